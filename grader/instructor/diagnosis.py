"""Diagnosis: say which known mistake a failing case looks like, and give its hint.

The catalogue (:mod:`solutions.mistakes`) is run once per grading run, in this
trusted process, on the very inputs of every hidden case; where a mistake fails
a case, what it did there (its output, or the error it raised) is kept as a
*fingerprint*.  Each call gets its own copies of the inputs, so a mistake
that writes into them changes nothing shared.  A learner's failing case that
left the same fingerprint -- equal outputs within a loose tolerance, or the
same error -- is named after that mistake, and the feedback shows its hint.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.instructor.replies import CallReply, ErrorInfo
from grader.instructor.verdict import FAILED, judge_in_process

LANGUAGES = ("en", "zh")


@dataclass
class Fingerprint:
    """What one catalogued mistake did on one hidden case it fails."""

    mistake: str
    exercise: str
    outputs: list[torch.Tensor] = field(default_factory=list)
    error: str | None = None  # the error's type and message with the numbers taken out
    inputs_unchanged: bool = True
    will_fail_on_gpu: bool = False


def _error_key(error: ErrorInfo | None) -> str | None:
    if not error:
        return None
    message = re.sub(r"\d+(\.\d+)?", "#", str(error.get("message", "")).splitlines()[0] if error.get("message") else "")
    return f"{error.get('type')}: {message}"


def _fingerprint(mistake_id: str, exercise: str, reply: CallReply, outputs: dict, message: str) -> Fingerprint:
    return Fingerprint(
        mistake=mistake_id,
        exercise=exercise,
        outputs=[outputs[k] for k in sorted(outputs)],
        error=_error_key(reply.get("error")),
        inputs_unchanged=reply.get("inputs_unchanged", True) is not False,
        will_fail_on_gpu=message.startswith("will fail on a GPU"),
    )


class Fingerprints:
    """The catalogued mistakes' fingerprints, computed the first time a failing case needs them.

    Shared by every grading thread; only trials that some submission fails cost
    anything.  Empty where the catalogue is not installed (no ``solutions/``).
    """

    def __init__(self, catalogue: Any = None) -> None:
        self._by_hook: dict[str, list[tuple[Any, Any]]] = {}
        self._cache: dict[int, list[Fingerprint]] = {}
        self._lock = threading.Lock()
        try:
            from solutions.mistakes import CATALOGUE, mistake_solution
        except ImportError:
            return
        for mistake in CATALOGUE if catalogue is None else catalogue:
            solution = mistake_solution(mistake)
            for hook in mistake.overrides:
                self._by_hook.setdefault(hook, []).append((mistake, solution))

    def for_trial(self, trial: Any) -> list[Fingerprint]:
        """Fingerprints of the mistakes (overriding this trial's hook) that fail this trial."""
        with self._lock:
            if id(trial) in self._cache:
                return self._cache[id(trial)]
        found = []
        if trial.device in ("cpu", "meta"):
            for mistake, solution in self._by_hook.get(trial.hook, []):
                verdict = judge_in_process(solution, trial)
                if verdict.status == FAILED:
                    found.append(
                        _fingerprint(mistake.id, mistake.exercise, verdict.reply, verdict.outputs, verdict.message)
                    )
        with self._lock:
            return self._cache.setdefault(id(trial), found)


def _same_outputs(mine: list[torch.Tensor], theirs: list[torch.Tensor]) -> bool:
    if not mine or len(mine) != len(theirs):
        return False
    for a, b in zip(mine, theirs, strict=True):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype == torch.bool:
            if not torch.equal(a, b):
                return False
        elif not torch.allclose(a.double(), b.double(), rtol=1e-3, atol=1e-4, equal_nan=True):
            return False
    return True


def diagnose(
    fingerprints: list[Fingerprint], reply: CallReply | None, outputs: dict[str, torch.Tensor], message: str
) -> str:
    """The id of the first known mistake whose fingerprint this failing case matches, or ``""``."""
    if reply is None:
        return ""
    mine = [outputs[k] for k in sorted(outputs)]
    error = _error_key(reply.get("error"))
    unchanged = reply.get("inputs_unchanged", True) is not False
    gpu = message.startswith("will fail on a GPU")
    for fp in fingerprints:
        if fp.will_fail_on_gpu or gpu:
            if fp.will_fail_on_gpu and gpu:
                return fp.mistake
            continue
        if fp.error is not None or error is not None:
            if fp.error == error:
                return fp.mistake
            continue
        if fp.inputs_unchanged == unchanged and _same_outputs(mine, fp.outputs):
            return fp.mistake
    return ""


def diagnose_in_process(solution: Any, hooks: list[str], seed: int = 0) -> dict[str, str]:
    """``{hook: mistake id}`` for each hook of a trusted, in-process solution that looks like a known mistake.

    For ``attnkit check`` and the notebooks' check cells in the instructor's kit
    (a learner's kit has no ``grader/instructor/``, so no hints): trusted code,
    run on the hidden-suite cases of a fixed public seed.  Returns ``{}`` where
    the catalogue is not installed.
    """
    try:
        import solutions.mistakes  # noqa: F401
    except ImportError:
        return {}
    from grader.instructor.suite import build_suite

    fingerprints = Fingerprints()
    found: dict[str, str] = {}
    for trial in build_suite(seed, ("cpu", "meta")).trials:
        if trial.hook not in hooks or trial.hook in found or not (known := fingerprints.for_trial(trial)):
            continue
        try:
            verdict = judge_in_process(solution, trial)
        except Exception:  # a learner's module that breaks the call itself; nothing to compare
            continue
        if verdict.status == FAILED:
            mistake = diagnose(known, verdict.reply, verdict.outputs, verdict.message)
            if mistake:
                found[trial.hook] = mistake
    return found


def hint(mistake_id: str, lang: str = "en") -> tuple[str, str]:
    """``(description, hint)`` of a catalogued mistake, the hint in ``lang`` (en or zh)."""
    from solutions.mistakes import by_id

    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    mistake = by_id(mistake_id)
    return mistake.description, mistake.hint_zh if lang == "zh" else mistake.hint
