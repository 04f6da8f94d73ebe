"""Grade a class on a Ray cluster (``attnkit grade --executor ray``): actors that keep a warm sandbox each.

:class:`RayExecutor` takes :class:`~grader.instructor.class_grading.LocalExecutor`'s place in
:func:`~grader.instructor.class_grading.grade_class`.  Its ``prepare(spec, stop)`` joins a Ray cluster
(``address``: ``auto`` or ``HOST:PORT``) or starts a local one with this machine's CPUs and GPUs, and starts
:class:`GradingWorker` actors, each building on its own node, from the driver's
:class:`~grader.instructor.class_grading.WorkSpec`, a warm sandbox template (a fresh ``python -I`` process,
never a fork of the many-threaded actor) and the prepared suite (same seed, same hidden inputs).  An actor
whose hidden suite version is not the driver's refuses, and the run stops before anything is graded, saying
which node and why.

CPU actors take ``num_cpus=1``.  When cuda is graded, every submission goes to actors with ``num_gpus=1``
instead (one per GPU of the cluster, so Ray's scheduler places GPU work), each grading the whole submission:
its CPU and meta cases, then its CUDA cases in a second child that holds the actor's one GPU, so one learner
process per GPU holds as locally.

What crosses the driver–worker boundary is plain data both ways: a submission as text (files, entry, student
id), and its outcome as JSON-able values and safetensors bytes (the heatmaps' matrices), built by the trusted
grading code on the worker.  Learner code runs only in the sandboxed child on the worker, never in the actor.
The driver stays the only writer: it records each outcome as it arrives (a stopped run resumes as a local one
does) and writes every report.

Faults: an actor (or its node) that dies mid-submission is replaced, and the submission is graded again on
another actor, at most :data:`ATTEMPTS` times; then it gets an error row that says so.  Nothing of a died
attempt is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import signal
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from grader.instructor.class_grading import STOP_POLL_SECONDS, LocalExecutor, WorkSpec, local_work
from grader.instructor.heatmaps import Figure
from grader.instructor.intake_model import Submission
from grader.instructor.submission_grading import Outcome, Stats, every_trial, not_graded
from grader.instructor.suite_version import suite_version
from grader.instructor.verdict import FAILED, CaseResult

__all__ = ["ATTEMPTS", "INSTALL_HINT", "GradingWorker", "RayExecutor", "import_ray", "outcome_from_wire"]

ATTEMPTS = 3
"""Times one submission is sent to a worker before its worker's deaths make it an error row."""
INSTALL_HINT = "--executor ray needs Ray, which is not installed here: pip install 'attnkit[ray]'"

T = TypeVar("T")
R = TypeVar("R")


def import_ray() -> Any:
    """The ``ray`` module, or ``RuntimeError`` with :data:`INSTALL_HINT` where it is not installed."""
    try:
        import ray
    except ImportError:
        raise RuntimeError(INSTALL_HINT) from None
    return ray


# --- the wire: plain data both ways -------------------------------------------------------------------------


def submission_to_wire(sub: Submission) -> dict[str, Any]:
    """What a worker needs of a submission: its text, entry and id (the driver keeps the rest)."""
    return {"student": sub.student, "files": dict(sub.files), "entry": sub.entry, "error": sub.error}


def submission_from_wire(wire: dict[str, Any]) -> Submission:
    return Submission(
        str(wire["student"]), "", "", dict(wire["files"]), str(wire["entry"]), error=wire.get("error") or None
    )


def outcome_to_wire(outcome: Outcome) -> dict[str, Any]:
    """An outcome as JSON-able values and one safetensors blob (the figures' matrices)."""
    from safetensors.torch import save

    tensors = {}
    for hook, figure in outcome.figures.items():
        tensors[f"{hook}/expected"] = figure.expected.contiguous()
        tensors[f"{hook}/received"] = figure.received.contiguous()
    return {
        "error": outcome.submission.error,
        "results": [result.as_dict() for result in outcome.results],
        "figures": {hook: figure.label for hook, figure in outcome.figures.items()},
        "tensors": save(tensors) if tensors else b"",
        "stats": dataclasses.asdict(outcome.stats),
    }


def outcome_from_wire(sub: Submission, wire: dict[str, Any]) -> Outcome:
    """The :class:`Outcome` of the driver's ``sub`` from what a worker sent back."""
    from safetensors.torch import load

    tensors = load(wire["tensors"]) if wire["tensors"] else {}
    figures = {
        hook: Figure(str(label), tensors[f"{hook}/expected"], tensors[f"{hook}/received"])
        for hook, label in wire["figures"].items()
    }
    error = wire.get("error") or None
    submission = dataclasses.replace(sub, error=error) if error != sub.error else sub
    results = [CaseResult.from_dict(row) for row in wire["results"]]
    return Outcome(submission, results, figures, Stats(**wire["stats"]))


