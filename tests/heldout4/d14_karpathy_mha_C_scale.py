import torch
import torch.nn as nn
from torch.nn import functional as F


class MultiHeadAttention(nn.Module):
    """Karpathy-style: batch all heads, then project."""

    def __init__(self, d_in, d_out, block_size, dropout, n_head, bias=False):
        super().__init__()
        if d_out % n_head:
            raise ValueError("d_out % n_head != 0")
        self.n_head = n_head
        self.W_query = nn.Linear(d_in, d_out, bias=bias)
        self.W_key = nn.Linear(d_in, d_out, bias=bias)
        self.W_value = nn.Linear(d_in, d_out, bias=bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), 1))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        C = q.shape[-1]
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * C ** -0.5  # (B, nh, T, T)
        wei = wei.masked_fill(self.mask[:T, :T], float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        out = (wei @ v).transpose(1, 2).reshape(B, T, C)
        return self.out_proj(out)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens < 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device), 1)
