import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, inputs):
        q = self.W_query(inputs)
        k = self.W_key(inputs)
        v = self.W_value(inputs)
        T = inputs.shape[1]
        attention_scores = q @ k.transpose(1, 2)
        attention_weights = torch.softmax(attention_scores / k.shape[-1] ** 0.5, dim=-1)
        # mask the upper triangle (not the diagonal) with -inf, then normalise again
        masked = attention_weights.masked_fill(self.mask.bool()[:T, :T], -torch.inf)
        attention_weights = torch.softmax(masked / k.shape[-1] ** 0.5, dim=-1)
        attention_weights = self.dropout(attention_weights)
        return attention_weights @ v


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalSelfAttention(d_in, d_out, context_length, dropout, qkv_bias)


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1).bool()
