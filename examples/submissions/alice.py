"""Attention exercises -- Alice's hand-in.

I wrote every step out myself so I could follow the shapes.  Index names in
the einsum strings: q = query position, k = key position, d = feature,
v = value feature, h = head.
"""

import math

import torch
from torch import nn


# --- scores and softmax ---------------------------------------------------------------------


def dot_product_scores(queries, keys):
    # score[q, k] = sum over d of queries[q, d] * keys[k, d], for any batch dims in front
    return torch.einsum("...qd,...kd->...qk", queries, keys)


def scaled_dot_product_scores(queries, keys):
    d_k = keys.shape[-1]  # the key dimension, not d_in and not the number of tokens
    return dot_product_scores(queries, keys) / math.sqrt(d_k)


def softmax_weights(scores, dim=-1):
    # 1. subtract the largest score of each slice, so exp never overflows
    biggest = scores.amax(dim=dim, keepdim=True)
    # a slice that is entirely -inf has biggest == -inf, and -inf - (-inf) is NaN:
    # shift such slices by 0 instead (their exp is 0 everywhere anyway)
    biggest = torch.nan_to_num(biggest, neginf=0.0)
    # 2. exponentiate: -inf scores give exactly 0
    numerators = torch.exp(scores - biggest)
    # 3. normalise; an all -inf slice sums to 0, and 0 / tiny is still 0 (no NaN)
    totals = numerators.sum(dim=dim, keepdim=True)
    tiny = torch.finfo(scores.dtype).tiny
    return numerators / totals.clamp_min(tiny)


def softmax_with_temperature(scores, temperature, dim=-1):
    # a temperature of 0 would divide by zero, and a negative one would flip which score wins
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    # dividing first is fine: softmax_weights subtracts the max of the scaled scores
    return softmax_weights(scores / temperature, dim=dim)


def context_vectors(weights, values):
    # context[q, v] = sum over k of weights[q, k] * values[k, v]
    return torch.einsum("...qk,...kv->...qv", weights, values)


# --- the causal mask -------------------------------------------------------------------------


def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(f"need at least one token, got num_tokens={num_tokens}")
    position = torch.arange(num_tokens, device=device)
    # row i may look at columns j <= i; True marks the future (j > i)
    return position.unsqueeze(0) > position.unsqueeze(1)


def apply_causal_mask(scores):
    num_rows, num_cols = scores.shape[-2:]
    if num_rows != num_cols:
        raise ValueError(f"scores must be square in the last two dims, got {tuple(scores.shape)}")
    future = causal_mask(num_rows, device=scores.device)
    return scores.masked_fill(future, -math.inf)  # masked_fill returns a new tensor


def renormalize_masked_weights(weights):
    # tril keeps the diagonal and everything below it: exactly the allowed entries
    kept = torch.tril(weights)
    row_sums = kept.sum(dim=-1, keepdim=True)
    return kept / row_sums


# --- dropout -----------------------------------------------------------------------------------


