# 因果注意力：按照教程的写法，先 softmax 再掩码，再次 softmax 归一化
import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, inputs):
        b, T, _ = inputs.shape
        q = self.W_query(inputs)
        k = self.W_key(inputs)
        v = self.W_value(inputs)
        attention_scores = q @ k.transpose(1, 2)  # 注意力分数
        attention_weights = torch.softmax(attention_scores / k.shape[-1] ** 0.5, dim=-1)
        masked = attention_weights.masked_fill(self.mask.bool()[:T, :T], -torch.inf)  # 上半部分掩码为 -inf
        attention_weights = torch.softmax(masked, dim=-1)  # 再次使用 softmax 归一化
        attention_weights = self.dropout(attention_weights)
        return attention_weights @ v


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
