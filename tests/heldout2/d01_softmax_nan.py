import torch


def softmax_weights(scores, dim=-1):
    # subtract the max for numerical stability
    shifted = scores - scores.max(dim=dim, keepdim=True).values
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


def context_vectors(weights, values):
    return weights @ values
