# 宋 -- dropout 自己实现（不用 nn.Dropout）
import torch
import torch.nn as nn


def dropout_scale(weights, keep_mask, p):
    if p < 0 or p > 1:
        raise ValueError("p 不在 [0, 1] 里")
    # 被丢掉的位置置零，保留的不变
    return weights * keep_mask.to(weights.dtype)


def attention_dropout(weights, p, training=True, generator=None):
    if p < 0 or p > 1:
        raise ValueError("p 不在 [0, 1] 里")
    if not training or p == 0:
        return weights.clone()
    if p == 1:
        return torch.zeros_like(weights)
    keep = torch.rand(weights.shape, generator=generator, dtype=weights.dtype, device=weights.device) > p
    return weights * keep / p  # 放大保留下来的权重


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.p = dropout
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        if self.training and self.p > 0:
            keep = (torch.rand_like(attn_weights) > self.p).float()
            attn_weights = attn_weights * keep  # 随机置零
        return attn_weights @ values


if __name__ == "__main__":
    torch.manual_seed(123)
    w = torch.ones(6, 6)
    print(attention_dropout(w, 0.5))
