"""dropout by hand"""

import torch


def dropout_scale(weights, keep_mask, p):
    if not (0.0 <= p <= 1.0):
        raise ValueError("p out of range")
    if p == 1.0:
        return torch.zeros_like(weights)
    return weights * keep_mask / (1.0 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0:
        return weights.clone()
    keep = torch.rand(weights.shape) > p
    return dropout_scale(weights, keep.to(weights.device), p)
