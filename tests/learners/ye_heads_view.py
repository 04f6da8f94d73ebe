# Ye -- multi-head attention (my version, shorter than the book)
import torch
import torch.nn as nn


def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads != 0:
        raise ValueError("d must be divisible by num_heads")
    return x.reshape(b, num_heads, t, d // num_heads)


def merge_heads(x):
    b, h, t, hd = x.shape
    return x.reshape(b, t, h * hd)


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
        # directly view as (b, heads, tokens, head_dim)
        queries = self.W_query(x).view(b, self.num_heads, num_tokens, self.head_dim)
        keys = self.W_key(x).view(b, self.num_heads, num_tokens, self.head_dim)
        values = self.W_value(x).view(b, self.num_heads, num_tokens, self.head_dim)
        print(queries.shape)

        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


if __name__ == "__main__":
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 4, 6, 0.0, 2)
    print(mha(torch.rand(2, 6, 3)))
