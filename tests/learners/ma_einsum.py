"""Ma -- I did the whole chapter with einsum, it's easier for me to read the shapes.

letters: b batch, h head, q query position, k key position, d feature
"""
import math

import torch
from torch import nn


def dot_product_scores(queries, keys):
    return torch.einsum("...qd,...kd->...qk", queries, keys)


def scaled_dot_product_scores(queries, keys):
    return torch.einsum("...qd,...kd->...qk", queries, keys) / math.sqrt(keys.shape[-1])


def context_vectors(weights, values):
    return torch.einsum("...qk,...kd->...qd", weights, values)


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        w = torch.softmax(scaled_dot_product_scores(q, k), dim=-1)
        return context_vectors(w, v)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.h = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length).triu(1).bool())

    def forward(self, x):
        b, t, d_out = x.shape[0], x.shape[1], self.W_query.out_features
        hd = d_out // self.h
        q = self.W_query(x).reshape(b, t, self.h, hd)  # b t h d
        k = self.W_key(x).reshape(b, t, self.h, hd)
        v = self.W_value(x).reshape(b, t, self.h, hd)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
        scores = scores.masked_fill(self.mask[:t, :t], -math.inf)
        w = self.drop(torch.softmax(scores, dim=-1))
        out = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, t, d_out)
        return self.out_proj(out)


if __name__ == "__main__":
    torch.manual_seed(123)
    print(MultiHeadAttention(3, 6, 6, 0.0, 3)(torch.rand(2, 6, 3)).shape)
