"""Grade one submission: a sandboxed child runs the learner's code, every verdict is made in this process.

:func:`grade_submission` returns one :class:`Outcome` (plain data).  The child holds only the learner's code and
sends back data; every reply is read within the caps of :mod:`grader.instructor.replies` and checked against its
schema before use.  A timeout, a crash or a malformed reply ends the case (and what cannot run without it) with
the reason, and grading goes on in a fresh child; nothing the child sends raises out of grading a submission.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import queue
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.hook_table import BANNED_NAMES, CLASS_NAMES
from grader.instructor.diagnosis import diagnose_hook, main_first
from grader.instructor.heatmaps import WEIGHT_HOOKS, Figure, informative
from grader.instructor.held_memory import UNREAD, Held, ProcessMeter, open_meter
from grader.instructor.intake_model import Submission
from grader.instructor.learner_source import LearnerSource
from grader.instructor.notebook_places import in_notebook, results_in_notebook
from grader.instructor.observations import HookRow, observe
from grader.instructor.replies import (
    LOAD_CAPS,
    CallReply,
    Caps,
    HookFound,
    LoadReply,
    MalformedReply,
    caps_for,
    read_outputs,
    validate_call_reply,
    validate_load_reply,
)
from grader.instructor.review_flags import Finding
from grader.instructor.said import said
from grader.instructor.sandbox import OUTPUT_KEPT, WITNESS_LINES, Child, ChildGone, Limits, Template
from grader.instructor.suite import Batch, Suite
from grader.instructor.verdict import FAILED, SKIPPED, CaseResult, Status, case_label, case_note, judge
from grader.instructor.witnessed import WHERE, witnessed_findings
from grader.registry import HOOK_NAMES, format_hook, signature_problem
from grader.rules import banned_message

MAX_RESTARTS = 2
"""How many times one exercise's calls may end the learner's process (a crash, a timeout) before its other cases
are failed unrun: each exercise has its own (:meth:`_Session.ensure`)."""
PRINTED_PER_HOOK = 8 * 1024
"""At most this many characters of what one exercise's calls printed are kept (each call's part is capped too)."""
STORED_MESSAGE_BYTES = 1 << 20
"""What one submission's messages may take in the gradebook; messages past it are replaced by a note."""

log = logging.getLogger(__name__)


def available_devices() -> dict[str, str | None]:
    """Each device the grader knows, mapped to None if usable or to why it is not."""
    devices: dict[str, str | None] = {"cpu": None, "meta": None}
    devices["cuda"] = None if torch.cuda.is_available() else said("not_available")
    mps = getattr(torch.backends, "mps", None)
    devices["mps"] = None if mps is not None and mps.is_available() else said("not_available")
    return devices


BANNED_LINE = re.compile(r"banned (\d{1,9}) ([A-Za-z_][A-Za-z0-9_.]{0,99})")
"""A banned call as the recorder told the witness of it, with the id of the call it was made in
(:func:`grader.child.call._recording_mode`)."""


@dataclass
class Stats:
    """How one submission's learner processes fared (their own reports: a hostile one may lie)."""

    peak_rss_kib: int = 0  # the largest peak RSS a learner's process reported
    restarts: int = 0  # learner processes started again after a crash or a timeout
    cuda_init_seconds: float | None = None  # CUDA start-up in the GPU child, where one ran
    output: str = ""  # what its learner processes printed, each in turn (the first OUTPUT_KEPT characters)
    printed: dict[str, str] = field(default_factory=dict)  # hook -> what its calls printed (PRINTED_PER_HOOK)
    witnessed: list[str] = field(default_factory=list)  # the witness's lines of every learner process, each once
    heard_banned: dict[int, list[str]] = field(default_factory=dict)  # call id -> banned calls the witness heard

    def keep_printed(self, hook: str, text: str) -> None:
        """Add what one call of ``hook`` printed, up to :data:`PRINTED_PER_HOOK` characters per hook."""
        kept = self.printed.get(hook, "")
        if not text or len(kept) >= PRINTED_PER_HOOK:
            return
        joined = kept + text + ("" if text.endswith("\n") else "\n")
        if len(joined) > PRINTED_PER_HOOK:
            joined = joined[:PRINTED_PER_HOOK] + "\n[... more not kept]\n"
        self.printed[hook] = joined

    def keep_output(self, child: Child, calls: range) -> None:
        """Add what ``child`` printed, and what its witness heard; ``calls`` are the ids of the calls it was sent."""
        if len(self.output) < OUTPUT_KEPT:
            self.output = (self.output + child.output())[:OUTPUT_KEPT]
        lines = child.witnessed()
        # the witness writes one line per kind and per call: the rest is forged
        other = ["overflowed"] if len(lines) >= WITNESS_LINES else []
        for line in lines:
            heard = BANNED_LINE.fullmatch(line)
            if heard and int(heard[1]) in calls:
                self.heard_banned.setdefault(int(heard[1]), []).append(heard[2])
            else:
                other.append(line)  # a malformed line, or one for a call this child was not sent: forged
        self.witnessed = list(dict.fromkeys(self.witnessed + other))[:64]


