"""Grade a whole class: resume where a stopped run left off, grade in parallel, write the reports.

The loop that hands submissions to workers is :class:`Executor`, one small
interface; :class:`LocalExecutor` (a thread per job, each driving one
sandboxed child at a time) is the default.  A distributed engine can take its
place by implementing ``map_unordered`` -- the work item is a
:class:`~grader.instructor.intake.Submission` (plain data) and the result a list of
:class:`~grader.instructor.verdict.CaseResult` (plain data).  The work item never raises
for one submission: a failure while grading it becomes that submission's error
row, and the class goes on (``KeyboardInterrupt`` still stops it).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from grader.instructor import heatmaps
from grader.instructor.cases import suite_version
from grader.instructor.diagnosis import Fingerprints
from grader.instructor.gradebook import Gradebook
from grader.instructor.intake import Submission, collect_submissions
from grader.instructor.replies import MESSAGE_CHARS
from grader.instructor.reports import student_folder
from grader.instructor.sandbox import KIT_ROOT, Limits, Template
from grader.instructor.submission_grading import (
    Figures,
    GpuPool,
    available_devices,
    grade_submission,
    limit_stored_messages,
)
from grader.instructor.suite import build_suite
from grader.instructor.verdict import FAILED, CaseResult

SAMPLE_CLASS = KIT_ROOT / "examples" / "submissions"
FULL_ISOLATION = "pid-ns+net-ns+ipc-ns+mount-ns+landlock"
"""The layers ``--isolation strict`` needs (made with a user namespace, or by root, which then drops to nobody)."""
log = logging.getLogger(__name__)


def _describe(exc: BaseException) -> str:
    """``Type: first line of the message``, at most MESSAGE_CHARS long, whatever the exception holds."""
    try:
        text = str(exc)
    except Exception:
        text = ""
    return f"{type(exc).__name__}: {(text.splitlines() or [''])[0][:MESSAGE_CHARS]}"


def _not_graded(student: str, run: Any, why: str) -> CaseResult:
    return CaseResult(student, run.hook, run.case.name, run.device, run.dtype, FAILED, f"not graded: {why}")


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


def kit_version() -> str:
    try:
        return importlib.metadata.version("attnkit")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass
class GradeRun:
    """What one ``attnkit grade`` did: the conditions and every submission's results."""

    run_id: int
    seed: int
    suite_version: str
    devices: list[str]
    skipped_devices: dict[str, str]
    graded: list[tuple[Submission, list[CaseResult]]]
    reused: list[str]
    isolation: str = "none"
    cuda_overhead_seconds: float | None = None  # mean CUDA start-up per submission, where a GPU ran
    peak_child_rss_mib: float | None = None  # the largest peak RSS a learner's process reported

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


