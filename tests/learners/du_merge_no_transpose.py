# 杜 -- 多头注意力：拆头和合并
import torch
import torch.nn as nn


def split_heads(x, num_heads):
    b, t, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d={d} 不能被 num_heads={num_heads} 整除")
    return x.reshape(b, t, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, hd = x.shape
    # (b, h, t, hd) -> (b, t, h*hd)
    return x.contiguous().view(b, t, h * hd)


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
        queries = split_heads(self.W_query(x), self.num_heads)
        keys = split_heads(self.W_key(x), self.num_heads)
        values = split_heads(self.W_value(x), self.num_heads)

        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = attn_weights @ values  # (b, h, t, hd)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


if __name__ == "__main__":
    x = torch.arange(24.0).reshape(1, 2, 12)
    print(merge_heads(split_heads(x, 3)))  # 应该等于 x ?