@dataclass
class Outcome:
    """What grading one submission gives back, as plain data (no process, no file)."""

    submission: Submission  # with ``error`` set where grading it stopped
    results: list[CaseResult]
    figures: dict[str, Figure] = field(default_factory=dict)  # hook -> its most informative failing case
    stats: Stats = field(default_factory=Stats)


@dataclass
class _Session:
    """The child currently serving one submission, restarted after a crash or timeout, until ``deadline``."""

    template: Template
    submission: Submission
    limits: Limits
    deadline: float  # time.monotonic() when the submission's time is up: every child of it gets this deadline
    stats: Stats
    gpu: str | None = None  # the GPU this session's child may see, or None for a CPU child
    child: Child | None = None
    restarts: Counter[str] = field(default_factory=Counter)  # hook -> its learner processes dropped (every device)
    given_back: float = 0.0  # seconds of timeouts given back to the deadline, at most limits.submission_seconds
    calls_sent: int = 0  # call ids run on across batches and children, so a stale reply never answers a later call
    load_reply: LoadReply | None = None
    child_calls_from: int = 0  # the first call id the current child was sent

    def ensure(self, hook: str = "") -> Child:
        """The child, started (and the submission loaded) where there is none; ChildGone once ``hook`` has had
        :data:`MAX_RESTARTS`: one exercise's restarts never end another's cases."""
        if self.restarts[hook] >= MAX_RESTARTS:
            raise ChildGone(said("restarts", n=MAX_RESTARTS))
        if self.child is None:
            self.child = self.template.spawn(self.limits, self.gpu, deadline=self.deadline)
            self.child_calls_from = self.calls_sent
            sub = self.submission
            # the runtime imports nothing of the kit: the hooks, their class names and every ban a call may carry
            hooks = {"hooks": list(HOOK_NAMES), "aliases": CLASS_NAMES, "banned": BANNED_NAMES}
            self.child.send({"op": "load", "files": sub.files, "entry": sub.entry, **hooks})
            header, _ = receive(self.child, self.limits.load_seconds, LOAD_CAPS)
            try:
                reply = self.load_reply = validate_load_reply(header)
            except MalformedReply as exc:
                raise ChildGone(said("malformed", why=str(exc))) from None
            if (cuda_init := reply.get("cuda_init_seconds")) is not None:
                self.stats.cuda_init_seconds = cuda_init
        return self.child

    def drop(self, hook: str, gone: ChildGone) -> None:
        """Close the child after a crash or timeout of a call of ``hook`` (the next call starts another, within
        ``hook``'s :data:`MAX_RESTARTS`).  The time a call spent to its own limit is given back to the deadline, so a
        loop in one exercise never uses up another's time; at most ``limits.submission_seconds`` in all."""
        if self.child is not None:
            self.close()
            self.restarts[hook] += 1
            self.stats.restarts += 1
            back = min(gone.lost, self.limits.submission_seconds - self.given_back)
            self.deadline += back
            self.given_back += back

    def close(self) -> None:
        if self.child is not None:
            self.stats.keep_output(self.child, range(self.child_calls_from, self.calls_sent))
            self.child.close()
            self.child = None


