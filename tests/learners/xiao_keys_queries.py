# 肖 -- attention scores: every key against every query
import torch
import torch.nn as nn


def dot_product_scores(queries, keys):
    return keys @ queries.transpose(-2, -1)


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
        attn_scores = dot_product_scores(queries, keys)
        print(attn_scores.shape)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values


if __name__ == "__main__":
    torch.manual_seed(789)
    x = torch.rand(6, 3)
    print(SelfAttention(3, 2)(x))
