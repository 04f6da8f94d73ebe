# Fan -- masking exercises
import torch
import torch.nn as nn


def apply_causal_mask(scores):
    T = scores.shape[-1]
    if scores.shape[-2] != T:
        raise ValueError("need square scores")
    mask = torch.triu(torch.ones(T, T, device=scores.device), diagonal=1).bool()
    # set the future to zero so it doesn't count
    return scores.masked_fill(mask, 0.0)


def renormalize_masked_weights(weights):
    T = weights.shape[-1]
    simple = torch.tril(torch.ones(T, T, device=weights.device, dtype=weights.dtype))
    masked = weights * simple
    return masked / masked.sum(dim=-1, keepdim=True)


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
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], 0)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


if __name__ == "__main__":
    torch.manual_seed(123)
    s = torch.randn(4, 4)
    print(apply_causal_mask(s))
    print(renormalize_masked_weights(torch.softmax(s, dim=-1)))
