import math

import torch
from torch import nn


def dot_product_scores(queries, keys):
    return torch.matmul(queries, keys.transpose(-1, -2))


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        d = x.shape[-1]  # embedding size
        attn_weights = torch.softmax(dot_product_scores(queries, keys) / math.sqrt(d), dim=-1)
        return attn_weights @ values


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def context_vectors(weights, values):
    return torch.matmul(weights, values)
