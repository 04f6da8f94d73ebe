"""Tao -- chapter 3, causal attention as one `Head` of the makemore / nanoGPT video."""
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalAttention(nn.Module):
    """one head of self-attention"""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B,T,hs)
        q = self.query(x)  # (B,T,hs)
        # compute attention scores ("affinities")
        wei = q @ k.transpose(-2, -1) * C**-0.5  # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
        wei = F.softmax(wei, dim=-1)  # (B, T, T)
        v = self.value(x)  # (B,T,hs)
        out = wei @ v  # (B, T, T) @ (B, T, hs) -> (B, T, hs)
        return out


if __name__ == "__main__":
    torch.manual_seed(1337)
    x = torch.randn(4, 8, 32)
    head = CausalAttention(32, 16, 8, 0.0)
    print(head(x).shape)
