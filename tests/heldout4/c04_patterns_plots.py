"""Patterns + plots, plain functions."""
import math

import torch


def _check(**kw):
    for name, v in kw.items():
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")


def _back(num_tokens, device):
    pos = torch.arange(num_tokens, device=device)
    return pos.unsqueeze(1) - pos.unsqueeze(0)  # back[i, j] = i - j


def strided_mask(num_tokens, stride, device=None):
    _check(num_tokens=num_tokens, stride=stride)
    back = _back(num_tokens, device)
    visible = (back >= 0) & ((back < stride) | (back % stride == 0))
    return ~visible


def dilated_window_mask(num_tokens, window, dilation, device=None):
    _check(num_tokens=num_tokens, window=window, dilation=dilation)
    back = _back(num_tokens, device)
    visible = (back >= 0) & (back % dilation == 0) & (back // dilation < window)
    return ~visible


def attention_entropy(weights):
    # 0 * ln 0 := 0 -- put 1 where p == 0 so the log is 0 (and its gradient finite)
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    return -(weights * torch.log(safe)).sum(dim=-1)


def _tokens(tokens, Tq, Tk):
    if tokens is None:
        return None, None
    if len(tokens) == 2 and not isinstance(tokens[0], str):
        qt, kt = list(tokens[0]), list(tokens[1])
    else:
        if Tq != Tk:
            raise ValueError("one token sequence needs square weights")
        qt = kt = list(tokens)
    if len(qt) != Tq or len(kt) != Tk:
        raise ValueError("token lengths do not match the weights")
    return qt, kt


def _label(ax, qt, kt):
    if qt is None:
        ax.set_xlabel("Key positions")
        ax.set_ylabel("Query positions")
    else:
        ax.set_xticks(range(len(kt)))
        ax.set_xticklabels(kt, rotation=90)
        ax.set_yticks(range(len(qt)))
        ax.set_yticklabels(qt)


def plot_attention(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.dim() != 2:
        raise ValueError(f"need one (Tq, Tk) matrix, got shape {tuple(weights.shape)}")
    Tq, Tk = weights.shape
    qt, kt = _tokens(tokens, Tq, Tk)
    arr = weights.detach().cpu().float().numpy()
    fig, ax = plt.subplots()
    im = ax.imshow(arr, cmap="viridis")
    _label(ax, qt, kt)
    fig.colorbar(im, ax=ax)
    return fig


def plot_head_grid(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.dim() != 3:
        raise ValueError("need (H, Tq, Tk)")
    H, Tq, Tk = weights.shape
    qt, kt = _tokens(tokens, Tq, Tk)
    arr = weights.detach().cpu().float().numpy()
    lo, hi = float(arr.min()), float(arr.max())
    fig, axes = plt.subplots(1, H, squeeze=False, figsize=(3 * H, 3))
    im = None
    for h in range(H):
        ax = axes[0, h]
        im = ax.imshow(arr[h], vmin=lo, vmax=hi, cmap="viridis")
        ax.set_title(f"Head {h}")
        ax.set_xlabel("Key positions")
        ax.set_ylabel("Query positions")
        if qt is not None:
            ax.set_xticks(range(Tk))
            ax.set_xticklabels(kt)
            ax.set_yticks(range(Tq))
            ax.set_yticklabels(qt)
    fig.colorbar(im, ax=list(axes[0]))
    return fig
