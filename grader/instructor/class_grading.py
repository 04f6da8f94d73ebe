"""Grade a whole class: plan the run, grade what is left in parallel, sum up.

:func:`grade_class` is three steps under one set of :class:`GradeOptions`
(every knob, with its default):

1. :func:`plan`: resume the unfinished run under the same conditions or start
   one, reuse what the gradebook already holds (this run's results, or an
   identical earlier grading), and list what is left to grade;
2. the grading loop: an :class:`Executor` maps one work item over the
   submissions left; each outcome is recorded in ``gradebook.sqlite`` as it
   arrives, so a stopped run loses at most the submissions in flight;
3. the summary, a :class:`GradeRun` for the report writer and the console.

The executor is one small interface, ``map_unordered(fn, items)``;
:class:`LocalExecutor` (a thread per job, each driving one sandboxed child at
a time) is the default, and a distributed engine can take its place: the
work item is a :class:`~grader.instructor.intake.Submission` and the result an
:class:`~grader.instructor.submission_grading.Outcome`, both plain data (the
heatmaps' data are tensors; nothing is written to disk by a worker).  The
work item never raises for one submission: a failure while grading it becomes
that submission's error row, and the class goes on (``KeyboardInterrupt``
still stops it).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from grader.handin import kit_version
from grader.instructor.diagnosis import Fingerprints
from grader.instructor.gradebook import Gradebook
from grader.instructor.heatmaps import Figure
from grader.instructor.intake import Submission, collect_submissions
from grader.instructor.replies import MESSAGE_CHARS
from grader.instructor.sandbox import KIT_ROOT, Limits, Template
from grader.instructor.submission_grading import (
    GpuPool,
    Outcome,
    available_devices,
    every_trial,
    grade_submission,
    limit_stored_messages,
)
from grader.instructor.suite import Suite, build_suite
from grader.instructor.suite_version import suite_version
from grader.instructor.verdict import FAILED, CaseResult

__all__ = [
    "FULL_ISOLATION",
    "SAMPLE_CLASS",
    "Executor",
    "GradeOptions",
    "GradeRun",
    "LocalExecutor",
    "Plan",
    "choose_devices",
    "default_devices",
    "grade_class",
    "plan",
]

SAMPLE_CLASS = KIT_ROOT / "examples" / "submissions"
FULL_ISOLATION = "pid-ns+net-ns+ipc-ns+mount-ns+landlock"
"""The layers ``--isolation strict`` needs (made with a user namespace, or by root, which then drops to nobody)."""


def _describe(exc: BaseException) -> str:
    """``Type: first line of the message``, at most MESSAGE_CHARS long, whatever the exception holds."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {(text.splitlines() or [''])[0][:MESSAGE_CHARS]}"


def default_devices() -> tuple[str, ...]:
    """cpu, meta and cuda (skipped with its reason when absent, so the report says so); mps where present."""
    extra = ("mps",) if available_devices()["mps"] is None else ()
    return ("cpu", "meta", "cuda") + extra


