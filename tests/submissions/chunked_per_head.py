"""chunked_attention as a learner might write it: a loop over the batch-heads, each an online softmax in blocks."""

import math

import torch


def _one_head(q, k, v, chunk_size, causal):
    num_q, num_k = q.shape[0], k.shape[0]
    q = q / math.sqrt(q.shape[-1])
    best = torch.full((num_q, 1), -math.inf, dtype=q.dtype, device=q.device)
    total = torch.zeros((num_q, 1), dtype=q.dtype, device=q.device)
    acc = torch.zeros((num_q, v.shape[-1]), dtype=q.dtype, device=q.device)
    rows = torch.arange(num_q, device=q.device).unsqueeze(1) + (num_k - num_q)
    for start in range(0, num_k, chunk_size):
        block = q @ k[start : start + chunk_size].T  # (Tq, c)
        if causal:
            cols = torch.arange(start, start + block.shape[1], device=q.device)
            block = block.masked_fill(cols > rows, -math.inf)
        new_best = torch.maximum(best, block.amax(dim=1, keepdim=True))
        base = torch.where(torch.isfinite(new_best), new_best, torch.zeros_like(new_best))
        scale = torch.exp(best - base)
        weights = torch.exp(block - base)
        total = total * scale + weights.sum(dim=1, keepdim=True)
        acc = acc * scale + weights @ v[start : start + chunk_size]
        best = new_best
    return acc / torch.where(total > 0, total, torch.ones_like(total))  # a query that sees no key: 0, and a 0 gradient


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    lead = queries.shape[:-2]
    q = queries.reshape(-1, *queries.shape[-2:])
    k = keys.reshape(-1, *keys.shape[-2:])
    v = values.reshape(-1, *values.shape[-2:])
    heads = [_one_head(q[i], k[i], v[i], chunk_size, causal) for i in range(q.shape[0])]
    return torch.stack(heads).reshape(*lead, queries.shape[-2], values.shape[-1])
