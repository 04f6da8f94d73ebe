import torch


def dropout_scale(weights, keep_mask, p):
    if not 0 <= p <= 1:
        raise ValueError("p must lie in [0, 1]")
    return weights * keep_mask / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not 0 <= p <= 1:
        raise ValueError("p must lie in [0, 1]")
    if not training or p == 0:
        return weights
    if p == 1:
        return torch.zeros_like(weights) * weights
    keep_mask = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return weights * keep_mask / (1 - p)
