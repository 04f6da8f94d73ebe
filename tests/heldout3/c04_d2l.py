# d2l.ai style: transpose_qkv / transpose_output, bmm, masked softmax
import math
import torch
from torch import nn


def transpose_qkv(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def split_heads(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError("feature dim not divisible by num_heads")
    b = x.shape[0]
    out = transpose_qkv(x, num_heads)
    return out.reshape(b, num_heads, out.shape[1], out.shape[2])


def merge_heads(x):
    b, h, t, e = x.shape
    return transpose_output(x.reshape(b * h, t, e), h).contiguous()


def scaled_dot_product_scores(queries, keys):
    d = queries.shape[-1]
    return torch.matmul(queries, keys.transpose(-1, -2)) / math.sqrt(d)


def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1 or window < 1:
        raise ValueError("num_tokens and window must be >= 1")
    i = torch.arange(num_tokens, device=device).unsqueeze(1)
    j = torch.arange(num_tokens, device=device).unsqueeze(0)
    return (j > i) | (i - j >= window)


class DotProductAttention(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, causal=False):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        if causal:
            n = scores.shape[-1]
            m = torch.ones(n, n, dtype=torch.bool, device=scores.device).triu(1)
            scores = scores.masked_fill(m, float("-inf"))
        self.attention_weights = nn.functional.softmax(scores, dim=-1)
        return torch.bmm(self.dropout(self.attention_weights), values)


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.attention = DotProductAttention(0.0)

    def forward(self, x):
        return self.attention(self.W_query(x), self.W_key(x), self.W_value(x))


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        self.attention = DotProductAttention(dropout)

    def forward(self, x):
        q = transpose_qkv(self.W_query(x), self.num_heads)
        k = transpose_qkv(self.W_key(x), self.num_heads)
        v = transpose_qkv(self.W_value(x), self.num_heads)
        out = self.attention(q, k, v, causal=True)
        return self.out_proj(transpose_output(out, self.num_heads))


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
