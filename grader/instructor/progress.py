"""How far the grading of a class is: rich's live bar on a terminal, a line every few submissions in a log.

:func:`grading_progress` picks by the console: a terminal gets the bar (gone once grading ends); anything else
(a CI log, ``| tee``, a file) gets a line per :func:`log_step` submissions and one at the end, so a log shows
that a long run is moving and how fast.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

__all__ = ["GradingProgress", "grading_progress", "log_step"]


class GradingProgress(Protocol):
    """What the grading loop tells the display: how many are left to grade, then each one graded."""

    def start(self, total: int) -> None: ...

    def graded(self, student: str) -> None: ...


def log_step(total: int) -> int:
    """Submissions between two log lines: about ten lines a run, at least one a submission, at most ten."""
    return min(10, max(1, math.ceil(total / 10)))


class _Bar:
    """rich's live bar, with the last student graded beside it."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task = progress.add_task("", total=None)

    def start(self, total: int) -> None:
        self._progress.update(self._task, total=total)

    def graded(self, student: str) -> None:
        self._progress.update(self._task, advance=1, description=student)


class _Lines:
    """A line every :func:`log_step` submissions and at the last: ``graded 20 of 90 (0:00:41) ...``."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self.start(0)

    def start(self, total: int) -> None:
        self._total, self._done, self._step = total, 0, log_step(total)
        self._started = time.monotonic()
        if total:
            self._console.print(f"grading {total} submission(s)", highlight=False)

    def graded(self, student: str) -> None:
        self._done += 1
        if self._done % self._step and self._done != self._total:
            return
        elapsed = timedelta(seconds=round(time.monotonic() - self._started))
        line = f"graded {self._done} of {self._total} ({elapsed}), last: {student}"
        self._console.print(line, highlight=False, no_wrap=True, overflow="ellipsis")  # a student's id: never wrapped


@contextmanager
def grading_progress(console: Console) -> Iterator[GradingProgress]:
    """The display for ``console``: the live bar on a terminal, else log lines.

    ``student`` names given to :meth:`GradingProgress.graded` are rich markup: pass a name a submission chose
    through ``console_summary.console_text``.
    """
    if not console.is_terminal:
        yield _Lines(console)
        return
    with Progress(
        TextColumn("[bold]grading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis")),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        yield _Bar(progress)
