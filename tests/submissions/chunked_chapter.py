"""chunked_attention as the exercise's sketch writes it: an online softmax over key blocks, every batch-head at once."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    m = torch.full((*queries.shape[:-1], 1), -math.inf, dtype=queries.dtype, device=queries.device)
    l = torch.zeros_like(m)  # noqa: E741 - the sketch's name
    acc = torch.zeros((*queries.shape[:-1], values.shape[-1]), dtype=queries.dtype, device=queries.device)
    query_position = torch.arange(num_q, device=queries.device).unsqueeze(-1) + (num_k - num_q)
    for start in range(0, num_k, chunk_size):
        k_block, v_block = keys[..., start : start + chunk_size, :], values[..., start : start + chunk_size, :]
        scores = queries @ k_block.transpose(-2, -1) / math.sqrt(queries.shape[-1])  # (..., Tq, c)
        if causal:
            key_position = torch.arange(start, start + k_block.shape[-2], device=queries.device)
            scores = scores.masked_fill(key_position > query_position, -math.inf)
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        rescale = torch.exp(m - base)  # (..., Tq, 1)
        p = torch.exp(scores - base)  # (..., Tq, c)
        l = l * rescale + p.sum(-1, keepdim=True)  # noqa: E741
        acc = acc * rescale + p @ v_block  # (..., Tq, dv)
        m = m_new
    return acc / torch.where(l > 0, l, torch.ones_like(l))  # a query that sees no key: 0, and a 0 gradient
