"""The chapter's exercises: scores, softmax, the causal mask, dropout, heads, the modules, long sequences, plots.

The contract is :mod:`grader.hookspecs` (one hookspec per function a learner writes); the rows below say how
the kit treats each hook (:class:`~grader.hook_row.HookRow`).  Its hidden cases, reference and catalogue of
known mistakes are named by module, and never ship in a learner's kit.
"""

from __future__ import annotations

import grader.hookspecs as HOOKSPECS  # noqa: F401, N812 - the group's hookspecs
from grader.hook_row import HookRow

POSITION = 0
"""First: the chapter's groups come before any other."""
HIDDEN_CASES = "grader.instructor.groups.chapter"
REFERENCE = "solutions.reference"
MISTAKES = "solutions.mistakes"

_MODULE_BANS = (
    "scaled_dot_product_attention",
    "multi_head_attention_forward",
    "attention",
    "transformer_encoder_layer_fwd",
)
"""``attention``: every aten kernel whose name holds the word (``_native_multi_head_attention``, the flash,
efficient and cuDNN kernels: red team 7's 1), and the fused encoder layer, which holds one."""
_SOFTMAX_BANS = (
    "softmax",
    "log_softmax",
    "_softmax",
    "special_softmax",
    "special_log_softmax",
    "softmin",
    "scaled_dot_product_attention",  # its kernels hold a softmax of their own
)

_QK = ("queries", "keys")
_TRAINS = ("x", "parameters")  # a module: its input and every parameter

ROWS: tuple[HookRow, ...] = (
    # --- scores and softmax
    HookRow("dot_product_scores", "scores", "tensor", points=1, gradients=_QK),
    HookRow("scaled_dot_product_scores", "scores", "tensor", points=1, reused_by_modules=True, gradients=_QK),
    HookRow(
        "softmax_weights",
        "scores",
        "weights",
        points=2,
        banned=_SOFTMAX_BANS,
        why_banned="this exercise is to write the stable softmax yourself (subtract the max, exponentiate, normalise)",
        reused_by_modules=True,
        gradients=("scores",),
    ),
    HookRow(
        "softmax_with_temperature",
        "scores",
        "weights",
        points=1,
        banned=_SOFTMAX_BANS,
        why_banned="this exercise is to write the stable softmax yourself, with the scores divided by the temperature",
        gradients=("scores",),
    ),
    HookRow("context_vectors", "scores", "tensor", points=1, reused_by_modules=True, gradients=("weights", "values")),
    # --- the causal mask
    HookRow("causal_mask", "masking", "mask", points=1, reused_by_modules=True),
    HookRow("apply_causal_mask", "masking", "weights", points=2, gradients=("scores",)),
    HookRow("renormalize_masked_weights", "masking", "weights", points=1, gradients=("weights",)),
    # --- dropout
    HookRow("dropout_scale", "dropout", "weights", points=1, gradients=("weights",)),
    HookRow(
        "attention_dropout",
        "dropout",
        "weights",
        points=2,
        banned=(
            # every aten dropout kernel holds the word (banned_op); drawing the keep mask (torch.bernoulli,
            # Tensor.bernoulli_, torch.rand) is the exercise, never banned
            *("dropout", "native_dropout", "feature_dropout", "alpha_dropout"),
            *("dropout1d", "dropout2d", "dropout3d"),
        ),
        why_banned="this exercise is to write inverted dropout yourself (draw a keep mask, scale by 1/(1-p))",
        reused_by_modules=True,
        gradients=("weights",),
    ),
    # --- heads
    HookRow("split_heads", "heads", "tensor", points=2, reused_by_modules=True, gradients=("x",)),
    HookRow(
        "merge_heads", "heads", "tensor", points=1, reused_by_modules=True, contiguous_result=True, gradients=("x",)
    ),
    # --- the modules
    HookRow(
        "make_self_attention",
        "modules",
        "module",
        points=3,
        class_alias="SelfAttention",
        class_variants=("SelfAttention_v2", "SelfAttention_v1"),
        banned=_MODULE_BANS,
        why_banned="this exercise is to build attention from scores, softmax and values yourself",
        gradients=_TRAINS,
    ),
    HookRow(
        "make_causal_attention",
        "modules",
        "module",
        points=3,
        class_alias="CausalAttention",
        banned=_MODULE_BANS,
        why_banned="this exercise is to build attention from scores, mask, softmax and values yourself",
        gradients=_TRAINS,
    ),
    HookRow(
        "make_multihead_attention",
        "modules",
        "module",
        points=3,
        class_alias="MultiHeadAttention",
        banned=_MODULE_BANS,
        why_banned="this exercise is to split heads and attend per head yourself",
        gradients=_TRAINS,
    ),
    # --- long sequences
    HookRow("sliding_window_mask", "long_sequences", "mask", points=1),
    HookRow(
        "chunked_attention",
        "long_sequences",
        "tensor",
        points=3,
        banned=_MODULE_BANS,
        why_banned="this exercise is to compute attention block by block yourself, with a running max and sum",
        bounded_memory=True,
        gradients=("queries", "keys", "values"),
    ),
    # --- plotting
    HookRow(
        "plot_attention",
        "plotting",
        "figure",
        points=1,
        banned=("show",),
        why_banned="return the Figure and let the caller show it; the grader reads it as data, headless",
    ),
)
"""Every hook's row, in the chapter's (hookspec) order."""
