import torch


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p must be in [0, 1]")
    if p == 1:
        return torch.zeros_like(weights)
    return weights * keep_mask.to(weights.dtype) / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if p < 0 or p > 1:
        raise ValueError("p must be in [0, 1]")
    if not training or p == 0:
        return weights.clone()
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return dropout_scale(weights, keep, p)
