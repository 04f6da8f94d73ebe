"""``attnkit check``: run the public cases in-process and summarise them per exercise.

The public tests live beside the exercises (``exercises/test_*.py``); each test names the hook it checks with
``@pytest.mark.exercise("<hook>")``.  This module runs them with pytest against one solution (the learner's
``exercises`` by default) and folds the results into one row per exercise: *not started* while the stub still raises
``NotImplementedError``, *failing* with the first failure in one line, or *passing*.  Each call a test makes is held to
the grader's rules beyond values (:mod:`grader.rules`): banned calls, the meta-device pass, in-place changes, the
result's dtype and contiguity, and the grader's time limit on a call (:mod:`grader.deadline`): an exercise whose test
runs out of time fails with the grader's words, its other tests are not run, and the other exercises are checked.

The public tests are the kit's where the command runs (:func:`use_kit_here`), whatever else is importable.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader import deadline
from grader.deadline import TimedOut, time_limit
from grader.registry import HOOK_NAMES, Solution, SolutionError, load_solution
from grader.rules import RuleBroken, RuledSolution

NUMPY_WARNING = "Failed to initialize NumPy"
"""What torch warns at import where numpy is not installed: the kit does not need numpy, so the learner's
entry points (``attnkit check``, the notebook's check cell, ``attnkit submit``: everything that imports this
module before torch) silence exactly that warning.  The kit's pytest settings filter it likewise."""

warnings.filterwarnings("ignore", message=NUMPY_WARNING, category=UserWarning)

IN_MEMORY_SOLUTION = pytest.StashKey[Any]()
"""Where :func:`run_public_cases` leaves a solution object (say, a notebook's) for the ``solution`` fixture."""

MEASURED_RUNS = 3
"""How many times the local rules run each call of a hook whose memory is measured: measured, for its gradient,
and on the meta device (:class:`grader.rules.RuledSolution`)."""
NOTE_WARNING = "AttnkitNote"
"""The class name of the warning a public test gives for the grader's note on a case that passes."""

NOT_STARTED = "not started"
FAILING = "failing"
PASSING = "passing"
NO_TESTS = "no tests"


@dataclass
class ExerciseResult:
    exercise: str
    passed: int = 0
    failed: int = 0
    not_implemented: int = 0
    first_error: str = ""
    first_not_implemented: str = ""
    nodeids: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """The grader's notes on cases that pass (``exercises._expect.AttnkitNote``): worth telling, for no points."""
    problem: str = ""
    """Why the solution's function cannot be called at all, though it is there: its signature, or its module's
    load error.  Such an exercise is *failing*, not *not started*."""
    timed_out: bool = False
    """A test ran out of time (:mod:`grader.deadline`); the exercise's later tests were not run."""

    @property
    def first_failure(self) -> str:
        return self.problem or self.first_error or self.first_not_implemented

    @property
    def status(self) -> str:
        if self.problem:
            return FAILING
        if self.passed == self.failed == self.not_implemented == 0:
            return NO_TESTS
        if self.not_implemented and not self.passed and self.failed == 0:
            return NOT_STARTED
        return FAILING if self.failed or self.not_implemented else PASSING


def one_line(message: str) -> str:
    """The first meaningful line of a failure, without the exception class noise."""
    line = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    for prefix in ("AssertionError: ", "E   ", "E "):
        line = line.removeprefix(prefix)
    return line


@dataclass(frozen=True)
class LearnerFiles:
    """Which source files are the learner's: those of the solution's origin, never the public tests nor the kit's."""

    roots: tuple[str, ...]
    """Folders (ending in a separator) or files; empty: any file that is not the kit's, the tests' or installed."""

    @classmethod
    def of(cls, solution: Any) -> LearnerFiles:
        origin = str(getattr(solution, "origin", "") or "")
        if origin in ("", "this notebook", "solutions/reference.py") or origin.startswith("entry point"):
            return cls(())
        path = Path(origin).resolve() if origin != "exercises/" else public_tests_dir()
        return cls((str(path) + os.sep,) if path.is_dir() else (str(path),))

    def holds(self, filename: str) -> bool:
        if filename.startswith("<") or Path(filename).name.startswith(("test_", "conftest", "_expect")):
            return False
        real = os.path.realpath(filename)
        if real.startswith(_NOT_LEARNERS):
            return False
        return not self.roots or any(real == r or real.startswith(r) for r in self.roots)

    def deepest(self, exc: BaseException) -> str | None:
        """``file:line`` of the deepest frame of ``exc``'s traceback in the learner's files, or None."""
        where = None
        tb = exc.__traceback__
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if self.holds(filename):
                where = f"{_relative(filename)}:{tb.tb_lineno}"
            tb = tb.tb_next
        return where


