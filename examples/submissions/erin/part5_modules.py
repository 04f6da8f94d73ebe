# Erin -- part 5: the attention modules (following the chapter's code)
import torch
import torch.nn as nn

from part1_scores import context_vectors, scaled_dot_product_scores, softmax_weights
from part2_masking import causal_mask
from part3_dropout import attention_dropout


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        return context_vectors(softmax_weights(scaled_dot_product_scores(queries, keys)), values)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        T = x.shape[1]
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = scaled_dot_product_scores(queries, keys).masked_fill(self.mask[:T, :T], -torch.inf)
        weights = attention_dropout(softmax_weights(scores), self.dropout, self.training)
        return context_vectors(weights, values)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        b, T, _ = x.shape
        # as in the chapter: unroll the last dim, then swap tokens and heads
        q = self.W_query(x).view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, T, self.num_heads, self.head_dim).transpose(1, 2)
        scores = scaled_dot_product_scores(q, k).masked_fill(self.mask[:T, :T], -torch.inf)
        weights = attention_dropout(softmax_weights(scores), self.dropout, self.training)
        context = context_vectors(weights, v).transpose(1, 2).contiguous().view(b, T, self.d_out)
        return self.out_proj(context)


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
