"""Ke -- chapter 3 homework, multi-head attention the way nanoGPT writes it (one c_attn for q, k, v)."""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.n_embd = d_in
        self.n_head = num_heads
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(d_in, 3 * d_in, bias=qkv_bias)
        # output projection
        self.c_proj = nn.Linear(d_in, d_in)
        self.attn_dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask.bool()[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.c_proj(y)


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.rand(2, 6, 4)
    attn = MultiHeadAttention(4, 4, 6, 0.0, num_heads=2)
    print(attn(x).shape)  # (2, 6, 4)
