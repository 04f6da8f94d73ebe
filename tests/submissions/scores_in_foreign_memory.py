"""chunked_attention writing whole scores into memory no torch op allocates: ``torch.frombuffer`` over a
``bytearray`` made in the call (red team memory3 a6; ``from_numpy``, ``UntypedStorage`` with ``set_`` and
``array`` are the same route)."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    tq, tk = queries.shape[-2], keys.shape[-2]
    shape = (*queries.shape[:-1], tk)
    if queries.device.type == "cpu" and math.prod(shape):
        raw = bytearray(math.prod(shape) * queries.element_size())
        scores = torch.frombuffer(raw, dtype=queries.dtype).view(shape)
        torch.matmul(queries, keys.transpose(-2, -1), out=scores)
    else:
        scores = queries @ keys.transpose(-2, -1)
    scores.mul_(1.0 / math.sqrt(queries.shape[-1]))
    if causal:
        rows = torch.arange(tq).unsqueeze(-1) + (tk - tq)
        for r in range(0, tq, 64):
            scores[..., r : r + 64, :].masked_fill_(torch.arange(tk) > rows[r : r + 64], float("-inf"))
    peak = scores.amax(-1, keepdim=True)
    scores.sub_(torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))).exp_()
    total = scores.sum(-1, keepdim=True)
    out = scores @ values
    return torch.where(total > 0, out / total, torch.zeros_like(out))
