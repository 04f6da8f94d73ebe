import math
import torch


def dot_product_scores(queries, keys):
    # batched matrix multiply
    return torch.bmm(queries, keys.transpose(1, 2))


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / math.sqrt(keys.shape[-1])


def context_vectors(weights, values):
    return torch.bmm(weights, values)
