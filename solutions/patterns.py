"""The reference of the patterns group, and its catalogue of known mistakes.

Sparse masks (seed text 002, §4.1: 带状、扩张式), the entropy of each row of weights (§5.3: weights too
dispersed or too concentrated) and one heatmap per head (§6.3: different heads learn different patterns).
Gold answers come from the ``@hookimpl`` functions here, in float64 on the CPU.  Each wrong implementation
below changes one step of its reference and calls nothing of another hook, so a mistake fails its own hook only.

Instructor-only, like the chapter's reference: nothing here ships in a learner's kit.
"""

from __future__ import annotations

import types

import torch

from grader import hookimpl
from solutions.mistakes import Mistake

SEED_002 = "seed 002_5796c8154c5408de.txt"
CLASSIC = "classic"

# --- sparse masks --------------------------------------------------------------------------------------------


def _offsets(num_tokens, device):
    positions = torch.arange(num_tokens, device=device)
    return positions.unsqueeze(-1) - positions  # (T, T): [i, j] = i - j, how far back key j is from query i


def _check_sizes(hook, **sizes):
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{hook} needs {name} >= 1, got {value}")


@hookimpl
def strided_mask(num_tokens, stride, device=None):
    _check_sizes("strided_mask", num_tokens=num_tokens, stride=stride)
    back = _offsets(num_tokens, device)  # (T, T)
    local = back < stride  # the band: itself and the stride - 1 tokens before it
    strided = back % stride == 0  # every stride-th token back
    return (back < 0) | ~(local | strided)  # (T, T), True where query i may not look


@hookimpl
def dilated_window_mask(num_tokens, window, dilation, device=None):
    _check_sizes("dilated_window_mask", num_tokens=num_tokens, window=window, dilation=dilation)
    back = _offsets(num_tokens, device)  # (T, T)
    on_grid = back % dilation == 0  # i, i - d, i - 2d, …
    near = back <= (window - 1) * dilation  # at most window keys of the grid, itself included
    return (back < 0) | ~(on_grid & near)  # (T, T)


# --- entropy ------------------------------------------------------------------------------------------------


@hookimpl
def attention_entropy(weights):
    # 0 * ln 0 is 0: where p == 0 take 0, never p * -inf (NaN), and log a safe p: ln 0's backward would send NaN back
    safe = torch.where(weights > 0, weights, torch.ones_like(weights))
    p_log_p = torch.where(weights > 0, weights * safe.log(), torch.zeros_like(weights))  # (..., Tq, Tk)
    return -p_log_p.sum(dim=-1)  # (..., Tq), in nats


# --- one heatmap per head --------------------------------------------------------------------------------------


def _token_names(tokens, num_queries, num_keys):
    """``(query_tokens, key_tokens)``: one sequence names both (square weights), a pair names each."""
    items = list(tokens)
    pair = len(items) == 2 and not any(isinstance(t, str) for t in items)
    queries, keys = (list(items[0]), list(items[1])) if pair else (items, items)
    if (len(queries), len(keys)) != (num_queries, num_keys):
        raise ValueError(f"{len(queries)} query and {len(keys)} key tokens for ({num_queries}, {num_keys}) weights")
    return [str(t) for t in queries], [str(t) for t in keys]


def _check_heads(weights):
    if weights.dim() != 3:
        raise ValueError(f"plot_head_grid draws (H, Tq, Tk) weights, one head per heatmap, got {tuple(weights.shape)}")


@hookimpl
def plot_head_grid(weights, tokens=None):
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    _check_heads(weights)
    num_heads, num_queries, num_keys = weights.shape
    names = None if tokens is None else _token_names(tokens, num_queries, num_keys)
    data = weights.detach().cpu().numpy()  # (H, Tq, Tk)
    scale = Normalize(vmin=float(data.min()), vmax=float(data.max()))  # one colour scale for every head
    fig, axes = plt.subplots(1, num_heads, squeeze=False, figsize=(3 * num_heads + 1, 3))
    images = []
    for h, ax in enumerate(axes[0]):
        images.append(ax.imshow(data[h], norm=scale))  # row i: query i, column j: key j
        ax.set_title(f"Head {h}")
        ax.set_xlabel("Key positions")
        ax.set_ylabel("Query positions")
        if names is not None:
            ax.set_xticks(range(num_keys), names[1], rotation=90)
            ax.set_yticks(range(num_queries), names[0])
    fig.colorbar(images[0], ax=list(axes[0]))  # the shared scale: one colorbar reads every head
    return fig


