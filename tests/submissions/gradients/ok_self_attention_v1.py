# right: the chapter's SelfAttention_v1, weights as (d_in, d_out) parameters used as x @ W (biases after them)
import torch
from torch import nn


class SelfAttention_v1(nn.Module):  # noqa: N801 - the chapter's name
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))
        self.biases = nn.ParameterList([nn.Parameter(torch.zeros(d_out)) for _ in range(3)] if qkv_bias else [])

    def forward(self, x):
        b_q, b_k, b_v = self.biases if len(self.biases) else (0.0, 0.0, 0.0)
        keys, queries, values = x @ self.W_key + b_k, x @ self.W_query + b_q, x @ self.W_value + b_v
        weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)
        return weights @ values


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention_v1(d_in, d_out, qkv_bias)
