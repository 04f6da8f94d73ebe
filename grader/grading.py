"""Grade submissions: one sandboxed child per submission, verdicts in this process.

:func:`grade_submission` runs the prepared suite against one submission and
returns its case results; the child holds only the learner's code and sends
back data, and every verdict is computed here.  A timeout or crash in one
exercise marks that exercise's remaining cases with the reason, and grading
goes on with the next exercise in a fresh child.
"""

from __future__ import annotations

import contextlib
import os
import queue
import time
from collections.abc import Iterator
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
    gpu: str | None = None  # the GPU this session's child may see, or None for a CPU child
    started: float = field(default_factory=time.monotonic)
    child: Child | None = None
    restarts: int = 0
    load_reply: dict[str, Any] | None = None
    peak_rss_kib: int = 0
    cuda_init_seconds: float | None = None

    def ensure(self) -> Child:
        if self.child is None:
            if self.restarts > MAX_RESTARTS:
                raise ChildGone(f"stopped after {MAX_RESTARTS} restarts of the learner's process")
            self.child = self.template.spawn(self.limits, self.gpu)
            self.child.started = self.started
            sub = self.submission
            self.child.send({"op": "load", "files": sub.files, "entry": sub.entry, "hooks": list(HOOK_NAMES)})
            header, _ = self.child.receive(self.limits.load_seconds)
            self.load_reply = header
            if header.get("cuda_init_seconds") is not None:
                self.cuda_init_seconds = float(header["cuda_init_seconds"])
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


class GpuPool:
    """One learner process per GPU at a time: a token per GPU, leased for a submission's CUDA cases."""

    def __init__(self, gpus: list[str]) -> None:
        self.gpus = list(gpus)
        self._free: queue.Queue[str] = queue.Queue()
        for gpu in self.gpus:
            self._free.put(gpu)

    @classmethod
    def visible(cls) -> GpuPool:
        """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (or 0..n-1)."""
        if not torch.cuda.is_available():
            return cls([])
        named = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
        return cls(named or [str(i) for i in range(torch.cuda.device_count())])

    @contextlib.contextmanager
    def lease(self) -> Iterator[str]:
        gpu = self._free.get()
        try:
            yield gpu
        finally:
            self._free.put(gpu)


def grade_submission(
    submission: Submission,
    suite: Suite,
    template: Template,
    limits: Limits | None = None,
    skipped_devices: dict[str, str] | None = None,
    reveal: bool = False,
    figures: Figures | None = None,
    stats: dict[str, Any] | None = None,
    gpus: GpuPool | None = None,
) -> list[CaseResult]:
    """Every run of ``suite`` against ``submission``, judged here.

    CPU and meta cases run in one child without CUDA; CUDA cases in a second
    child that holds one GPU of ``gpus`` for the whole submission, so CUDA
    start-up is paid once per submission per GPU and each GPU serves one
    learner process at a time.  Failing cases are matched against the suite's
    fingerprints of known mistakes; ``figures``, when given, collects the
    first failing weights case of each hook for a heatmap; ``stats``, when
    given, gets the learner process's peak RSS (``peak_rss_kib``, as it
    reported it), its restarts and the CUDA start-up time.
    """
    limits = limits or Limits()
    skipped_devices = dict(skipped_devices or {})
    student = submission.student
    if submission.error:
        return [_result(student, run, FAILED, f"not graded: {submission.error}") for run in suite.runs]
    gpus = gpus if gpus is not None else GpuPool.visible()
    if not gpus.gpus:
        skipped_devices.setdefault("cuda", "not available")
    done: dict[int, list[CaseResult]] = {}
    session = _Session(template, submission, limits)
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
        on_gpu = []
        for i, batch in enumerate(suite.batches):
            if batch.device in skipped_devices:
                why = f"{batch.device}: {skipped_devices[batch.device]}"
                done[i] = [_result(student, r, SKIPPED, why) for r in batch.runs]
            elif batch.hook in unusable:
                done[i] = [_result(student, r, FAILED, unusable[batch.hook]) for r in batch.runs]
            elif batch.device == "cuda":
                on_gpu.append(i)
            else:
                done[i] = _grade_batch(session, batch, reveal, suite.fingerprints, figures)
        session.close()
        if on_gpu:
            with gpus.lease() as gpu:
                cuda = _Session(template, submission, limits, gpu=gpu, started=session.started)
                try:
                    for i in on_gpu:
                        done[i] = _grade_batch(cuda, suite.batches[i], reveal, suite.fingerprints, figures)
                finally:
                    cuda.close()
                    session.peak_rss_kib = max(session.peak_rss_kib, cuda.peak_rss_kib)
                    session.restarts += cuda.restarts
                    session.cuda_init_seconds = cuda.cuda_init_seconds
    finally:
        session.close()
        if stats is not None:
            stats.update(
                peak_rss_kib=session.peak_rss_kib,
                restarts=session.restarts,
                cuda_init_seconds=session.cuda_init_seconds,
            )
    return [result for i in sorted(done) for result in done[i]]


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
