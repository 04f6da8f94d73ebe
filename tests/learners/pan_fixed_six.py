# 潘 -- 第三章：因果掩码（书上的例子是 6 个 token）
import torch
import torch.nn as nn


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens 至少是 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1).bool()


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores 要是 (..., T, T)")
    mask = torch.triu(torch.ones(6, 6), diagonal=1)
    return scores.masked_fill(mask.bool(), -torch.inf)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        context_length = attn_scores.shape[-1]
        mask = torch.triu(torch.ones(context_length, context_length), diagonal=1)
        masked = attn_scores.masked_fill(mask.bool(), -torch.inf)
        attn_weights = torch.softmax(masked / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


if __name__ == "__main__":
    inputs = torch.tensor(
        [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
         [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]
    )
    attn_scores = inputs @ inputs.T
    print(apply_causal_mask(attn_scores))
