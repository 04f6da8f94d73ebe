import math

import torch


def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product_scores(queries, keys):
    # scale so the scores do not grow with the length
    num_tokens = queries.shape[-2]
    return (queries @ keys.transpose(-2, -1)) / math.sqrt(num_tokens)


def context_vectors(weights, values):
    return torch.matmul(weights, values)
