"""Bob: the long-sequence, plotting and pattern exercises."""

import torch


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
