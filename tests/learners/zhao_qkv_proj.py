# Zhao -- attention homework
# I use the HuggingFace-style names q_proj / k_proj / v_proj / o_proj because
# that's what I see in the llama code.
import math

import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.q_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.k_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.v_proj = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.softmax(dim=-1)
        return att @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out ({d_out}) has to be a multiple of num_heads ({num_heads})")
        self.n_head = num_heads
        self.head_dim = d_out // num_heads
        self.q_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.k_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.v_proj = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.o_proj = nn.Linear(d_out, d_out)
        self.attn_drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, C = x.size()
        # (B, T, d_out) -> (B, T, nh, hd) -> (B, nh, T, hd)
        q = self.q_proj(x).reshape(B, T, self.n_head, self.head_dim).permute(0, 2, 1, 3)
        k = self.k_proj(x).reshape(B, T, self.n_head, self.head_dim).permute(0, 2, 1, 3)
        v = self.v_proj(x).reshape(B, T, self.n_head, self.head_dim).permute(0, 2, 1, 3)

        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        att = att.softmax(dim=-1)
        att = self.attn_drop(att)

        y = att @ v  # (B, nh, T, hd)
        y = y.permute(0, 2, 1, 3).reshape(B, T, self.n_head * self.head_dim)
        return self.o_proj(y)


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.rand(2, 6, 3)
    mha = MultiHeadAttention(3, 4, context_length=6, dropout=0.0, num_heads=2)
    out = mha(x)
    print(out.shape)
    print(out)
