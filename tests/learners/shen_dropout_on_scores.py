# Shen -- dropout in attention
import torch
import torch.nn as nn


def attention_dropout(weights, p, training=True, generator=None):
    if p < 0 or p > 1:
        raise ValueError("p must be in [0, 1]")
    if not training or p == 0:
        return weights.clone()
    if p == 1:
        return torch.zeros_like(weights)
    keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p
    dropped = weights * keep / (1 - p)
    # make every row a distribution again
    return dropped / dropped.sum(dim=-1, keepdim=True)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = self.dropout(attn_scores)  # drop some scores before the softmax
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values
