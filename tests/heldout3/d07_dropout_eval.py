import torch


def attention_dropout(weights, p, training=True, generator=None):
    if not (0.0 <= p <= 1.0):
        raise ValueError("p must be between 0 and 1")
    if p == 0:
        return weights
    if p == 1:
        return weights * 0.0
    u = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype)
    keep = u >= p
    return torch.where(keep, weights / (1 - p), torch.zeros_like(weights))


def dropout_scale(weights, keep_mask, p):
    if not (0.0 <= p <= 1.0):
        raise ValueError("p must be between 0 and 1")
    if p == 1.0:
        return weights * 0.0
    return weights * keep_mask / (1.0 - p)
