"""Grade submissions: one sandboxed child per submission, verdicts in this process.

:func:`grade_submission` runs the prepared suite against one submission and
returns its case results; the child holds only the learner's code and sends
back data, and every verdict is computed here.  A timeout or crash in one
exercise marks that exercise's remaining cases with the reason, and grading
goes on with the next exercise in a fresh child.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch
from safetensors.torch import load as load_tensors

from grader.diagnosis import diagnose
from grader.heatmaps import WEIGHT_HOOKS
from grader.registry import HOOK_NAMES, format_hook, signature_problem
from grader.sandbox import Child, ChildGone, Limits, Template
from grader.submissions import Submission
from grader.suite import Batch, Suite
from grader.verdict import FAILED, SKIPPED, CaseResult, judge

MAX_RESTARTS = 6


def available_devices() -> dict[str, str | None]:
    """Each device the grader knows, mapped to None if usable or to why it is not."""
    devices: dict[str, str | None] = {"cpu": None, "meta": None}
    devices["cuda"] = None if torch.cuda.is_available() else "not available"
    mps = getattr(torch.backends, "mps", None)
    devices["mps"] = None if mps is not None and mps.is_available() else "not available"
    return devices


@dataclass
class _Session:
    """The child currently serving one submission, restarted after a crash or timeout."""

    template: Template
    submission: Submission
    limits: Limits
    use_cuda: bool
    started: float = field(default_factory=time.monotonic)
    child: Child | None = None
    restarts: int = 0
    load_reply: dict[str, Any] | None = None
    peak_rss_kib: int = 0

    def ensure(self) -> Child:
        if self.child is None:
            if self.restarts > MAX_RESTARTS:
                raise ChildGone(f"stopped after {MAX_RESTARTS} restarts of the learner's process")
            self.child = self.template.spawn(self.limits, self.use_cuda)
            self.child.started = self.started
            sub = self.submission
            self.child.send({"op": "load", "files": sub.files, "entry": sub.entry, "hooks": list(HOOK_NAMES)})
            header, _ = self.child.receive(self.limits.load_seconds)
            self.load_reply = header
        return self.child

    def drop(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None
            self.restarts += 1

    def close(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None


def _result(student: str, run: Any, status: str, message: str, seconds: float = 0.0, mistake: str = "") -> CaseResult:
    return CaseResult(
        student, run.hook, run.case.name, run.device, run.dtype, status, message, round(seconds, 6), mistake
    )


Figures = dict[str, tuple[str, torch.Tensor, torch.Tensor]]
"""hook -> (case label, expected, received) for the first failing weights case of each hook."""


def grade_submission(
    submission: Submission,
    suite: Suite,
    template: Template,
    limits: Limits | None = None,
    skipped_devices: dict[str, str] | None = None,
    reveal: bool = False,
    figures: Figures | None = None,
    stats: dict[str, Any] | None = None,
) -> list[CaseResult]:
    """Every run of ``suite`` against ``submission``, judged here.

    Failing cases are matched against the suite's fingerprints of known
    mistakes; ``figures``, when given, collects the first failing weights case
    of each hook for a heatmap; ``stats``, when given, gets the learner
    process's peak RSS (``peak_rss_kib``, as it reported it) and its restarts.
    """
    limits = limits or Limits()
    skipped_devices = skipped_devices or {}
    student = submission.student
    results: list[CaseResult] = []
    if submission.error:
        return [_result(student, run, FAILED, f"not graded: {submission.error}") for run in suite.runs]
    use_cuda = any(b.device == "cuda" for b in suite.batches) and "cuda" not in skipped_devices
    session = _Session(template, submission, limits, use_cuda)
    try:
        try:
            session.ensure()
        except ChildGone as exc:
            return [_result(student, run, FAILED, f"could not load the submission: {exc.reason}") for run in suite.runs]
        load = session.load_reply or {}
        if load.get("import_error"):
            message = f"the submission does not import: {load['import_error']}"
            return [_result(student, run, FAILED, message) for run in suite.runs]
        unusable = _unusable_hooks(load.get("hooks", {}))
        for batch in suite.batches:
            if batch.device in skipped_devices:
                results += [
                    _result(student, r, SKIPPED, f"{batch.device}: {skipped_devices[batch.device]}") for r in batch.runs
                ]
            elif batch.hook in unusable:
                results += [_result(student, r, FAILED, unusable[batch.hook]) for r in batch.runs]
            else:
                results += _grade_batch(session, batch, reveal, suite.fingerprints, figures)
    finally:
        session.close()
        if stats is not None:
            stats.update(peak_rss_kib=session.peak_rss_kib, restarts=session.restarts)
    return results


def _unusable_hooks(found: dict[str, Any]) -> dict[str, str]:
    """Hooks the submission lacks or whose signature does not fit, with the message for each."""
    unusable = {}
    for hook in HOOK_NAMES:
        info = found.get(hook)
        if info is None:
            unusable[hook] = f"no function {hook}; the hook is {format_hook(hook)}"
            continue
        problem = signature_problem(hook, info.get("params", []))
        if problem:
            unusable[hook] = f"{info.get('where', '')}: {problem}; the hook is {format_hook(hook)}"
    return unusable


def _grade_batch(
    session: _Session, batch: Batch, reveal: bool, fingerprints: Any, figures: Figures | None
) -> list[CaseResult]:
    student = session.submission.student
    results: list[CaseResult] = []
    limits = session.limits
    try:
        child = session.ensure()
        child.send({"op": "run", "calls": batch.calls}, batch.blob)
    except ChildGone as exc:
        session.drop()
        return [_result(student, r, FAILED, exc.reason) for r in batch.runs]
    for i, run in enumerate(batch.runs):
        try:
            header, blob = child.receive(limits.call_seconds)
            if header.get("id") != i:
                raise ChildGone(f"answered out of order (expected call {i}, got {header.get('id')!r})")
            outputs = load_tensors(blob) if blob else {}
        except ChildGone as exc:
            session.drop()
            results.append(_result(student, run, FAILED, exc.reason))
            later = f"not run: an earlier case of {batch.hook} ({run.case.name}) failed with: {exc.reason}"
            results += [_result(student, r, FAILED, later) for r in batch.runs[i + 1 :]]
            return results
        except Exception as exc:  # unreadable tensor bytes
            session.drop()
            results.append(_result(student, run, FAILED, f"sent back unreadable data ({type(exc).__name__})"))
            results += [_result(student, r, FAILED, "not run: the process was stopped") for r in batch.runs[i + 1 :]]
            return results
        session.peak_rss_kib = max(session.peak_rss_kib, int(header.get("peak_rss_kib") or 0))
        status, message = judge(run, header, outputs, reveal=reveal)
        mistake = ""
        if status == FAILED:
            mistake = diagnose(fingerprints.for_run(run) if fingerprints else [], header, outputs, message)
            got = outputs.get("out0")
            if figures is not None and run.hook in WEIGHT_HOOKS and run.hook not in figures and run.golds:
                if got is not None and got.shape == run.golds[0].shape:
                    figures[run.hook] = (f"{run.case.name} ({run.device}, {run.dtype})", run.golds[0], got)
        if message and run.case.what:
            message = f"{run.case.what}: {message}"
        results.append(_result(student, run, status, message, float(header.get("seconds") or 0.0), mistake))
    return results
