"""Stopping ``attnkit grade`` the way people expect: Ctrl-C ends the run cleanly and says how to resume.

:func:`stop_on_signals` turns the first SIGINT or SIGTERM (to the grader alone, or to its whole process group
as a terminal's Ctrl-C sends) into a stop request: it sets the run's stop event, which
:func:`~grader.instructor.class_grading.grade_class` answers by handing out nothing more, killing the learner
processes in flight and raising :class:`~grader.instructor.class_grading.GradingStopped`.  A second signal
exits at once (``os._exit``): the gradebook's transactions and the sandbox template (which kills its children
when the grader's end of its socket closes) leave nothing half-written and no learner process behind.
"""

from __future__ import annotations

import os
import shlex
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

__all__ = ["EXIT_INTERRUPTED", "STOP_SIGNALS", "resume_command", "stop_on_signals"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_FIRST = (
    b"\nattnkit: stopping: no more submissions are handed out and the ones in flight are ended "
    b"(not recorded); interrupt again to quit at once\n"
)
_SECOND = b"\nattnkit: interrupted again: quitting at once\n"


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """While inside, the first SIGINT or SIGTERM sets ``stop``; a second one exits at once with status 130.

    Call from the main thread (Python runs signal handlers there).  The handler only sets the event and writes
    one line to stderr, so it is safe wherever the main thread is; nothing in the grading loop's main thread waits
    on the event itself.  The previous handlers are put back on leaving.
    """

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            os.write(2, _SECOND)
            os._exit(EXIT_INTERRUPTED)
        stop.set()
        os.write(2, _FIRST)

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def resume_command(program: Sequence[str], args: Sequence[str]) -> str:
    """``program`` and ``args`` as one shell line that runs the same command again (each word quoted)."""
    return shlex.join([*program, *args])