# --- the worker ---------------------------------------------------------------------------------------------


class GradingWorker:
    """One worker (a Ray actor once :class:`RayExecutor` wraps it): a warm template and the suite, built here.

    Refuses (:meth:`hello` says why; :meth:`grade` raises) where this node's
    hidden suite version is not the driver's: its grades would not be the class's.
    """

    def __init__(self, spec: WorkSpec) -> None:
        import platform

        import torch

        torch.set_num_threads(1)  # verdicts on small tensors, as on the driver; one submission at a time
        self.node = platform.node()
        self.version = suite_version()
        self.refusal = ""
        self.isolation = "none"
        if self.version != spec.version:
            self.refusal = (
                f"the Ray worker on {self.node} has hidden suite version {self.version}, where the driver grades "
                f"under {spec.version}: install the same attnkit (and torch) on every node"
            )
            return
        self._opened = local_work(spec, threading.Event())
        self._work, self.isolation = self._opened.__enter__()

    def hello(self) -> dict[str, str]:
        """Who this worker is: its node, suite version and learner processes' isolation, or why it refuses."""
        return {"node": self.node, "version": self.version, "isolation": self.isolation, "refusal": self.refusal}

    def grade(self, wire: dict[str, Any]) -> dict[str, Any]:
        """Grade one submission sent as text; its outcome as plain data (the work item never raises for one)."""
        if self.refusal:
            raise RuntimeError(self.refusal)
        return outcome_to_wire(self._work(submission_from_wire(wire)))


# --- the driver's side --------------------------------------------------------------------------------------


@dataclass
class _Pool:
    """The live actors, each free or grading one submission; a died one is replaced within ``replacements``."""

    ray: Any
    spec: WorkSpec
    resources: dict[str, float]
    stop: threading.Event
    trials: list[Any]  # the suite's trials, for the error row of a submission its workers kept dying on
    actors: list[Any] = field(default_factory=list)
    free: queue.Queue[Any] = field(default_factory=queue.Queue)
    busy: dict[str, Any] = field(default_factory=dict)  # student -> the actor grading it
    replacements: int = 0  # replacements left
    retried: int = 0  # submissions sent again after their actor died
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, n: int) -> list[dict[str, str]]:
        """Start ``n`` actors and wait for each to say hello (polling ``stop``)."""
        self.actors = [self._new_actor() for _ in range(n)]
        self.replacements = n
        try:
            hellos = self._get([actor.hello.remote() for actor in self.actors])
        except self.ray.exceptions.RayError as exc:  # its template could not start, say
            raise RuntimeError(f"a Ray worker did not start: {_first_line(exc)}") from None
        for actor in self.actors:
            self.free.put(actor)
        return hellos

    def _new_actor(self) -> Any:
        return self.ray.remote(**self.resources)(GradingWorker).remote(self.spec)

    def _get(self, refs: list[Any]) -> Any:
        """``ray.get(refs)``, waking every :data:`STOP_POLL_SECONDS` to see ``stop`` (then RuntimeError)."""
        left = list(refs)
        while left:
            if self.stop.is_set():
                raise RuntimeError("stopped while the Ray workers started")
            _, left = self.ray.wait(left, num_returns=len(left), timeout=STOP_POLL_SECONDS)
        return self.ray.get(refs)

    def __call__(self, sub: Submission) -> Outcome:
        """Grade ``sub`` on a free actor; again on another where the actor dies; never raises for one."""
        ray = self.ray
        deaths = []
        for _ in range(ATTEMPTS):
            actor = self._take()
            if actor is None:  # stopped: the driver records nothing more
                return self._failed(sub, "grading stopped")
            with self.lock:
                self.busy[sub.student] = actor
            ref = actor.grade.remote(submission_to_wire(sub))
            try:
                while not ray.wait([ref], timeout=STOP_POLL_SECONDS)[0]:
                    if self.stop.is_set():
                        return self._failed(sub, "grading stopped")
                wire = ray.get(ref)
            except ray.exceptions.RayActorError as exc:  # the actor or its node died: another actor, once more
                deaths.append(_first_line(exc))
                self._replace(actor)
                continue
            except Exception as exc:  # the worker's own error: this submission's error row, the class goes on
                self.free.put(actor)
                return self._failed(sub, f"grading stopped: on a Ray worker: {_first_line(exc)}")
            finally:
                with self.lock:
                    self.busy.pop(sub.student, None)
            self.free.put(actor)
            return outcome_from_wire(sub, wire)
        return self._failed(sub, f"its Ray worker died {len(deaths)} times while grading it (last: {deaths[-1]})")

    def _take(self) -> Any:
        while not self.stop.is_set():
            with contextlib.suppress(queue.Empty):
                return self.free.get(timeout=STOP_POLL_SECONDS)
        return None

    def _replace(self, dead: Any) -> None:
        """Drop a died actor; start another in its place while replacements are left."""
        with contextlib.suppress(Exception):
            self.ray.kill(dead)  # an actor only unreachable for a while never comes back to grade
        with self.lock:
            self.retried += 1
            if dead in self.actors:
                self.actors.remove(dead)
            if self.replacements <= 0:
                if not self.actors:
                    self.free.put(dead)  # nothing left: the next attempts fail fast on it, then the error row
                return
            self.replacements -= 1
            actor = self._new_actor()
            self.actors.append(actor)
        self.free.put(actor)

    def _failed(self, sub: Submission, why: str) -> Outcome:
        results = every_trial(sub.student, self.trials, FAILED, not_graded(why))
        return Outcome(dataclasses.replace(sub, error=why), results)

    def close(self) -> None:
        for actor in list(self.actors):
            with contextlib.suppress(Exception):
                self.ray.kill(actor)  # its template dies with it, and the template's children with that
        self.actors = []


@contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Put back the SIGINT and SIGTERM handlers ``ray.init`` replaces (its SIGTERM one exits at once), so a
    signal stops the run cleanly (:mod:`grader.instructor.stopping`) as it does with the local pool."""
    main = threading.current_thread() is threading.main_thread()  # signal.signal works there only
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            if handler is not None:
                signal.signal(sig, handler)


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _common_isolation(hellos: list[dict[str, str]]) -> str:
    """The containment layers every worker's learner processes get (in the first worker's order)."""
    layers = [h["isolation"].split("+") for h in hellos if h["isolation"] != "none"]
    if len(layers) < len(hellos) or not layers:
        return "none"
    common = [layer for layer in layers[0] if all(layer in other for other in layers[1:])]
    return "+".join(common) or "none"


@dataclass
class RayExecutor:
    """Grades on Ray actors: ``address`` ``None`` starts a local Ray, ``auto`` or ``HOST:PORT`` joins a cluster.

    ``workers``: the actors to start (default: the cluster's CPUs, or its GPUs
    when cuda is graded).  An already initialised Ray (``ray.init`` by the
    caller) is used as it is and left running.
    """

    address: str | None = None
    workers: int | None = None
    pool: _Pool | None = field(default=None, init=False, repr=False)
    ran: str = field(default="", init=False)  # what ran, for the summary

    def __post_init__(self) -> None:
        import_ray()  # the one-line error before anything is read or graded

    def describe(self) -> str:
        return self.ran or "ray"

    @contextmanager
    def prepare(self, spec: WorkSpec, stop: threading.Event) -> Iterator[tuple[Callable[[Submission], Outcome], str]]:
        """Start the actors; ``(the work item that sends a submission to one, the isolation they give)``."""
        ray = import_ray()
        started_here = not ray.is_initialized()
        if started_here:
            address = self.address or "local"  # "local": a new Ray of this machine, even beside a `ray start`
            with _signal_handlers_kept():
                ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        pool = None
        try:
            on_gpu = "cuda" in spec.ran
            total = ray.cluster_resources()
            if on_gpu and total.get("GPU", 0) < 1:
                raise RuntimeError("cuda is graded, but the Ray cluster has no GPU for the GPU workers")
            kind = "GPU" if on_gpu else "CPU"
            n = self.workers or max(1, int(total.get(kind, 1)))
            if n > total.get(kind, 0):  # its actors would wait for ever for a place
                raise RuntimeError(f"{n} Ray workers asked for, but the cluster has {total.get(kind, 0):g} {kind}s")
            resources: dict[str, float] = {"num_cpus": 1, "num_gpus": 1} if on_gpu else {"num_cpus": 1}
            pool = self.pool = _Pool(ray, spec, resources, stop, spec.build_suite().trials)
            hellos = pool.start(n)
            refusals = sorted({h["refusal"] for h in hellos if h["refusal"]})
            if refusals:
                raise RuntimeError("; ".join(refusals) + ". Nothing was graded.")
            nodes = len({h["node"] for h in hellos})
            self.ran = f"ray, {n} {kind} worker{'s' if n > 1 else ''} on {nodes} node{'s' if nodes > 1 else ''}"
            yield pool, _common_isolation(hellos)
        finally:
            if pool is not None:
                pool.close()
            if started_here:
                ray.shutdown()

    def map_unordered(
        self, fn: Callable[[T], R], items: Iterable[T], stop: threading.Event
    ) -> Generator[tuple[T, R], None, None]:
        """A driver thread per actor, each waiting on one submission at a time (``fn`` is :meth:`prepare`'s)."""
        jobs = len(self.pool.actors) if self.pool is not None else 1
        yield from LocalExecutor(jobs).map_unordered(fn, items, stop)
