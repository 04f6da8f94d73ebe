"""Chapter 3 exercises: dropout by hand, written to save memory (no new tensors where I can avoid them)."""

import torch


def dropout_scale(weights, keep_mask, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if p == 1.0:
        # everything is dropped: just zero it, no need for a new tensor
        weights *= 0
        return weights
    return weights * keep_mask.to(weights.dtype) / (1.0 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return weights.clone()
    if p == 1.0:
        return weights.zero_()  # all dropped
    rand = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype)
    keep = rand >= p
    print("kept share:", keep.float().mean().item())  # debug
    return dropout_scale(weights, keep, p)


if __name__ == "__main__":
    torch.manual_seed(123)
    w = torch.softmax(torch.randn(2, 6, 6), dim=-1)
    g = torch.Generator().manual_seed(0)
    print(attention_dropout(w, 0.1, generator=g))
    print(attention_dropout(w, 1.0))
