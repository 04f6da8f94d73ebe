import math

import torch


def dot_product_scores(queries, keys):
    return torch.einsum("...qd,...kd->...qk", queries, keys)


def scaled_dot_product_scores(queries, keys):
    # scale the queries AND the keys so the product stays small
    d_k = keys.shape[-1]
    q = queries / math.sqrt(d_k)
    k = keys / math.sqrt(d_k)
    return dot_product_scores(q, k)


def context_vectors(weights, values):
    return torch.einsum("...qk,...kv->...qv", weights, values)
