# right: an online softmax whose running max is kept out of the graph (flash attention's habit)
import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError(f"chunked_attention needs chunk_size >= 1, got {chunk_size}")
    tq, tk = queries.shape[-2], keys.shape[-2]
    q = queries * (1.0 / math.sqrt(queries.shape[-1]))
    m = torch.full((*queries.shape[:-1], 1), -torch.inf, dtype=queries.dtype, device=queries.device)
    l = torch.zeros_like(m)  # noqa: E741
    acc = torch.zeros((*queries.shape[:-1], values.shape[-1]), dtype=queries.dtype, device=queries.device)
    row = torch.arange(tq, device=queries.device)[:, None] + (tk - tq)
    for s in range(0, tk, chunk_size):
        blk = q @ keys[..., s : s + chunk_size, :].transpose(-2, -1)
        if causal:
            col = torch.arange(s, s + blk.shape[-1], device=queries.device)
            blk = blk.masked_fill(col[None, :] > row, -torch.inf)
        m_new = torch.maximum(m, blk.amax(-1, keepdim=True)).detach()
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(blk - m_safe)
        corr = torch.exp(m - m_safe)
        l = l * corr + p.sum(-1, keepdim=True)  # noqa: E741
        acc = acc * corr + p @ values[..., s : s + chunk_size, :]
        m = m_new
    return acc / torch.where(l > 0, l, torch.ones_like(l))
