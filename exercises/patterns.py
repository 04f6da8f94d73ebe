"""Attention patterns: sparse masks, how spread out the weights are, and what each head looks at.

Three remarks of the course, made concrete:

1. sparse attention: a designed pattern of who may look where, banded or dilated.  (strided_mask, dilated_window_mask)
2. weights "too dispersed or too concentrated": the entropy of a row says which.  (attention_entropy)
3. "different heads learn different patterns": draw every head side by side.     (plot_head_grid)

A sparse mask keeps the cost per token from growing with T, like the sliding
window, but still lets information travel far: a token that sees every s-th
token back reaches the start in T / s hops.  Both masks stay causal.

Run `pytest exercises/test_patterns.py` to check your work.
"""

import math  # noqa: F401  (you may need it)

import torch  # noqa: F401  (you will need it)


def strided_mask(num_tokens, stride, device=None):
    """A (T, T) bool mask, True where query i may not look: the Sparse Transformer's strided pattern.

    Query i sees key j (j <= i, never the future) when j is in its local band,
    i - j < stride (itself and the stride - 1 tokens before it), or when j is a
    whole number of strides back, (i - j) % stride == 0.  Everything else is
    masked.  stride 1 sees every earlier token: causal_mask(T) again; so does
    any stride >= T (the band covers the whole past).  Measure the stride back
    from the query, not from the start of the sequence.
    stride < 1 or num_tokens < 1 is a ValueError.
    """
    # -> (T, T) torch.bool on `device`
    # back = i - j for every (i, j): an arange, unsqueezed, minus itself     # (T, T)
    # mask[i, j] is True when back < 0 (the future), or neither back < stride nor back % stride == 0
    raise NotImplementedError(
        "exercise strided_mask: not implemented yet — the future, or'ed with the keys neither in the band nor on "
        "the stride"
    )


def dilated_window_mask(num_tokens, window, dilation, device=None):
    """A (T, T) bool mask, True where query i may not look: a sliding window with gaps.

    Query i sees the keys i, i - dilation, i - 2 * dilation, ..., window keys in
    all, itself included (fewer near the start of the sequence).  dilation 1 is
    sliding_window_mask(T, window); a dilation of T or more, or window 1, lets
    each token see only itself.  `window` counts keys, not positions: the
    farthest key it sees is (window - 1) * dilation back.
    window < 1, dilation < 1 or num_tokens < 1 is a ValueError.
    """
    # -> (T, T) torch.bool on `device`
    # mask[i, j] is False only when j <= i, (i - j) % dilation == 0 and (i - j) // dilation < window
    raise NotImplementedError(
        "exercise dilated_window_mask: not implemented yet — the future, or'ed with the keys off the dilation's "
        "grid or more than window - 1 steps back"
    )


def attention_entropy(weights):
    """The entropy of each row of attention weights, in nats: -sum_j p_j ln p_j.

    A row that puts all its weight on one key (one-hot) has entropy 0: the
    attention is concentrated.  A uniform row over Tk keys has ln(Tk), the most
    a row can have: the attention is dispersed.  Masked keys have weight exactly
    0, and 0 * ln(0) counts as 0 -- but in floating point ln(0) is -inf and
    0 * -inf is NaN, so keep the zeros out of the product.  A row of zeros (a
    query that sees no key) gives 0.  Sum over the keys (the last dim), use the
    natural log, and keep the input's dtype and device.
    """
    # weights: (..., Tq, Tk)   ->   (..., Tq)
    raise NotImplementedError(
        "exercise attention_entropy: not implemented yet — -sum of p * ln(p) over the keys, 0 where p is 0"
    )


def plot_head_grid(weights, tokens=None):
    """A matplotlib Figure with one heatmap per head, side by side, in head order.

    weights is (H, Tq, Tk): the heads of one batch element.  Draw head h's
    (Tq, Tk) weights with imshow on the h-th axes, as they are (row i = query
    i, not transposed), titled "Head h" ("Head 0", "Head 1", ...), x labelled
    "Key positions" and y "Query positions"; add a colorbar (one shared
    colorbar is enough when every head uses the same colour scale: pass the
    same vmin and vmax, or norm, to every imshow).  With tokens, label the
    ticks of every head as plot_attention does: one sequence for square
    weights, or a pair (query_tokens, key_tokens).  Anything that is not 3-D,
    or tokens of the wrong lengths, is a ValueError.  Draw NumPy arrays, as
    plot_attention does (detached, on the CPU); return the figure and leave
    plt.show() to whoever calls you.  Not allowed: plt.show, fig.show.
    """
    # weights: (H, Tq, Tk)   ->   a matplotlib Figure with H images
    # import matplotlib.pyplot as plt (here, so the other exercises run without matplotlib)
    # fig, axes = plt.subplots(1, H, squeeze=False);  one ax.imshow(...) per head;  fig.colorbar(first_image, ax=...)
    raise NotImplementedError(
        "exercise plot_head_grid: not implemented yet — one heatmap per head on its own axes, titled, labelled, "
        "with a colorbar; return the Figure"
    )