def receive(child: Child, timeout: float, caps: Caps) -> tuple[dict[str, Any], bytes]:
    """One message from ``child`` within ``caps`` (an oversized one refused from its length prefix, unread);
    anything but a well-formed message is :class:`ChildGone`."""
    try:
        return child.receive(timeout, max_header=caps.max_header, max_blob=caps.max_blob)
    except ChildGone:
        raise
    except Exception as exc:  # Child.receive says ChildGone for everything; should anything slip through
        raise ChildGone(said("malformed.reading", kind=type(exc).__name__)) from None


def limit_stored_messages(results: Iterable[CaseResult], budget: int = STORED_MESSAGE_BYTES) -> list[CaseResult]:
    """``results`` with messages past ``budget`` bytes (UTF-8, all together) replaced by a short note."""
    kept: list[CaseResult] = []
    used, note = 0, said("not_kept", budget=budget)
    for result in results:
        size = len(result.message.encode("utf-8", "replace"))
        if used + size > budget:
            result = dataclasses.replace(result, message=note)
            size = len(note)
        used += size
        kept.append(result)
    return kept


def _result(
    student: str, trial: Any, status: Status, message: str, seconds: float = 0.0, mistake: str = ""
) -> CaseResult:
    return CaseResult(
        student, trial.hook, trial.case.name, trial.device, trial.dtype, status, message, round(seconds, 6), mistake
    )


def not_graded(why: str) -> str:
    """The message of every case of a submission that was not graded (``why``: the submission's error)."""
    return said("not_graded", error=why)


def every_trial(student: str, trials: Iterable[Any], status: Status, message: str) -> list[CaseResult]:
    """The same result for each of ``trials``: a submission, or an exercise, that got no further."""
    return [_result(student, trial, status, message) for trial in trials]


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
    submission: Submission, suite: Suite, template: Template, limits: Limits | None = None, reveal: bool = False,
    gpus: GpuPool | None = None,
) -> Outcome:  # fmt: skip
    """Every trial of ``suite`` against ``submission``, judged here.

    CPU and meta cases run in one child without CUDA; CUDA cases in a second child that holds one GPU of ``gpus``
    for the whole submission (CUDA start-up paid once per submission, one learner process per GPU at a time).
    Every child shares one deadline, ``limits.submission_seconds`` from now.  Devices in ``suite.skipped`` (and cuda
    where no GPU is visible) are skipped with their reason.  Each exercise's failing cases are diagnosed together;
    the most informative failing weights case of each hook becomes a :class:`~grader.instructor.heatmaps.Figure`.
    """
    limits = limits or Limits()
    student = submission.student
    if submission.error:
        return Outcome(submission, every_trial(student, suite.trials, FAILED, not_graded(submission.error)))
    gpus = gpus if gpus is not None else GpuPool.visible()
    session = _Session(template, submission, limits, time.monotonic() + limits.submission_seconds, stats := Stats())
    verdicts = _Verdicts(student, reveal, suite.fingerprints)
    done: dict[int, list[CaseResult]] = {}
    try:
        refused = in_notebook(submission, _load(session))
        if refused:
            return Outcome(submission, every_trial(student, suite.trials, FAILED, refused), stats=stats)
        settled = _settled_batches(suite, session.load_reply or LoadReply(), gpus, student)
        done.update(settled)
        on_gpu = [i for i, batch in enumerate(suite.batches) if i not in settled and batch.device == "cuda"]
        # a batch the grader measures from outside runs first, in the child as it loaded: no other call's freed
        # memory for it to reuse unseen (grader.instructor.held_memory)
        for i in sorted(range(len(suite.batches)), key=lambda i: not suite.batches[i].held):
            if i not in settled and i not in on_gpu:
                done[i] = _grade_batch(session, suite.batches[i], verdicts)
        session.close()
        if on_gpu:
            with gpus.lease() as gpu:
                done.update(_grade_on_gpu(session, gpu, {i: suite.batches[i] for i in on_gpu}, verdicts))
    finally:
        session.close()
    return _outcome(session, verdicts, [result for i in sorted(done) for result in done[i]])


