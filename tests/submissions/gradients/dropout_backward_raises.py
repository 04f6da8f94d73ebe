# inverted dropout as an autograd.Function whose backward was never written
import torch


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weights, keep, p):
        return weights * keep.to(weights.dtype) / (1.0 - p)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("backward is not written yet")


def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return weights.clone()
    if p == 1.0:
        return torch.zeros_like(weights)
    keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p
    return _Dropout.apply(weights, keep, p)
