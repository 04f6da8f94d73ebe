"""``attnkit check --watch``: check again on every save, in one warm process.

The first round pays for importing torch and pytest; the process then stays up and polls the modification times
of the files that make a round (the solution's own files and the public tests) every :data:`POLL_SECONDS`.
When one changes, the next round starts from the files on disk:

- every module loaded from those files leaves ``sys.modules`` (the learner's modules, the public tests, the
  ``exercises`` package), so the loader and pytest import them afresh; torch, pytest and the kit stay loaded;
- the changed files' bytecode caches are dropped: Python trusts a ``.pyc`` whose recorded source mtime (in whole
  seconds) and size match, and two saves within one second that keep the size (``dim=1`` to ``dim=0``) would
  otherwise run the old code.  pytest's rewritten test modules are keyed on a hash of the source, and each
  round is a fresh pytest session.

This module ships in a learner's kit.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

POLL_SECONDS = 0.3
"""How often the files are looked at."""

SETTLE_SECONDS = 0.1
"""After a change, how long the files must stay still before a round starts (an editor may save in steps)."""

Snapshot = dict[str, tuple[int, int]]
"""``{path: (mtime in ns, size)}`` of the watched files."""


def watched_roots(solution: str) -> tuple[Path, ...]:
    """The files and folders a round reads: the public tests' folder and, for a path, the solution itself."""
    from grader.check import public_tests_dir

    roots = [public_tests_dir()]
    if solution == "reference":
        spec = importlib.util.find_spec("solutions.reference")
        if spec is not None and spec.origin:
            roots.append(Path(spec.origin).resolve())
    elif solution != "exercises" and Path(solution).exists():
        roots.append(Path(solution).resolve())
    return tuple(dict.fromkeys(roots))


def _environment() -> tuple[str, ...]:
    """The standard library, the installed packages (torch, pytest) and the kit's ``grader``: never watched."""
    import sysconfig

    paths = sysconfig.get_paths()
    folders = {paths["stdlib"], paths["purelib"], paths["platlib"], str(Path(__file__).resolve().parent)}
    return tuple(os.path.realpath(f) + os.sep for f in folders)


def snapshot(roots: Iterable[Path]) -> Snapshot:
    """The mtime and size of every ``.py`` file under ``roots`` (hidden folders and caches left out)."""
    skip = _environment()
    seen: Snapshot = {}

    def note(path: str) -> None:
        with contextlib.suppress(OSError):  # a file removed between the listing and the stat
            st = os.stat(path)
            seen[path] = (st.st_mtime_ns, st.st_size)

    for root in roots:
        if root.is_file():
            note(str(root))
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
            dirs[:] = [d for d in dirs if not (os.path.join(folder, d) + os.sep).startswith(skip)]
            for name in files:
                if name.endswith(".py"):
                    note(os.path.join(folder, name))
    return seen


def changed_files(before: Snapshot, after: Snapshot) -> list[str]:
    """The files added, removed or saved between two snapshots, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def forget(roots: Iterable[Path], changed: Iterable[str] = ()) -> list[str]:
    """Drop the modules loaded from ``roots`` (and the ``exercises`` package) and the ``changed`` files' bytecode.

    Returns the names dropped.  A dropped submodule also leaves its parent's
    attributes, so ``from package import module`` imports it again.
    """
    skip = _environment()
    inside = [(str(r) + os.sep if r.is_dir() else str(r)) for r in roots]

    def loaded_from_roots(module: object) -> bool:
        filename = getattr(module, "__file__", None)
        if not filename:
            return False
        real = os.path.realpath(filename)
        return not real.startswith(skip) and any(real == r or real.startswith(r) for r in inside)

    names = [
        name
        for name, module in list(sys.modules.items())
        if name == "exercises" or name.startswith("exercises.") or loaded_from_roots(module)
    ]
    for name in names:
        del sys.modules[name]
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            with contextlib.suppress(AttributeError):
                delattr(sys.modules[parent], child)
    for path in changed:
        if path.endswith(".py"):
            with contextlib.suppress(OSError, ValueError, NotImplementedError):
                os.remove(importlib.util.cache_from_source(path))
    importlib.invalidate_caches()
    return names


def _shown(paths: list[str]) -> str:
    from grader.check import _relative

    names = [_relative(p) for p in paths]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def watch(
    run_round: Callable[[], None],
    roots: tuple[Path, ...],
    say: Callable[[str], None],
    poll: float = POLL_SECONDS,
) -> None:
    """Run ``run_round`` now and again after every change under ``roots``, until Ctrl-C (which returns).

    ``say`` prints one line: what is watched, then before each round what changed.
    A round that raises (a file saved half-way, say) is reported in one line; the watch goes on.
    """
    say(f"Watching {_shown([str(r) for r in roots])}: checking again on every save (Ctrl-C to stop).")
    try:
        before = snapshot(roots)
        _one_round(run_round, say)
        gc.freeze()  # torch, pytest and the kit are loaded for good: later collections skip them
        while True:
            time.sleep(poll)
            after = snapshot(roots)
            if after == before:
                continue
            while True:  # let a save in several steps finish
                time.sleep(SETTLE_SECONDS)
                settled = snapshot(roots)
                if settled == after:
                    break
                after = settled
            changed = changed_files(before, after)
            before = after
            forget(roots, changed)
            say(f"{time.strftime('%H:%M:%S')} {_shown(changed)} changed")
            _one_round(run_round, say)
    except KeyboardInterrupt:
        say("Stopped watching.")


def _one_round(run_round: Callable[[], None], say: Callable[[str], None]) -> None:
    try:
        run_round()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - the watch outlives a bad round; the next save gets another
        text = (str(exc) or type(exc).__name__).splitlines()[0]
        say(f"This round could not run: {type(exc).__name__}: {text}")