def _outcome(session: _Session, verdicts: _Verdicts, results: list[CaseResult]) -> Outcome:
    """The submission's outcome once every child is gone: what the witness heard checked against the replies,
    flagged, and each exercise's mistakes named."""
    stats = session.stats
    results, hidden = verdicts.unhidden(results, stats.heard_banned)
    source = LearnerSource.of(session.submission.files, (session.load_reply or {}).get("hooks"))
    submission = _with_heard(session.submission, stats.witnessed, hidden)
    named = results_in_notebook(submission, verdicts.named(results, source))  # its places: the notebook's cells
    return Outcome(submission, named, verdicts.figures, stats)


def _with_heard(submission: Submission, witnessed: list[str], hidden: list[str] | None = None) -> Submission:
    """``submission`` with what its witness heard while it ran flagged beside what the scan read."""
    if not witnessed and not hidden:
        return submission
    review = list(dict.fromkeys([*submission.review, *witnessed_findings(witnessed), *(hidden or [])]))
    return dataclasses.replace(submission, review=review)


def _load(session: _Session) -> str:
    """Start the submission's first child and load its code; why it cannot be graded, or ``""``."""
    try:
        session.ensure()
    except ChildGone as exc:
        return said("could_not_load", reason=exc.reason)
    error = (session.load_reply or {}).get("import_error")
    return said("does_not_import", error=error) if error else ""


def _settled_batches(suite: Suite, load_reply: LoadReply, gpus: GpuPool, student: str) -> dict[int, list[CaseResult]]:
    """The batches whose results are known without a call: a device skipped here, a hook missing or unfit."""
    skipped = dict(suite.skipped)
    if not gpus.gpus:
        skipped.setdefault("cuda", said("not_available"))
    unusable = _unusable_hooks(load_reply.get("hooks", {}), load_reply.get("load_errors") or {})
    settled = {}
    for i, batch in enumerate(suite.batches):
        if batch.device in skipped:
            why = said("device_skipped", device=batch.device, reason=skipped[batch.device])
            settled[i] = every_trial(student, batch.trials, SKIPPED, why)
        elif batch.hook in unusable:
            settled[i] = every_trial(student, batch.trials, FAILED, unusable[batch.hook])
    return settled


def _grade_on_gpu(
    cpu: _Session, gpu: str, batches: dict[int, Batch], verdicts: _Verdicts
) -> dict[int, list[CaseResult]]:
    """The CUDA batches, in a child of their own that sees ``gpu``, under the submission's deadline."""
    session = _Session(cpu.template, cpu.submission, cpu.limits, cpu.deadline, cpu.stats, gpu=gpu)
    session.calls_sent = cpu.calls_sent  # call ids are the submission's: the witness's lines name them
    session.restarts, session.given_back = cpu.restarts, cpu.given_back  # the budgets are the submission's
    try:
        return {i: _grade_batch(session, batch, verdicts) for i, batch in batches.items()}
    finally:
        session.close()


def _unusable_hooks(found: dict[str, HookFound], load_errors: dict[str, str] | None = None) -> dict[str, str]:
    """Hooks the submission lacks (or whose module did not import) or whose signature does not fit, each with why."""
    unusable = {}
    for hook in HOOK_NAMES:
        info = found.get(hook)
        if info is None:
            missing = said("no_function", hook=hook, signature=format_hook(hook))
            unusable[hook] = (load_errors or {}).get(hook) or missing
            continue
        problem = signature_problem(hook, [dict(p) for p in info.get("params", [])], said, info.get("is_class", False))
        if problem:
            where = str(info.get("where", ""))
            unusable[hook] = said("bad_signature", where=where, problem=problem, signature=format_hook(hook))
    return unusable


def _grade_batch(session: _Session, batch: Batch, verdicts: _Verdicts) -> list[CaseResult]:
    """Send one batch and judge each reply as it comes; a reply that breaks the protocol ends the batch."""
    first = session.calls_sent
    with contextlib.ExitStack() as closing:
        try:
            child = session.ensure(batch.hook)  # a child started now is sent ids from `first` on (child_calls_from)
            session.calls_sent += len(batch.calls)
            meter = _held_meter(child, batch)
            if meter is not None:
                closing.callback(meter.close)
            child.send({"op": "call", "calls": [dict(c, id=first + i) for i, c in enumerate(batch.calls)]}, batch.blob)
        except ChildGone as exc:
            session.calls_sent = first + len(batch.calls)
            session.drop(batch.hook, exc)
            return every_trial(session.submission.student, batch.trials, FAILED, exc.reason)
        return _judge_replies(session, batch, verdicts, child, first, meter)


