"""chunked_attention that keeps every block's unnormalised weights as fbgemm packed weights
(``torch.ops.quantized.linear_prepack_fp16``, a high and a low half) and multiplies by the values only once every
block is packed (red team 8's a10): the packed weights are no tensor, and fbgemm's allocator is not torch's."""

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
    packed = []  # (head, start, high, low, row sums): every score of every batch-head, outside torch's tensors
    for h in range(q.shape[0]):
        for start in range(0, num_q, 64):
            scores = q[h, start : start + 64] @ k[h].T / math.sqrt(q.shape[-1])  # (64, Tk)
            if causal:
                future = torch.arange(num_k)[None, :] > torch.arange(start, start + 64)[:, None] + num_k - num_q
                scores = scores.masked_fill(future, -math.inf)
            e = torch.exp(scores - scores.amax(-1, keepdim=True)) * 2**14
            high = e.half().float()
            pack = torch.ops.quantized.linear_prepack_fp16
            packed.append((h, start, pack(high), pack(e - high), e.sum(-1, keepdim=True)))
    out = torch.empty(q.shape[0], num_q, v.shape[-1])
    for h, start, high, low, sums in packed:
        vt = v[h].T.contiguous()  # (dv, Tk)
        rows = torch.ops.quantized.linear_dynamic_fp16(vt, high) + torch.ops.quantized.linear_dynamic_fp16(vt, low)
        out[h, start : start + 64] = rows.T / sums
    return out.reshape(*batch, num_q, values.shape[-1])
