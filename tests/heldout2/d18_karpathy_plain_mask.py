import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    """one head of causal self-attention"""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.mask = torch.triu(torch.ones(context_length, context_length), diagonal=1).bool()

    def forward(self, x):
        B, T, C = x.shape
        k = self.W_key(x)
        q = self.W_query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.mask[:T, :T], float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.W_value(x)
        return wei @ v


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return Head(d_in, d_out, context_length, dropout, qkv_bias)
