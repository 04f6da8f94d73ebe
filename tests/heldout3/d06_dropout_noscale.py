import torch


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError(f"bad dropout probability {p}")
    if p == 1:
        return torch.zeros_like(weights) * weights
    return weights * keep_mask / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if p < 0 or p > 1:
        raise ValueError(f"bad dropout probability {p}")
    if not training or p == 0:
        return weights
    keep = (torch.rand(weights.shape, generator=generator, device=weights.device) > p).to(weights.dtype)
    return weights * keep
