"""Causal + multi-head attention, mask built on the fly.

I don't keep a (context_length x context_length) buffer: the mask only needs
to be (T, T), so I build it in forward, on the same device as x, so this also
runs on the GPU without .to() tricks.
"""
import torch
import torch.nn as nn


def _future_mask(num_tokens, device):
    # True above the diagonal = tokens in the future
    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device), diagonal=1)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        b, num_tokens, _ = x.shape
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = attn_scores.masked_fill(_future_mask(num_tokens, x.device), -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


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

    def forward(self, x):
        b, num_tokens, _ = x.shape

        def heads(t):
            return t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        queries = heads(self.W_query(x))
        keys = heads(self.W_key(x))
        values = heads(self.W_value(x))

        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores = attn_scores.masked_fill(_future_mask(num_tokens, x.device), -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2).contiguous()
        context_vec = context_vec.view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(123)
    x = torch.rand(2, 6, 3, device=device)
    mha = MultiHeadAttention(3, 4, 6, 0.1, num_heads=2).to(device)
    mha.eval()
    print(mha(x))
