# attention hand-in, written the way nanoGPT's CausalSelfAttention reads
import math

import torch
import torch.nn as nn


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(f"need at least one token, got {num_tokens}")
    bias = torch.tril(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device))
    return bias.logical_not()  # True above the diagonal


def apply_causal_mask(scores):
    T, T2 = scores.shape[-2], scores.shape[-1]
    if T != T2:
        raise ValueError("scores must be square in the last two dims")
    m = causal_mask(T, device=scores.device)
    return scores.masked_fill(m, float("-inf"))


def split_heads(x, num_heads):
    B, T, C = x.size()
    if C % num_heads != 0:
        raise ValueError("n_embd must be divisible by n_head")
    return x.view(B, T, num_heads, C // num_heads).transpose(1, 2) if x.is_contiguous() \
        else x.reshape(B, T, num_heads, C // num_heads).transpose(1, 2)


def merge_heads(x):
    B, nh, T, hs = x.size()
    return x.transpose(1, 2).contiguous().view(B, T, nh * hs)


class _CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, block_size, dropout, n_head, qkv_bias):
        super().__init__()
        if d_out % n_head != 0:
            raise ValueError("d_out must be divisible by n_head")
        # separate projections (the kit wants W_query/W_key/W_value, not one c_attn)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.n_head = n_head
        self.d_out = d_out
        self.attn_dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(block_size, block_size), diagonal=1).bool()
        )

    def _heads(self, x):
        B, T, C = x.size()
        return x.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

    def forward(self, x):
        B, T, _ = x.size()
        q = self._heads(self.W_query(x))
        k = self._heads(self.W_key(x))
        v = self._heads(self.W_value(x))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        return y.transpose(1, 2).contiguous().view(B, T, self.d_out)


class _MHA(_CausalSelfAttention):
    def __init__(self, d_in, d_out, block_size, dropout, n_head, qkv_bias):
        super().__init__(d_in, d_out, block_size, dropout, n_head, qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        return self.out_proj(super().forward(x))


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    # one head = the chapter's CausalAttention
    return _CausalSelfAttention(d_in, d_out, context_length, dropout, 1, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return _MHA(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
