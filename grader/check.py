"""``attnkit check``: run the public cases in-process and summarise them per exercise.

The public tests live beside the exercises (``exercises/test_*.py``); each test
names the hook it checks with ``@pytest.mark.exercise("<hook>")``.  This module
runs them with pytest against one solution (the learner's ``exercises`` by
default) and folds the results into one row per exercise: *not started* while
the stub still raises ``NotImplementedError``, *failing* with the first
failure in one line, or *passing*.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader.registry import HOOK_NAMES

IN_MEMORY_SOLUTION = pytest.StashKey[Any]()
"""Where :func:`run_public_cases` leaves a solution object (say, a notebook's) for the ``solution`` fixture."""

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

    @property
    def first_failure(self) -> str:
        return self.first_error or self.first_not_implemented

    @property
    def status(self) -> str:
        if self.passed == self.failed == self.not_implemented == 0:
            return NO_TESTS
        if self.not_implemented and not self.passed and self.failed == 0:
            return NOT_STARTED
        if self.failed or self.not_implemented:
            return FAILING
        return PASSING


def one_line(message: str) -> str:
    """The first meaningful line of a failure, without the exception class noise."""
    line = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    for prefix in ("AssertionError: ", "E   ", "E "):
        if line.startswith(prefix):
            line = line[len(prefix) :]
    return line


class _Collector:
    """A pytest plugin that files each test's outcome under its exercise marker."""

    def __init__(self, wanted: list[str]) -> None:
        self.results = {hook: ExerciseResult(hook) for hook in wanted}
        self._exercise_of: dict[str, str] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        kept = []
        for item in items:
            marker = item.get_closest_marker("exercise")
            if marker and marker.args and marker.args[0] in self.results:
                self._exercise_of[item.nodeid] = marker.args[0]
                kept.append(item)
        items[:] = kept

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
                result.first_error = result.first_error or one_line(message)
        result.nodeids.append(report.nodeid)


def public_tests_dir() -> Path:
    """The folder of the ``exercises`` package, found without importing (and so running) it."""
    import importlib.util

    spec = importlib.util.find_spec("exercises")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("cannot find the exercises package: run attnkit from your kit's folder")
    return Path(list(spec.submodule_search_locations)[0]).resolve()


class _InMemory:
    """A pytest plugin handing a solution object to the ``solution`` fixture."""

    def __init__(self, solution: Any) -> None:
        self.solution = solution

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[IN_MEMORY_SOLUTION] = self.solution


def run_public_cases(
    solution: Any = "exercises", exercises: list[str] | None = None, tests_dir: Path | None = None
) -> list[ExerciseResult]:
    """Run the public cases for ``exercises`` (default: all) against ``solution``.

    ``solution`` is anything ``load_solution`` takes, or an already loaded
    :class:`~grader.registry.Solution` (a notebook's functions, say).
    """
    wanted = list(exercises) if exercises else list(HOOK_NAMES)
    unknown = [e for e in wanted if e not in HOOK_NAMES]
    if unknown:
        raise ValueError(f"unknown exercise(s) {', '.join(unknown)}; the exercises are: {', '.join(HOOK_NAMES)}")
    collector = _Collector(wanted)
    plugins: list[Any] = [collector]
    if not isinstance(solution, str):
        plugins.append(_InMemory(solution))
        solution = getattr(solution, "name", "in-memory")
    folder = tests_dir or public_tests_dir()
    args = [
        str(folder),
        f"--solution={solution}",
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        "-p",
        "no:randomly",
        "--tb=line",
    ]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = pytest.main(args, plugins=plugins)
    if code in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        raise RuntimeError(f"pytest could not run the public cases in {folder} (exit code {int(code)})")
    return [collector.results[hook] for hook in wanted]