def _check_probability(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be between 0 and 1, got {p}")


def dropout_scale(weights, keep_mask, p):
    _check_probability(p)
    if p == 1.0:
        return torch.zeros_like(weights)  # everything dropped; 1/(1-p) would be inf
    kept = torch.where(keep_mask.bool(), weights, torch.zeros_like(weights))
    return kept * (1.0 / (1.0 - p))


def attention_dropout(weights, p, training=True, generator=None):
    _check_probability(p)
    if not training or p == 0.0:
        return weights.clone()  # dropout is off: same values, but a new tensor
    draws = torch.rand(weights.shape, generator=generator, dtype=weights.dtype, device=weights.device)
    keep_mask = draws >= p  # P(draw >= p) = 1 - p
    return dropout_scale(weights, keep_mask, p)


# --- heads ---------------------------------------------------------------------------------------


def split_heads(x, num_heads):
    batch, num_tokens, d = x.shape
    if d % num_heads != 0:
        raise ValueError(f"cannot split {d} features into {num_heads} equal heads")
    head_dim = d // num_heads
    # (b, T, d) -> (b, T, H, hd): reshape copes with non-contiguous input where view would not
    x = x.reshape(batch, num_tokens, num_heads, head_dim)
    return x.permute(0, 2, 1, 3)  # (b, H, T, hd)


def merge_heads(x):
    batch, num_heads, num_tokens, head_dim = x.shape
    x = x.permute(0, 2, 1, 3).contiguous()  # (b, T, H, hd), laid out in memory in that order
    return x.reshape(batch, num_tokens, num_heads * head_dim)


# --- the modules ------------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        weights = softmax_weights(scaled_dot_product_scores(queries, keys), dim=-1)
        return context_vectors(weights, values)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout_p = dropout
        # a buffer: saved in state_dict and moved by .to(device), but not trained
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        num_tokens = x.shape[-2]
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        scores = scaled_dot_product_scores(queries, keys)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], -math.inf)
        weights = softmax_weights(scores, dim=-1)
        weights = attention_dropout(weights, self.dropout_p, training=self.training)
        return context_vectors(weights, values)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out={d_out} must be divisible by num_heads={num_heads}")
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads back together
        self.dropout_p = dropout
        self.register_buffer("mask", causal_mask(context_length))

    def forward(self, x):
        num_tokens = x.shape[1]
        queries = split_heads(self.W_query(x), self.num_heads)  # (b, H, T, hd)
        keys = split_heads(self.W_key(x), self.num_heads)
        values = split_heads(self.W_value(x), self.num_heads)
        scores = scaled_dot_product_scores(queries, keys)  # (b, H, T, T), scaled by sqrt(hd)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], -math.inf)
        weights = softmax_weights(scores, dim=-1)
        weights = attention_dropout(weights, self.dropout_p, training=self.training)
        heads = context_vectors(weights, values)  # (b, H, T, hd)
        return self.out_proj(merge_heads(heads))  # (b, T, d_out)


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias=qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias=qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=qkv_bias)


# --- long sequences -------------------------------------------------------------------------


def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1 or window < 1:
        raise ValueError(f"need num_tokens >= 1 and window >= 1, got {num_tokens} and {window}")
    position = torch.arange(num_tokens, device=device)
    behind = position[:, None] - position[None, :]  # behind[q, k] = how far key k is behind query q
    return (behind < 0) | (behind >= window)  # the future, or too far back


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    num_q, num_k = queries.shape[-2], keys.shape[-2]
    scale = 1.0 / math.sqrt(queries.shape[-1])
    best = queries.new_full((*queries.shape[:-1], 1), -math.inf)  # running max of each query's scores
    total = queries.new_zeros((*queries.shape[:-1], 1))  # running sum of exp(score - best)
    out = queries.new_zeros((*queries.shape[:-1], values.shape[-1]))  # running weighted sum of values
    my_position = torch.arange(num_q, device=queries.device)[:, None] + (num_k - num_q)
    for start in range(0, num_k, chunk_size):
        k, v = keys[..., start : start + chunk_size, :], values[..., start : start + chunk_size, :]
        scores = torch.einsum("...qd,...kd->...qk", queries, k) * scale  # (..., Tq, chunk)
        if causal:
            key_position = torch.arange(start, start + k.shape[-2], device=queries.device)
            scores = scores.masked_fill(key_position[None, :] > my_position, -math.inf)
        new_best = torch.maximum(best, scores.amax(dim=-1, keepdim=True))
        shift = torch.nan_to_num(new_best, neginf=0.0)  # nothing seen yet: shift by 0, not -inf
        shrink = torch.exp(best - shift)  # what the old sums are worth against the new max
        numerators = torch.exp(scores - shift)
        total = total * shrink + numerators.sum(dim=-1, keepdim=True)
        out = out * shrink + torch.einsum("...qk,...kv->...qv", numerators, v)
        best = new_best
    return out / total.clamp_min(torch.finfo(total.dtype).tiny)  # a query that saw nothing stays 0


