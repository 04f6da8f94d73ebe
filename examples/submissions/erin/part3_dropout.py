# Erin -- part 3: dropout
import torch


def dropout_scale(weights, keep_mask, p):
    if not (0.0 <= p <= 1.0):
        raise ValueError(f"p={p} is not a probability")
    if p == 1.0:
        return torch.zeros_like(weights)
    return torch.where(keep_mask.bool(), weights / (1.0 - p), torch.zeros_like(weights))


def attention_dropout(weights, p, training=True, generator=None):
    if not (0.0 <= p <= 1.0):
        raise ValueError(f"p={p} is not a probability")
    if not training or p == 0.0:
        return weights.clone()
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return dropout_scale(weights, keep, p)
