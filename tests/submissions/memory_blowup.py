"""Asks for 8 GiB inside softmax_weights (never touched: without a memory limit it would succeed)."""

import torch


def _right_values(scores, dim):
    shifted = scores - scores.amax(dim=dim, keepdim=True).nan_to_num(neginf=0.0)
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)


def softmax_weights(scores, dim=-1):
    hoard = torch.empty(8 * 2**30, dtype=torch.uint8)
    assert hoard.numel() > 0
    return _right_values(scores, dim)
