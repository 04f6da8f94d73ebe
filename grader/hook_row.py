"""One row of the hook table: every fact about an exercise that is not its signature.

An exercise group declares a row per hook (:mod:`grader.groups`); :mod:`grader.hook_table` gathers the rows of
every group.  Data only: this module imports nothing of the kit and ships in a learner's kit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["OUTPUT_KINDS", "HookRow", "OutputKind"]

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

    hook: str  # the hook's name, as its hookspec names it
    group: str  # the exercise group: exercises/<group>.py holds its stub, notebooks/<group>.ipynb its cell
    output: OutputKind  # what it returns (OUTPUT_KINDS)
    points: float  # default points in the rubric (a rubric TOML file overrides them)
    all_or_nothing: bool = False  # by default, points only when no case failed (a rubric TOML file overrides it)
    class_alias: str | None = None  # the chapter's class name, adopted when make_* is absent (SelfAttention)
    class_variants: tuple[str, ...] = ()
    """The chapter's other names for the same class, adopted in this order after ``class_alias``
    (``SelfAttention_v2``, then ``SelfAttention_v1``: the chapter writes both, the second is its final form)."""
    banned: tuple[str, ...] = ()
    """Torch calls the exercise asks to do by hand, as base names in any namespace (``softmax``
    catches ``torch.softmax``, ``F.softmax`` and ``Tensor.softmax``)."""
    why_banned: str = ""  # the sentence shown after "uses torch.softmax: " when a banned call is recorded
    why_banned_zh: str = ""  # the same in Chinese (the chapter's are in grader.instructor.messages; a group's here)
    reused_by_modules: bool = False  # the module classes may reuse it: the modules notebook lists it to paste in
    contiguous_result: bool = False  # its result must be contiguous (the hidden cases and the local check hold it)
    bounded_memory: bool = False
    """It must never hold as much memory at once as one batch-head's ``(Tq, Tk)`` scores: the hidden suite's long
    case and the local check measure the peak its tensors hold (:func:`grader.rules.memory_problem`)."""
    gradients: tuple[str, ...] = ()
    """What a gradient must reach, so that a model built on the hook can train: the tensor arguments by name; for a
    module, ``("x", "parameters")`` (each forward's input, and every parameter of the contract).  Each such case
    also runs backward for a cotangent the grader draws, and its vector-Jacobian products are judged like its values
    (:mod:`grader.gradients`)."""

    def __post_init__(self) -> None:
        where = f"the row of {self.hook!r}"
        if self.output not in OUTPUT_KINDS:
            raise ValueError(f"{where}: output {self.output!r} is not one of {', '.join(OUTPUT_KINDS)}")
        if isinstance(self.points, bool) or not isinstance(self.points, (int, float)):
            raise ValueError(f"{where}: points must be a number, not {self.points!r}")
        if not math.isfinite(self.points) or self.points < 0:
            raise ValueError(f"{where}: points must be a non-negative finite number, not {self.points!r}")
        if isinstance(self.banned, str):
            raise ValueError(f"{where}: banned must be a tuple of names, not the string {self.banned!r}")
        if isinstance(self.gradients, str):
            raise ValueError(f"{where}: gradients must be a tuple of names, not the string {self.gradients!r}")
        if self.output == "module" and set(self.gradients) - {"x", "parameters"}:
            raise ValueError(f"{where}: a module's gradients are ('x', 'parameters') or fewer, not {self.gradients!r}")
        if bool(self.banned) != bool(self.why_banned.strip()):
            raise ValueError(f"{where}: banned calls and why_banned go together (one without the other)")

    @property
    def expected_dtype(self) -> str | None:
        """The dtype every answer must have whatever the inputs' (``"bool"`` for a mask, ``"float64"`` for the
        array of a figure's image, as the child sends it), or None: the input's."""
        return {"mask": "bool", "figure": "float64"}.get(self.output)
