"""Attention patterns: sparse masks, how spread out a row of weights is, and what each head looks at.

The seed text 002 lists, for long sequences, sparse attention "with designed patterns, banded, dilated …"
(§4.1, 带状、扩张式); when the weights come out "too dispersed or too concentrated" (§5.3) it asks to look at
them; and it reports that "different heads learn different patterns, some local, some global" (§6.3).  This
group turns those three remarks into four small exercises: two sparse masks (the Sparse Transformer's
strided pattern and a dilated window), the entropy of each row of weights (a number for "dispersed" and
"concentrated"), and a grid of heatmaps, one per head.

The contract, the learner's half of the group: it imports nothing of the kit but the row and the hookspec
marker, and ships in a learner's kit.  Its hidden cases, reference and catalogue of known mistakes are named
by module below and never ship.
"""

from __future__ import annotations

from grader.hook_row import HookRow
from grader.hookspecs import hookspec

POSITION = 20
"""After the chapter's groups: the patterns build on the causal mask, the sliding window and the heatmap."""

ROWS = (
    HookRow("strided_mask", "patterns", "mask", points=1),
    HookRow("dilated_window_mask", "patterns", "mask", points=1),
    HookRow("attention_entropy", "patterns", "tensor", points=2),
    HookRow(
        "plot_head_grid",
        "patterns",
        "figure",
        points=1,
        banned=("show",),
        why_banned="return the Figure and let the caller show it; the grader reads each head's image as data, headless",
        why_banned_zh="返回 Figure，由调用者决定是否显示；评分程序在无界面的环境中把每个头的图像当作数据读取",
    ),
)

HIDDEN_CASES = "grader.instructor.groups.patterns"
REFERENCE = "solutions.patterns"
STUB = "exercises.patterns"
PUBLIC_TESTS = "exercises.test_patterns"


# --- sparse masks -----------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def strided_mask(num_tokens, stride, device=None):
    """Return the strided (Sparse Transformer) causal mask: True where a query may not look.

    :param num_tokens: ``T >= 1``.
    :param stride: ``s >= 1``.
    :param device: where to build the mask (``None`` = the default device).
    :returns: ``(T, T)`` tensor of dtype ``torch.bool`` on ``device``.  Key ``j`` is visible to query ``i``
        (entry ``[i, j]`` is False) when ``j <= i`` and either ``i - j < s`` (the local band: itself and the
        ``s - 1`` tokens before it) or ``(i - j) % s == 0`` (every ``s``-th token back, as far as the first);
        every other entry, the future among them, is True.

    The two parts are the two heads of the Sparse Transformer's strided pattern, here in one mask.
    ``stride == 1`` and ``stride >= T`` both equal ``causal_mask(T)``.  ``stride < 1`` or
    ``num_tokens < 1`` raises ``ValueError``.
    """


@hookspec(firstresult=True)
def dilated_window_mask(num_tokens, window, dilation, device=None):
    """Return the dilated sliding-window causal mask: True where a query may not look.

    :param num_tokens: ``T >= 1``.
    :param window: ``w >= 1``, how many keys each query sees at most, itself included.
    :param dilation: ``d >= 1``, the gap between two keys it sees.
    :param device: where to build the mask (``None`` = the default device).
    :returns: ``(T, T)`` tensor of dtype ``torch.bool`` on ``device``.  Query ``i`` sees the keys
        ``i, i - d, i - 2d, …, i - (w - 1) d`` that exist (``>= 0``): entry ``[i, j]`` is False when
        ``j <= i``, ``(i - j) % d == 0`` and ``(i - j) // d < w``, and True everywhere else, the future
        among it.

    ``dilation == 1`` is ``sliding_window_mask(T, window)``; ``dilation >= T`` or ``window == 1`` lets each
    token see only itself.  ``window < 1``, ``dilation < 1`` or ``num_tokens < 1`` raises ``ValueError``.
    """


# --- how spread out the weights are -------------------------------------------------------------------------


@hookspec(firstresult=True)
def attention_entropy(weights):
    """Return the entropy of each row of attention weights, in nats.

    :param weights: ``(..., Tq, Tk)`` non-negative weights whose rows sum to 1 (a softmax output), or to 0
        (a query that sees no key: a row of zeros).
    :returns: ``(..., Tq)`` in the input's dtype and device: ``-sum_j p_j * ln(p_j)`` over each row, with
        ``0 * ln(0)`` taken as 0.

    A one-hot row (all the attention on one key) gives 0, the lowest; a uniform row over ``Tk`` keys gives
    ``ln(Tk)``, the highest.  Exact zeros (masked keys) add nothing and never give NaN; a row of zeros gives
    0.  The natural logarithm (nats), not ``log2``; the sum runs over the keys (the last dimension), never
    over the queries.  The input is left unchanged.
    """


# --- what each head looks at -------------------------------------------------------------------------------


@hookspec(firstresult=True)
def plot_head_grid(weights, tokens=None):
    """Return a matplotlib ``Figure`` with one heatmap per attention head.

    :param weights: ``(H, Tq, Tk)``, the weights of ``H`` heads (one batch element of ``(b, H, Tq, Tk)``),
        on any device; they may require grad.  Anything that is not 3-D (one matrix ``(Tq, Tk)``, a whole
        batch ``(b, H, Tq, Tk)``) raises ``ValueError``.
    :param tokens: ``None``; or one sequence of ``T`` strings for square ``(H, T, T)`` weights, naming the
        keys and the queries alike; or a pair ``(query_tokens, key_tokens)`` of ``Tq`` and ``Tk`` strings.
        Lengths that do not match the weights raise ``ValueError``.
    :returns: the ``Figure``, neither shown nor closed.

    The figure holds ``H`` axes with one ``imshow`` image each, in head order: the image of the ``h``-th
    axes is head ``h``'s ``(Tq, Tk)`` weights as they are (row ``i`` is query ``i``, never transposed),
    titled ``"Head h"`` (``"Head 0"``, ``"Head 1"``, …), its x axis labelled "Key positions" and its y axis
    "Query positions"; with tokens, key token ``j`` also labels the x tick at ``j`` and query token ``i``
    the y tick at ``i``, on every head.  At least one colorbar, for the first image (one shared colorbar
    is enough when the heads share one colour scale).  ``H == 1`` is one heatmap.  The grader reads the
    figure as data (every image's array, the labels, the ticks, the colorbar), headless.  Not allowed
    inside: ``pyplot.show``.
    """
