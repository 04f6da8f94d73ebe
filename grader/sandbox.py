"""The trusted side of the sandbox: a warm template process and one child per submission.

The template is ``python -I`` running :mod:`grader.child_runtime`: it imports
torch (and nothing of the kit) once, then forks a child per request.  Each
child gets its own session and process group, its own temporary folder, a
scrubbed environment and resource limits, and talks to this process over a
socket pair in the data-only wire format of :mod:`grader.child_runtime`.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import child_runtime
from grader.child_runtime import ProtocolError, recv_message, send_message

KIT_ROOT = Path(__file__).resolve().parent.parent
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
    """The whole environment a learner's process sees: no secrets, no seed, one thread."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
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
    """One learner process.  Always ``close()`` it: that kills its whole process group."""

    pid: int
    sock: socket.socket
    workdir: Path
    limits: Limits
    started: float = field(default_factory=time.monotonic)
    closed: bool = False

    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        try:
            send_message(self.sock, header, blob)
        except OSError as exc:
            raise ChildGone(f"the process is gone ({exc.strerror or exc})") from exc

    def receive(self, timeout: float) -> tuple[dict[str, Any], bytes]:
        budget = self.limits.submission_seconds - (time.monotonic() - self.started)
        if budget <= 0:
            raise ChildGone(f"the submission used up its {self.limits.submission_seconds:g} s time limit")
        wait = min(timeout, budget)
        self.sock.settimeout(wait)
        try:
            return recv_message(self.sock, max_blob=self.limits.max_result_bytes)
        except TimeoutError:
            if wait < timeout:
                raise ChildGone(f"the submission used up its {self.limits.submission_seconds:g} s time limit") from None
            raise ChildGone(f"timed out after {timeout:g} s (an infinite loop, or far too slow)") from None
        except EOFError:
            raise ChildGone(
                "the process ended during this call (sys.exit, os._exit, a crash, or a resource limit)"
            ) from None
        except (ProtocolError, OSError, ValueError) as exc:
            raise ChildGone(f"the process sent something unreadable ({exc})") from None

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


def kill_group(pid: int) -> None:
    """Kill the child's process group (it called ``setsid``, so its pgid is its pid)."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


class Template:
    """A warm ``python -I`` process that has imported torch and forks children on request."""

    def __init__(self, start_timeout: float = 120.0, warm_meta: bool = True) -> None:
        """Start the template; it boots in the background until the first :meth:`spawn`.

        ``warm_meta`` pays the meta device's start-up once in the template (about
        4 s and 70 MB) so each child's meta pass is fast; skip it when no meta
        pass will run.
        """
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
                "meta" if warm_meta else "no-meta",
                str(KIT_ROOT),
            ],
            pass_fds=[theirs.fileno()],
            env=child_environment(self._home),
            cwd=self._home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        theirs.close()
        self._control = ours
        self._lock = threading.Lock()
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

    def spawn(self, limits: Limits, gpu: str | None = None) -> Child:
        """Fork a child; ``gpu`` is the one GPU it may see (``CUDA_VISIBLE_DEVICES``), else it sees none.

        CUDA is initialised in that child only, never in the template.
        """
        workdir = Path(tempfile.mkdtemp(prefix="attnkit-child-"))
        use_cuda = gpu is not None
        env = dict(child_environment(str(workdir)), CUDA_VISIBLE_DEVICES=gpu if use_cuda else "")
        config = {
            "workdir": str(workdir),
            "env": env,
            "limits": limits.rlimits(use_cuda),
            "cuda_memory_fraction": limits.cuda_memory_fraction if use_cuda else None,
        }
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with self._lock:
            self._wait_ready()
            socket.send_fds(self._control, [json.dumps(config).encode()], [theirs.fileno()])
            reply = self._control.recv(4096)
        theirs.close()
        if not reply:
            ours.close()
            raise RuntimeError("the sandbox template has stopped")
        return Child(int(json.loads(reply)["pid"]), ours, workdir, limits)

    def isolation(self) -> str:
        """What this machine lets a child have, e.g. ``namespaces+landlock+seccomp``, ``landlock`` or ``none``.

        Asked of a throwaway child once: the kernel decides, not the configuration.
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
