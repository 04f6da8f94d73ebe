import torch


def dropout_scale(weights, keep_mask, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError("p 必须在 0 和 1 之间")
    if p == 1.0:
        return torch.zeros_like(weights)
    return weights * keep_mask.to(weights.dtype) * (1.0 / (1.0 - p))


def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError("p 必须在 0 和 1 之间")
    if not training or p == 0.0:
        return weights.clone()
    r = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype)
    return dropout_scale(weights, r >= p, p)
