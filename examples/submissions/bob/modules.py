import torch
from torch import nn

from .dropout import attention_dropout
from .heads import merge_heads, split_heads
from .masking import causal_mask


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(-2, -1)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = attention_dropout(attn_weights, self.dropout, self.training)
        return attn_weights @ values


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.d_out = d_out
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = split_heads(self.W_key(x), self.num_heads)
        queries = split_heads(self.W_query(x), self.num_heads)
        values = split_heads(self.W_value(x), self.num_heads)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = attention_dropout(attn_weights, self.dropout, self.training)
        context_vec = merge_heads(attn_weights @ values)
        return self.out_proj(context_vec)


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