# ---------- 6. the heatmap ----------

def plot_attention(weights, tokens=None):
    import matplotlib.pyplot as plt  # only this exercise needs matplotlib

    if weights.ndim != 2:
        raise ValueError(f"one (Tq, Tk) matrix at a time, not {tuple(weights.shape)}")
    rows, cols = weights.shape
    if tokens is None:
        row_names = col_names = None
    elif len(tokens) == 2 and not isinstance(tokens[0], str):
        row_names, col_names = tokens  # (query tokens, key tokens)
    else:
        row_names = col_names = tokens  # self-attention: the same tokens on both axes
    if row_names is not None and (len(row_names) != rows or len(col_names) != cols):
        raise ValueError(f"{len(row_names)}/{len(col_names)} tokens for a {rows}x{cols} matrix")
    fig, ax = plt.subplots(figsize=(4, 4))
    picture = ax.imshow(weights.detach().to("cpu", torch.float64).numpy(), cmap="viridis")
    fig.colorbar(picture, ax=ax, label="weight")
    ax.set_xlabel("Key positions")
    ax.set_ylabel("Query positions")
    if row_names is not None:
        ax.set_xticks(list(range(cols)), list(col_names))
        ax.set_yticks(list(range(rows)), list(row_names))
    return fig


# --- patterns: sparse masks, how spread a row is, one heatmap per head


def _how_far_back(num_tokens, device):
    positions = torch.arange(num_tokens, device=device)
    return positions[:, None] - positions[None, :]  # (T, T): [i, j] = i - j, negative in the future


def strided_mask(num_tokens, stride, device=None):
    if num_tokens < 1 or stride < 1:
        raise ValueError(f"need num_tokens >= 1 and stride >= 1, got {num_tokens} and {stride}")
    back = _how_far_back(num_tokens, device)
    visible = (back >= 0) & ((back < stride) | (back % stride == 0))
    return ~visible


def dilated_window_mask(num_tokens, window, dilation, device=None):
    if num_tokens < 1 or window < 1 or dilation < 1:
        raise ValueError(f"need num_tokens, window, dilation >= 1, got {num_tokens}, {window}, {dilation}")
    back = _how_far_back(num_tokens, device)
    visible = (back >= 0) & (back % dilation == 0) & (back // dilation < window)
    return ~visible


def attention_entropy(weights):
    return -torch.special.xlogy(weights, weights).sum(dim=-1)  # xlogy(0, 0) is 0: masked keys add nothing


def plot_head_grid(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.ndim != 3:
        raise ValueError(f"one (H, Tq, Tk) stack of heads, not {tuple(weights.shape)}")
    heads, rows, cols = weights.shape
    if tokens is None:
        row_names = col_names = None
    elif len(tokens) == 2 and not isinstance(tokens[0], str):
        row_names, col_names = tokens
    else:
        row_names = col_names = tokens
    if row_names is not None and (len(row_names) != rows or len(col_names) != cols):
        raise ValueError(f"{len(row_names)}/{len(col_names)} tokens for {rows}x{cols} weights")
    fig, axes = plt.subplots(1, heads, figsize=(4 * heads, 4), squeeze=False)
    values = weights.detach().to("cpu", torch.float64)
    low, high = float(values.min()), float(values.max())
    for h, ax in enumerate(axes[0]):
        picture = ax.imshow(values[h].numpy(), cmap="viridis", vmin=low, vmax=high)
        ax.set_title(f"Head {h}")
        ax.set_xlabel("Key positions")
        ax.set_ylabel("Query positions")
        if row_names is not None:
            ax.set_xticks(list(range(cols)), list(col_names))
            ax.set_yticks(list(range(rows)), list(row_names))
        if h == 0:
            fig.colorbar(picture, ax=ax, label="weight")
    return fig
