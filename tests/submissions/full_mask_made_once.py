"""The chapter's online softmax over key blocks, but the causal mask built once as a (Tq, Tk) bool tensor and
sliced per block (red team 12a, who took it for honest): the contract says a chunked version never holds a (..., Tq,
Tk) tensor, and a bool one takes as many bytes as a 1-byte copy of the scores would, so the long case fails and its
message names the mask: build each block's mask from its own positions."""

import math

import torch


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    future = None
    if causal:
        future = torch.ones(num_q, num_k, dtype=torch.bool, device=queries.device).triu(1 + num_k - num_q)
    m = torch.full((*queries.shape[:-1], 1), -math.inf, dtype=queries.dtype, device=queries.device)
    l = torch.zeros_like(m)  # noqa: E741
    acc = torch.zeros((*queries.shape[:-1], values.shape[-1]), dtype=queries.dtype, device=queries.device)
    for start in range(0, num_k, chunk_size):
        k_block, v_block = keys[..., start : start + chunk_size, :], values[..., start : start + chunk_size, :]
        scores = queries @ k_block.transpose(-2, -1) / math.sqrt(queries.shape[-1])
        if future is not None:
            scores = scores.masked_fill(future[:, start : start + chunk_size], -math.inf)
        m_new = torch.maximum(m, scores.amax(-1, keepdim=True))
        base = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        rescale = torch.exp(m - base)
        p = torch.exp(scores - base)
        l = l * rescale + p.sum(-1, keepdim=True)  # noqa: E741
        acc = acc * rescale + p @ v_block
        m = m_new
    return torch.where(l > 0, acc / l, torch.zeros_like(acc))
