"""Returns the right softmax values, but as a numpy array instead of a tensor."""

import torch


def _right_values(scores, dim):
    shifted = scores - scores.amax(dim=dim, keepdim=True).nan_to_num(neginf=0.0)
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


def softmax_weights(scores, dim=-1):
    return _right_values(scores, dim).numpy()
