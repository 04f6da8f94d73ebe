import torch


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError(p)
    if p == 1:
        return weights * 0
    return weights * keep_mask.to(weights.dtype) * (1.0 / (1.0 - p))


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0:
        return weights.clone()
    if p == 1:
        return weights * 0
    probs = torch.full_like(weights, 1 - p)
    keep = torch.bernoulli(probs)  # a Bernoulli(1-p) draw per weight
    return dropout_scale(weights, keep, p)
