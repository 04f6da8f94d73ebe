# Cao -- ch03. Things I changed from the book on purpose:
#  * reshape/permute instead of view/transpose (view broke for me on a sliced tensor once)
#  * F.dropout with self.training instead of an nn.Dropout layer
#  * raise ValueError instead of assert (asserts disappear with python -O)
import torch
import torch.nn as nn
import torch.nn.functional as F


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
        attn_scores = torch.matmul(queries, keys.transpose(-2, -1))
        attn_weights = F.softmax(attn_scores / keys.size(-1) ** 0.5, dim=-1)
        return torch.matmul(attn_weights, values)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout_p = dropout
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        n = x.size(1)
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attn_scores = torch.matmul(queries, keys.permute(0, 2, 1))
        attn_scores = attn_scores.masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        attn_weights = F.softmax(attn_scores / keys.size(-1) ** 0.5, dim=-1)
        attn_weights = F.dropout(attn_weights, p=self.dropout_p, training=self.training)
        return torch.matmul(attn_weights, values)


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
        self.dropout_p = dropout
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        q = self.W_query(x).reshape(b, n, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        k = self.W_key(x).reshape(b, n, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        v = self.W_value(x).reshape(b, n, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.permute(0, 1, 3, 2)) / self.head_dim ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        weights = F.dropout(F.softmax(scores, dim=-1), p=self.dropout_p, training=self.training)
        ctx = torch.matmul(weights, v).permute(0, 2, 1, 3).reshape(b, n, self.d_out)
        return self.out_proj(ctx)


if __name__ == "__main__":
    torch.manual_seed(123)
    x = torch.randn(2, 6, 3)
    m = MultiHeadAttention(3, 6, 6, 0.2, 2)
    m.eval()
    print(m(x))
