# inverted dropout by hand, forward and backward: the backward forgets the 1 / (1 - p)
import torch


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weights, keep, p):
        ctx.save_for_backward(keep)
        return weights * keep.to(weights.dtype) / (1.0 - p)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return grad * keep.to(grad.dtype), None, None


def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return weights.clone()
    if p == 1.0:
        return torch.zeros_like(weights)
    keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p
    return _Dropout.apply(weights, keep, p)
