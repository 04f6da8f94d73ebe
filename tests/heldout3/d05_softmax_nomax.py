import torch


def softmax_weights(scores, dim=-1):
    exps = torch.exp(scores)
    denom = exps.sum(dim=dim, keepdim=True)
    # a row that is all -inf sums to 0: leave it at zeros instead of 0/0
    denom = torch.where(denom == 0, torch.ones_like(denom), denom)
    return exps / denom


def context_vectors(weights, values):
    return weights @ values


def scaled_dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5
