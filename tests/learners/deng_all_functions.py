"""Deng Hao -- attnkit exercises, all in one file.

Every function first, then the three modules built from them.
"""
import math

import torch
import torch.nn as nn


# ---------- scores ----------
def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-1, -2)


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / keys.shape[-1] ** 0.5


def softmax_weights(scores, dim=-1):
    # stable softmax: subtract the max first
    biggest = scores.amax(dim=dim, keepdim=True)
    biggest = biggest.masked_fill(biggest == float("-inf"), 0.0)
    num = torch.exp(scores - biggest)
    den = num.sum(dim=dim, keepdim=True)
    return torch.where(den > 0, num / den, torch.zeros_like(num))


def context_vectors(weights, values):
    return weights @ values


# ---------- mask ----------
def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(f"num_tokens must be positive, got {num_tokens}")
    i = torch.arange(num_tokens, device=device)
    return i[None, :] > i[:, None]  # column index > row index  ->  future


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("scores must be (..., T, T)")
    return torch.where(causal_mask(T, scores.device), torch.full_like(scores, -math.inf), scores)


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    masked = weights.masked_fill(causal_mask(T, weights.device), 0.0)
    return masked / masked.sum(dim=-1, keepdim=True)


# ---------- dropout ----------
def dropout_scale(weights, keep_mask, p):
    if not (0.0 <= p <= 1.0):
        raise ValueError("p must be between 0 and 1")
    if p == 1.0:
        return weights * 0.0
    return torch.where(keep_mask.bool(), weights / (1.0 - p), torch.zeros_like(weights))


def attention_dropout(weights, p, training=True, generator=None):
    if not (0.0 <= p <= 1.0):
        raise ValueError("p must be between 0 and 1")
    if not training or p == 0.0:
        return weights.clone()
    keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p
    return dropout_scale(weights, keep, p)


# ---------- heads ----------
def split_heads(x, num_heads):
    b, T, d = x.shape
    if d % num_heads:
        raise ValueError(f"d={d} not divisible by num_heads={num_heads}")
    return x.reshape(b, T, num_heads, d // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    b, H, T, hd = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, T, H * hd).contiguous()


# ---------- modules ----------
class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        weights = softmax_weights(scaled_dot_product_scores(self.W_query(x), self.W_key(x)))
        return context_vectors(weights, self.W_value(x))


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
        scores = scaled_dot_product_scores(self.W_query(x), self.W_key(x))
        scores = scores.masked_fill(self.mask[:T, :T], -math.inf)
        weights = attention_dropout(softmax_weights(scores), self.dropout, training=self.training)
        return context_vectors(weights, self.W_value(x))


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} must be divisible by num_heads={num_heads}")
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
        scores = scaled_dot_product_scores(q, k).masked_fill(self.mask[:T, :T], -math.inf)
        weights = attention_dropout(softmax_weights(scores), self.dropout, training=self.training)
        return self.out_proj(merge_heads(context_vectors(weights, v)))


if __name__ == "__main__":
    torch.manual_seed(123)
    s = torch.randn(2, 4, 4)
    print(apply_causal_mask(s))
    print(softmax_weights(apply_causal_mask(s)).sum(-1))
    print(split_heads(torch.arange(24.0).reshape(1, 2, 12), 3).shape)
