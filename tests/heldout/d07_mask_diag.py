"""causal mask via index comparisons; the module with it."""

import math

import torch
from torch import nn


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens >= 1")
    i = torch.arange(num_tokens, device=device)
    return i[None, :] >= i[:, None]


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=0))

    def forward(self, x):
        b, T, _ = x.shape
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = q @ k.transpose(1, 2) / math.sqrt(k.shape[-1])
        scores = scores.masked_fill(self.mask.bool()[:T, :T], -torch.inf)
        w = self.dropout(torch.softmax(scores, dim=-1))
        return w @ v


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
