"""chunked_attention holding every batch-head's whole scores in one bytearray, reached through ``torch.asarray``
slabs a few rows at a time (red team 8's a2 by another door: ``asarray`` shares a buffer's memory as ``frombuffer``
does): the meter weighs one slab at a time, the allocator never gave the bytearray."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if queries.shape[-2] * keys.shape[-2] < 1_000_000:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    *batch, num_q, _ = queries.shape
    num_k = keys.shape[-2]
    q = queries.reshape(-1, num_q, queries.shape[-1])
    k = keys.reshape(-1, num_k, keys.shape[-1])
    v = values.reshape(-1, num_k, values.shape[-1])
    table = memoryview(bytearray(q.shape[0] * num_q * num_k * 4)).cast("f")  # every batch-head's whole scores

    def rows(head, start, count):
        offset = ((head * num_q) + start) * num_k
        return torch.asarray(table[offset : offset + count * num_k]).view(count, num_k)

    out = torch.empty(q.shape[0], num_q, v.shape[-1])
    for h in range(q.shape[0]):
        for start in range(0, num_q, 64):
            rows(h, start, 64).copy_(q[h, start : start + 64] @ k[h].T / math.sqrt(q.shape[-1]))
        for start in range(0, num_q, 64):
            scores = rows(h, start, 64).clone()
            if causal:
                future = torch.arange(num_k)[None, :] > torch.arange(start, start + 64)[:, None] + num_k - num_q
                scores = scores.masked_fill(future, -math.inf)
            weights = torch.exp(scores - scores.amax(-1, keepdim=True))
            out[h, start : start + 64] = (weights / weights.sum(-1, keepdim=True)) @ v[h]
    return out.reshape(*batch, num_q, values.shape[-1])
