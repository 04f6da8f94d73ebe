import torch


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0.0:
        return weights
    if p == 1.0:
        return torch.zeros_like(weights)
    keep = torch.bernoulli(torch.full_like(weights, 1 - p))  # uses torch's RNG
    return weights * keep / (1 - p)
