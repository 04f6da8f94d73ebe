"""Grade submissions: one sandboxed child per submission, verdicts in this process.

:func:`grade_submission` runs the prepared suite against one submission and
returns its case results; the child holds only the learner's code and sends
back data, and every verdict is computed here.  Every reply is read within
the caps of :mod:`grader.instructor.replies` and checked against its schema before use.
A timeout, a crash or a malformed reply in one exercise marks that exercise's
remaining cases with the reason, and grading goes on with the next exercise
in a fresh child; nothing the child sends raises out of grading a submission.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from grader.instructor.diagnosis import diagnose
from grader.instructor.heatmaps import WEIGHT_HOOKS
from grader.instructor.intake import Submission
from grader.instructor.replies import (
    LOAD_CAPS,
    Caps,
    MalformedReply,
    caps_for,
    check_load_reply,
    check_run_reply,
    read_outputs,
)
from grader.instructor.sandbox import Child, ChildGone, Limits, Template
from grader.instructor.suite import Batch, Suite
from grader.instructor.verdict import FAILED, SKIPPED, CaseResult, judge
from grader.registry import HOOK_NAMES, format_hook, signature_problem

MAX_RESTARTS = 6
STORED_MESSAGE_BYTES = 1 << 20
"""What one submission's messages may take in the gradebook; messages past it are replaced by a note."""


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
    deadline: float = 0.0  # time.monotonic() when the submission's time is up; 0: submission_seconds from now
    child: Child | None = None
    restarts: int = 0
    calls_sent: int = 0  # call ids run on across batches and children, so a stale reply never answers a later call
    load_reply: dict[str, Any] | None = None
    peak_rss_kib: int = 0
    cuda_init_seconds: float | None = None

    def __post_init__(self) -> None:
        if not self.deadline:
            self.deadline = time.monotonic() + self.limits.submission_seconds

    def ensure(self) -> Child:
        if self.child is None:
            if self.restarts > MAX_RESTARTS:
                raise ChildGone(f"stopped after {MAX_RESTARTS} restarts of the learner's process")
            self.child = self.template.spawn(self.limits, self.gpu, deadline=self.deadline)
            sub = self.submission
            self.child.send({"op": "load", "files": sub.files, "entry": sub.entry, "hooks": list(HOOK_NAMES)})
            header, _ = receive(self.child, self.limits.load_seconds, LOAD_CAPS)
            try:
                self.load_reply = check_load_reply(header)
            except MalformedReply as exc:
                raise ChildGone(f"sent a malformed reply: {exc}") from None
            if self.load_reply.get("cuda_init_seconds") is not None:
                self.cuda_init_seconds = self.load_reply["cuda_init_seconds"]
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


def receive(child: Child, timeout: float, caps: Caps) -> tuple[dict[str, Any], bytes]:
    """One message from ``child`` within ``caps``; anything but a well-formed message is :class:`ChildGone`.

    The caps go to ``Child.receive`` (``max_header``, ``max_blob``), which refuses
    an oversized message from its length prefix, before reading it.
    """
    try:
        return child.receive(timeout, max_header=caps.max_header, max_blob=caps.max_blob)
    except ChildGone:
        raise
    except Exception as exc:  # Child.receive says ChildGone for everything; should anything slip through
        raise ChildGone(f"sent a malformed reply: {type(exc).__name__} while reading it") from None


def limit_stored_messages(results: Iterable[CaseResult], budget: int = STORED_MESSAGE_BYTES) -> list[CaseResult]:
    """``results`` with messages past ``budget`` bytes (UTF-8, all together) replaced by a short note."""
    kept: list[CaseResult] = []
    used = 0
    note = f"[message not kept: this submission's messages passed the {budget} bytes the gradebook keeps]"
    for result in results:
        size = len(result.message.encode("utf-8", "replace"))
        if used + size > budget:
            result = dataclasses.replace(result, message=note)
            size = len(note)
        used += size
        kept.append(result)
    return kept


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
                cuda = _Session(template, submission, limits, gpu=gpu, deadline=session.deadline)
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
    """Send one batch and judge each reply as it comes; a reply that breaks the protocol ends the batch."""
    student = session.submission.student
    results: list[CaseResult] = []
    first = session.calls_sent
    session.calls_sent += len(batch.calls)
    try:
        child = session.ensure()
        child.send({"op": "run", "calls": [dict(c, id=first + i) for i, c in enumerate(batch.calls)]}, batch.blob)
    except ChildGone as exc:
        session.drop()
        return [_result(student, r, FAILED, exc.reason) for r in batch.runs]
    for i, run in enumerate(batch.runs):
        try:
            reply, outputs = _read_reply(child, run, first + i, session.limits.call_seconds)
        except ChildGone as exc:
            reason = exc.reason
        except MalformedReply as exc:
            reason = f"sent a malformed reply: {exc}"
        except Exception as exc:  # nothing a child sends may stop the class
            reason = f"sent back unreadable data ({type(exc).__name__})"
        else:
            session.peak_rss_kib = max(session.peak_rss_kib, int(reply.get("peak_rss_kib", 0)))
            results.append(_verdict(student, run, reply, outputs, reveal, fingerprints, figures))
            continue
        session.drop()
        results.append(_result(student, run, FAILED, reason))
        later = f"not run: an earlier case of {batch.hook} ({run.case.name}) failed with: {reason}"
        results += [_result(student, r, FAILED, later) for r in batch.runs[i + 1 :]]
        return results
    return results


def _read_reply(child: Child, run: Any, call_id: int, timeout: float) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The checked reply to call ``call_id`` and the tensors it sent, or MalformedReply / ChildGone."""
    caps = caps_for(run)
    header, blob = receive(child, timeout, caps)
    reply = check_run_reply(header, caps)
    if reply["id"] != call_id:
        raise ChildGone(f"answered out of order (expected call {call_id}, got {reply['id']})")
    return reply, read_outputs(blob, caps)


def _verdict(
    student: str,
    run: Any,
    reply: dict[str, Any],
    outputs: dict[str, torch.Tensor],
    reveal: bool,
    fingerprints: Any,
    figures: Figures | None,
) -> CaseResult:
    """Judge one checked reply; a failure of the judging itself fails the case with the reason."""
    try:
        status, message = judge(run, reply, outputs, reveal=reveal)
        mistake = ""
        if status == FAILED:
            mistake = diagnose(fingerprints.for_run(run) if fingerprints else [], reply, outputs, message)
            got = outputs.get("out0")
            if figures is not None and run.hook in WEIGHT_HOOKS and run.hook not in figures and run.golds:
                if got is not None and got.shape == run.golds[0].shape:
                    figures[run.hook] = (f"{run.case.name} ({run.device}, {run.dtype})", run.golds[0], got)
    except Exception as exc:  # extreme values, odd tensors: this case fails, the class goes on
        status, message, mistake = FAILED, f"the grader could not judge what came back ({type(exc).__name__})", ""
    if message and run.case.what:
        message = f"{run.case.what}: {message}"
    return _result(student, run, status, message, reply.get("seconds", 0.0), mistake)
