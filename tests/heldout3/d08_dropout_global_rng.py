import torch


def attention_dropout(weights, p, training=True, generator=None):
    if p < 0 or p > 1:
        raise ValueError("p out of range")
    if not training or p == 0:
        return weights
    if p == 1:
        return weights * 0
    keep_mask = torch.bernoulli(torch.full_like(weights, 1 - p))
    return weights * keep_mask / (1 - p)
