import torch


def _check(p):
    if p < 0 or p > 1:
        raise ValueError(f"p must be in [0, 1], got {p}")


def dropout_scale(weights, keep_mask, p):
    _check(p)
    if p == 1:
        return torch.zeros_like(weights)
    return weights * keep_mask.to(weights.dtype) / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    _check(p)
    if not training or p == 0:
        return weights.clone()
    u = torch.rand(weights.shape, generator=generator, dtype=weights.dtype, device=weights.device)
    return dropout_scale(weights, u >= p, p)
