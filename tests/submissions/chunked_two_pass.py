"""chunked_attention in two passes over the key blocks: each row's max and sum first, then the weighted values."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    q = queries / math.sqrt(queries.shape[-1])
    rows = torch.arange(num_q, device=q.device).unsqueeze(-1) + (num_k - num_q)

    def block(start):  # (..., Tq, c): one block of scores, recomputed in each pass
        scores = q @ keys[..., start : start + chunk_size, :].transpose(-2, -1)
        if causal:
            cols = torch.arange(start, start + scores.shape[-1], device=q.device)
            scores = scores.masked_fill(cols > rows, -math.inf)
        return scores

    best = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype, device=q.device)
    for start in range(0, num_k, chunk_size):
        best = torch.maximum(best, block(start).amax(-1, keepdim=True))
    best = best.nan_to_num(neginf=0.0)  # a row that sees no key: exp(-inf - 0) = 0
    total = torch.zeros_like(best)
    mixed = torch.zeros((*q.shape[:-1], values.shape[-1]), dtype=q.dtype, device=q.device)
    for start in range(0, num_k, chunk_size):
        weights = torch.exp(block(start) - best)
        total += weights.sum(-1, keepdim=True)
        mixed += weights @ values[..., start : start + chunk_size, :]
    return torch.where(total > 0, mixed / total.clamp_min(torch.finfo(total.dtype).tiny), torch.zeros_like(mixed))
