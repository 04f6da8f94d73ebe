"""multi-head attention the way I first learned it (one fused qkv projection)."""

import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out % num_heads != 0")
        self.c_attn = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.c_proj = nn.Linear(d_out, d_out)
        self.attn_dropout = nn.Dropout(dropout)
        self.n_head = num_heads
        self.d_out = d_out
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        )

    def forward(self, x):
        B, T, _ = x.size()
        q, k, v = self.c_attn(x).split(self.d_out, dim=2)
        hs = self.d_out // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        att = self.attn_dropout(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.d_out)
        return self.c_proj(y)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return CausalSelfAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
