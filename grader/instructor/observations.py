"""What a solution did on one trial, as the diagnosis compares them: the outcome (:class:`Seen`), read off a verdict
and its reply (:func:`observe`), one submission's row of a hook (:class:`HookRow`), and whether two outcomes are the
same (within float32 tolerance, or a dropout's kept entries).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.instructor.replies import CallReply
from grader.instructor.verdict import FAILED, PASSED

__all__ = [
    "OTHER", "PASS", "HookRow", "Seen", "close", "dropped_matches", "error_sizes", "normalised", "observe", "same",
]  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """One solution's outcome on one trial, as the diagnosis compares them.

    ``kind``: ``pass``; ``values`` (wrong values, shape, NaN; or, on a case with random outputs, whatever its
    properties found); ``error`` (it raised); ``property``; ``mutation``; ``device`` (fails on meta as it would on a
    GPU); ``contract`` (an expected error did not come); ``banned``; ``other`` (no evidence).  The model adds
    ``random`` (nondeterministic where the case wants it deterministic), ``predicate`` (a random output of a known
    form) and ``any`` (fails, with values no one can predict).
    """

    kind: str
    outputs: tuple[torch.Tensor, ...] = ()
    error_type: str = ""
    sizes: tuple[int, ...] = ()
    message: str = ""
    where: str | None = None
    knob: str = ""  # the model's: the mistake id of the step that raised
    test: Callable[[Sequence[torch.Tensor]], bool | None] | None = field(default=None, compare=False)
    alternative: Seen | None = None  # the model's: what the same setting does written another (right) way


PASS = Seen("pass")
OTHER = Seen("other")

_VALUE_MESSAGES = re.compile(r"^(output \d+: )?(returned |values differ|NaN in the output|wrong entries)")


def error_sizes(message: str) -> tuple[int, ...]:
    """The sizes an error message names, sorted (``at non-singleton dimension 2`` is a position, left out)."""
    text = re.sub(r"dimension \d+", "", message)
    text = re.sub(r"(?<=\d)x(?=\d)", " ", text)  # 6x4: two sizes
    return tuple(sorted(int(n) for n in re.findall(r"(?<![\w.])-?\d+(?![\w.])", text)))  # not mat1, batch2, 0.5


def normalised(message: str) -> str:
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", message)


def observe(trial: Any, status: str, message: str, reply: CallReply | Mapping | None, outputs: Mapping) -> Seen:
    """What a solution did on ``trial``, from its verdict (``message`` without the case's label) and its reply."""
    if status == PASSED:
        return PASS
    if status != FAILED or reply is None:
        return OTHER
    error = dict(reply.get("error") or {})
    outs = tuple(outputs[k] for k in sorted(outputs) if k.startswith("out") and isinstance(outputs[k], torch.Tensor))
    if (trial.call.get("module") or {}).get("eval_too"):
        outs = outs[:-1]  # the training forwards; the last is the module's own eval-mode answer
    if trial.case.expect_error:
        return Seen("contract", message=message)
    if trial.device == "meta":
        return Seen("device", message=message) if message.startswith("will fail on a GPU") else OTHER
    if error:
        text = str(error.get("message", ""))
        return Seen("error", (), str(error.get("type", "")), error_sizes(text), text, error.get("where"))
    if reply.get("banned"):
        return Seen("banned", message=message)
    if str(getattr(message, "id", "")).startswith("grad."):
        grads = tuple(v for k, v in sorted(outputs.items()) if k.startswith("grad.") and isinstance(v, torch.Tensor))
        return Seen("gradient", grads, message=_gradient_kind(message))
    if message.startswith("modified its input"):
        return Seen("mutation", outs, message=message)
    if _VALUE_MESSAGES.match(message) or not trial.case.compare_gold:
        return Seen("values", outs, message=message)
    if message.startswith("the reference's weights cannot be loaded"):
        return OTHER
    return Seen("property", outs, message=message)


def _gradient_kind(message: Any) -> str:
    """What kind of break a gradient failure is, as two programs that break alike share it: the message's id, the
    function input it names (a module's names are the learner's own, left out) and, for a backward that raised, the
    exception and the first words of its text (never its shapes, versions or line)."""
    params = dict(getattr(message, "params", {}))
    name = params.get("input", params.get("inputs", ""))
    if message.id in ("grad.raised", "grad.raised_at", "grad.call_raised", "grad.call_raised_at"):
        kind, _, text = str(params.get("error", "")).partition(": ")
        return f"{message.id.removesuffix('_at')} {kind}: {re.split(r'[:[(]', text)[0].strip()}"
    kind = message.id.removesuffix("_at")  # where the graph was cut is the learner's line, not the kind
    return f"{kind} {name}" if kind != "grad.frozen" else kind


@dataclass
class HookRow:
    """One trial of one hook for one submission: the trial and what the submission did."""

    trial: Any
    seen: Seen
    facts: Mapping[str, Any] = field(default_factory=dict)  # the module facts of the reply, where one came


def dropped_matches(expect: Seen, seen: Seen, dtype: str) -> bool:
    """Each of the learner's entries is 0 or the candidate's kept value (where known), and some are 0."""
    if len(seen.outputs) != len(expect.outputs):
        return False
    some_dropped = False
    for got, kept in zip(seen.outputs, expect.outputs, strict=True):
        if got.shape != kept.shape or got.dtype == torch.bool:
            return False
        got = got.double()
        known = ~torch.isnan(kept)
        zero = got == 0
        rtol = 1e-6 if dtype == "float64" else 2e-4
        same = torch.isclose(got, kept.nan_to_num(0.0), rtol=rtol, atol=1e-7)
        if not bool((zero | same | ~known).all()):
            return False
        some_dropped = some_dropped or bool((zero & known & (kept != 0)).any())
    return some_dropped


def same(a: Sequence[torch.Tensor], b: Seen) -> bool:
    """The very same tensors (NaN where the other has NaN)."""
    return len(a) == len(b.outputs) and all(
        x.shape == y.shape and x.dtype == y.dtype
        and (torch.equal(x, y) or x.is_floating_point() and bool(torch.allclose(x, y, 0.0, 0.0, equal_nan=True)))
        for x, y in zip(a, b.outputs, strict=True)
    )  # fmt: skip


def close(mine: Sequence[torch.Tensor], theirs: Sequence[torch.Tensor], dtype: str, floor: float = 1.0) -> bool:
    """Whether a learner's outputs are the candidate's, within what float32 (or float64) arithmetic allows.  The
    absolute tolerance scales with the candidate's largest entry, or ``floor`` where that is smaller (0: relative to
    it however small, for gradients, where near one-hot weights leave every entry tiny)."""
    if not mine or len(mine) != len(theirs):
        return False
    rtol, atol = (1e-6, 1e-8) if dtype == "float64" else (2e-4, 2e-5) if dtype == "float32" else (2e-2, 2e-2)
    for a, b in zip(mine, theirs, strict=True):
        if a.shape != b.shape:
            return False
        if a.dtype == torch.bool or b.dtype == torch.bool:
            if a.dtype != b.dtype or not torch.equal(a, b):
                return False
            continue
        a64, b64 = a.double(), b.double()
        scale = float(b64.nan_to_num(0.0, 0.0, 0.0).abs().max()) if b64.numel() else 0.0
        if not torch.allclose(a64, b64, rtol=rtol, atol=atol * max(floor, scale), equal_nan=True):
            return False
    return True
