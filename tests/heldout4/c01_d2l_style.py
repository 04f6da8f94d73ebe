"""My hand-in. I followed the d2l.ai chapter on attention scoring functions."""
import math

import torch


def dot_product_scores(queries, keys):
    # d2l: torch.bmm(queries, keys.transpose(1, 2)) -- but bmm only takes 3-D,
    # so use matmul which broadcasts over any batch dims
    return torch.matmul(queries, keys.transpose(-2, -1))


def scaled_dot_product_scores(queries, keys):
    d = keys.shape[-1]
    return torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(d)


def softmax_weights(scores, dim=-1):
    # stable softmax written by hand
    m = scores.amax(dim=dim, keepdim=True)
    # all -inf slice: max is -inf, replace by 0 so we don't get -inf - -inf
    m = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    X_exp = torch.exp(scores - m)
    partition = X_exp.sum(dim=dim, keepdim=True)
    partition = partition.masked_fill(partition == 0, 1.0)
    return X_exp / partition


def softmax_with_temperature(scores, temperature, dim=-1):
    if not temperature > 0:
        raise ValueError("temperature should be positive")
    return softmax_weights(scores / temperature, dim=dim)


def context_vectors(weights, values):
    return torch.matmul(weights, values)


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p must be in [0, 1]")
    if p == 1:
        return weights * 0.0  # keeps the graph, no 0/0
    return weights * keep_mask.to(weights.dtype) / (1.0 - p)


def attention_dropout(weights, p, training=True, generator=None):
    # d2l's dropout_layer, but with the generator and on the right device
    assert 0 <= p <= 1
    if not training or p == 0:
        return weights.clone()
    if p == 1:
        return weights * 0.0
    u = torch.rand(weights.shape, generator=generator, device=weights.device)
    mask = (u > p).to(weights.dtype)
    return mask * weights / (1.0 - p)
