"""chunked_attention as full attention one batch-head at a time, its (Tq, Tk) scores held as two (Tq, Tk/2) halves."""

import math

import torch


def _masked(scores, start, num_q, num_k):
    """-inf in place where key ``start + j`` is after query ``i``'s position, a few rows at a time."""
    cols = torch.arange(start, start + scores.shape[-1], device=scores.device)
    rows = torch.arange(num_q, device=scores.device).view(-1, 1) + (num_k - num_q)
    for r in range(0, num_q, 64):
        scores[r : r + 64].masked_fill_(cols > rows[r : r + 64], -math.inf)
    return scores


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    q = queries.reshape(-1, num_q, queries.shape[-1]) / math.sqrt(queries.shape[-1])
    k = keys.reshape(-1, num_k, keys.shape[-1])
    v = values.reshape(-1, num_k, values.shape[-1])
    half = (num_k + 1) // 2
    out = []
    for i in range(q.shape[0]):
        left, right = q[i] @ k[i, :half].T, q[i] @ k[i, half:].T  # both held: together a whole (Tq, Tk)
        if causal:
            left, right = _masked(left, 0, num_q, num_k), _masked(right, half, num_q, num_k)
        best = torch.maximum(left.amax(-1, keepdim=True), right.amax(-1, keepdim=True)).nan_to_num(neginf=0.0)
        left, right = torch.exp(left - best), torch.exp(right - best)
        total = left.sum(-1, keepdim=True) + right.sum(-1, keepdim=True)
        mixed = left @ v[i, :half] + right @ v[i, half:]
        out.append(mixed / total.clamp_min(torch.finfo(total.dtype).tiny))
    return torch.stack(out).reshape(*queries.shape[:-1], values.shape[-1])
