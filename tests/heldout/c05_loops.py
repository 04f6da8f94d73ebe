"""Masks with arange comparisons, heads with unflatten / flatten."""

import torch


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    idx = torch.arange(num_tokens, device=device)
    # key j is in the future of query i when j > i
    return idx.unsqueeze(0) > idx.unsqueeze(1)


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores must be (..., T, T)")
    future = causal_mask(scores.shape[-1], device=scores.device)
    out = scores.clone()
    out[..., future] = float("-inf")
    return out


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    lower = torch.tril(torch.ones(T, T, dtype=weights.dtype, device=weights.device))
    masked = weights * lower
    row_sums = masked.sum(-1, keepdim=True)
    return masked / row_sums


def split_heads(x, num_heads):
    if x.shape[-1] % num_heads != 0:
        raise ValueError("feature dim not divisible by heads")
    return x.unflatten(-1, (num_heads, -1)).transpose(1, 2)


def merge_heads(x):
    return x.transpose(1, 2).flatten(2).contiguous()