def grade_class(
    paths: list[str],
    out: Path,
    seed: int | None = None,
    devices: Iterable[str] | None = None,
    require: Iterable[str] = (),
    force: bool = False,
    reveal: bool = False,
    limits: Limits | None = None,
    executor: Executor | None = None,
    strict_isolation: bool = False,
    on_start: Callable[[int], None] | None = None,
    on_graded: Callable[[Submission, list[CaseResult]], None] | None = None,
) -> GradeRun:
    """Grade every submission under ``paths`` into ``out`` and return what happened.

    Results are written to ``out/gradebook.sqlite`` one submission at a time,
    so a stopped run loses at most the submissions in flight; running again
    resumes the unfinished run (same seed) and grades only what is missing.
    """
    ran, skipped = choose_devices(devices or default_devices(), require)
    conditions = sorted(ran + list(skipped))
    version = suite_version()
    out.mkdir(parents=True, exist_ok=True)
    submissions = collect_submissions(paths)
    with Gradebook(out / "gradebook.sqlite") as book:
        previous = book.latest_unfinished_run()
        resumable = (
            previous is not None
            and previous["suite_version"] == version
            and sorted(previous["devices"]) == conditions
            and (seed is None or str(previous["seed"]) == str(seed))
        )
        if resumable and previous is not None:
            run_id, seed = int(previous["id"]), int(previous["seed"])
        else:
            seed = seed if seed is not None else secrets.randbelow(2**31 - 1)
            run_id = book.start_run(seed, version, conditions, kit_version(), "unknown (nothing graded yet)")
        done = {} if force else book.results_for_run(run_id)

        graded: dict[str, list[CaseResult]] = {}
        reused: list[str] = []
        measured: list[dict[str, Any]] = []  # per graded submission: peak RSS, CUDA start-up
        todo: list[Submission] = []
        errored: dict[str, Submission] = {}  # submissions whose grading stopped, with the reason as their error
        for sub in submissions:
            earlier = done.get(sub.student)
            if earlier is not None and earlier[0].sha256 == sub.sha256 and sub.error is None and not earlier[0].error:
                graded[sub.student] = earlier[1]
                reused.append(sub.student)
                continue
            cached = None
            if not force and sub.error is None:
                cached = book.find_graded(sub.student, sub.sha256, version, seed, conditions)
            if cached is not None:
                book.record(run_id, sub, cached)
                graded[sub.student] = cached
                reused.append(sub.student)
            else:
                todo.append(sub)

        if on_start:
            on_start(len(todo))
        if todo:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # verdicts on small tensors; the parallelism is --jobs
            with Template(warm_meta="meta" in ran) as template:  # boots while the suite is built
                suite = build_suite(seed, tuple(ran) + tuple(skipped))
                suite.fingerprints = Fingerprints()
                isolation = template.isolation()
                book.set_isolation(run_id, isolation)
                if strict_isolation and not set(FULL_ISOLATION.split("+")) <= set(isolation.split("+")):
                    raise RuntimeError(
                        f"--isolation strict: this machine gives learner processes only '{isolation}' isolation, "
                        f"not '{FULL_ISOLATION}' (Linux PID, network, IPC and mount namespaces and Landlock); "
                        "nothing was graded"
                    )

                gpus = GpuPool.visible()
                failures: dict[str, str] = {}  # student -> why grading stopped, for the error row

                def grade_one(sub: Submission) -> list[CaseResult]:
                    """Never raises for one submission: a failure of the grading becomes that submission's error."""
                    figures: Figures = {}
                    stats: dict[str, Any] = {}
                    try:
                        results = grade_submission(sub, suite, template, limits, skipped, reveal, figures, stats, gpus)
                    except Exception as exc:  # one submission never stops the class
                        why = f"grading stopped: {_describe(exc)}"
                        failures[sub.student] = why
                        return [_not_graded(sub.student, run, why) for run in suite.runs]
                    measured.append(stats)
                    try:
                        heatmaps.write(student_folder(out, sub.student), figures)
                    except Exception as exc:  # a figure is never worth a student's grades
                        log.warning("%s: no heatmap (%s: %s)", sub.student, type(exc).__name__, exc)
                    return results

                try:
                    for sub, results in (executor or LocalExecutor()).map_unordered(grade_one, todo):
                        if sub.student in failures:
                            sub = dataclasses.replace(sub, error=failures.pop(sub.student))
                            errored[sub.student] = sub
                        results = limit_stored_messages(results)
                        book.record(run_id, sub, results)
                        graded[sub.student] = results
                        if on_graded:
                            on_graded(sub, results)
                finally:
                    torch.set_num_threads(threads)
        else:
            isolation = str((book.get_run(run_id) or {}).get("isolation", "none"))
            if isolation.startswith("unknown"):
                isolation = "n/a (every submission was graded in an earlier run)"
                book.set_isolation(run_id, isolation)
        book.finish_run(run_id)
    by_student = sorted(submissions, key=lambda s: s.student)
    ordered = [(errored.get(sub.student, sub), graded[sub.student]) for sub in by_student]
    cuda_starts = [s["cuda_init_seconds"] for s in measured if s.get("cuda_init_seconds") is not None]
    peaks = [s["peak_rss_kib"] for s in measured if s.get("peak_rss_kib")]
    return GradeRun(
        run_id,
        int(seed),
        version,
        ran,
        skipped,
        ordered,
        reused,
        isolation,
        cuda_overhead_seconds=sum(cuda_starts) / len(cuda_starts) if cuda_starts else None,
        peak_child_rss_mib=max(peaks) / 1024 if peaks else None,
    )
