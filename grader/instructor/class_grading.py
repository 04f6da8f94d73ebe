"""Grade a whole class: plan the run, grade what is left in parallel, sum up.

:func:`grade_class`, under one :class:`GradeOptions`: :func:`plan` (hold the run to the out folder's class, resume
the unfinished run or start one, reuse what the gradebook holds); the grading loop (an :class:`Executor` maps one
work item over what is left, each outcome recorded in ``gradebook.sqlite`` as it arrives, so a stopped run loses
at most the submissions in flight); the summary, a :class:`GradeRun`.

One ``--out`` is one class.  Its first run draws the seed (or takes ``--seed``) and records it with the suite
version and the devices (:class:`~grader.instructor.gradebook.ClassSettings`); every later run grades under them,
so a late hand-in gets the same inputs as the rest.  Other conditions are refused (:class:`OutFolderConflict`)
unless ``force``, which makes them the class's and regrades the whole class from the hand-ins the gradebook keeps.
The roster is the class's too: one that only adds students is taken, one that drops or changes a student is
refused unless ``force`` (merging would keep a student who left the course ``missing`` for ever).

The executor is one small interface, ``map_unordered(fn, items, stop)``; :class:`LocalExecutor` (a thread per job,
each driving one sandboxed child at a time) is the default.  Work item and result are plain data; a worker writes
nothing to disk and never raises for one submission (a failure becomes its error row).  The work item is built from
a :class:`WorkSpec` by :func:`local_work`, or by the executor's own ``prepare(spec, stop)`` where its workers are
elsewhere (:mod:`grader.instructor.ray_executor`); the driver stays the only writer either way.

Stopping: once ``GradeOptions.stop`` is set (``attnkit grade`` sets it on SIGINT and SIGTERM, and so does a
``KeyboardInterrupt`` in the loop, re-raised), the executor hands out nothing more, the sandbox template kills every
learner process in flight, nothing more is recorded (a submission in flight is graded again on resume), and
:func:`grade_class` raises :class:`GradingStopped`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import torch

from grader.handin import kit_version
from grader.instructor.fingerprints import Fingerprints
from grader.instructor.gradebook import ClassSettings, Gradebook
from grader.instructor.heatmaps import Figure
from grader.instructor.intake import collect
from grader.instructor.intake_model import Intake, Submission
from grader.instructor.out_folder import GRADEBOOK, class_file
from grader.instructor.replies import MESSAGE_CHARS
from grader.instructor.report_model import ClassRoll, Person, ReportOptions
from grader.instructor.said import said
from grader.instructor.sandbox import KIT_ROOT, ChildGone, Limits, Template
from grader.instructor.submission_grading import (
    GpuPool,
    Outcome,
    available_devices,
    every_trial,
    grade_submission,
    limit_stored_messages,
    not_graded,
)
from grader.instructor.suite import Suite, build_suite
from grader.instructor.suite_version import suite_version
from grader.instructor.verdict import FAILED, CaseResult
from grader.instructor.witnessed import WHERE

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


class OutFolderConflict(ValueError):
    """A run into an out folder under other conditions (seed, suite, devices, roster) than its class's."""


class RosterRows(Protocol):
    """A roster (:class:`grader.instructor.roster.Roster` is one): a dict per student (id, name, email, pattern)."""

    def to_rows(self) -> list[dict[str, Any]]: ...


T = TypeVar("T")
R = TypeVar("R")

STOP_POLL_SECONDS = 0.05
"""How often a wait looks at the stop event: the delay a stop request adds before learner processes are killed."""


