# 林 -- 因果掩码
# 用 tril 做掩码（下三角），diagonal=1 保证对角线也包含进来
import torch
import torch.nn as nn


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens 必须 >= 1")
    return torch.tril(torch.ones(num_tokens, num_tokens, device=device), diagonal=1).bool()


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores 必须是方阵")
    return scores.masked_fill(causal_mask(scores.shape[-1], scores.device), -torch.inf)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        print(attn_weights)  # 为什么最后几行是 nan ??
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


if __name__ == "__main__":
    print(causal_mask(6).int())
