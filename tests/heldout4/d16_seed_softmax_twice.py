# 因果注意力：先 softmax 归一化，再对右上角遮挡，然后再次 softmax 重新归一化（照着教程写的）
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

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        q = self.W_query(x)
        k = self.W_key(x)
        v = self.W_value(x)
        attention_scores = q @ k.transpose(1, 2)  # 注意力分数
        attention_weights = torch.softmax(attention_scores / k.shape[-1] ** 0.5, dim=-1)  # softmax归一化权重系数
        mask = self.mask.bool()[:num_tokens, :num_tokens]  # 上三角(不包含对角线)
        masked = attention_weights.masked_fill(mask, -torch.inf)  # 对矩阵中为1的上半部分进行掩码为-inf
        attention_weights = torch.softmax(masked / k.shape[-1] ** 0.5, dim=-1)  # 再次使用softmax归一化
        attention_weights = self.dropout(attention_weights)
        return attention_weights @ v


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores 必须是方阵")
    n = scores.shape[-1]
    mask = torch.triu(torch.ones(n, n, device=scores.device), diagonal=1).bool()
    return scores.masked_fill(mask, -torch.inf)
