# modelled on nanoGPT's CausalSelfAttention, with the chapter's layer names
import math
import torch
import torch.nn as nn
from torch.nn import functional as F


class SelfAttn(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att, dim=-1)
        return att @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads=1, qkv_bias=False, proj=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.n_head = num_heads
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        if proj:
            self.out_proj = nn.Linear(d_out, d_out)
        self.proj = proj
        self.attn_dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        B, T, C = x.size()
        hs = self.d_out // self.n_head
        q = self.W_query(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.W_key(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.W_value(x).view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:T, :T].bool(), float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, self.d_out)
        if self.proj:
            y = self.out_proj(y)
        return y


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttn(d_in, d_out, qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalSelfAttention(d_in, d_out, context_length, dropout, 1, qkv_bias, proj=False)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return CausalSelfAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias, proj=True)
