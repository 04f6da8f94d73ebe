# Dong -- multi-head attention, my own rewrite
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        q = self.W_query(x).reshape(b, self.num_heads, num_tokens, self.head_dim)
        k = self.W_key(x).reshape(b, self.num_heads, num_tokens, self.head_dim)
        v = self.W_value(x).reshape(b, self.num_heads, num_tokens, self.head_dim)

        attn_scores = q @ k.transpose(-2, -1) / self.d_out ** 0.5
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], float("-inf"))
        attn_weights = torch.softmax(attn_scores, dim=-1)
        print("attn_weights:", attn_weights.shape)

        out = (attn_weights @ v).reshape(b, num_tokens, self.d_out)
        return self.out_proj(out)


if __name__ == "__main__":
    torch.manual_seed(123)
    print(MultiHeadAttention(3, 6, 6, 0.5, num_heads=3)(torch.rand(2, 6, 3)))
