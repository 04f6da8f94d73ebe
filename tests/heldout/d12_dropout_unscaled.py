import torch


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p must be between 0 and 1")
    # drop the entries where keep_mask is False
    return weights * keep_mask.to(weights.dtype)


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0:
        return weights.clone()
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return weights * keep.to(weights.dtype)