def _held_meter(child: Child, batch: Batch) -> ProcessMeter | None:
    """The kernel's records of the child, reset now, for a batch of one call whose memory is measured on the CPU."""
    if batch.device != "cpu" or not batch.held:
        return None
    meter = open_meter(child.pid, child.pidfd)
    if meter is not None and not meter.start():
        meter.close()
        return None
    return meter


def _judge_replies(
    session: _Session, batch: Batch, verdicts: _Verdicts, child: Child, first: int, meter: ProcessMeter | None
) -> list[CaseResult]:
    student = session.submission.student
    results: list[CaseResult] = []
    for i, trial in enumerate(batch.trials):
        gone = ChildGone("")
        try:
            limit = session.limits.call_seconds * trial.case.call_factor
            reply, outputs = _read_reply(child, trial, first + i, limit)
        except ChildGone as exc:
            reason, gone = exc.reason, exc
        except MalformedReply as exc:
            reason = said("malformed", why=str(exc))
        except Exception as exc:  # nothing a child sends may stop the class
            reason = said("data_unread", kind=type(exc).__name__)
        else:
            session.stats.peak_rss_kib = max(session.stats.peak_rss_kib, int(reply.get("peak_rss_kib", 0)))
            session.stats.keep_printed(trial.hook, reply.get("printed", ""))
            held = (meter.finish() or UNREAD) if meter is not None else None  # reset, then unread: it fails
            results.append(verdicts.judge(trial, reply, outputs, first + i, held))
            continue
        session.drop(batch.hook, gone)
        results.append(_result(student, trial, FAILED, reason))
        later = said("not_run", hook=batch.hook, case=trial.case.name, reason=reason)
        # the same case in its other dtypes follows it (the same inputs): not run; the other cases run in another
        # learner's process while the exercise has restarts left (code that loops on some inputs only)
        end = next((j for j in range(i + 1, len(batch.trials)) if batch.trials[j].case is not trial.case), None)
        if end is None or session.restarts[batch.hook] >= MAX_RESTARTS:
            return results + every_trial(student, batch.trials[i + 1 :], FAILED, later)
        rest = dataclasses.replace(batch, trials=batch.trials[end:], calls=batch.calls[end:])
        same = every_trial(student, batch.trials[i + 1 : end], FAILED, later)
        return results + same + _grade_batch(session, rest, verdicts)
    return results


def _read_reply(child: Child, trial: Any, call_id: int, timeout: float) -> tuple[CallReply, dict[str, torch.Tensor]]:
    """The checked reply to call ``call_id`` and the tensors it sent, or MalformedReply / ChildGone."""
    caps = caps_for(trial)
    header, blob = receive(child, timeout, caps)
    reply = validate_call_reply(header, caps)
    if reply["id"] != call_id:
        raise ChildGone(said("out_of_order", expected=call_id, got=reply["id"]))
    return reply, read_outputs(blob, caps)


