import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    """Online softmax over key blocks (flash-attention style)."""
    Tq, d = queries.shape[-2:]
    Tk = keys.shape[-2]
    scale = d ** -0.5
    m_i = torch.full(queries.shape[:-1] + (1,), -math.inf, dtype=queries.dtype, device=queries.device)
    l_i = torch.zeros_like(m_i)
    o_i = torch.zeros(queries.shape[:-1] + (values.shape[-1],), dtype=queries.dtype, device=queries.device)
    q_idx = torch.arange(Tq, device=queries.device)[:, None]
    for j0 in range(0, Tk, chunk_size):
        k_blk = keys[..., j0:j0 + chunk_size, :]
        v_blk = values[..., j0:j0 + chunk_size, :]
        s = (queries @ k_blk.transpose(-1, -2)) * scale
        if causal:
            k_idx = torch.arange(j0, j0 + k_blk.shape[-2], device=queries.device)[None, :]
            s = s.masked_fill(k_idx > q_idx, -math.inf)  # no peeking at later keys
        m_new = torch.maximum(m_i, s.amax(dim=-1, keepdim=True))
        m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        corr = torch.exp(torch.where(torch.isinf(m_i), m_use, m_i) - m_use)
        p = torch.exp(s - m_use)
        l_i = corr * l_i + p.sum(dim=-1, keepdim=True)
        o_i = corr * o_i + p @ v_blk
        m_i = m_new
    return o_i / torch.where(l_i > 0, l_i, torch.ones_like(l_i))


def dot_product_scores(queries, keys):
    return queries @ keys.mT