class GradingStopped(Exception):
    """Grading stopped on request before the class was done; every finished submission is in the gradebook."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"grading stopped: {done} of {total} submissions done")
        self.done = done  # submissions with their results in the run (graded now, earlier, or reused)
        self.total = total


class Executor(Protocol):
    """Runs ``fn`` over ``items`` and yields ``(item, result)`` pairs as each finishes.

    Once ``stop`` is set it starts and yields nothing more and returns promptly; work in flight is abandoned (the
    caller ends the local one's sandboxed children: :meth:`~grader.instructor.sandbox.Template.stop`).  Optional:
    ``prepare(spec, stop)`` (default :func:`local_work`) and ``describe()``, one line for the summary.
    """

    def map_unordered(
        self, fn: Callable[[T], R], items: Iterable[T], stop: threading.Event
    ) -> Generator[tuple[T, R], None, None]: ...


@dataclass
class LocalExecutor:
    """``jobs`` threads on this machine; each grades one submission (one child process) at a time."""

    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)

    def describe(self) -> str:
        return f"local, {max(1, self.jobs)} job{'s' if self.jobs > 1 else ''}"

    def map_unordered(
        self, fn: Callable[[T], R], items: Iterable[T], stop: threading.Event
    ) -> Generator[tuple[T, R], None, None]:
        pending: dict[Future[R], T] = {}
        with ThreadPoolExecutor(max_workers=max(1, self.jobs), thread_name_prefix="attnkit-grade") as pool:
            try:
                for item in items:
                    pending[pool.submit(fn, item)] = item
                while pending and not stop.is_set():
                    done, _ = wait(pending, timeout=STOP_POLL_SECONDS, return_when=FIRST_COMPLETED)
                    for future in done:
                        if stop.is_set():
                            return
                        yield pending.pop(future), future.result()
            except KeyboardInterrupt:  # while waiting: a stop, so the caller ends the work in flight (see above)
                stop.set()
                raise
            finally:  # stopped, or closed early: nothing queued starts; `with` then waits for the threads in flight
                pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class GradeOptions:
    """Every knob of grading a class, with its default (what ``attnkit grade``'s options set)."""

    seed: int | None = None  # the hidden inputs' seed; None: the resumed run's, else a random one
    devices: Sequence[str] | None = None  # devices to grade on; None: default_devices()
    require: Sequence[str] = ()  # devices whose absence is an error instead of a skip
    force: bool = False  # regrade everything given; with other conditions than the out folder's, the whole class
    only: frozenset[str] = frozenset()  # students regraded even if unchanged, under the class's own conditions
    roster: RosterRows | None = None  # the class's roster; None: the one the gradebook holds, if any
    reveal: bool = False  # show hidden input values in the feedback
    limits: Limits = field(default_factory=Limits)  # time, memory and CPU of each learner process
    executor: Executor = field(default_factory=LocalExecutor)
    strict_isolation: bool = False  # refuse to grade unless learner processes get FULL_ISOLATION
    on_start: Callable[[int], None] | None = None  # told how many submissions are left to grade
    on_graded: Callable[[Outcome], None] | None = None  # told of each outcome once it is recorded
    stop: threading.Event = field(default_factory=threading.Event)  # set it to stop (GradingStopped)


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
    regraded_from_gradebook: list[str] = field(default_factory=list)  # class members regraded from stored hand-ins
    roster: list[dict[str, str]] = field(default_factory=list)  # the class's roster rows (empty: none)
    notes: list[str] = field(default_factory=list)  # one line per change to the class (conditions, roster)

    @property
    def conditions(self) -> list[str]:
        """Every device of the run, sorted (with the seed and the version: what makes gradings comparable)."""
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
    roll: ClassRoll = field(default_factory=ClassRoll)  # the whole class of the out folder, for the class files
    notes: list[str] = field(default_factory=list)  # changes to the class: conditions replaced, roster grown
    regraded_from_gradebook: list[str] = field(default_factory=list)  # students regraded from stored hand-ins
    executor: str = ""  # which executor graded this run and with how many workers; "" where nothing was graded

    @property
    def graded(self) -> list[tuple[Submission, list[CaseResult]]]:
        """``(submission, results)`` per student, as the report writers take them."""
        return [(o.submission, o.results) for o in self.outcomes]

    @property
    def figures(self) -> dict[str, dict[str, Figure]]:
        """``student -> hook -> Figure``: the heatmaps' data, for :func:`~grader.instructor.reports.write_reports`."""
        return {o.submission.student: o.figures for o in self.outcomes if o.figures}

    @property
    def report_options(self) -> ReportOptions:
        """This run's conditions for the reports; ``dataclasses.replace`` adds the files' own choices (``lang``…)."""
        return ReportOptions(
            devices=tuple(self.devices), skipped_devices=dict(self.skipped_devices), suite_version=self.suite_version,
            kit=kit_version(), isolation=self.isolation, seed=self.seed,
        )  # fmt: skip


def choose_devices(requested: Iterable[str], required: Iterable[str] = ()) -> tuple[list[str], dict[str, str]]:
    """Split the requested devices into those that run and those skipped with a reason (``RuntimeError`` where
    a device in ``required`` is not available)."""
    known = available_devices()
    required = list(required)
    wanted = list(dict.fromkeys([*requested, *required]))
    for device in wanted:
        if device not in known:
            raise ValueError(f"unknown device {device!r}; the grader knows {', '.join(known)}")
    ran = [device for device in wanted if known[device] is None]
    skipped = {device: reason for device in wanted if (reason := known[device]) is not None}
    if "cpu" not in ran:
        ran.insert(0, "cpu")
    if missing := [d for d in required if d in skipped]:
        raise RuntimeError(", ".join(f"{d}: {skipped[d]}" for d in missing) + " (required with --require)")
    return ran, skipped


def grade_class(paths: list[str] | Intake, out: Path, options: GradeOptions | None = None) -> GradeRun:
    """Grade every submission under ``paths`` (or of an :class:`Intake`) into ``out/gradebook.sqlite``.

    Running again resumes the unfinished run (same seed) and grades only what is missing; the reports are the
    caller's.  Raises :class:`GradingStopped` when ``options.stop`` is set before the class is done.
    """
    options = options or GradeOptions()
    devices = choose_devices(options.devices or default_devices(), options.require)
    intake = paths if isinstance(paths, Intake) else collect(paths)  # IntakeError before anything is written
    if options.roster is None and intake.roster is not None:
        options = dataclasses.replace(options, roster=intake.roster)
    out.mkdir(parents=True, exist_ok=True)
    with Gradebook(class_file(out, GRADEBOOK)) as book:
        planned = plan(book, intake.submissions, options, devices)
        if options.on_start:
            options.on_start(len(planned.todo))
        executor = ""
        if planned.todo:
            isolation, graded = _grade(book, planned, options)
            describe = getattr(options.executor, "describe", None)
            executor = describe() if describe else type(options.executor).__name__
        else:
            isolation, graded = _isolation_of_earlier_runs(book, planned.run_id), {}
        if options.stop.is_set() and len(graded) < len(planned.todo):
            raise GradingStopped(len(planned.reused) + len(graded), len(planned.submissions))
        book.finish_run(planned.run_id)
        roll = class_roll(book, ClassSettings(planned.seed, planned.version, planned.conditions), planned.roster, out)
    return _summary(planned, {**planned.reused, **graded}, isolation, roll, executor)


def plan(
    book: Gradebook, submissions: list[Submission], options: GradeOptions, devices: tuple[list[str], dict[str, str]]
) -> Plan:
    """Decide what this run does; ``devices`` is :func:`choose_devices`'s ``(ran, skipped)``.

    The run grades under the out folder's conditions (:func:`class_settings`) and roster (:func:`class_roster`),
    resuming the latest unfinished run under them, else starting one.  A submission is reused, unless
    ``options.force``, its student is in ``options.only`` or it has an error of its own, when the run holds it
    unchanged or an identical input was graded under identical conditions.  Everything else is left to grade, and
    so is every student of the class with no grading under its conditions (after a forced change of them), from the
    hand-in the gradebook keeps.
    """
    ran, skipped = devices
    wanted = ClassSettings("" if options.seed is None else options.seed, suite_version(), sorted(ran + list(skipped)))
    settings, notes = class_settings(book, wanted, options.force)
    roster, roster_notes = class_roster(book, options.roster, options.force)
    run_id = _run_to_write(book, settings)
    planned = Plan(run_id, int(settings.seed), settings.suite_version, ran, skipped, list(submissions))
    planned.roster, planned.notes = roster, notes + roster_notes
    in_this_run = {} if options.force else book.results_for_run(run_id)
    for sub in submissions:
        regrade = options.force or sub.student in options.only or sub.error
        reused = None if regrade else _reusable(book, planned, sub, in_this_run.get(sub.student))
        if reused is None:
            planned.todo.append(sub)
        else:
            planned.reused[sub.student] = reused
    given = {sub.student for sub in submissions}
    graded_now = set(book.class_results(settings))
    for student, stored in book.stored_submissions().items():
        if student not in given and student not in graded_now:
            if not stored.files and not stored.error:
                stored = dataclasses.replace(
                    stored, error="its hand-in is not in the gradebook (graded by an older attnkit): grade it again"
                )
            planned.submissions.append(stored)
            planned.todo.append(stored)
            planned.regraded_from_gradebook.append(student)
    return planned


def _settings_text(settings: ClassSettings) -> str:
    return f"seed {settings.seed}, suite {settings.suite_version}, devices {', '.join(settings.devices)}"


def class_settings(book: Gradebook, wanted: ClassSettings, force: bool) -> tuple[ClassSettings, list[str]]:
    """``(the conditions to grade under, notes)``: the out folder's, its first run's, or (``force``) ``wanted``.

    ``wanted.seed`` is ``""`` where no seed was asked for: the folder's, or a fresh one for a new folder.  Any
    other difference raises :class:`OutFolderConflict` naming both, unless ``force``.
    """
    have = book.class_settings()
    if have is None:
        settings = dataclasses.replace(wanted, seed=secrets.randbelow(2**31 - 1) if wanted.seed == "" else wanted.seed)
        book.set_class_settings(settings)
        return settings, []
    if wanted.seed == "":
        wanted = dataclasses.replace(wanted, seed=have.seed)
    differences = []
    if str(wanted.seed) != str(have.seed):
        differences.append(f"--seed {wanted.seed}, where this out folder's seed is {have.seed}")
    if wanted.suite_version != have.suite_version:
        differences.append(
            f"the hidden suite is now version {wanted.suite_version}, where this out folder's class "
            f"was graded under version {have.suite_version}"
        )
    if sorted(wanted.devices) != sorted(have.devices):
        differences.append(
            f"the devices are {', '.join(sorted(wanted.devices))}, where this out folder's class was graded "
            f"on {', '.join(sorted(have.devices))}"
        )
    if not differences:
        book.set_class_settings(have)  # a gradebook from before the class was kept adopts its latest run's
        return have, []
    if not force:
        raise OutFolderConflict(
            f"{book.path.parent} is one class, graded under {_settings_text(have)}: "
            + "; ".join(differences)
            + ". Nothing was graded. Grade into another --out, or use --force to make the new conditions this "
            "class's and regrade the whole class under them (every student ever graded into it, from the "
            "hand-ins its gradebook keeps), so that no grade of the old conditions survives."
        )
    book.set_class_settings(wanted)
    return wanted, [f"the class's conditions changed (--force): {_settings_text(have)} -> {_settings_text(wanted)}"]


def _roster_rows(roster: RosterRows) -> list[dict[str, str]]:
    return [
        {key: "" if row.get(key) is None else str(row.get(key)) for key in ("id", "name", "email", "pattern")}
        for row in roster.to_rows()
    ]


def class_roster(book: Gradebook, given: RosterRows | None, force: bool) -> tuple[list[dict[str, str]], list[str]]:
    """``(the class's roster rows, notes)``: the stored one, or ``given`` where it may replace it (a first one, one
    that only adds students; one that drops or changes a student only with ``force``)."""
    stored = book.roster_rows()
    if given is None:
        return stored or [], []
    rows = _roster_rows(given)
    if stored is None or rows == stored:
        book.set_roster_rows(rows)
        return rows, []
    old = {row.get("id", ""): row for row in stored}
    new = {row["id"]: row for row in rows}
    dropped = sorted(set(old) - set(new))
    changed = sorted(i for i in set(old) & set(new) if old[i] != new[i])
    added = sorted(set(new) - set(old))
    if (dropped or changed) and not force:
        parts = [f"{verb} {', '.join(ids)}" for verb, ids in (("drops", dropped), ("changes", changed)) if ids]
        raise OutFolderConflict(
            f"{book.path.parent} holds another roster for this class: the one given {' and '.join(parts)}. "
            "Nothing was graded. Leave out --roster to use the stored one, or --force to replace it."
        )
    book.set_roster_rows(rows)
    if dropped or changed:
        return rows, [f"roster replaced (--force): {len(dropped)} dropped, {len(changed)} changed, {len(added)} added"]
    return rows, [f"roster: {len(added)} student(s) added ({', '.join(added)})"]


def _run_to_write(book: Gradebook, settings: ClassSettings) -> int:
    """The id of the unfinished run to resume under the class's conditions, or of a new one."""
    previous = book.latest_unfinished_run()
    if previous is not None and (previous["suite_version"], str(previous["seed"]), sorted(previous["devices"])) == (
        settings.suite_version, str(settings.seed), sorted(settings.devices)
    ):
        return int(previous["id"])
    return book.start_run(
        settings.seed, settings.suite_version, settings.devices, kit_version(), "unknown (nothing graded yet)"
    )


def _reusable(
    book: Gradebook, planned: Plan, sub: Submission, recorded: tuple[Submission, list[CaseResult]] | None
) -> Outcome | None:
    """The outcome ``sub`` already has: ``recorded`` in this run unchanged, or an identical earlier grading."""
    if recorded is not None and recorded[0].sha256 == sub.sha256 and not recorded[0].error:
        return Outcome(_heard_again(sub, recorded[0].review), recorded[1], book.figures(planned.run_id, sub.student))
    found = book.earlier_grading(sub.student, sub.sha256, planned.version, planned.seed, planned.conditions)
    if found is None:
        return None
    sub = _heard_again(sub, found.review)
    book.record(planned.run_id, sub, found.results, found.figures, found.output, found.printed)  # output.txt stays
    return Outcome(sub, found.results, found.figures)


def _heard_again(sub: Submission, review: list[str]) -> Submission:
    """``sub`` with what was heard while its earlier grading ran (:mod:`grader.instructor.witnessed`)."""
    heard = [f for f in review if f.startswith(WHERE + ":")]
    return dataclasses.replace(sub, review=list(dict.fromkeys(sub.review + heard))) if heard else sub


@dataclass
class WorkSpec:
    """What grading a submission needs, as plain data: any worker builds the same work item from it."""

    seed: int
    ran: tuple[str, ...]  # the devices that run
    skipped: dict[str, str]  # the devices skipped, with why
    version: str  # the hidden suite's version the driver grades under: a worker with another refuses
    limits: Limits
    reveal: bool

    @classmethod
    def of(cls, planned: Plan, options: GradeOptions) -> WorkSpec:
        return cls(
            planned.seed, tuple(planned.ran), dict(planned.skipped), planned.version, options.limits, options.reveal
        )

    def build_suite(self) -> Suite:
        """The prepared suite: the same wherever it is built."""
        suite = build_suite(self.seed, self.ran + tuple(self.skipped))
        suite.fingerprints, suite.skipped = Fingerprints(), dict(self.skipped)
        return suite


@contextmanager
def local_work(spec: WorkSpec, stop: threading.Event) -> Iterator[tuple[_Work, str]]:
    """``(work item, isolation)`` on this machine: a warm template (booting while the suite is built) and the suite;
    ``stop`` ends its learner processes.  ``RuntimeError`` or ``ChildGone`` where the template cannot start, or was
    stopped while it booted."""
    with Template(warm_meta="meta" in spec.ran) as template, _stopping(template, stop):
        suite = spec.build_suite()
        yield _Work(suite, template, spec.limits, spec.reveal, GpuPool.visible()), template.isolation()


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
            why = said("grading_stopped", error=_describe(exc))
            results = every_trial(sub.student, self.suite.trials, FAILED, not_graded(why))
            return Outcome(dataclasses.replace(sub, error=why), results)


@contextmanager
def _stopping(template: Template, stop: threading.Event) -> Iterator[None]:
    """While inside, a watcher thread ends the template's work in flight as soon as ``stop`` is set, wherever the
    main thread waits; an exception from inside (``KeyboardInterrupt``) ends it too, before anyone waits for it."""
    left = threading.Event()

    def watch() -> None:
        while not left.is_set():
            if stop.wait(STOP_POLL_SECONDS):
                template.stop()
                return

    watcher = threading.Thread(target=watch, name="attnkit-stop", daemon=True)
    watcher.start()
    try:
        yield
    except BaseException:
        template.stop()
        raise
    finally:
        left.set()
        if stop.is_set():
            template.stop()  # the watcher may not have seen it yet
        watcher.join()


def _grade(book: Gradebook, planned: Plan, options: GradeOptions) -> tuple[str, dict[str, Outcome]]:
    """Grade ``planned.todo``, recording each outcome as it arrives, until ``options.stop`` is set;
    ``(isolation, outcomes by student)``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # verdicts on small tensors; the parallelism is the executor's
    graded: dict[str, Outcome] = {}
    stop, isolation = options.stop, "none"
    prepare = getattr(options.executor, "prepare", local_work)  # an executor whose workers build their own
    try:
        with contextlib.ExitStack() as opened:
            try:
                work, isolation = opened.enter_context(prepare(WorkSpec.of(planned, options), stop))
            except (RuntimeError, ChildGone):
                if stop.is_set():  # stopped while the template (or the workers) booted
                    return isolation, graded
                raise
            book.set_isolation(planned.run_id, isolation)
            if options.strict_isolation and not set(FULL_ISOLATION.split("+")) <= set(isolation.split("+")):
                raise RuntimeError(
                    f"--isolation strict: this machine gives learner processes only '{isolation}' isolation, "
                    f"not '{FULL_ISOLATION}' (Linux PID, network, IPC and mount namespaces and Landlock); "
                    "nothing was graded"
                )
            results = options.executor.map_unordered(work, planned.todo, stop)
            for _, outcome in results:
                if stop.is_set():  # its learner process may have been killed by the stop: never recorded
                    break
                outcome = dataclasses.replace(outcome, results=limit_stored_messages(outcome.results))
                sub, stats = outcome.submission, outcome.stats
                book.record(planned.run_id, sub, outcome.results, outcome.figures, stats.output, stats.printed)
                graded[outcome.submission.student] = outcome
                if options.on_graded:
                    options.on_graded(outcome)
            results.close()
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


STUDENT_FILES = ("feedback.md", "feedback.html", "results.json")
"""A folder of the out folder holding one of these is a student's folder."""


def stale_folders(out: Path, students: Iterable[str]) -> list[str]:
    """Student folders in ``out`` of no student of the class: listed for the instructor, never removed."""
    keep = set(students)
    try:
        entries = sorted(out.iterdir())
    except OSError:
        return []
    return [
        e.name for e in entries if e.is_dir() and e.name not in keep and any((e / n).is_file() for n in STUDENT_FILES)
    ]


def class_roll(book: Gradebook, settings: ClassSettings, roster: list[dict[str, str]], out: Path) -> ClassRoll:
    """The whole class of the out folder as the gradebook holds it: the latest grading of each student,
    what each printed, the roster's students with no hand-in, and folders of no student of the class."""
    latest = book.class_results(settings)
    people = {r["id"]: Person(r["id"], r.get("name", ""), r.get("email", "")) for r in roster if r["id"]}
    return ClassRoll(
        graded=[(sub, results) for _, sub, results in latest.values()],
        missing=[person for student, person in people.items() if student not in latest],
        people=people,
        outputs={student: book.output(run_id, student) for student, (run_id, _, _) in latest.items()},
        printed={student: book.printed(run_id, student) for student, (run_id, _, _) in latest.items()},
        stale=stale_folders(out, list(latest) + list(people)),
    )


def _summary(planned: Plan, outcomes: dict[str, Outcome], isolation: str, roll: ClassRoll, executor: str) -> GradeRun:
    """The :class:`GradeRun`: outcomes in student order, and what the learner processes reported."""
    ordered = [outcomes[sub.student] for sub in sorted(planned.submissions, key=lambda s: s.student)]
    cuda_starts = [o.stats.cuda_init_seconds for o in ordered if o.stats.cuda_init_seconds is not None]
    peaks = [o.stats.peak_rss_kib for o in ordered if o.stats.peak_rss_kib]
    return GradeRun(
        planned.run_id, planned.seed, planned.version, planned.ran, planned.skipped, ordered, list(planned.reused),
        isolation, sum(cuda_starts) / len(cuda_starts) if cuda_starts else None, max(peaks) / 1024 if peaks else None,
        roll, list(planned.notes), list(planned.regraded_from_gradebook), executor,
    )  # fmt: skip
