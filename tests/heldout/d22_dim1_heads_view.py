# softmax as in section 3.3.1, and my first MultiHeadAttention
import torch
import torch.nn as nn


def softmax_weights(scores, dim=-1):
    exp = torch.exp(scores - scores.max(dim=1, keepdim=True).values.nan_to_num(neginf=0.0))
    return exp / exp.sum(dim=1, keepdim=True).clamp_min(1e-38)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
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
        b, num_tokens, _ = x.shape
        # (b, T, d_out) -> (b, H, T, hd)
        queries = self.W_query(x).view(b, self.num_heads, num_tokens, self.head_dim)
        keys = self.W_key(x).view(b, self.num_heads, num_tokens, self.head_dim)
        values = self.W_value(x).view(b, self.num_heads, num_tokens, self.head_dim)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context = (attn_weights @ values).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
