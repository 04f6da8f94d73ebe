"""Frank -- attention homework (chapter 3)."""

import torch
import torch.nn as nn


# ---------- 1. scores, softmax, context vectors ----------

def dot_product_scores(queries, keys):
    return queries @ keys.transpose(-2, -1)


def scaled_dot_product_scores(queries, keys):
    return (queries @ keys.transpose(-2, -1)) / keys.shape[-1] ** 0.5


def softmax_weights(scores, dim=-1):
    # stable softmax: subtract the max first so exp() cannot overflow
    max_scores = scores.max(dim=dim, keepdim=True).values
    # a slice that is all -inf: shift by 0 instead of -inf (else -inf - -inf = nan)
    max_scores = torch.where(max_scores == -torch.inf, torch.zeros_like(max_scores), max_scores)
    exp_scores = torch.exp(scores - max_scores)
    sums = exp_scores.sum(dim=dim, keepdim=True)
    # a slice that is all -inf sums to 0: divide by 1 there (its exps are all 0), never by 0
    return exp_scores / torch.where(sums == 0, torch.ones_like(sums), sums)


def softmax_with_temperature(scores, temperature, dim=-1):
    # a temperature of 0 or below has no meaning: refuse it before dividing
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return softmax_weights(scores / temperature, dim=dim)


def context_vectors(weights, values):
    return weights @ values


# ---------- 2. causal mask ----------

def causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    return torch.triu(torch.ones(num_tokens, num_tokens, device=device), diagonal=1).bool()


def apply_causal_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError("scores must be square in the last two dims")
    # mask from the chapter: everything above the diagonal
    mask = torch.triu(torch.ones(6, 6), 1).bool()
    return scores.masked_fill(mask, -torch.inf)


def renormalize_masked_weights(weights):
    context_length = weights.shape[-1]
    mask_simple = torch.tril(torch.ones(context_length, context_length, device=weights.device))
    masked_simple = weights * mask_simple.to(weights.dtype)
    row_sums = masked_simple.sum(dim=-1, keepdim=True)
    return masked_simple / row_sums


# ---------- 3. dropout ----------

def dropout_scale(weights, keep_mask, p):
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    if p == 1:
        return torch.zeros_like(weights)
    # inverted dropout: scale the survivors by 1/(1-p)
    return weights * keep_mask.to(weights.dtype) / (1 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not 0 <= p <= 1:
        raise ValueError("p must be in [0, 1]")
    if not training or p == 0:
        return weights.clone()
    if p == 1:
        return torch.zeros_like(weights)
    keep_mask = torch.rand(weights.shape, generator=generator, device=weights.device) >= p
    return weights * keep_mask.to(weights.dtype) / (1 - p)


# ---------- 4. heads ----------

def split_heads(x, num_heads):
    b, num_tokens, d_out = x.shape
    if d_out % num_heads != 0:
        raise ValueError("d_out must be divisible by num_heads")
    head_dim = d_out // num_heads
    # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
    return x.reshape(b, num_tokens, num_heads, head_dim).transpose(1, 2)


def merge_heads(x):
    b, num_heads, num_tokens, head_dim = x.shape
    return x.transpose(1, 2).contiguous().view(b, num_tokens, num_heads * head_dim)


# ---------- 5. modules ----------

class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(-2, -1)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
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
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError("d_out must be divisible by num_heads")
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        # (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


def make_self_attention(d_in, d_out, qkv_bias=False):
    return SelfAttention(d_in, d_out, qkv_bias)


def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)


def make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
    return MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


# ---------- 6. long sequences ----------

