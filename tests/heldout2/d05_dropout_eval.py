import torch


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p out of range")
    if p == 1:
        return weights * 0
    return weights * keep_mask / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    # inverted dropout: keep with prob 1-p, scale survivors
    if p == 0:
        return weights
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return dropout_scale(weights, keep.to(weights.dtype), p)