@dataclass
class _Verdicts:
    """Judges one submission's checked replies; keeps the most informative failing weights case of each hook,
    and what each trial did, for the diagnosis of each exercise once all its cases are in (:meth:`named`)."""

    student: str
    reveal: bool
    fingerprints: Any  # a fingerprints.Fingerprints, or None
    figures: dict[str, Figure] = field(default_factory=dict)
    rows: dict[str, list[tuple[str, HookRow]]] = field(default_factory=dict)  # hook -> (test name, row)
    reported: dict[int, tuple[Any, set[str]]] = field(default_factory=dict)  # call id -> (trial, bans its reply named)

    def judge(
        self, trial: Any, reply: CallReply, outputs: dict[str, torch.Tensor], call_id: int = -1,
        held: Held | None = None,
    ) -> CaseResult:  # fmt: skip
        """The case's result (``held``: what the kernel says the call held); a failure of the judging itself fails
        the case with the reason."""
        self.reported[call_id] = (trial, {str(name) for name in reply.get("banned") or ()})
        try:
            status, message = judge(trial, reply, outputs, reveal=self.reveal, held=held)
            note = case_note(trial, reply) if status != SKIPPED else ""
            mistake = ""  # named once the exercise's every case is in (named)
            if status == FAILED and not str(getattr(message, "id", "")).startswith("grad."):  # values: a heatmap
                self._keep_figure(trial, outputs.get("out0"))  # (a gradient's failure has right weights to show)
            self._keep_row(trial, status, message, reply, outputs)
        except Exception as exc:  # extreme values, odd tensors: this case fails, the class goes on
            status, message, mistake = FAILED, said("not_judged", kind=type(exc).__name__), ""
            note = ""
        if message and trial.case.what:
            message = said("case", what=trial.case.what, message=message)
        result = _result(self.student, trial, status, message, reply.get("seconds", 0.0), mistake)
        return dataclasses.replace(result, note=note) if note else result

    def _keep_row(self, trial: Any, status: Status, message: str, reply: CallReply, outputs: dict) -> None:
        if self.fingerprints is None:
            return
        seen = observe(trial, status, message, reply, outputs if status == FAILED else {})
        row = HookRow(trial, seen, dict(reply.get("module") or {}))
        name = _result(self.student, trial, status, message).test_name
        self.rows.setdefault(trial.hook, []).append((name, row))

    def unhidden(self, results: list[CaseResult], heard: dict[int, list[str]]) -> tuple[list[CaseResult], list[str]]:
        """``results`` with each case whose reply left out a banned call the witness heard it make failed for it,
        and the review findings that say so: the runtime names in the reply what it tells the witness, so only
        a reply rewritten in the learner's process (or recorders cleared behind it) leaves one out."""
        failed: dict[str, str] = {}
        every: dict[str, None] = {}
        for call_id, names in sorted(heard.items()):
            trial, named = self.reported.get(call_id, (None, set()))
            if trial is None or set(names) <= named:
                continue  # a call never answered failed anyway; a reply that named the ban failed for it
            calls = list(dict.fromkeys(names))[:8]
            every.update(dict.fromkeys(calls))
            why = banned_message(trial.hook, calls, said)
            name = _result(self.student, trial, FAILED, "").test_name
            failed[name] = said("case", what=trial.case.what, message=why) if trial.case.what else why
        if not failed:
            return results, []
        heard_calls = ", ".join(list(every)[:8])
        hidden = [str(Finding(WHERE, 0, f"a reply that hid the banned calls the witness heard ({heard_calls})"))]
        kept = [
            dataclasses.replace(r, status=FAILED, message=failed[r.test_name], mistake="")
            if r.test_name in failed
            else r
            for r in results
        ]
        return kept, hidden

    def named(self, results: list[CaseResult], source: LearnerSource) -> list[CaseResult]:
        """``results`` with the known mistakes each exercise shows named on the failing cases that show them."""
        mistakes: dict[str, str] = {}
        for hook, kept in self.rows.items():
            try:
                hook_rows = [row for _, row in kept]
                found = main_first(hook, hook_rows, diagnose_hook(hook, hook_rows, self.fingerprints, source),
                                   self.fingerprints)  # fmt: skip
            except Exception as exc:  # a diagnosis is never worth a grade
                log.warning("%s: no diagnosis of %s (%s: %s)", self.student, hook, type(exc).__name__, exc)
                continue
            for i, ids in found.items():
                mistakes[kept[i][0]] = ",".join(ids)  # the main mistake first (main_first)
        if not mistakes:
            return results
        return [dataclasses.replace(r, mistake=mistakes.get(r.test_name, r.mistake)) for r in results]

    def _keep_figure(self, trial: Any, got: torch.Tensor | None) -> None:
        """Keep this failing case's figure if it shows the mistake better than the one kept (heatmaps.informative)."""
        if trial.hook not in WEIGHT_HOOKS or not trial.golds or got is None or got.shape != trial.golds[0].shape:
            return
        kept = self.figures.get(trial.hook)
        if kept is not None and informative(got.shape) <= informative(kept.expected.shape):
            return
        label = case_label(trial.case.name, trial.device, trial.dtype)
        try:
            self.figures[trial.hook] = Figure.of(label, trial.golds[0], got)
        except Exception as exc:  # a figure is never worth a case
            log.warning("%s: no heatmap of %s (%s)", self.student, trial.hook, type(exc).__name__)
