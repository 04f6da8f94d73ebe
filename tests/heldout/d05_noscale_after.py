# self-attention, chapter 3.4
import torch
from torch import nn


def scaled_dot_product_scores(queries, keys):
    attn_scores = queries @ keys.transpose(-2, -1)
    return attn_scores


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
        attn_scores = queries @ keys.transpose(-2, -1)
        attn_weights = torch.softmax(attn_scores, dim=-1)
        attn_weights = attn_weights / keys.shape[-1] ** 0.5  # scale
        return attn_weights @ values


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)
