"""chunked_attention holding, one batch-head at a time, every score a causal mask keeps (red team 8's a6): blocks of
64 query rows, each against the keys up to its diagonal, all held in a list before any is mixed.  Under the whole
(Tq, Tk) matrix, about as much as its lower triangle."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    if not causal or num_q != num_k or num_q % 64 or num_q * num_k < 1_000_000:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    q = queries.reshape(-1, num_q, queries.shape[-1])
    k = keys.reshape(-1, num_k, keys.shape[-1])
    v = values.reshape(-1, num_k, values.shape[-1])
    out = []
    for h in range(q.shape[0]):
        kept = []  # every block's scores, up to its diagonal, at once
        for start in range(0, num_q, 64):
            block = q[h, start : start + 64] @ k[h, : start + 64].T / math.sqrt(q.shape[-1])
            seen = torch.arange(start + 64, device=block.device)[None, :]
            future = seen > torch.arange(start, start + 64, device=block.device)[:, None]
            kept.append(block.masked_fill(future, -math.inf))
        rows = []
        for start, block in zip(range(0, num_q, 64), kept):
            weights = torch.exp(block - block.amax(dim=-1, keepdim=True))
            rows.append((weights / weights.sum(dim=-1, keepdim=True)) @ v[h, : start + 64])
        out.append(torch.cat(rows))
    return torch.stack(out).reshape(*queries.shape[:-1], values.shape[-1])
