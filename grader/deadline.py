"""A time limit on learner code run in this process (``attnkit check``): it ends a loop with the grader's words.

The grader runs each call in a child process and kills it at its limit (``Limits.call_seconds``); the local check
runs the learner's code in its own main thread, so :func:`time_limit` raises :class:`TimedOut` there from a
``SIGALRM`` timer instead.  Whatever the code does, the limit is gone when the block is left: the timer and the
handler found on entry (pytest-timeout's, say) are put back, the timer with the time it had left.

This module ships in a learner's kit.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from grader.rule_words import english

CALL_SECONDS = 10.0
"""How long one public test may run locally: the grader's limit on one call (``Limits.call_seconds``)."""

AGAIN_SECONDS = 1.0
"""After the limit, the timer rings again this often until the block is left: code that catches
:class:`TimedOut` (a bare ``except:`` in a loop) is stopped all the same."""


class TimedOut(BaseException):
    """The time limit ran out.  Not an ``Exception``: a learner's ``except Exception`` does not swallow it."""


def can_limit() -> bool:
    """Whether :func:`time_limit` can stop code here: a POSIX timer, and the main thread (where signals land)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def timed_out_words(seconds: float) -> str:
    """The grader's words for a call that ran out of time."""
    return english("timed_out", seconds=f"{seconds:g}")


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`TimedOut` (with the grader's words) in the block once ``seconds`` have passed.

    No limit where ``seconds`` is falsy or :func:`can_limit` says no (Windows, another thread).
    """
    if not seconds or not can_limit():
        yield
        return
    words = timed_out_words(seconds)

    def ring(signum: int, frame: Any) -> None:
        raise TimedOut(words)

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, ring)
    outer = signal.setitimer(signal.ITIMER_REAL, seconds, AGAIN_SECONDS)
    try:
        yield
    finally:
        _put_back(previous, outer, time.monotonic() - started)


def _put_back(handler: Any, timer: tuple[float, float], spent: float) -> None:
    """Stop this limit's timer and put back the handler and timer found on entry (the timer less ``spent``)."""
    while True:
        try:  # the timer may ring once more before it is stopped: stop it again
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, handler)
            break
        except TimedOut:
            continue
    left, interval = timer
    if left > 0:
        signal.setitimer(signal.ITIMER_REAL, max(left - spent, 1e-3), interval)