# --- the catalogue ---------------------------------------------------------------------------------------------


def strided_band_one_too_narrow(num_tokens, stride, device=None):
    _check_sizes("strided_mask", num_tokens=num_tokens, stride=stride)
    back = _offsets(num_tokens, device)
    return (back < 0) | ~((back < stride - 1) | (back % stride == 0))  # `i - j < stride - 1`: stride - 1 band keys


def strided_not_causal(num_tokens, stride, device=None):
    _check_sizes("strided_mask", num_tokens=num_tokens, stride=stride)
    back = _offsets(num_tokens, device)
    return ~((back.abs() < stride) | (back % stride == 0))  # the band and the stride both ways: the future too


def strided_only(num_tokens, stride, device=None):
    _check_sizes("strided_mask", num_tokens=num_tokens, stride=stride)
    back = _offsets(num_tokens, device)
    return (back < 0) | (back % stride != 0)  # the strided head alone: the local band forgotten


def strided_on_positions(num_tokens, stride, device=None):
    _check_sizes("strided_mask", num_tokens=num_tokens, stride=stride)
    back = _offsets(num_tokens, device)
    keys = torch.arange(num_tokens, device=device)
    return (back < 0) | ~((back < stride) | (keys % stride == 0))  # `j % stride == 0`: fixed columns, not i - j


def dilated_window_spans_keys(num_tokens, window, dilation, device=None):
    _check_sizes("dilated_window_mask", num_tokens=num_tokens, window=window, dilation=dilation)
    back = _offsets(num_tokens, device)
    return (back < 0) | ~((back % dilation == 0) & (back < window))  # window counted in positions, not keys


def dilated_window_one_too_many(num_tokens, window, dilation, device=None):
    _check_sizes("dilated_window_mask", num_tokens=num_tokens, window=window, dilation=dilation)
    back = _offsets(num_tokens, device)
    return (back < 0) | ~((back % dilation == 0) & (back <= window * dilation))  # window + 1 keys


def dilated_window_ignores_dilation(num_tokens, window, dilation, device=None):
    _check_sizes("dilated_window_mask", num_tokens=num_tokens, window=window, dilation=dilation)
    back = _offsets(num_tokens, device)
    return (back < 0) | (back >= window)  # a plain sliding window


def dilated_window_unchecked(num_tokens, window, dilation, device=None):
    back = _offsets(num_tokens, device)
    return (back < 0) | ~((back % dilation == 0) & (back <= (window - 1) * dilation))  # dilation 0: an error


def entropy_nan_on_zeros(weights):
    return -(weights * weights.log()).sum(dim=-1)  # 0 * ln 0 = 0 * -inf = NaN


def entropy_in_bits(weights):
    p_log_p = torch.where(weights > 0, weights * weights.log2(), torch.zeros_like(weights))
    return -p_log_p.sum(dim=-1)  # log2: bits, ln 2 times the nats


def entropy_over_queries(weights):
    p_log_p = torch.where(weights > 0, weights * weights.log(), torch.zeros_like(weights))
    return -p_log_p.sum(dim=-2)  # over the queries: (..., Tk)


def entropy_with_epsilon(weights):
    return -(weights * (weights + 1e-3).log()).sum(dim=-1)  # `log(p + eps)`: every entry shifted


def entropy_sign_flipped(weights):
    p_log_p = torch.where(weights > 0, weights * weights.log(), torch.zeros_like(weights))
    return p_log_p.sum(dim=-1)  # `sum p log p`: the minus forgotten, every entropy <= 0


def _grid_drawn_wrong(weights, tokens, transpose=False, mean=False, colorbar=True, show=False):
    """The reference's grid with one thing changed (each mistake below names which)."""
    import matplotlib.pyplot as plt

    _check_heads(weights)
    num_heads, num_queries, num_keys = weights.shape
    names = None if tokens is None else _token_names(tokens, num_queries, num_keys)
    data = weights.detach().cpu().numpy()
    heads = [data.mean(axis=0)] if mean else list(data)  # mean: one picture, the heads averaged
    fig, axes = plt.subplots(1, len(heads), squeeze=False)
    images = []
    for h, (ax, head) in enumerate(zip(axes[0], heads, strict=True)):
        images.append(ax.imshow(head.T if transpose else head))
        ax.set_title(f"Head {h}")
        ax.set_xlabel("Key positions")
        ax.set_ylabel("Query positions")
        if names is not None:
            ax.set_xticks(range(num_keys), names[1])
            ax.set_yticks(range(num_queries), names[0])
    if colorbar:
        fig.colorbar(images[0], ax=list(axes[0]))
    if show:
        plt.show()
    return fig


