"""Red team 13: every score a causal call keeps (the triangle) of one batch-head, in float32, computed first and
held at once, then a plain softmax row by row.  The triangle's bytes live in a storage made as bool and only
ever seen as bool: written and read with torch.cat(out=...), which copies a bool view's raw bytes unchanged."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    tq, tk = queries.shape[-2], keys.shape[-2]
    if not causal or tq != tk or tq < 1024:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821
    *lead, _, d = queries.shape
    q = queries.reshape(-1, tq, d).double() / math.sqrt(d)
    k = keys.reshape(-1, tk, d).double()
    v = values.reshape(-1, tk, values.shape[-1]).double()
    out = torch.empty(q.shape[0], tq, v.shape[-1], dtype=torch.float64)
    offs = [i * (i + 1) // 2 for i in range(tq + 1)]  # row i's kept scores: [offs[i], offs[i + 1])
    rows = 64
    for b in range(q.shape[0]):
        held = torch.empty(offs[tq] * 4, dtype=torch.bool)  # every kept score of this batch-head (float32 bytes)
        for r in range(0, tq, rows):
            s = (q[b, r : r + rows] @ k[b, : r + rows].T).float()  # (rows, r + rows)
            for i in range(s.shape[0]):
                n = r + i + 1
                torch.cat([s[i, :n].view(torch.bool)], out=held[offs[n - 1] * 4 : offs[n] * 4])
            del s
        for i in range(tq):  # the whole triangle is held: now a plain softmax, row by row
            row = torch.empty(i + 1, dtype=torch.float32)
            torch.cat([held[offs[i] * 4 : offs[i + 1] * 4]], out=row.view(torch.bool))
            e = torch.exp(row.double() - row.max())
            out[b, i] = (e @ v[b, : i + 1]) / e.sum()
        del held
    return out.to(queries.dtype).reshape(*lead, tq, -1)
