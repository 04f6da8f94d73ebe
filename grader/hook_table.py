"""The hook table: one row per hook, holding every fact about an exercise that is not its signature.

:mod:`grader.hookspecs` says what each hook computes (its signature and its
contract); this table says how the kit treats it, as data in one place: the
exercise group it belongs to (one module in ``exercises/``, one notebook), the
chapter's class name that stands in for a module hook, the torch calls the
exercise asks the learner to write by hand and why, what kind of output it
returns (which decides the expected dtype and whether a failing case gets a
heatmap), whether its result must be contiguous, its default points, and
whether the module classes may reuse it.

Everything else reads it: the registry and the notebooks (aliases, groups),
the hidden suite (banned calls, sent in each call), the verdict (the output's
dtype and the banned-call message), the heatmaps, the rubric (default points).
The child runtime does not import it: what it needs (the aliases, the banned
names) travels in the wire messages.

This module is data only and imports nothing of the kit; it ships in a
learner's kit.  Adding a hook is a recipe (see the README's Development
section): a hookspec, a row here, the reference, its hidden cases, its
catalogued mistakes, its stub and public test; ``tests/test_meta.py`` names
the step that is missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "BANNED_NAMES",
    "CLASS_ALIASES",
    "CLASS_NAMES",
    "GROUPS",
    "HELPERS_OF_MODULES",
    "OUTPUT_KINDS",
    "ROWS",
    "TABLE",
    "HookRow",
    "OutputKind",
    "hooks_in",
    "row",
]

OutputKind = Literal["tensor", "weights", "mask", "module", "figure"]
OUTPUT_KINDS: tuple[str, ...] = ("tensor", "weights", "mask", "module", "figure")
"""What a hook returns:

- ``tensor``: a floating tensor in the input's dtype (scores, context vectors, heads);
- ``weights``: an attention matrix ``(..., Tq, Tk)`` in the input's dtype, as the
  chapter plots it (weights, or scores with the future masked): a failing case
  gets a heatmap;