def grid_transposed(weights, tokens=None):
    return _grid_drawn_wrong(weights, tokens, transpose=True)


def grid_heads_averaged(weights, tokens=None):
    return _grid_drawn_wrong(weights, tokens, mean=True)


def grid_without_colorbar(weights, tokens=None):
    return _grid_drawn_wrong(weights, tokens, colorbar=False)


def grid_shows_figure(weights, tokens=None):
    return _grid_drawn_wrong(weights, tokens, show=True)


def _m(mistake_id, exercise, description, hint, hint_zh, source, overrides):
    return Mistake(mistake_id, exercise, description, hint, hint_zh, source, types.MappingProxyType(overrides))


CATALOGUE: tuple[Mistake, ...] = (
    # strided_mask
    _m(
        "strided-band-one-too-narrow",
        "strided_mask",
        "keeps the local band with `i - j < stride - 1`: the token stride - 1 back is masked",
        "Count the keys of the local band in one row, itself included: how many should there be for this stride?",
        "数一数某一行局部带里的键（包括它自己）：对这个步长，应当有几个？",
        CLASSIC,
        {"strided_mask": strided_band_one_too_narrow},
    ),
    _m(
        "strided-not-causal",
        "strided_mask",
        "keeps the band and the stride in both directions: the future is visible",
        "A strided mask is still causal. What does your mask say for a key after the query?",
        "步长掩码仍然是因果的。对于位于查询之后的键，你的掩码给出的是什么？",
        SEED_002,
        {"strided_mask": strided_not_causal},
    ),
    _m(
        "strided-without-band",
        "strided_mask",
        "keeps only every stride-th token back: the local band of the previous stride - 1 tokens is masked",
        "The strided pattern has two parts. Which keys just before the query should stay visible as well?",
        "步长模式由两部分组成。紧挨在查询之前的哪些键也应当保持可见？",
        SEED_002,
        {"strided_mask": strided_only},
    ),
    _m(
        "strided-on-key-positions",
        "strided_mask",
        "keeps the keys with `j % stride == 0` (fixed columns) instead of the ones with `(i - j) % stride == 0`",
        "Is the stride counted from the start of the sequence or back from the query? Compare rows i and i + 1.",
        "步长是从序列开头数起，还是从查询往回数？比较一下第 i 行和第 i + 1 行。",
        CLASSIC,
        {"strided_mask": strided_on_positions},
    ),
    # dilated_window_mask
    _m(
        "dilated-window-counts-positions",
        "dilated_window_mask",
        "keeps keys with `i - j < window`: the window spans positions, so each query sees about window / dilation keys",
        "Is `window` a number of positions or a number of keys? Count the visible keys of a row far from the start.",
        "`window` 是位置的个数，还是键的个数？数一数离开头较远的某一行里能看到几个键。",
        CLASSIC,
        {"dilated_window_mask": dilated_window_spans_keys},
    ),
    _m(
        "dilated-window-one-too-many",
        "dilated_window_mask",
        "keeps keys with `i - j <= window * dilation`: each query sees window + 1 keys",
        "Count the keys row i may see, itself included: i, i - d, … how many of them, exactly?",
        "数一数第 i 行能看到的键（包括它自己）：i、i - d、……一共应当正好有几个？",
        CLASSIC,
        {"dilated_window_mask": dilated_window_one_too_many},
    ),
    _m(
        "dilated-window-ignores-dilation",
        "dilated_window_mask",
        "builds a plain sliding window: the dilation is never used",
        "What does the dilation change? With dilation 2, which keys between the visible ones should be hidden?",
        "扩张率改变了什么？当扩张率为 2 时，可见的键之间有哪些应当被遮住？",
        SEED_002,
        {"dilated_window_mask": dilated_window_ignores_dilation},
    ),
    _m(
        "dilated-window-unchecked",
        "dilated_window_mask",
        "accepts window < 1 or num_tokens < 1 (and dilation 0 fails with a RuntimeError) instead of raising ValueError",
        "What should a window of 0 keys, or a dilation of 0, mean? Check every size before building the mask, "
        "and say what is wrong with a ValueError.",
        "窗口为 0 个键、或扩张率为 0，应当是什么意思？在构建掩码之前检查每个尺寸，并用 ValueError 说明哪里不对。",
        CLASSIC,
        {"dilated_window_mask": dilated_window_unchecked},
    ),
    # attention_entropy
    _m(
        "entropy-nan-on-zeros",
        "attention_entropy",
        "computes `-(p * p.log()).sum(-1)`: a weight of exactly 0 gives 0 * -inf = NaN",
        "What is ln(0), and what is 0 times it in floating point? A masked key has weight 0 and should add nothing.",
        "ln(0) 是多少？在浮点运算里 0 乘以它又是多少？被遮蔽的键权重为 0，不应当对熵有任何贡献。",
        CLASSIC,
        {"attention_entropy": entropy_nan_on_zeros},
    ),
    _m(
        "entropy-in-bits",
        "attention_entropy",
        "uses log2: the entropy in bits, ln 2 times too large compared with nats",
        "Which logarithm gives nats? A uniform row over Tk keys should give ln(Tk).",
        "哪一种对数给出的单位是奈特（nats）？对 Tk 个键的均匀分布，一行的熵应当是 ln(Tk)。",
        CLASSIC,
        {"attention_entropy": entropy_in_bits},
    ),
    _m(
        "entropy-over-queries",
        "attention_entropy",
        "sums over dim -2 (the queries) instead of the keys: one number per key, (..., Tk)",
        "Each row of the weights is one query's distribution over the keys. Along which dimension does a row run?",
        "权重的每一行是一个查询在所有键上的分布。一行沿着哪个维度展开？",
        CLASSIC,
        {"attention_entropy": entropy_over_queries},
    ),
    _m(
        "entropy-log-plus-epsilon",
        "attention_entropy",
        "avoids the NaN with `log(p + 1e-3)`: every term is shifted, a one-hot row no longer gives 0",
        "Adding a small number inside the log changes every term, not only the zeros. What should a one-hot "
        "row give exactly?",
        "在对数里加一个小数会改变每一项，而不只是那些零。一个 one-hot 的行，熵应当恰好是多少？",
        CLASSIC,
        {"attention_entropy": entropy_with_epsilon},
    ),
    _m(
        "entropy-sign-flipped",
        "attention_entropy",
        "returns `sum p log p` without the minus: every entropy is zero or negative",
        "Can an entropy be negative? Look at the sign of ln(p) for a weight between 0 and 1.",
        "熵可能是负数吗？看一看权重在 0 和 1 之间时 ln(p) 的符号。",
        CLASSIC,
        {"attention_entropy": entropy_sign_flipped},
    ),
    # plot_head_grid
    _m(
        "grid-transposed",
        "plot_head_grid",
        "draws each head's weights transposed: keys down the side and queries across",
        "Which axis of each image holds the queries? imshow puts the rows of its array down the side, and row i "
        "of a head's weights is query i.",
        "每个图像的哪一个轴对应查询（query）？imshow 把数组的行画在纵轴上，而每个头的权重的第 i 行属于第 i 个查询。",
        CLASSIC,
        {"plot_head_grid": grid_transposed},
    ),
    _m(
        "grid-heads-averaged",
        "plot_head_grid",
        "draws one image of the weights averaged over the heads instead of one image per head",
        "The point of the grid is that different heads look at different things. How many images does your "
        "figure hold, and whose weights does each show?",
        "画网格的意义在于不同的头关注不同的模式。你的图里有几个图像？每个图像画的是哪个头的权重？",
        SEED_002,
        {"plot_head_grid": grid_heads_averaged},
    ),
    _m(
        "grid-without-colorbar",
        "plot_head_grid",
        "draws the heads but no colorbar, so the colours cannot be read as weights",
        "How would a reader tell a weight of 0.2 from 0.8 in your grid? Something on the figure must say which "
        "colour means which value.",
        "读者怎样从你的网格图中分辨 0.2 和 0.8 的权重？图上需要有东西说明每种颜色代表多大的数值。",
        SEED_002,
        {"plot_head_grid": grid_without_colorbar},
    ),
    _m(
        "grid-shows-figure",
        "plot_head_grid",
        "calls `plt.show()` inside the function instead of returning the figure for the caller to show",
        "Who decides when a figure is shown: the function that draws it, or the code that calls it? Return the "
        "figure and leave showing to the caller.",
        "图什么时候显示，应该由画图的函数决定，还是由调用它的代码决定？把 Figure 返回，让调用者去显示。",
        SEED_002,
        {"plot_head_grid": grid_shows_figure},
    ),
)
"""The patterns group's known mistakes: each overrides its own hook only (the reference gives every other)."""
