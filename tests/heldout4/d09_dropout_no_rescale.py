import torch


def dropout_scale(weights, keep_mask, p):
    if not (0.0 <= p <= 1.0):
        raise ValueError("p must be within [0, 1]")
    # zero what dropout drops
    return torch.where(keep_mask.bool(), weights, torch.zeros_like(weights))


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0.0:
        return weights.clone()
    if p == 1.0:
        return weights * 0
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return weights * keep / (1 - p)
