import math
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.d_out, self.num_heads = d_out, num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def _heads(self, t, b, n):
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        b, n, _ = x.shape
        q = self._heads(self.W_query(x), b, n)
        k = self._heads(self.W_key(x), b, n)
        v = self._heads(self.W_value(x), b, n)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_out)
        scores = scores.masked_fill(self.mask.bool()[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(scores, dim=-1))
        out = (w @ v).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(out)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    Tq, Tk = queries.shape[-2], keys.shape[-2]
    scale = queries.shape[-1] ** -0.5
    m = queries.new_full(queries.shape[:-1] + (1,), float("-inf"))
    l = queries.new_zeros(queries.shape[:-1] + (1,))
    o = values.new_zeros(queries.shape[:-1] + (values.shape[-1],))
    rows = torch.arange(Tq, device=queries.device)[:, None]
    for s0 in range(0, Tk, chunk_size):
        kb = keys[..., s0:s0 + chunk_size, :]
        vb = values[..., s0:s0 + chunk_size, :]
        s = torch.matmul(queries, kb.transpose(-2, -1)) * scale
        if causal:
            cols = torch.arange(s0, s0 + kb.shape[-2], device=queries.device)[None, :]
            s = s.masked_fill(cols > rows + (Tk - Tq), float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_use)
        corr = torch.exp(m - m_use)
        l = l * corr + p.sum(-1, keepdim=True)
        o = o * corr + p @ vb
        m = m_new
    return o / torch.where(l > 0, l, torch.ones_like(l))
