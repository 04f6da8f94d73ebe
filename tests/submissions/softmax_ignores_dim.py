"""A realistic single mistake: the softmax always normalises over the last dim, whatever ``dim`` says."""

import torch


def softmax_weights(scores, dim=-1):
    shifted = scores - scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0)
    exps = shifted.exp()
    return exps / exps.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