- ``mask``: a ``torch.bool`` tensor whatever the input's dtype: a failing case gets a heatmap;
- ``module``: an ``nn.Module``, graded through its forward outputs;
- ``figure``: a matplotlib ``Figure``, graded as data: the learner's process sends the image's
  array (as a float64 tensor), its axis labels, tick labels and whether it has a colorbar, never
  the figure (:func:`grader.child.figures.figure_facts`); a failing case gets no heatmap (the
  learner's own plot is the picture).
"""


@dataclass(frozen=True)
class HookRow:
    """The facts about one hook; see the module docstring for who reads which."""

    hook: str
    """The hook's name, as in :mod:`grader.hookspecs`."""
    group: str
    """The exercise group: ``exercises/<group>.py`` holds its stub, ``notebooks/<group>.ipynb`` its cell."""
    output: OutputKind
    """What it returns (:data:`OUTPUT_KINDS`)."""
    points: float
    """Default points in the rubric (a rubric TOML file overrides them)."""
    all_or_nothing: bool = False
    """By default, the points are earned only when no case failed (a rubric TOML file overrides it)."""
    class_alias: str | None = None
    """The chapter's class name, adopted when the ``make_*`` function is absent (``SelfAttention``)."""
    class_variants: tuple[str, ...] = ()
    """The chapter's other names for the same class, adopted in this order after ``class_alias``
    (``SelfAttention_v2``, then ``SelfAttention_v1``: the chapter writes both, the second is its final form)."""
    banned: tuple[str, ...] = ()
    """Torch calls the exercise asks to do by hand, as base names in any namespace (``softmax``
    catches ``torch.softmax``, ``F.softmax`` and ``Tensor.softmax``)."""
    why_banned: str = ""
    """The sentence shown after "uses torch.softmax: " when a banned call is recorded."""
    reused_by_modules: bool = False
    """The module classes may reuse it, so the modules notebook lists it among the functions to paste in."""
    contiguous_result: bool = False
    """Its result must be a contiguous tensor (the hidden cases and the local check both hold it to that)."""
    bounded_memory: bool = False
    """It must never hold as much memory at once as one batch-head's ``(Tq, Tk)`` scores: the hidden suite's long
    case and the local check measure the peak its tensors hold (:func:`grader.rules.memory_problem`)."""

    def __post_init__(self) -> None:
        where = f"grader/hook_table.py: the row of {self.hook!r}"
        if self.output not in OUTPUT_KINDS:
            raise ValueError(f"{where}: output {self.output!r} is not one of {', '.join(OUTPUT_KINDS)}")
        if isinstance(self.points, bool) or not isinstance(self.points, (int, float)):
            raise ValueError(f"{where}: points must be a number, not {self.points!r}")
        if not math.isfinite(self.points) or self.points < 0:
            raise ValueError(f"{where}: points must be a non-negative finite number, not {self.points!r}")
        if isinstance(self.banned, str):
            raise ValueError(f"{where}: banned must be a tuple of names, not the string {self.banned!r}")
        if bool(self.banned) != bool(self.why_banned.strip()):
            raise ValueError(f"{where}: banned calls and why_banned go together (one without the other)")

    @property
    def expected_dtype(self) -> str | None:
        """The dtype every answer must have whatever the inputs' (``"bool"`` for a mask, ``"float64"`` for the
        array of a figure's image, as the child sends it), or None: the input's."""
        return {"mask": "bool", "figure": "float64"}.get(self.output)


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

TABLE: tuple[HookRow, ...] = (
    # --- scores and softmax
    HookRow("dot_product_scores", "scores", "tensor", points=1),
    HookRow("scaled_dot_product_scores", "scores", "tensor", points=1, reused_by_modules=True),
    HookRow(
        "softmax_weights",
        "scores",
        "weights",
        points=2,
        banned=_SOFTMAX_BANS,
        why_banned="this exercise is to write the stable softmax yourself (subtract the max, exponentiate, normalise)",
        reused_by_modules=True,
    ),
    HookRow(
        "softmax_with_temperature",
        "scores",
        "weights",
        points=1,
        banned=_SOFTMAX_BANS,
        why_banned="this exercise is to write the stable softmax yourself, with the scores divided by the temperature",
    ),
    HookRow("context_vectors", "scores", "tensor", points=1, reused_by_modules=True),
    # --- the causal mask
    HookRow("causal_mask", "masking", "mask", points=1, reused_by_modules=True),
    HookRow("apply_causal_mask", "masking", "weights", points=2),
    HookRow("renormalize_masked_weights", "masking", "weights", points=1),
    # --- dropout
    HookRow("dropout_scale", "dropout", "weights", points=1),
    HookRow(
        "attention_dropout",
        "dropout",
        "weights",
        points=2,
        banned=(
            *("dropout", "native_dropout", "feature_dropout", "alpha_dropout", "bernoulli_"),
            *("dropout1d", "dropout2d", "dropout3d"),
        ),
        why_banned="this exercise is to write inverted dropout yourself (draw a keep mask, scale by 1/(1-p))",
        reused_by_modules=True,
    ),
    # --- heads
    HookRow("split_heads", "heads", "tensor", points=2, reused_by_modules=True),
    HookRow("merge_heads", "heads", "tensor", points=1, reused_by_modules=True, contiguous_result=True),
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
    ),
    HookRow(
        "make_causal_attention",
        "modules",
        "module",
        points=3,
        class_alias="CausalAttention",
        banned=_MODULE_BANS,
        why_banned="this exercise is to build attention from scores, mask, softmax and values yourself",
    ),
    HookRow(
        "make_multihead_attention",
        "modules",
        "module",
        points=3,
        class_alias="MultiHeadAttention",
        banned=_MODULE_BANS,
        why_banned="this exercise is to split heads and attend per head yourself",
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

ROWS: dict[str, HookRow] = {r.hook: r for r in TABLE}
if len(ROWS) != len(TABLE):
    raise ValueError("grader/hook_table.py: a hook has two rows")

GROUPS: tuple[str, ...] = tuple(dict.fromkeys(r.group for r in TABLE))
"""The exercise groups, in the chapter's order: one module in ``exercises/`` and one notebook each."""

BANNED_NAMES: tuple[str, ...] = tuple(sorted({name for r in TABLE for name in r.banned}))
"""Every name a call may ban: the learner's process watches the kernels of them all before its code loads."""

CLASS_ALIASES: dict[str, str] = {r.hook: r.class_alias for r in TABLE if r.class_alias}
"""``{hook: the chapter's class name}`` for the module hooks."""

CLASS_NAMES: dict[str, tuple[str, ...]] = {
    r.hook: (r.class_alias, *r.class_variants) for r in TABLE if r.class_alias
}
"""``{hook: every class name adopted for it, first preferred}`` for the module hooks."""

HELPERS_OF_MODULES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (group, hooks)
    for group in GROUPS
    if (hooks := tuple(r.hook for r in TABLE if r.group == group and r.reused_by_modules))
)
"""``((group, (hook, ...)), ...)``: what the module classes may reuse from each other group."""


def row(hook: str) -> HookRow:
    """The row of ``hook``; a KeyError naming this file when the hook has none."""
    try:
        return ROWS[hook]
    except KeyError:
        raise KeyError(f"hook {hook!r} has no row in grader/hook_table.py") from None


def hooks_in(group: str) -> tuple[str, ...]:
    """The hooks of one exercise group, in the chapter's order."""
    if group not in GROUPS:
        raise ValueError(f"unknown exercise group {group!r}; the groups are: {', '.join(GROUPS)}")
    return tuple(r.hook for r in TABLE if r.group == group)
