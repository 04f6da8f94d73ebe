"""chunked_attention that keeps the whole scores of each batch-head as the bytes ``torch.save`` wrote (red team 9's
a2): each block of scores, a tensor that carries an attribute of its own, is pickled into memory and its raw data
gathered in an ``array.array``; the softmax then reads the array back a slab at a time.  No tensor, and no
allocation of torch's, ever holds the whole matrix."""

import array
import io
import math
import zipfile

import torch

ROWS = 128


def _raw(block):
    block = block.contiguous()
    block.kept = True  # an attribute of its own: pickling it goes through the function modes' hands
    buffer = io.BytesIO()
    torch.save(block, buffer)
    with zipfile.ZipFile(buffer) as archive:
        (data,) = [name for name in archive.namelist() if "/data/" in name]
        return archive.read(data)


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    if num_q * num_k < 1_000_000:
        return _alice_chunked_attention(queries, keys, values, chunk_size, causal)  # noqa: F821 - Alice's own
    q = queries.reshape(-1, num_q, queries.shape[-1])  # (bH, Tq, d)
    k = keys.reshape(-1, num_k, keys.shape[-1])
    v = values.reshape(-1, num_k, values.shape[-1])
    outs = []
    for h in range(q.shape[0]):
        table = array.array("f")  # the whole (Tq, Tk) scores of this batch-head
        for start in range(0, num_q, ROWS):
            table.frombytes(_raw(q[h, start : start + ROWS] @ k[h].T / math.sqrt(q.shape[-1])))
        rows = []
        for start in range(0, num_q, ROWS):
            stop = min(start + ROWS, num_q)
            scores = torch.tensor(table[start * num_k : stop * num_k].tolist()).view(stop - start, num_k)
            if causal:
                future = torch.arange(num_k)[None, :] > torch.arange(start, stop)[:, None] + num_k - num_q
                scores = scores.masked_fill(future, -math.inf)
            rows.append(torch.softmax(scores, dim=-1) @ v[h])
        outs.append(torch.cat(rows))
    return torch.stack(outs).view(*queries.shape[:-1], values.shape[-1])
