import torch


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p must be in [0, 1]")
    return weights * keep_mask / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0:
        return weights.clone()
    if p == 1:
        # everything is dropped
        return weights.zero_()
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return weights * keep / (1 - p)