_NOT_LEARNERS = tuple(
    os.path.realpath(p) + os.sep
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).resolve().parent)}
)
"""The environment's files (the standard library, torch, pytest) and the kit's ``grader``: never the learner's."""


def _relative(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def failure_line(nodeid: str, exc: BaseException, learner: LearnerFiles) -> str | None:
    """One line for a failed public test that names the case (the test id) and, for an exception raised in
    the learner's code, the learner's ``file:line``; None where the test's own message already does
    (``case '…': …``) or the exercise is not started."""
    if isinstance(exc, NotImplementedError):
        return None
    case, text = nodeid.split("::")[-1], one_line(str(exc))
    if isinstance(exc, TimedOut):  # the grader's words, and where the learner's code was when time ran out
        where = learner.deepest(exc)
        return f"{case}: {text}" + (f" (at {where})" if where else "")
    if isinstance(exc, AssertionError):
        return None if text.startswith("case '") else f"{case}: {text}"
    if not isinstance(exc, Exception):  # pytest.fail and friends: their message is the reason
        return None
    where = learner.deepest(exc)
    return f"{case}: raised {type(exc).__name__}: {text}" + (f" (at {where})" if where else "")


class _Collector:
    """A pytest plugin that files each test's outcome under its exercise marker, and hands an ``in_memory`` solution
    object to the ``solution`` fixture."""

    def __init__(
        self,
        wanted: list[str],
        ruled: RuledSolution | None = None,
        seconds: float | None = None,
        checking: Callable[[str], None] | None = None,
        say: Callable[[str], None] | None = None,
        in_memory: Any = None,
    ) -> None:
        self.in_memory = in_memory
        self.results = {hook: ExerciseResult(hook) for hook in wanted}
        self.seconds = seconds
        self.checking = checking
        self.say = say
        self._stopped: dict[str, str] = {}  # exercise -> the words of its test that ran out of time
        self._timed_out: set[str] = set()  # the tests that did
        self._current = ""
        self._exercise_of: dict[str, str] = {}
        self._messages: dict[str, str] = {}
        self.ruled = ruled
        self.learner_files = LearnerFiles.of(ruled.solution if ruled is not None else None)
        self.interrupted = False
        self.collect_errors: list[str] = []

    def pytest_configure(self, config: pytest.Config) -> None:
        if self.in_memory is not None:
            config.stash[IN_MEMORY_SOLUTION] = self.in_memory

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A public test file that does not import: its path and the error's last line."""
        if report.failed:
            lines = [ln.strip() for ln in str(report.longrepr).splitlines() if ln.strip()]
            self.collect_errors.append(f"{report.nodeid or 'collection'}: {one_line(lines[-1]) if lines else 'error'}")

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Ctrl-C during the run.  pytest calls this hook for a collection error (``Session.Interrupted``) and a
        ``pytest.exit`` too, and its INTERRUPTED exit code means any of them: only a real KeyboardInterrupt counts."""
        self.interrupted = type(excinfo.value) is KeyboardInterrupt

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        kept = []
        for item in items:
            marker = item.get_closest_marker("exercise")
            if marker and marker.args and marker.args[0] in self.results:
                self._exercise_of[item.nodeid] = marker.args[0]
                kept.append(item)
        items[:] = kept

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        hook = self._exercise_of.get(nodeid, "")
        if hook and hook != self._current and self.checking is not None:
            self.checking(hook)
        self._current = hook or self._current

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """A test whose own checks passed still fails on the first grading rule one of its calls broke; a test
        runs within the grader's time limit, and once one of an exercise runs out of time, its others fail
        unrun (as the grader's later cases of a hook that timed out)."""
        hook = self._exercise_of.get(item.nodeid, "")
        if hook in self._stopped:
            raise TimedOut(self._stopped[hook])
        ruled = self.ruled
        if ruled is not None:
            ruled.pending.clear()
        try:
            with time_limit(self._seconds(hook)):
                result = yield
        except TimedOut as exc:
            self._stopped[hook] = str(exc)
            raise
        if ruled is not None and ruled.pending:
            raise RuleBroken(ruled.pending[0])
        return result

    def _seconds(self, hook: str) -> float | None:
        """A test's limit: the grader's on a call, but for a hook whose calls' memory is measured, which may take
        ``MEASURED_CALL_FACTOR`` times as long, and whose public tests' calls the rules make :data:`MEASURED_RUNS`
        times (the reference's long-sequence test took 60 s so on a loaded machine).  A plain hook's tests take
        milliseconds: its limit is the grader's."""
        from grader.hook_table import row
        from grader.rules import MEASURED_CALL_FACTOR

        if not self.seconds or not hook or not row(hook).bounded_memory:
            return self.seconds
        return self.seconds * MEASURED_CALL_FACTOR * MEASURED_RUNS

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        if report.failed and call.excinfo is not None:
            if isinstance(call.excinfo.value, TimedOut):
                self._timed_out.add(report.nodeid)
            message = failure_line(item.nodeid, call.excinfo.value, self.learner_files)
            if message:
                self._messages[report.nodeid] = message
        return report

    def pytest_warning_recorded(self, warning_message: Any, when: str, nodeid: str, location: Any) -> None:
        """A public test's note (``exercises._expect.AttnkitNote``): the grader's note, filed under the exercise."""
        hook = self._exercise_of.get(nodeid)
        if hook is not None and getattr(warning_message.category, "__name__", "") == NOTE_WARNING:
            note = str(warning_message.message)
            if note not in self.results[hook].notes:
                self.results[hook].notes.append(note)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        hook = self._exercise_of.get(report.nodeid)
        if hook is None:
            return
        result = self.results[hook]
        if report.when == "call" and report.passed:
            result.passed += 1
        elif report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr)
            if message.startswith(("NotImplementedError", "grader.registry.HookNotImplemented")):
                result.not_implemented += 1
                result.first_not_implemented = result.first_not_implemented or one_line(message)
            else:
                result.failed += 1
                said = self._messages.get(report.nodeid) or one_line(message)
                result.first_error = result.first_error or said
                if report.nodeid in self._timed_out and not result.timed_out:
                    result.timed_out = True
                    if self.say is not None:
                        self.say(f"{hook}: {said}")
        result.nodeids.append(report.nodeid)


def use_kit_here(cwd: Path | None = None) -> Path | None:
    """Make ``exercises`` the kit's where the command runs, ahead of any other importable one (an editable
    install of a checkout, whose finder the ``attnkit`` script would use): its root goes first on ``sys.path``
    and an ``exercises`` loaded from elsewhere is forgotten, so the loader, the public tests and the watch all
    read this kit.  Returns its folder (``cwd`` itself, or the ``exercises/`` in ``cwd`` or the nearest folder above
    it); None outside a kit (then the importable ``exercises`` is checked)."""
    here = (Path.cwd() if cwd is None else Path(cwd)).resolve()
    kits = (f / "exercises" for f in (here, *here.parents) if (f / "exercises" / "__init__.py").is_file())
    folder = here if here.name == "exercises" and (here / "__init__.py").is_file() else next(kits, None)
    if folder is None:
        return None
    root = str(folder.parent)
    sys.path[:] = [root, *(p for p in sys.path if p != root)]
    inside = str(folder) + os.sep
    for name in [k for k in sys.modules if k == "exercises" or k.startswith("exercises.")]:
        if not os.path.realpath(getattr(sys.modules[name], "__file__", None) or "").startswith(inside):
            del sys.modules[name]
    import importlib

    importlib.invalidate_caches()
    return folder


def public_tests_dir() -> Path:
    """The folder of the ``exercises`` package, found without importing (and so running) it."""
    import importlib.util

    spec = importlib.util.find_spec("exercises")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("cannot find the exercises package: run attnkit from your kit's folder")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def run_public_cases(
    solution: Any = "exercises",
    exercises: list[str] | None = None,
    tests_dir: Path | None = None,
    *,
    seconds: float | None = None,
    checking: Callable[[str], None] | None = None,
    say: Callable[[str], None] | None = None,
) -> list[ExerciseResult]:
    """Run the public cases for ``exercises`` (default: all) against ``solution``.

    ``solution`` is anything ``load_solution`` takes, or an already loaded :class:`~grader.registry.Solution` (a
    notebook's functions, say).  Each test has ``seconds`` (default: the grader's
    :data:`~grader.deadline.CALL_SECONDS`). Progress: ``checking(exercise)`` as each exercise's first test starts,
    ``say(line)`` as an exercise runs out of time.
    """
    wanted = list(exercises) if exercises else list(HOOK_NAMES)
    unknown = [e for e in wanted if e not in HOOK_NAMES]
    if unknown:
        raise ValueError(f"unknown exercise(s) {', '.join(unknown)}; the exercises are: {', '.join(HOOK_NAMES)}")
    if isinstance(solution, str):
        try:
            solution = load_solution(solution)
        except SolutionError:
            pass  # the solution fixture fails every test with the reason
    ruled = RuledSolution(solution) if isinstance(solution, Solution) else None
    seconds = deadline.CALL_SECONDS if seconds is None else seconds
    in_memory = None if isinstance(solution, str) else ruled or solution
    collector = _Collector(wanted, ruled, seconds, _outside(checking), _outside(say), in_memory)
    if not isinstance(solution, str):
        solution = getattr(solution, "name", "in-memory")
    folder = tests_dir or public_tests_dir()
    args = [str(folder), f"--solution={solution}", "-p", "no:cacheprovider", "-q", "--no-header", "-p", "no:randomly"]
    args += ["-p", "no:logging", "--tb=line"]  # nothing reads the captured log; capturing it costs a tenth of a round
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), _importable_exercises():
        code = pytest.main(args, plugins=[collector])
    if collector.interrupted:
        raise KeyboardInterrupt
    if code in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        why = f": {collector.collect_errors[0]}" if collector.collect_errors else f" (exit code {int(code)})"
        raise RuntimeError(f"pytest could not run the public cases in {folder}{why}")
    if ruled is not None:
        for hook in wanted:  # why a hook that is there cannot be called: its signature, or its module's load error
            problem = "" if ruled.solution.implements(hook) else ruled.solution.problem_for(hook) or ""
            if problem and ": no function " not in problem:
                collector.results[hook].problem = problem if "could not load" in problem else f"signature: {problem}"
    return [collector.results[hook] for hook in wanted]


def _outside(progress: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """``progress``, called with the caller's ``sys.stdout`` and ``sys.stderr`` (the run silences its own)."""
    if progress is None:
        return None
    out, err = sys.stdout, sys.stderr

    def call(text: str) -> None:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            progress(text)

    return call


@contextlib.contextmanager
def _importable_exercises() -> Iterator[None]:
    """The public tests import their helpers from ``exercises``: where the learner's package does not import
    whole (a module of it is broken), a bare stand-in package lets them, for the run only."""
    import importlib
    import types

    def forget() -> None:
        for key in [k for k in sys.modules if k == "exercises" or k.startswith("exercises.")]:
            del sys.modules[key]

    try:
        importlib.import_module("exercises")
    except Exception:  # noqa: BLE001 - the learner's modules may raise anything; registry reports it per hook
        forget()
        bare = sys.modules["exercises"] = types.ModuleType("exercises")
        bare.__path__ = [str(public_tests_dir())]
        bare.__package__ = "exercises"
        try:
            yield
        finally:
            forget()
        return
    yield
