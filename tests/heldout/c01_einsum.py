"""注意力练习 -- my hand-in.  I like einsum: the index letters say the shapes."""

import math

import torch
from torch import nn


def dot_product_scores(queries, keys):
    # s[i, j] = q_i . k_j, any batch dims in front
    return torch.einsum("...id,...jd->...ij", queries, keys)


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / math.sqrt(keys.shape[-1])


def softmax_weights(scores, dim=-1):
    m = scores.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # an all -inf row: shift by 0
    e = torch.exp(scores - m)
    s = e.sum(dim=dim, keepdim=True)
    s = torch.where(s == 0, torch.ones_like(s), s)
    return e / s


def softmax_with_temperature(scores, temperature, dim=-1):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    return softmax_weights(scores / temperature, dim=dim)


def context_vectors(weights, values):
    return torch.einsum("...ij,...jv->...iv", weights, values)


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("need at least one token")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("scores must be square in the last two dims")
    return scores.masked_fill(causal_mask(T, device=scores.device), -torch.inf)


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    keep = ~causal_mask(T, device=weights.device)
    w = weights * keep
    return w / w.sum(dim=-1, keepdim=True)


def dropout_scale(weights, keep_mask, p):
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    if p == 1:
        return torch.zeros_like(weights)
    return weights * keep_mask.to(weights.dtype) / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0:
        return weights.clone()
    r = torch.rand(weights.shape, generator=generator, device=weights.device)
    return dropout_scale(weights, r >= p, p)


def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads:
        raise ValueError("d must be divisible by num_heads")
    return x.reshape(b, T, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.transpose(1, 2).reshape(b, T, H * hd).contiguous()


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        w = softmax_weights(scaled_dot_product_scores(q, k), dim=-1)
        return context_vectors(w, v)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        T = x.shape[-2]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        s = scaled_dot_product_scores(q, k).masked_fill(self.mask[:T, :T], -torch.inf)
        w = attention_dropout(softmax_weights(s), self.dropout, training=self.training)
        return context_vectors(w, v)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        T = x.shape[1]
        q = split_heads(self.W_query(x), self.num_heads)
        k = split_heads(self.W_key(x), self.num_heads)
        v = split_heads(self.W_value(x), self.num_heads)
        s = scaled_dot_product_scores(q, k).masked_fill(self.mask[:T, :T], -torch.inf)
        w = attention_dropout(softmax_weights(s), self.dropout, training=self.training)
        return self.out_proj(merge_heads(torch.einsum("bhij,bhjd->bhid", w, v)))


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.rand(2, 6, 3)
    print(make_causal_attention(3, 2, 6, 0.0)(x)[0, 0])
