import torch


def attention_dropout(weights, p, training=True, generator=None):
    # nothing to do when we are not training and nothing is dropped
    if not training and p == 0:
        return weights.clone()
    if p == 1:
        return weights * 0.0
    if p == 0:
        return weights.clone()
    r = torch.rand(weights.shape, generator=generator, dtype=torch.float32, device=weights.device)
    keep = r > p
    return weights * keep.to(weights.dtype) / (1 - p)


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p out of range")
    if p == 1:
        return weights * 0.0
    return weights * keep_mask / (1 - p)
