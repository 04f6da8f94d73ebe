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

from grader.child_runtime import run_call
from grader.instructor.verdict import FAILED, judge

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


def _error_key(error: dict[str, Any] | None) -> str | None:
    if not error:
        return None
    message = re.sub(r"\d+(\.\d+)?", "#", str(error.get("message", "")).splitlines()[0] if error.get("message") else "")
    return f"{error.get('type')}: {message}"


def _fingerprint(mistake_id: str, exercise: str, reply: dict, outputs: dict, message: str) -> Fingerprint:
    return Fingerprint(
        mistake=mistake_id,
        exercise=exercise,
        outputs=[outputs[k] for k in sorted(outputs)],
        error=_error_key(reply.get("error")),
        inputs_unchanged=reply.get("inputs_unchanged", True) is not False,
        will_fail_on_gpu=message.startswith("will fail on a GPU"),
    )


def own_inputs(run: Any) -> dict[str, torch.Tensor]:
    """Copies of a run's input tensors for one call here: a mistake that writes into its input
    (a mistake that masks in place) must not change the suite's tensors, which every submission shares."""
    return {name: tensor.clone() for name, tensor in run.tensors.items()}


class Fingerprints:
    """The catalogued mistakes' fingerprints, computed the first time a failing case needs them.

    Shared by every grading thread; only runs that some submission fails cost
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

    def for_run(self, run: Any) -> list[Fingerprint]:
        """Fingerprints of the mistakes (overriding this run's hook) that fail this run."""
        with self._lock:
            if id(run) in self._cache:
                return self._cache[id(run)]
        found = []
        if run.device in ("cpu", "meta"):
            for mistake, solution in self._by_hook.get(run.hook, []):
                with torch.random.fork_rng(devices=[]):
                    reply, outputs = run_call(solution.functions, dict(run.call, id=0), own_inputs(run))
                status, message = judge(run, reply, outputs)
                if status == FAILED:
                    found.append(_fingerprint(mistake.id, mistake.exercise, reply, outputs, message))
        with self._lock:
            return self._cache.setdefault(id(run), found)


def fingerprint_runs(runs: list[Any], catalogue: Any = None) -> dict[int, list[Fingerprint]]:
    """For each run (by ``id(run)``), the fingerprints of the catalogued mistakes that fail it."""
    fingerprints = Fingerprints(catalogue)
    return {id(run): found for run in runs if (found := fingerprints.for_run(run))}


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
    fingerprints: list[Fingerprint], reply: dict[str, Any] | None, outputs: dict[str, torch.Tensor], message: str
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

    runs = [r for r in build_suite(seed, ("cpu", "meta")).runs if r.hook in hooks]
    fingerprints = fingerprint_runs(runs)
    found: dict[str, str] = {}
    for run in runs:
        if run.hook in found or not fingerprints.get(id(run)):
            continue
        try:
            reply, outputs = run_call(solution.functions, dict(run.call, id=0), own_inputs(run))
        except Exception:  # a learner's module that breaks the call itself; nothing to compare
            continue
        status, message = judge(run, reply, outputs)
        if status == FAILED:
            mistake = diagnose(fingerprints[id(run)], reply, outputs, message)
            if mistake:
                found[run.hook] = mistake
    return found


def hint(mistake_id: str, lang: str = "en") -> tuple[str, str]:
    """``(description, hint)`` of a catalogued mistake, the hint in ``lang`` (en or zh)."""
    from solutions.mistakes import by_id

    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    mistake = by_id(mistake_id)
    return mistake.description, mistake.hint_zh if lang == "zh" else mistake.hint
