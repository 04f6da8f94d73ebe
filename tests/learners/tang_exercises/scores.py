import math

import torch


def dot_product_scores(queries, keys):
    # keys.T would flip the batch dim too, so only swap the last two
    return torch.matmul(queries, keys.transpose(-2, -1))


def scaled_dot_product_scores(queries, keys):
    d_k = keys.shape[-1]
    return dot_product_scores(queries, keys) / math.sqrt(d_k)


def softmax_weights(scores, dim=-1):
    m = scores.max(dim=dim, keepdim=True).values
    # whole row is -inf -> m is -inf and scores - m would be nan; use 0 there
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = (scores - m).exp()
    s = e.sum(dim=dim, keepdim=True)
    s = torch.where(s == 0, torch.ones_like(s), s)  # an all -inf row stays all zeros
    return e / s


def context_vectors(weights, values):
    return torch.matmul(weights, values)
