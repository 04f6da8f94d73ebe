"""chunked_attention that builds the whole (..., Tq, Tk) weights, then mixes the values block by block."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])  # every score at once
    if causal:
        num_q, num_k = scores.shape[-2], scores.shape[-1]
        future = torch.ones(num_q, num_k, dtype=torch.bool, device=scores.device).triu(1 + num_k - num_q)
        scores = scores.masked_fill(future, -math.inf)
    weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0))
    weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny)
    out = 0
    for start in range(0, keys.shape[-2], chunk_size):  # "chunked", but only after the fact
        out = out + weights[..., start : start + chunk_size] @ values[..., start : start + chunk_size, :]
    return out
