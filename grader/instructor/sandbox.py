"""The trusted side of the sandbox: a warm template process and one child per submission.

The template is ``python -I`` running :mod:`grader.child_runtime`: it imports
torch (and nothing of the kit) once, then forks a child per request.  Each
child gets its own session and process group, its own temporary folder, a
scrubbed environment, resource limits and its containment (``contain()`` in
:mod:`grader.child_runtime`), and talks to this process over a socket pair in
the data-only wire format, every read bounded by an absolute deadline.

:meth:`Template.stop` is how a stopped run ends what is in flight: it kills
every live child's process group and wakes every thread waiting on a child or
on the template, and the template forks nothing more.  The template runs in a
session of its own, so a terminal's Ctrl-C reaches only the grader, which
decides; if the grader dies, the template reads end-of-file on its control
socket and kills its children (each also dies with the template).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import child_runtime
from grader.child_runtime import MAX_HEADER, SANDBOX_UID, WORK_BYTES, recv_message, send_message

KIT_ROOT = Path(__file__).resolve().parents[2]
OUTPUT_KEPT = 64 * 1024


@dataclass
class Limits:
    """Per-child limits.  Wall clocks are enforced here; the rest by ``setrlimit`` in the child."""

    call_seconds: float = 10.0
    submission_seconds: float = 180.0
    load_seconds: float = 20.0
    memory_bytes: int = 3 << 30  # address space a child may add to what it starts with; CPU runs only
    cpu_seconds: int = 120
    file_bytes: int = 16 << 20
    work_bytes: int = WORK_BYTES  # the work folder: a tmpfs of this size in the child's mount namespace
    open_files: int = 256
    processes: int = 64
    cuda_memory_fraction: float = 0.25
    max_result_bytes: int = 256 << 20

    def rlimits(self, use_cuda: bool) -> dict[str, int]:
        limits = {
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_bytes,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_CORE": 0,
        }
        if not use_cuda:
            limits["RLIMIT_AS"] = self.memory_bytes
        return limits


def child_environment(home: str) -> dict[str, str]:
    """The whole environment a learner's process sees: no secrets, no seed, one thread.

    ``USER`` and ``LOGNAME`` answer ``getpass.getuser()`` without ``/etc/passwd``
    (which the child may not read); matplotlib draws with Agg and keeps its cache in ``home``.
    """
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "USER": "learner",
        "LOGNAME": "learner",
        "MPLCONFIGDIR": home,
        "MPLBACKEND": "Agg",  # headless: a figure is read as data, never shown
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "CUDA_VISIBLE_DEVICES": "",  # no GPU unless the child is given one
    }


class ChildGone(Exception):
    """The child stopped answering: it exited, crashed, hung or broke the protocol."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Child:
    """One learner process.  Always ``close()`` it: that kills its whole process group.

    ``deadline`` (``time.monotonic()``) is the submission's: no read waits past
    it, and the process is killed when it passes.
    """

    pid: int
    sock: socket.socket
    workdir: Path
    limits: Limits
    deadline: float
    closed: bool = False

    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        try:
            send_message(self.sock, header, blob)
        except OSError as exc:
            raise ChildGone(f"the process is gone ({exc.strerror or exc})") from exc

    def receive(
        self, timeout: float, *, max_header: int = MAX_HEADER, max_blob: int | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """The next message, within ``timeout`` seconds from now and the submission's deadline.

        Both deadlines are absolute: the time left is recomputed before every
        ``recv``, so a reply dripped a byte at a time is cut off, and the process
        is killed there.  A message over ``max_header`` or ``max_blob`` bytes
        (default: the limits' ``max_result_bytes``) is refused from its length
        prefix.  Anything but a well-formed message in time raises ChildGone,
        and nothing else.
        """
        call_deadline = time.monotonic() + timeout
        deadline = min(call_deadline, self.deadline)
        submission = f"the submission used up its {self.limits.submission_seconds:g} s time limit"
        if deadline <= time.monotonic():
            kill_group(self.pid)
            raise ChildGone(submission)
        blob_cap = self.limits.max_result_bytes if max_blob is None else max_blob
        try:
            return recv_message(self.sock, max_blob=blob_cap, max_header=max_header, deadline=deadline)
        except TimeoutError:
            kill_group(self.pid)
            if self.deadline < call_deadline:
                raise ChildGone(submission) from None
            raise ChildGone(f"timed out after {timeout:g} s (an infinite loop, or far too slow)") from None
        except (EOFError, ConnectionError):
            raise ChildGone(
                "the process ended during this call (sys.exit, os._exit, a crash, or a resource limit)"
            ) from None
        except Exception as exc:  # ProtocolError, OSError, ...: nothing the child sends escapes as anything else
            kill_group(self.pid)
            raise ChildGone(f"the process sent something unreadable ({type(exc).__name__}: {exc})") from None

    def output(self) -> str:
        """The first 64 KiB of what the child printed, and how much more there was."""
        path = self.workdir / "output.txt"
        try:
            size = path.stat().st_size
            with path.open("rb") as fh:
                head = fh.read(OUTPUT_KEPT)
        except OSError:
            return ""
        text = head.decode("utf-8", "replace")
        if size > OUTPUT_KEPT:
            text += f"\n[... {size - OUTPUT_KEPT} more bytes not kept]"
        return text

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            send_message(self.sock, {"op": "bye"})
        except OSError:
            pass
        self.sock.close()
        kill_group(self.pid)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def abort(self) -> None:
        """Kill the process group and wake a thread blocked reading from it (it gets ChildGone); ``close()`` still.

        Safe from another thread: the socket is shut down, not closed, so its
        owner's ``recv`` returns end-of-file even where a learner's process that
        left the group still holds the other end.
        """
        kill_group(self.pid)
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def kill_group(pid: int) -> None:
    """Kill the child's process group (it called ``setsid``, so its pgid is its pid)."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


class Template:
    """A warm ``python -I`` process that has imported torch and forks children on request."""

    def __init__(
        self,
        start_timeout: float = 120.0,
        warm_meta: bool = True,
        sandbox_uid: int = SANDBOX_UID,
        warm_figures: bool = True,
    ) -> None:
        """Start the template; it boots in the background until the first :meth:`spawn`.

        ``warm_meta`` pays the meta device's start-up once in the template (about
        4 s and 70 MB) so each child's meta pass is fast; skip it when no meta
        pass will run.  ``warm_figures`` imports matplotlib's pyplot (headless)
        in the template, where installed, so a child's plot pays no import and
        no font scan (about 2.6 s a child; ``benchmarks/plot_cost.py``).
        ``sandbox_uid`` is the uid learner processes run as when this process
        is root (default ``nobody``); an unprivileged grader's children keep
        its uid, inside a user namespace of their own.
        """
        self.sandbox_uid = sandbox_uid
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._home = tempfile.mkdtemp(prefix="attnkit-template-")
        source = Path(child_runtime.__file__).read_text(encoding="utf-8")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-c",
                source,
                "template",
                str(theirs.fileno()),
                str(os.getpid()),
                "+".join(["meta"] * warm_meta + ["figures"] * warm_figures) or "none",
                str(KIT_ROOT),
            ],
            pass_fds=[theirs.fileno()],
            env=child_environment(self._home),
            cwd=self._home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C is the grader's to handle (see stop())
        )
        theirs.close()
        self._control = ours
        self._lock = threading.Lock()
        self._live: dict[int, Child] = {}  # children spawned and not yet closed, by pid (guarded by _lock)
        self._stopped = False
        self._isolation: str | None = None
        self._start_timeout = start_timeout
        self._ready = False

    def _wait_ready(self) -> None:
        """Block until the template has imported torch (call with the lock held)."""
        if self._ready:
            return
        self._control.settimeout(self._start_timeout)
        try:
            ready = self._control.recv(4096)
        except TimeoutError:
            ready = b""
        if not ready:
            self.process.kill()
            err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
            raise RuntimeError(f"the sandbox template did not start: {err.strip()[-2000:]}")
        self._control.settimeout(None)
        self._ready = True

    def spawn(
        self, limits: Limits, gpu: str | None = None, deadline: float | None = None, without: Collection[str] = ()
    ) -> Child:
        """Fork a child; ``gpu`` is the one GPU it may see (``CUDA_VISIBLE_DEVICES``), else it sees none.

        CUDA is initialised in that child only, never in the template.
        ``deadline`` (``time.monotonic()``) is the submission's, by default
        ``limits.submission_seconds`` from now.  ``without`` names containment
        layers to leave out (``user-ns``, ``namespaces``, ``tmpfs-work``, ``dev``,
        ``keyring``, ``landlock``, ``seccomp``; ``libseccomp``: as if it were
        missing): for tests that check one layer alone, never for grading.
        """
        workdir = Path(tempfile.mkdtemp(prefix="attnkit-child-"))
        use_cuda = gpu is not None
        env = dict(child_environment(str(workdir)), CUDA_VISIBLE_DEVICES=gpu if use_cuda else "")
        config = {
            "workdir": str(workdir),
            "env": env,
            "limits": limits.rlimits(use_cuda),
            "work_bytes": limits.work_bytes,
            "cuda": use_cuda,
            "cuda_memory_fraction": limits.cuda_memory_fraction if use_cuda else None,
            "sandbox_uid": self.sandbox_uid,
            "without": sorted(without),
        }
        if deadline is None:
            deadline = time.monotonic() + limits.submission_seconds
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self._lock:
                if self._stopped:
                    raise RuntimeError("the sandbox template has stopped")
                self._wait_ready()
                socket.send_fds(self._control, [json.dumps(config).encode()], [theirs.fileno()])
                reply = self._control.recv(4096)
                if not reply:
                    raise RuntimeError("the sandbox template has stopped")
                child = Child(int(json.loads(reply)["pid"]), ours, workdir, limits, deadline)
                self._live = {pid: c for pid, c in self._live.items() if not c.closed}
                self._live[child.pid] = child
                if self._stopped:  # stop() came while the template forked it
                    child.abort()
        except BaseException:
            ours.close()
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            theirs.close()
        return child

    def isolation(self) -> str:
        """The containment layers this machine gives a child, e.g. ``user-ns+pid-ns+...+landlock+seccomp``, or ``none``.

        Asked of a throwaway child once: the kernel decides, not the configuration.
        The README's security model lists the layers.
        """
        if self._isolation is None:
            child = self.spawn(Limits())
            try:
                child.send({"op": "hello"})
                header, _ = child.receive(30.0)
                self._isolation = str(header.get("isolation", "none"))
            finally:
                child.close()
        return self._isolation

    def stop(self) -> None:
        """End the work in flight, from any thread: kill every live child, fork no more, wake every waiter.

        A thread reading from a child gets ChildGone; one spawning (or waiting
        for the template to boot) gets RuntimeError.  Call ``close()`` after.
        """
        self._stopped = True
        for child in list(self._live.values()):  # a snapshot: spawn() may replace the dict meanwhile
            if not child.closed:
                child.abort()
        try:
            self._control.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        try:
            self._control.close()
        finally:
            self.process.kill()
            self.process.wait(timeout=10)
            if self.process.stderr:
                self.process.stderr.close()
            shutil.rmtree(self._home, ignore_errors=True)

    def __enter__(self) -> Template:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
