"""Reclaim a folder a learner's process could write, without the grader touching a name inside it.

The grader makes ``<tmp>/attnkit-child-XXXX`` (its own folder, ``0711``) and in it ``work``, the learner's, and hands a
descriptor of each to a *guardian*: this file, run as ``python -I -S -c <source> <fds and ids>`` (standard library only,
no site) when the folder is made.  The guardian reads the learner process's pid from a pipe, then waits for end-of-file
on it (the grader closed it: every learner process is dead; or the grader died), waits for that process to be gone
(killing its group if it is not), forks a *walker* with the learner's credentials and no more (a root grader's: the
sandbox uid, no groups; an unprivileged grader's children keep its uid, so the walker does too), which empties ``work``,
and then removes ``work`` and the outer folder.

The walk never resolves a path: every step is ``openat``/``unlinkat``/``renameat`` relative to a descriptor of a
directory it opened itself, with ``O_NOFOLLOW``. A symbolic link is removed, never followed; a FIFO or a device is
unlinked, never opened; a hard link loses one name; a folder it may not read (``chmod 000``) is opened ``O_PATH`` and
made ``0700`` through that descriptor (``/proc/self/fd``), never by name; a folder deeper than :data:`MAX_DEPTH` is
moved to the top, so the walk holds a bounded number of descriptors; the walk stops at a deadline.  A learner's process
that is still alive (none should be) can race it, but can only make it remove what that uid may remove anyway.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import sys
import time

MAX_DEPTH = 32
WORK = "work"  # the learner's folder's name inside the grader's
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_MOVED = itertools.count(1)  # names for the folders moved to the top, unique in this walk


def _open_folder(name: str, parent: int) -> int | None:
    """``parent``'s entry ``name`` opened as a folder, made ``0700`` first if it was closed; None if it is not one."""
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        try:
            handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        except OSError:
            return None
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)  # that very folder, whatever its name now
            fd = os.open(f"/proc/self/fd/{handle}", _DIR & ~os.O_NOFOLLOW)
        except OSError:
            return None
        finally:
            os.close(handle)
    except OSError:  # gone, a link, not a folder: the next pass unlinks what is there
        return None
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o700)  # its entries may be removed, its folders entered
    return fd


def empty(folder: int, deadline: float, top: int | None = None, depth: int = 0) -> bool:
    """Remove everything in the folder open as ``folder``; True if it is empty at the end."""
    top = folder if top is None else top
    with contextlib.suppress(OSError):
        os.fchmod(folder, 0o700)
    while True:
        try:
            names = os.listdir(folder)
        except OSError:
            return False
        if not names:
            return True
        progress = False
        for name in names:
            if time.monotonic() > deadline:
                return False
            try:
                os.unlink(name, dir_fd=folder)  # a file, a link, a FIFO, a socket, a device: never opened
                progress = True
                continue
            except FileNotFoundError:
                progress = True
                continue
            except IsADirectoryError:
                pass
            except OSError:
                continue
            inner = _open_folder(name, folder)  # made 0700: it may be emptied, or moved (its ".." rewritten)
            if inner is None:
                continue
            if depth >= MAX_DEPTH:  # flatten: the top folder takes it, and a later pass of the top empties it
                os.close(inner)
                with contextlib.suppress(OSError):
                    os.rename(name, f".attnkit-deep-{os.getpid()}-{next(_MOVED)}", src_dir_fd=folder, dst_dir_fd=top)
                    progress = True
                continue
            try:
                empty(inner, deadline, top, depth + 1)
            finally:
                os.close(inner)
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=folder)
                progress = True
        if not progress:
            return False


def become(uid: int) -> None:
    """Root only: the learner's uid and gid, and no supplementary group (``uid`` < 0: stay who we are)."""
    if uid >= 0 and os.geteuid() == 0:
        import ctypes

        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: the change of uid made /proc/self root's


def _wait_for_word(go: int) -> int | None:
    """Read the pipe to its end; open the pid on its first line at once (a pidfd: no mix-up with a later process)."""
    data, pid, pidfd = b"", 0, None
    while True:
        try:
            chunk = os.read(go, 64)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        if not pid and b"\n" in data:
            with contextlib.suppress(ValueError):
                pid = int(data.split(b"\n", 1)[0])
            with contextlib.suppress(OSError, AttributeError):
                pidfd = os.pidfd_open(pid) if pid > 0 else None
    if pidfd is not None and not select.select([pidfd], [], [], 0)[0]:  # still there: the grader died first
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # its group: the pid cannot be another's while its pidfd is unread
    return pidfd


def guard(go: int, folder: int, outer: int, outer_path: str, uid: int, seconds: float) -> int:
    """Wait for the word, then empty ``folder`` as ``uid``; remove it (:data:`WORK` in ``outer``) and ``outer_path``."""
    pidfd = _wait_for_word(go)
    if pidfd is not None:
        select.select([pidfd], [], [], min(seconds, 10.0))  # readable once the process is gone
    deadline = time.monotonic() + seconds
    walker = os.fork()
    if walker == 0:
        code = 1
        try:
            signal.alarm(int(seconds) + 2)
            become(uid)
            code = 0 if empty(folder, deadline) else 1
        finally:
            os._exit(code)
    os.close(folder)
    _, status = os.waitpid(walker, 0)
    try:
        os.rmdir(WORK, dir_fd=outer)
        os.rmdir(outer_path)  # the grader's own folder: no learner can write it, or rename it in a sticky /tmp
    except OSError:
        return 1
    return 0 if status == 0 else 1


if __name__ == "__main__" and len(sys.argv) == 7:
    go_fd, folder_fd, outer_fd = (int(a) for a in sys.argv[1:4])
    sys.exit(guard(go_fd, folder_fd, outer_fd, sys.argv[4], int(sys.argv[5]), float(sys.argv[6])))
