"""Chapter 3 exercises.  torch.manual_seed(123) everywhere so my printouts match the book."""

import torch
import torch.nn as nn


def softmax_weights(scores, dim=-1):
    # naive version from the book overflows, so subtract the max (but not a -inf max)
    row_max = torch.amax(scores, dim=dim, keepdim=True).detach()
    row_max[torch.isinf(row_max)] = 0.0
    exps = torch.exp(scores - row_max)
    sums = torch.sum(exps, dim=dim, keepdim=True)
    return exps / torch.where(sums > 0, sums, torch.ones_like(sums))


def apply_causal_mask(scores):
    context_length = scores.shape[-1]
    if scores.shape[-2] != context_length:
        raise ValueError("expected (..., T, T) scores")
    mask = torch.triu(torch.ones(context_length, context_length, device=scores.device), diagonal=1)
    masked = scores.clone()
    masked.masked_fill_(mask.bool(), -torch.inf)
    return masked


def attention_dropout(weights, p, training=True, generator=None):
    if not training or p == 0.0:
        return weights.clone()
    if p == 1.0:
        return torch.zeros_like(weights)
    keep = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return weights * keep / (1.0 - p)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = dropout
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2) / keys.shape[-1] ** 0.5
        attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = softmax_weights(attn_scores, dim=-1)
        attn_weights = attention_dropout(attn_weights, self.dropout, self.training)
        return attn_weights @ values


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


if __name__ == "__main__":
    torch.manual_seed(123)
    batch = torch.rand(2, 6, 3)
    ca = CausalAttention(3, 2, 6, 0.0)
    print(ca(batch)[0, 0])
