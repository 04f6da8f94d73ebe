import torch.nn as nn
import torch.nn.functional as F

from .heads import merge_heads, split_heads
from .masking import causal_mask
from .scores import scaled_dot_product_scores


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        w = F.softmax(scaled_dot_product_scores(self.W_query(x), self.W_key(x)), dim=-1)
        return w @ self.W_value(x)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        n = x.shape[1]
        scores = scaled_dot_product_scores(self.W_query(x), self.W_key(x))
        scores = scores.masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        w = F.dropout(F.softmax(scores, dim=-1), self.dropout)
        return w @ self.W_value(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out 必须能被 num_heads 整除")
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        n = x.shape[1]
        q = split_heads(self.W_query(x), self.num_heads)
        k = split_heads(self.W_key(x), self.num_heads)
        v = split_heads(self.W_value(x), self.num_heads)
        scores = scaled_dot_product_scores(q, k).masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        w = F.dropout(F.softmax(scores, dim=-1), self.dropout)
        return self.out_proj(merge_heads(w @ v))
