"""Threads and processes the learner's code starts: heard by an audit hook installed before it loads
(hooks cannot be removed), and measured at the start and end of every call.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

_THREAD_EVENTS = ("_thread.start_new_thread", "_thread.start_joinable_thread")
SPAWN_EVENTS = frozenset({*_THREAD_EVENTS, "_posixsubprocess.fork_exec", "os.fork", "os.forkpty", "os.posix_spawn",
                          "os.spawn", "os.exec", "os.system", "subprocess.Popen", "pty.spawn"})  # fmt: skip
"""The audit events of starting a thread, a process or a program (``grader.rules.SPAWN_KINDS`` words them)."""

_SPAWNS: list[str] | None = None
"""What the learner's code started since :func:`_watch_spawns` (None: not watched, as in the trusted process)."""


def _watch_spawns() -> None:
    """From now on, in this process, note every thread and process started (child side, before learner code loads):
    an audit hook hears ``SPAWN_EVENTS``; the entry points that raise none (a thread before Python 3.12,
    ``_posixsubprocess.fork_exec``) are replaced by ones that raise the event first."""
    global _SPAWNS
    seen: list[str] = []

    def hear(event: str, args: tuple[Any, ...]) -> None:
        if event in SPAWN_EVENTS and (event not in seen or event in _THREAD_EVENTS) and len(seen) < 1 << 16:
            seen.append(event)

    sys.addaudithook(hear)
    import _thread
    import threading

    def announcing(event: str, start: Callable[..., Any]) -> Callable[..., Any]:
        def started(*args: Any, **kwargs: Any) -> Any:
            sys.audit(event)
            return start(*args, **kwargs)

        return started

    if sys.version_info < (3, 12):
        original = _thread.start_new_thread
        wrapped = announcing("_thread.start_new_thread", original)
        for module in (_thread, threading):
            for name, value in list(vars(module).items()):
                if value is original:
                    setattr(module, name, wrapped)
    with contextlib.suppress(ImportError):
        import _posixsubprocess

        _posixsubprocess.fork_exec = announcing(  # type: ignore[attr-defined]
            "_posixsubprocess.fork_exec", _posixsubprocess.fork_exec
        )
    _SPAWNS = seen
    _spawn_facts()  # the baseline of reaped children


def spawns_heard() -> int:
    """How many starts the audit hook has heard so far (0 before the watch began)."""
    return len(_SPAWNS or ())


_REAPED: list[tuple[float, ...]] = []


def _spawn_facts(since: int = 0) -> list[str]:
    """What the learner's process started, for a reply: every process heard since the watch began, the threads heard
    from event ``since`` on, and what is measured where its code cannot hide it: another Python thread
    (``sys._current_frames``), a child not yet reaped (``waitid``), one reaped (``RUSAGE_CHILDREN`` moved)."""
    if _SPAWNS is None:
        return []
    import resource

    facts = [e for i, e in enumerate(_SPAWNS) if e not in _THREAD_EVENTS or i >= since]
    if len(sys._current_frames()) > 1:
        facts.append("thread-running")
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        facts.append("process-running")
    except ChildProcessError:
        pass
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (usage.ru_utime, usage.ru_stime, usage.ru_minflt, usage.ru_majflt, usage.ru_nvcsw, usage.ru_nivcsw)
    if not _REAPED:
        _REAPED.append(reaped)
    elif reaped != _REAPED[0]:
        facts.append("process-ended")
    return list(dict.fromkeys(facts))[:16]
