"""chunked_attention in float64 whatever it is given, mixing each block's values by broadcasting (Tq, c, dv)."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    q = queries.to(torch.float64) / math.sqrt(queries.shape[-1])  # (..., Tq, d) float64
    k, v = keys.to(torch.float64), values.to(torch.float64)  # (..., Tk, d), (..., Tk, dv)
    num_q, num_k = q.shape[-2], k.shape[-2]
    rows = torch.arange(num_q, device=q.device).unsqueeze(-1) + (num_k - num_q)
    best = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype, device=q.device)
    total = torch.zeros_like(best)
    mixed = torch.zeros((*q.shape[:-1], v.shape[-1]), dtype=q.dtype, device=q.device)
    for start in range(0, num_k, chunk_size):
        scores = q @ k[..., start : start + chunk_size, :].transpose(-2, -1)  # (..., Tq, c)
        if causal:
            cols = torch.arange(start, start + scores.shape[-1], device=q.device)
            scores = scores.masked_fill(cols > rows, -math.inf)
        new_best = torch.maximum(best, scores.amax(-1, keepdim=True))
        shift = new_best.nan_to_num(neginf=0.0)
        weights = torch.exp(scores - shift)
        rescale = torch.exp(best - shift)
        total = total * rescale + weights.sum(-1, keepdim=True)
        block = v[..., start : start + chunk_size, :].unsqueeze(-3)  # (..., 1, c, dv)
        mixed = mixed * rescale + (weights.unsqueeze(-1) * block).sum(-2)  # (..., Tq, c, dv) summed over c
        best = new_best
    out = torch.where(total > 0, mixed / total.clamp_min(torch.finfo(total.dtype).tiny), torch.zeros_like(mixed))
    return out.to(queries.dtype)
