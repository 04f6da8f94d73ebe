"""Attention homework.  I keep my own names for the helpers (attn_drop, n_heads, hd)
and use reshape everywhere so I never have to think about contiguity."""

import math

import torch
from torch import nn


def dot_product_scores(queries, keys):
    return torch.matmul(queries, keys.transpose(-1, -2))


def scaled_dot_product_scores(queries, keys):
    d_k = keys.size(-1)
    return torch.matmul(queries, keys.transpose(-1, -2)) * (1.0 / math.sqrt(d_k))


def context_vectors(weights, values):
    return torch.matmul(weights, values)


def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"{d} is not divisible by {num_heads}")
    hd = d // num_heads
    return x.reshape(b, T, num_heads, hd).permute(0, 2, 1, 3)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, T, H * hd)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out % num_heads must be 0")
        self.n_heads = num_heads
        self.hd = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.attn_drop = nn.Dropout(p=dropout)
        mask = torch.ones(context_length, context_length, dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, T, _ = x.shape
        q = split_heads(self.W_query(x), self.n_heads)
        k = split_heads(self.W_key(x), self.n_heads)
        v = split_heads(self.W_value(x), self.n_heads)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        weights = self.attn_drop(torch.softmax(scores, dim=-1))
        out = merge_heads(torch.matmul(weights, v))
        return self.out_proj(out)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
