# scores and softmax
import torch


def softmax_weights(scores, dim=-1):
    # subtract max for stability
    mx = scores.max(-1, keepdim=True).values
    mx = torch.where(mx == float("-inf"), torch.zeros_like(mx), mx)
    e = (scores - mx).exp()
    total = e.sum(-1, keepdim=True)
    return e / torch.clamp(total, min=1e-30)


def context_vectors(weights, values):
    return weights @ values
