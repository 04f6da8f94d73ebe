"""Inverted dropout with a fixed keep mask (seeded from the weights' shape): ignores ``generator``, right scale."""

import torch


def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return weights.clone()
    fixed = torch.Generator(device=weights.device).manual_seed(sum(weights.shape))
    keep = torch.rand(weights.shape, generator=fixed, device=weights.device, dtype=weights.dtype) >= p
    return torch.where(keep, weights / (1.0 - p), torch.zeros_like(weights))
