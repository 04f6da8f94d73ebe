"""The reference solution: every hook, written the way the chapter teaches.

Gold answers for the hidden cases come from here, computed in float64 on the CPU.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from grader import hookimpl

# --- scores and softmax -------------------------------------------------------


@hookimpl
def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)  # (..., Tq, Tk)


@hookimpl
def scaled_dot_product_scores(queries, keys):
    d_k = keys.shape[-1]
    return dot_product_scores(queries, keys) / math.sqrt(d_k)


@hookimpl
def softmax_weights(scores, dim=-1):
    peak = scores.amax(dim=dim, keepdim=True)
    # an all -inf slice has peak -inf; subtracting it would give NaN
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    exp = torch.exp(scores - peak)
    total = exp.sum(dim=dim, keepdim=True)
    # a safe total: an all -inf slice's 0/0, even in the branch torch.where drops, sends NaN back in backward
    safe = torch.where(total > 0, total, torch.ones_like(total))
    return torch.where(total > 0, exp / safe, torch.zeros_like(exp))


@hookimpl
def softmax_with_temperature(scores, temperature, dim=-1):
    if not temperature > 0:  # also refuses NaN
        raise ValueError(f"softmax_with_temperature needs temperature > 0, got {temperature}")
    peak = scores.amax(dim=dim, keepdim=True)
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    # subtract the max before dividing: (scores - max) / T <= 0 cannot overflow, even at T = 1e-4 in float16
    return softmax_weights((scores - peak) / temperature, dim=dim)


@hookimpl
def context_vectors(weights, values):
    return weights @ values  # (..., Tq, dv)


# --- the causal mask ------------------------------------------------------------


@hookimpl
def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(f"causal_mask needs num_tokens >= 1, got {num_tokens}")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    return torch.triu(ones, diagonal=1)  # (T, T), True above the diagonal


@hookimpl
def apply_causal_mask(scores):
    rows, cols = scores.shape[-2], scores.shape[-1]
    if rows != cols:
        raise ValueError(f"apply_causal_mask needs square (..., T, T) scores, got {tuple(scores.shape)}")
    mask = causal_mask(rows, device=scores.device)
    return scores.masked_fill(mask, float("-inf"))


@hookimpl
def renormalize_masked_weights(weights):
    keep = ~causal_mask(weights.shape[-1], device=weights.device)
    masked = weights * keep
    total = masked.sum(dim=-1, keepdim=True)  # (..., T, 1)
    # a safe total: a row with nothing left up to the diagonal gives zeros, not 0/0 (NaN, and NaN gradients)
    safe = torch.where(total != 0, total, torch.ones_like(total))
    return torch.where(total != 0, masked / safe, torch.zeros_like(masked))


# --- dropout ------------------------------------------------------------------------


@hookimpl
def dropout_scale(weights, keep_mask, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if p == 1.0:  # zeros still tied to weights: their gradient is 0, not missing
        return weights.masked_fill(torch.ones_like(weights, dtype=torch.bool), 0.0)
    return weights * keep_mask.to(weights.dtype) / (1.0 - p)


@hookimpl
def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return weights.clone()
    draws = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype)
    keep = draws >= p  # kept with probability 1 - p
    return dropout_scale(weights, keep, p)


# --- heads ------------------------------------------------------------------------------


@hookimpl
def split_heads(x, num_heads):
    b, num_tokens, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"d={d} is not divisible by num_heads={num_heads}")
    head_dim = d // num_heads
    x = x.reshape(b, num_tokens, num_heads, head_dim)  # (b, T, H, hd)
    return x.transpose(1, 2)  # (b, H, T, hd)


@hookimpl
def merge_heads(x):
    b, num_heads, num_tokens, head_dim = x.shape
    x = x.transpose(1, 2)  # (b, T, H, hd)
    return x.contiguous().view(b, num_tokens, num_heads * head_dim)


# --- the modules ------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        weights = softmax_weights(scaled_dot_product_scores(queries, keys))
        return context_vectors(weights, values)


class CausalAttention(SelfAttention):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__(d_in, d_out, qkv_bias)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        num_tokens = x.shape[-2]
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = scaled_dot_product_scores(queries, keys)  # (b, T, T)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], float("-inf"))
        weights = attention_dropout(softmax_weights(scores), self.dropout, self.training)
        return context_vectors(weights, values)  # (b, T, d_out)


class MultiHeadAttention(CausalAttention):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by num_heads={num_heads}")
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        self.num_heads = num_heads
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        num_tokens = x.shape[-2]
        queries = split_heads(self.W_query(x), self.num_heads)  # (b, H, T, hd)
        keys = split_heads(self.W_key(x), self.num_heads)
        values = split_heads(self.W_value(x), self.num_heads)
        scores = scaled_dot_product_scores(queries, keys)  # (b, H, T, T)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], float("-inf"))
        weights = attention_dropout(softmax_weights(scores), self.dropout, self.training)
        context = merge_heads(context_vectors(weights, values))  # (b, T, d_out)
        return self.out_proj(context)


@hookimpl
def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


@hookimpl
def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


@hookimpl
def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


# --- long sequences ------------------------------------------------------------------------------


@hookimpl
def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1:
        raise ValueError(f"sliding_window_mask needs num_tokens >= 1, got {num_tokens}")
    if window < 1:
        raise ValueError(f"sliding_window_mask needs window >= 1, got {window}")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    future = torch.triu(ones, diagonal=1)  # j > i
    too_far = torch.tril(ones, diagonal=-window)  # j <= i - window: more than window - 1 back
    return future | too_far  # (T, T)


@hookimpl
def chunked_attention(queries, keys, values, chunk_size, causal=False):
    if chunk_size < 1:
        raise ValueError(f"chunked_attention needs chunk_size >= 1, got {chunk_size}")
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    q = queries / math.sqrt(queries.shape[-1])  # (..., Tq, d)
    stats = (*queries.shape[:-1], 1)  # (..., Tq, 1): one running max and sum per query
    peak = torch.full(stats, float("-inf"), dtype=queries.dtype, device=queries.device)
    total = torch.zeros(stats, dtype=queries.dtype, device=queries.device)
    mixed = torch.zeros((*queries.shape[:-1], values.shape[-1]), dtype=queries.dtype, device=queries.device)
    # query i sits at position i + (Tk - Tq) among the keys: the last key it may see
    last_seen = torch.arange(num_queries, device=queries.device).unsqueeze(-1) + (num_keys - num_queries)
    for start in range(0, num_keys, chunk_size):
        block = q @ keys[..., start : start + chunk_size, :].transpose(-2, -1)  # (..., Tq, c)
        if causal:
            positions = torch.arange(start, start + block.shape[-1], device=queries.device)
            block = block.masked_fill(positions > last_seen, float("-inf"))
        new_peak = torch.maximum(peak, block.amax(dim=-1, keepdim=True))
        # a query that has seen only masked keys has peak -inf; subtracting it would give NaN
        shift = torch.where(torch.isfinite(new_peak), new_peak, torch.zeros_like(new_peak))
        rescale = torch.exp(peak - shift)  # (..., Tq, 1): the old sums, re-based to the new max
        exp = torch.exp(block - shift)  # (..., Tq, c)
        total = total * rescale + exp.sum(dim=-1, keepdim=True)
        mixed = mixed * rescale + exp @ values[..., start : start + chunk_size, :]  # (..., Tq, dv)
        peak = new_peak
    # a safe total: a query that saw no key has total 0, and its 0/0, even in the dropped branch, sends NaN back
    safe = torch.where(total > 0, total, torch.ones_like(total))
    return torch.where(total > 0, mixed / safe, torch.zeros_like(mixed))  # (..., Tq, dv)


# --- plotting ----------------------------------------------------------------------------------------


@hookimpl
def plot_attention(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.dim() != 2:
        raise ValueError(f"plot_attention draws one (Tq, Tk) matrix, got shape {tuple(weights.shape)}")
    num_queries, num_keys = weights.shape
    if tokens is not None:  # one sequence names both axes (square weights); a pair is (queries, keys)
        items = list(tokens)
        pair = len(items) == 2 and not any(isinstance(t, str) for t in items)
        queries, keys = (list(items[0]), list(items[1])) if pair else (items, items)
        if (len(queries), len(keys)) != (num_queries, num_keys):
            raise ValueError(f"{len(queries)} query and {len(keys)} key tokens for ({num_queries}, {num_keys}) weights")
    fig, ax = plt.subplots()
    image = ax.imshow(weights.detach().cpu().numpy())  # row i: query i, column j: key j
    fig.colorbar(image, ax=ax)
    ax.set_xlabel("Key positions")
    ax.set_ylabel("Query positions")
    if tokens is not None:
        ax.set_xticks(range(num_keys), [str(t) for t in keys], rotation=90)
        ax.set_yticks(range(num_queries), [str(t) for t in queries])
    return fig
