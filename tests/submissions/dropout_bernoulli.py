"""Draws the keep mask with torch.bernoulli on the weights' device: the exercise done another way (never banned)."""

import torch


def attention_dropout(weights, p, training=True, generator=None):
    if not 0 <= p <= 1:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if not training or p == 0:
        return weights
    if p == 1:
        return torch.zeros_like(weights)
    keep = torch.bernoulli(torch.full_like(weights, 1 - p), generator=generator)
    return weights * keep / (1 - p)
