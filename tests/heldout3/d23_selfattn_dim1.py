import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, d_in=3, d_out=2, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, inputs):
        q = self.W_query(inputs)
        k = self.W_key(inputs)
        v = self.W_value(inputs)
        attention_scores = q @ k.transpose(-2, -1)
        attention_weights = torch.softmax(attention_scores / k.shape[-1] ** 0.5, dim=1)
        return attention_weights @ v


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product_scores(queries, keys):
    return dot_product_scores(queries, keys) / keys.shape[-1] ** 0.5