def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1:
        raise ValueError("num_tokens must be >= 1")
    if window < 1:
        raise ValueError("window must be >= 1")
    ones = torch.ones(num_tokens, num_tokens, device=device)
    future = torch.triu(ones, diagonal=1)
    too_old = torch.tril(ones, diagonal=-window)
    return (future + too_old).bool()


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    # online softmax: running max m, running sum l, running output acc
    tq, tk = queries.shape[-2], keys.shape[-2]
    m = torch.full(queries.shape[:-1] + (1,), float("-inf"), dtype=queries.dtype, device=queries.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(queries.shape[:-1] + (values.shape[-1],), dtype=queries.dtype, device=queries.device)
    rows = torch.arange(tq, device=queries.device).view(-1, 1) + (tk - tq)
    for s in range(0, tk, chunk_size):
        e = min(s + chunk_size, tk)
        scores = queries @ keys[..., s:e, :].transpose(-2, -1) / queries.shape[-1] ** 0.5
        if causal:
            cols = torch.arange(s, e, device=queries.device).view(1, -1)
            scores = scores.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, scores.max(dim=-1, keepdim=True).values)
        m_safe = torch.where(m_new == float("-inf"), torch.zeros_like(m_new), m_new)
        p = torch.exp(scores - m_safe)
        alpha = torch.exp(m - m_safe)
        l = l * alpha + p.sum(dim=-1, keepdim=True)
        acc = acc * alpha + p @ values[..., s:e, :]
        m = m_new
    return acc / torch.where(l > 0, l, torch.ones_like(l))  # a query that saw nothing: 0 / 1


# ---------- plots ----------

def _token_names(tokens, rows, cols):
    if tokens is None:
        return None, None
    if len(tokens) == 2 and not isinstance(tokens[0], str):
        names = (list(tokens[0]), list(tokens[1]))
    else:
        names = (list(tokens), list(tokens))
    if len(names[0]) != rows or len(names[1]) != cols:
        raise ValueError("the tokens do not match the weights' shape")
    return names


def plot_attention(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.dim() != 2:
        raise ValueError("plot_attention takes one (Tq, Tk) matrix")
    row_names, col_names = _token_names(tokens, *weights.shape)
    fig, ax = plt.subplots()
    image = ax.imshow(weights.detach().cpu().float().numpy())
    fig.colorbar(image, ax=ax)
    ax.set_xlabel("Key positions")
    ax.set_ylabel("Query positions")
    if row_names is not None:
        ax.set_xticks(range(len(col_names)), col_names)
        ax.set_yticks(range(len(row_names)), row_names)
    return fig


# ---------- attention patterns ----------

def strided_mask(num_tokens, stride, device=None):
    if num_tokens < 1 or stride < 1:
        raise ValueError("num_tokens and stride must be >= 1")
    i = torch.arange(num_tokens, device=device)
    back = i.unsqueeze(1) - i.unsqueeze(0)  # how many steps key j is behind query i
    seen = (back >= 0) & ((back < stride) | (back % stride == 0))
    return ~seen


def dilated_window_mask(num_tokens, window, dilation, device=None):
    if num_tokens < 1 or window < 1 or dilation < 1:
        raise ValueError("num_tokens, window and dilation must be >= 1")
    i = torch.arange(num_tokens, device=device)
    back = i.unsqueeze(1) - i.unsqueeze(0)
    seen = (back >= 0) & (back % dilation == 0) & (back < window * dilation)
    return ~seen


def attention_entropy(weights):
    # 0 * log(0) counts as 0: take the log of 1 where a weight is 0
    logs = torch.log(torch.where(weights > 0, weights, torch.ones_like(weights)))
    return -(weights * logs).sum(dim=-1)


def plot_head_grid(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.dim() != 3:
        raise ValueError("plot_head_grid takes (H, Tq, Tk) weights")
    heads = weights.shape[0]
    row_names, col_names = _token_names(tokens, weights.shape[1], weights.shape[2])
    fig, axes = plt.subplots(1, heads, figsize=(3 * heads, 3), squeeze=False)
    data = weights.detach().cpu().float()
    for h in range(heads):
        ax = axes[0][h]
        image = ax.imshow(data[h].numpy(), vmin=float(data.min()), vmax=float(data.max()))
        ax.set_title(f"Head {h}")
        ax.set_xlabel("Key positions")
        ax.set_ylabel("Query positions")
        if row_names is not None:
            ax.set_xticks(range(len(col_names)), col_names)
            ax.set_yticks(range(len(row_names)), row_names)
    fig.colorbar(image, ax=list(axes[0]))
    return fig
