"""ch03 self-attention + causal attention (my own naming: lower-case w_query etc.)

I like lower case names better, the book's W_query looks like a constant to me.
"""
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.w_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q = self.w_query(x)
        k = self.w_key(x)
        v = self.w_value(x)
        # transpose(-2, -1) so it also works with a batch dim in front
        scores = q @ k.transpose(-2, -1)
        # print("scores", scores.shape)
        weights = torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)
        return weights @ v


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.w_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        b, n, _ = x.shape
        q = self.w_query(x)
        k = self.w_key(x)
        v = self.w_value(x)
        scores = q @ k.transpose(1, 2)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        weights = torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)
        print(weights.shape)  # debugging, (b, n, n)
        weights = self.dropout(weights)
        return weights @ v


if __name__ == "__main__":
    torch.manual_seed(123)
    inputs = torch.tensor(
        [[0.43, 0.15, 0.89],
         [0.55, 0.87, 0.66],
         [0.57, 0.85, 0.64],
         [0.22, 0.58, 0.33],
         [0.77, 0.25, 0.10],
         [0.05, 0.80, 0.55]]
    )
    sa = SelfAttention(3, 2)
    print(sa(inputs))
    ca = CausalAttention(3, 2, 6, 0.5)
    print(ca(torch.stack([inputs, inputs])))
