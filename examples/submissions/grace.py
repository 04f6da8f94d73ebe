"""Grace -- chapter 3 exercises."""

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
    num_tokens = scores.shape[-1]
    mask = torch.triu(torch.ones(num_tokens, num_tokens, device=scores.device), diagonal=1)
    return scores.masked_fill(mask.bool(), -torch.inf)


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
    merged = torch.empty(b, num_tokens, num_heads * head_dim, dtype=x.dtype, device=x.device)
    h = 0
    while h < num_heads:
        # copy head h into its block of columns
        merged[:, :, h * head_dim:(h + 1) * head_dim] = x[:, h]
    return merged


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


# ---------- long sequences ----------

def sliding_window_mask(num_tokens, window, device=None):
    if num_tokens < 1 or window < 1:
        raise ValueError("num_tokens and window must be >= 1")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    # hide the future (above the diagonal) and every key window or more steps back
    return torch.triu(ones, diagonal=1) | torch.tril(ones, diagonal=-window)


def chunked_attention(queries, keys, values, chunk_size, causal=False):
    # one pass over blocks of keys: running max, running sum and running output per query
    n_q, n_k = queries.shape[-2], keys.shape[-2]
    shape = queries.shape[:-1] + (1,)
    run_max = torch.full(shape, float("-inf"), dtype=queries.dtype, device=queries.device)
    run_sum = torch.zeros(shape, dtype=queries.dtype, device=queries.device)
    out = torch.zeros(queries.shape[:-1] + (values.shape[-1],), dtype=queries.dtype, device=queries.device)
    q_pos = torch.arange(n_q, device=queries.device).unsqueeze(1) + (n_k - n_q)
    for start in range(0, n_k, chunk_size):
        stop = min(start + chunk_size, n_k)
        s = queries @ keys[..., start:stop, :].transpose(-2, -1) / queries.shape[-1] ** 0.5
        if causal:
            k_pos = torch.arange(start, stop, device=queries.device).unsqueeze(0)
            s = s.masked_fill(k_pos > q_pos, float("-inf"))
        new_max = torch.maximum(run_max, s.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        e = torch.exp(s - shift)
        factor = torch.exp(run_max - shift)
        run_sum = run_sum * factor + e.sum(dim=-1, keepdim=True)
        out = out * factor + e @ values[..., start:stop, :]
        run_max = new_max
    # a query that saw no key keeps zeros (divide by 1 there, never by 0)
    return out / torch.where(run_sum > 0, run_sum, torch.ones_like(run_sum))


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
