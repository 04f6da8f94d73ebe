import math

import torch
import torch.nn as nn


def dot_product_scores(queries, keys):
    return torch.einsum("...id,...jd->...ij", queries, keys)


def context_vectors(weights, values):
    return torch.einsum("...ij,...jv->...iv", weights, values)


class Head(nn.Module):
    """one head of self-attention (no mask here)"""

    def __init__(self, d_in, head_size, bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, head_size, bias=bias)
        self.W_key = nn.Linear(d_in, head_size, bias=bias)
        self.W_value = nn.Linear(d_in, head_size, bias=bias)

    def forward(self, x):
        k = self.W_key(x)
        q = self.W_query(x)
        # scale by the head size, not by the embedding width C
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = torch.softmax(wei, dim=-1)
        v = self.W_value(x)
        return wei @ v


def make_self_attention(d_in, d_out, qkv_bias=False):
    return Head(d_in, d_out, bias=qkv_bias)


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    tril = torch.tril(torch.ones(T, T, device=weights.device, dtype=weights.dtype))
    masked = weights * tril
    return masked / masked.sum(dim=-1, keepdim=True)


def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1 or window < 1:
        raise ValueError("num_tokens and window must be >= 1")
    idx = torch.arange(num_tokens, device=device)
    diff = idx[:, None] - idx[None, :]  # i - j
    return (diff < 0) | (diff >= window)


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    Tq, d = queries.shape[-2], queries.shape[-1]
    Tk = keys.shape[-2]
    scale = 1.0 / math.sqrt(d)
    q = queries * scale
    lead = queries.shape[:-2]
    neg_inf = float("-inf")
    m = torch.full((*lead, Tq, 1), neg_inf, dtype=queries.dtype, device=queries.device)
    l = torch.zeros((*lead, Tq, 1), dtype=queries.dtype, device=queries.device)
    acc = torch.zeros((*lead, Tq, values.shape[-1]), dtype=queries.dtype, device=queries.device)
    q_pos = torch.arange(Tq, device=queries.device) + (Tk - Tq)
    for start in range(0, Tk, chunk_size):
        stop = min(start + chunk_size, Tk)
        s = q @ keys[..., start:stop, :].transpose(-2, -1)  # (..., Tq, c)
        if causal:
            k_pos = torch.arange(start, stop, device=queries.device)
            s = s.masked_fill(k_pos[None, :] > q_pos[:, None], neg_inf)
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
        # rows that have seen only -inf so far: shift by 0
        m_safe = torch.where(torch.isneginf(m_new), torch.zeros_like(m_new), m_new)
        m_old = torch.where(torch.isneginf(m), m_safe, m)
        alpha = torch.exp(m_old - m_safe)
        p = torch.exp(s - m_safe)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ values[..., start:stop, :]
        m = m_new
    return acc / torch.where(l > 0, l, torch.ones_like(l))
