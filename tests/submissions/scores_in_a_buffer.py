"""chunked_attention writing whole scores into a buffer made before the call (``out=`` and in place): no op of
the call makes it, so a meter that counted only what ops return never weighed it (red team memory3 a4)."""

import math

import torch

_BUFFER = torch.empty(1 << 23)  # 32 MB at import: room for the long case's scores


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    tq, tk = queries.shape[-2], keys.shape[-2]
    shape = (*queries.shape[:-1], tk)
    if queries.dtype == _BUFFER.dtype and queries.device == _BUFFER.device and math.prod(shape) <= _BUFFER.numel():
        scores = _BUFFER[: math.prod(shape)].view(shape)
        torch.matmul(queries, keys.transpose(-2, -1), out=scores)
    else:  # another dtype or device than the buffer's: plain full attention
        scores = queries @ keys.transpose(-2, -1)
    scores.mul_(1.0 / math.sqrt(queries.shape[-1]))
    if causal:
        rows = torch.arange(tq).unsqueeze(-1) + (tk - tq)
        for r in range(0, tq, 64):  # the mask a few rows at a time
            scores[..., r : r + 64, :].masked_fill_(torch.arange(tk) > rows[r : r + 64], float("-inf"))
    peak = scores.amax(-1, keepdim=True)
    scores.sub_(torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))).exp_()
    total = scores.sum(-1, keepdim=True)
    out = scores @ values
    return torch.where(total > 0, out / total, torch.zeros_like(out))
