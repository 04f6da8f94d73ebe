# right: the max is detached (a constant shift changes no softmax), the sum made safe before dividing
import torch


def softmax_weights(scores, dim=-1):
    with torch.no_grad():
        peak = scores.amax(dim=dim, keepdim=True)
        peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    exp = torch.exp(scores - peak.detach())
    total = exp.sum(dim=dim, keepdim=True)
    return exp / total.clamp_min(torch.finfo(exp.dtype).tiny)