T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    """Runs ``fn`` over ``items`` and yields ``(item, result)`` pairs as each finishes."""

    def map_unordered(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[tuple[T, R]]: ...


@dataclass
class LocalExecutor:
    """``jobs`` threads on this machine; each grades one submission (one child process) at a time."""

    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)

    def map_unordered(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[tuple[T, R]]:
        pending: dict[Future[R], T] = {}
        with ThreadPoolExecutor(max_workers=max(1, self.jobs), thread_name_prefix="attnkit-grade") as pool:
            for item in items:
                pending[pool.submit(fn, item)] = item
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield pending.pop(future), future.result()


@dataclass
class GradeOptions:
    """Every knob of grading a class, with its default (what ``attnkit grade``'s options set)."""

    seed: int | None = None  # the hidden inputs' seed; None: the resumed run's, else a random one
    devices: Sequence[str] | None = None  # devices to grade on; None: default_devices()
    require: Sequence[str] = ()  # devices whose absence is an error instead of a skip
    force: bool = False  # regrade everything, even submissions the gradebook already holds
    reveal: bool = False  # show hidden input values in the feedback
    limits: Limits = field(default_factory=Limits)  # time, memory and CPU of each learner process
    executor: Executor = field(default_factory=LocalExecutor)
    strict_isolation: bool = False  # refuse to grade unless learner processes get FULL_ISOLATION
    on_start: Callable[[int], None] | None = None  # told how many submissions are left to grade
    on_graded: Callable[[Outcome], None] | None = None  # told of each outcome once it is recorded


@dataclass
class Plan:
    """What a grading run does, decided before anything is graded."""

    run_id: int
    seed: int
    version: str  # the hidden suite's version
    ran: list[str]  # the devices that run here
    skipped: dict[str, str]  # the devices skipped, with why
    submissions: list[Submission]
    reused: dict[str, Outcome] = field(default_factory=dict)  # by student, in the order of ``submissions``
    todo: list[Submission] = field(default_factory=list)

    @property
    def conditions(self) -> list[str]:
        """Every device of the run, sorted: with the seed and the version, what makes two gradings comparable."""
        return sorted(self.ran + list(self.skipped))


@dataclass
class GradeRun:
    """What one ``attnkit grade`` did: the conditions and every submission's outcome, students sorted."""

    run_id: int
    seed: int
    suite_version: str
    devices: list[str]
    skipped_devices: dict[str, str]
    outcomes: list[Outcome]
    reused: list[str]
    isolation: str = "none"
    cuda_overhead_seconds: float | None = None  # mean CUDA start-up per submission, where a GPU ran
    peak_child_rss_mib: float | None = None  # the largest peak RSS a learner's process reported

    @property
    def graded(self) -> list[tuple[Submission, list[CaseResult]]]:
        """``(submission, results)`` per student, as the report writers take them."""
        return [(o.submission, o.results) for o in self.outcomes]

    @property
    def figures(self) -> dict[str, dict[str, Figure]]:
        """``student -> hook -> Figure``: the heatmaps' data, for :func:`~grader.instructor.reports.write_reports`."""
        return {o.submission.student: o.figures for o in self.outcomes if o.figures}

    @property
    def info(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seed": self.seed,
            "suite_version": self.suite_version,
            "devices": self.devices,
            "skipped_devices": self.skipped_devices,
            "kit_version": kit_version(),
            "isolation": self.isolation,
        }


def choose_devices(requested: Iterable[str], required: Iterable[str] = ()) -> tuple[list[str], dict[str, str]]:
    """Split the requested devices into those that run and those skipped with a reason.

    A device in ``required`` that is not available raises ``RuntimeError``.
    """
    known = available_devices()
    ran: list[str] = []
    skipped: dict[str, str] = {}
    for device in dict.fromkeys(list(requested) + list(required)):
        if device not in known:
            raise ValueError(f"unknown device {device!r}; the grader knows {', '.join(known)}")
        reason = known[device]
        if reason is None:
            ran.append(device)
        else:
            skipped[device] = reason
    if "cpu" not in ran:
        ran.insert(0, "cpu")
    missing = [d for d in required if d in skipped]
    if missing:
        raise RuntimeError(", ".join(f"{d}: {skipped[d]}" for d in missing) + " (required with --require)")
    return ran, skipped


def grade_class(paths: list[str], out: Path, options: GradeOptions | None = None) -> GradeRun:
    """Grade every submission under ``paths`` into ``out/gradebook.sqlite`` and return what happened.

    Results are recorded one submission at a time, so a stopped run loses at
    most the submissions in flight; running again resumes the unfinished run
    (same seed) and grades only what is missing.  Writing the reports is the
    caller's (:func:`~grader.instructor.reports.write_reports`).
    """
    options = options or GradeOptions()
    devices = choose_devices(options.devices or default_devices(), options.require)
    out.mkdir(parents=True, exist_ok=True)
    submissions = collect_submissions(paths)
    with Gradebook(out / "gradebook.sqlite") as book:
        planned = plan(book, submissions, options, devices)
        if options.on_start:
            options.on_start(len(planned.todo))
        if planned.todo:
            isolation, graded = _grade(book, planned, options)
        else:
            isolation, graded = _isolation_of_earlier_runs(book, planned.run_id), {}
        book.finish_run(planned.run_id)
    return _summary(planned, {**planned.reused, **graded}, isolation)


def plan(
    book: Gradebook, submissions: list[Submission], options: GradeOptions, devices: tuple[list[str], dict[str, str]]
) -> Plan:
    """Decide what this run does; ``devices`` is :func:`choose_devices`'s ``(ran, skipped)``.

    Resumes the latest unfinished run when its suite version and devices are
    this run's (and its seed, when one is asked for), else starts a run in
    ``book``.  A submission is reused, unless ``options.force``, when the run
    already holds it unchanged, or when an identical input was graded under
    identical conditions (then it is recorded in this run); a submission with
    an error of its own is never reused.  Everything else is left to grade.
    """
    ran, skipped = devices
    version = suite_version()
    conditions = sorted(ran + list(skipped))
    run_id, seed = _run_to_write(book, version, conditions, options.seed)
    planned = Plan(run_id, seed, version, ran, skipped, submissions)
    in_this_run = {} if options.force else book.results_for_run(run_id)
    for sub in submissions:
        reused = None if options.force or sub.error else _reusable(book, planned, sub, in_this_run.get(sub.student))
        if reused is None:
            planned.todo.append(sub)
        else:
            planned.reused[sub.student] = reused
    return planned


def _run_to_write(book: Gradebook, version: str, conditions: list[str], seed: int | None) -> tuple[int, int]:
    """``(run id, seed)``: the unfinished run to resume under these conditions, or a new one."""
    previous = book.latest_unfinished_run()
    if (
        previous is not None
        and previous["suite_version"] == version
        and sorted(previous["devices"]) == conditions
        and (seed is None or str(previous["seed"]) == str(seed))
    ):
        return int(previous["id"]), int(previous["seed"])
    seed = seed if seed is not None else secrets.randbelow(2**31 - 1)
    return book.start_run(seed, version, conditions, kit_version(), "unknown (nothing graded yet)"), seed


def _reusable(
    book: Gradebook, planned: Plan, sub: Submission, recorded: tuple[Submission, list[CaseResult]] | None
) -> Outcome | None:
    """The outcome ``sub`` already has: ``recorded`` in this run unchanged, or an identical earlier grading."""
    if recorded is not None and recorded[0].sha256 == sub.sha256 and not recorded[0].error:
        return Outcome(sub, recorded[1], book.figures(planned.run_id, sub.student))
    found = book.find_graded_with_figures(sub.student, sub.sha256, planned.version, planned.seed, planned.conditions)
    if found is None:
        return None
    results, figures = found
    book.record(planned.run_id, sub, results, figures)
    return Outcome(sub, results, figures)


@dataclass
class _Work:
    """The work item: one submission graded against the run's suite; never raises for one submission."""

    suite: Suite
    template: Template
    limits: Limits
    reveal: bool
    gpus: GpuPool

    def __call__(self, sub: Submission) -> Outcome:
        try:
            return grade_submission(sub, self.suite, self.template, self.limits, self.reveal, self.gpus)
        except Exception as exc:  # one submission never stops the class
            why = f"grading stopped: {_describe(exc)}"
            results = every_trial(sub.student, self.suite.trials, FAILED, f"not graded: {why}")
            return Outcome(dataclasses.replace(sub, error=why), results)


def _grade(book: Gradebook, planned: Plan, options: GradeOptions) -> tuple[str, dict[str, Outcome]]:
    """Grade ``planned.todo``, recording each outcome as it arrives; ``(isolation, outcomes by student)``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # verdicts on small tensors; the parallelism is the executor's
    graded: dict[str, Outcome] = {}
    try:
        with Template(warm_meta="meta" in planned.ran) as template:  # boots while the suite is built
            suite = build_suite(planned.seed, tuple(planned.ran) + tuple(planned.skipped))
            suite.fingerprints, suite.skipped = Fingerprints(), dict(planned.skipped)
            isolation = template.isolation()
            book.set_isolation(planned.run_id, isolation)
            if options.strict_isolation and not set(FULL_ISOLATION.split("+")) <= set(isolation.split("+")):
                raise RuntimeError(
                    f"--isolation strict: this machine gives learner processes only '{isolation}' isolation, "
                    f"not '{FULL_ISOLATION}' (Linux PID, network, IPC and mount namespaces and Landlock); "
                    "nothing was graded"
                )
            work = _Work(suite, template, options.limits, options.reveal, GpuPool.visible())
            for _, outcome in options.executor.map_unordered(work, planned.todo):
                outcome = dataclasses.replace(outcome, results=limit_stored_messages(outcome.results))
                book.record(planned.run_id, outcome.submission, outcome.results, outcome.figures)
                graded[outcome.submission.student] = outcome
                if options.on_graded:
                    options.on_graded(outcome)
    finally:
        torch.set_num_threads(threads)
    return isolation, graded


def _isolation_of_earlier_runs(book: Gradebook, run_id: int) -> str:
    """The isolation to report when this run started no learner process."""
    isolation = str((book.get_run(run_id) or {}).get("isolation", "none"))
    if isolation.startswith("unknown"):
        isolation = "n/a (every submission was graded in an earlier run)"
        book.set_isolation(run_id, isolation)
    return isolation


def _summary(planned: Plan, outcomes: dict[str, Outcome], isolation: str) -> GradeRun:
    """The :class:`GradeRun`: outcomes in student order, and what the learner processes reported."""
    ordered = [outcomes[sub.student] for sub in sorted(planned.submissions, key=lambda s: s.student)]
    cuda_starts = [o.stats.cuda_init_seconds for o in ordered if o.stats.cuda_init_seconds is not None]
    peaks = [o.stats.peak_rss_kib for o in ordered if o.stats.peak_rss_kib]
    return GradeRun(
        planned.run_id,
        planned.seed,
        planned.version,
        planned.ran,
        planned.skipped,
        ordered,
        list(planned.reused),
        isolation,
        cuda_overhead_seconds=sum(cuda_starts) / len(cuda_starts) if cuda_starts else None,
        peak_child_rss_mib=max(peaks) / 1024 if peaks else None,
    )
