# a hand-written backward for the softmax, off by a factor of two
import torch


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, dim):
        peak = scores.amax(dim=dim, keepdim=True)
        peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
        exp = torch.exp(scores - peak)
        total = exp.sum(dim=dim, keepdim=True)
        out = exp / torch.where(total > 0, total, torch.ones_like(total))
        ctx.save_for_backward(out)
        ctx.dim = dim
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        inner = (grad * out).sum(dim=ctx.dim, keepdim=True)
        return 2 * out * (grad - inner), None


def softmax_weights(scores, dim=-1):
    return _Softmax.apply(scores, dim)
