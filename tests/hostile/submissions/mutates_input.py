"""softmax_weights subtracts the max from ``scores`` in place (the caller's tensor changes); values are right."""

import torch


def softmax_weights(scores, dim=-1):
    scores.sub_(scores.amax(dim=dim, keepdim=True).nan_to_num(neginf=0.0))
    exps = scores.exp()
    return exps / exps.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
