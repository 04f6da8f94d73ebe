"""The trusted side of the sandbox: a warm template process and one child per submission.

The template is ``python -I`` running :mod:`grader.child`: it imports torch (and nothing of the kit) once, then
forks a child per request, each in its own session and process group, with its own temporary folder, a scrubbed
environment, resource limits and its containment (:mod:`grader.child.contain`), talking to this process over a
socket pair in the data-only wire format, every read bounded by an absolute deadline.  The template runs in a
session of its own, so a terminal's Ctrl-C reaches only the grader, which decides; if the grader dies, the template
reads end-of-file on its control socket and kills its children (each also dies with the template).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import select
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

from grader.child.contain import SANDBOX_UID
from grader.child.policy import WORK_BYTES
from grader.child.wire import MAX_HEADER, recv_message, send_message
from grader.hook_table import BANNED_NAMES
from grader.instructor import reclaim
from grader.instructor.said import said

KIT_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_BOOT = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module('grader.child', run_name='__main__', alter_sys=True)"
)
"""``python -I -c TEMPLATE_BOOT KIT_ROOT template ...``: :mod:`grader.child` run as ``python -I -m`` would, found
in this kit's own folder (never the working directory's nor an environment variable's), which the learner
cannot write; the child drops it from ``sys.path`` before learner code loads."""
OUTPUT_KEPT = 64 * 1024
END_SECONDS = 5.0  # how long a killed child may take to be gone before what it printed is read anyway
WITNESS_KEPT = 256 * 1024
"""Bytes kept of the witness pipe (``grader.child.witness``), which is made this big: its lines are short,
one per kind of event and one per call that made a banned call (``banned <id> <name>``)."""
WITNESS_LINES = 4096
RECLAIM_SECONDS = 60.0  # the most a guardian spends emptying one folder
TEMPLATE_SWEEP_SECONDS = 4.0  # the template's last sweep of strays (its children's deaths, then two seconds of rounds)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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

    ``USER`` and ``LOGNAME`` answer ``getpass.getuser()`` without ``/etc/passwd`` (which the child may not read);
    matplotlib draws with Agg and keeps its cache in ``home``."""
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


class Folder:
    """A folder a learner's process may write, ``<tmp>/<prefix>XXXX/work``, and the guardian that reclaims it.

    The outer folder is the grader's (``0711``: a learner may pass through it, not list it, write it or rename
    ``work`` in it).  The trusted side never opens, lists, stats or removes a name under ``work``: the guardian
    (:mod:`grader.instructor.reclaim`) empties it through descriptors only, with ``learner_uid``'s credentials
    (``-1``: ours), once :meth:`release` says every learner process is dead, or once this process has died.
    """

    def __init__(self, prefix: str, learner_uid: int, seconds: float = RECLAIM_SECONDS) -> None:
        self.outer = Path(tempfile.mkdtemp(prefix=prefix))
        self.path = self.outer / reclaim.WORK
        self._go = -1
        fds: list[int] = []
        try:
            os.chmod(self.outer, 0o711)
            os.mkdir(self.path, 0o700)
            go, self._go = os.pipe()
            fds.append(go)
            fds += [os.open(self.path, _FOLDER), os.open(self.outer, _FOLDER)]
            command = [sys.executable, "-I", "-S", "-c", _reclaim_source(), *map(str, fds), str(self.outer)]
            self._guardian = subprocess.Popen(
                [*command, str(learner_uid), str(seconds)], pass_fds=fds, cwd="/", env={}, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C stops the grader, never a reclaim half done
            )  # fmt: skip
        except BaseException:
            if self._go >= 0:
                os.close(self._go)
            with contextlib.suppress(OSError):  # nothing of a learner's has been near them yet
                os.rmdir(self.path)
            os.rmdir(self.outer)
            raise
        finally:
            for fd in fds:
                os.close(fd)

    def watch(self, pid: int) -> None:
        """The learner's process: the guardian waits for it, and kills its group if this process dies first."""
        with contextlib.suppress(OSError):
            os.write(self._go, f"{pid}\n".encode())

    def release(self, timeout: float = RECLAIM_SECONDS + 5) -> bool:
        """Every learner process is dead: reclaim the folder now; True once both folders are gone."""
        if self._go >= 0:
            os.close(self._go)
            self._go = -1
        try:
            return self._guardian.wait(timeout) == 0
        except subprocess.TimeoutExpired:  # it goes on by itself, within its own deadline
            return False


@functools.cache
def _reclaim_source() -> str:
    return Path(reclaim.__file__).read_text(encoding="utf-8")


def capture_file() -> int:
    """A file of this process's with no name (a memfd), for a child's fds 1 and 2: nothing a learner can replace."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("attnkit-output", os.MFD_CLOEXEC)
    with tempfile.TemporaryFile() as fh:  # unlinked, in this process's temporary folder
        return os.dup(fh.fileno())


class ChildGone(Exception):
    """The child stopped answering: it exited, crashed, hung or broke the protocol."""

    def __init__(self, reason: str, lost: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.lost = lost  # seconds a call spent to its own time limit: the hook's, not the submission's


@dataclass
class Child:
    """One learner process.  Always ``close()`` it: that kills its whole process group.

    ``deadline`` (``time.monotonic()``) is the submission's: no read waits past it.  ``capture`` is our descriptor
    of what the child printed (its fds 1 and 2), ``pidfd`` one of the child's process, to see it gone.
    """

    pid: int
    sock: socket.socket
    workdir: Path
    limits: Limits
    deadline: float
    closed: bool = False
    capture: int | None = None
    folder: Folder | None = None
    pidfd: int | None = None
    heard: int | None = None
    _printed: str | None = None
    _witnessed: list[str] | None = None

    def send(self, header: dict[str, Any], blob: bytes = b"") -> None:
        try:
            send_message(self.sock, header, blob)
        except OSError as exc:
            raise ChildGone(said("gone", why=str(exc.strerror or exc))) from exc

    def receive(
        self, timeout: float, *, max_header: int = MAX_HEADER, max_blob: int | None = None
    ) -> tuple[dict[str, Any], bytes]:
        """The next message, within ``timeout`` seconds from now and the submission's deadline; ChildGone else.

        Both deadlines are absolute, recomputed before every ``recv``: a reply dripped a byte at a time is cut off,
        and the process killed.  A message over ``max_header`` or ``max_blob`` bytes (default: the limits'
        ``max_result_bytes``) is refused from its length prefix.
        """
        call_deadline = time.monotonic() + timeout
        deadline = min(call_deadline, self.deadline)
        submission = said("time_limit", seconds=f"{self.limits.submission_seconds:g}")
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
            raise ChildGone(said("timed_out", seconds=f"{timeout:g}"), lost=timeout) from None
        except (EOFError, ConnectionError):
            raise ChildGone(said("ended")) from None
        except Exception as exc:  # ProtocolError, OSError, ...: nothing the child sends escapes as anything else
            kill_group(self.pid)
            raise ChildGone(said("unreadable", kind=type(exc).__name__, error=str(exc))) from None

    def output(self) -> str:
        """The first 64 KiB of what the child printed, and how much more there was: this ends the child first
        (read through our own descriptor, from offset 0, once it is gone or :data:`END_SECONDS` after the kill)."""
        if self._printed is not None:
            return self._printed
        self._end()
        if self.capture is None:
            return ""
        try:
            size = os.fstat(self.capture).st_size
            head = os.pread(self.capture, OUTPUT_KEPT, 0)
        except OSError:
            return ""
        text = head.decode("utf-8", "replace")
        if size > OUTPUT_KEPT:
            text += f"\n[... {size - OUTPUT_KEPT} more bytes not kept]"
        return text

    def witnessed(self) -> list[str]:
        """The witness's lines (:mod:`grader.child.witness`), each once: this ends the child first (read once every
        writer is gone, at most :data:`WITNESS_KEPT` bytes; a line the witness would not write is kept, for the flag).
        """
        if self._witnessed is not None:
            return self._witnessed
        self._end()
        if self.heard is None:
            return []
        data = b""
        with contextlib.suppress(OSError):  # BlockingIOError: a writer the kill left (none should)
            while len(data) < WITNESS_KEPT and (part := os.read(self.heard, WITNESS_KEPT - len(data))):
                data += part
        return list(dict.fromkeys(data.decode("utf-8", "replace").splitlines()))[:WITNESS_LINES]

    def _end(self) -> None:
        """Kill the process group, and wait (up to :data:`END_SECONDS`) until the child and its whole group are gone
        (a learner's process that left the group dies with its PID namespace's PID 1, in the group)."""
        kill_group(self.pid)
        if self.pidfd is None:  # not the template's child (a test's stand-in): nothing to wait on
            return
        deadline = time.monotonic() + END_SECONDS
        with contextlib.suppress(OSError, ValueError):
            select.select([self.pidfd], [], [], END_SECONDS)
        while time.monotonic() < deadline:  # the template reaps the group's orphans (a subreaper): no zombie stays
            try:
                os.killpg(self.pid, signal.SIGKILL)  # signal 0 would do, but kill what joined it meanwhile
            except OSError:  # no process is left in the group (ESRCH)
                return
            time.sleep(0.005)

    def close(self) -> None:
        """End the child, keep what it printed (``output()`` still answers), reclaim its folder."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            send_message(self.sock, {"op": "bye"})
        self.sock.close()
        self._printed = self.output()
        self._witnessed = self.witnessed()
        for fd in (self.capture, self.pidfd, self.heard):
            if fd is not None:
                os.close(fd)
        self.capture = self.pidfd = self.heard = None
        if self.folder is not None:
            self.folder.release()

    def abort(self) -> None:
        """Kill the process group and wake a thread blocked reading from it (it gets ChildGone); ``close()`` still.
        Safe from another thread: the socket is shut down, not closed, so its owner's ``recv`` returns end-of-file
        even where a learner's process that left the group still holds the other end."""
        kill_group(self.pid)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


def _pidfd(pid: int) -> int | None:
    """A descriptor of process ``pid``, readable once it has ended (None where the platform has none, or it is gone)."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def kill_group(pid: int) -> None:
    """Kill the child's process group (it called ``setsid``, so its pgid is its pid)."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


class Template:
    """A warm ``python -I`` process that has imported torch and forks children on request."""

    def __init__(
        self, start_timeout: float = 120.0, warm_meta: bool = True, sandbox_uid: int = SANDBOX_UID,
        warm_figures: bool = True,
    ) -> None:  # fmt: skip
        """Start the template; it boots in the background until the first :meth:`spawn`.

        ``warm_meta`` pays the meta device's start-up once in the template (about 4 s and 70 MB), ``warm_figures``
        pyplot's import and font scan (about 2.6 s a child; ``benchmarks/plot_cost.py``).  ``sandbox_uid`` is the
        uid learner processes run as when this process is root; an unprivileged grader's keep its uid, in a user
        namespace.
        """
        self.sandbox_uid = sandbox_uid
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._home_folder = Folder("attnkit-template-", -1)  # the template's: it runs no learner code
        self._home = str(self._home_folder.path)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-c", TEMPLATE_BOOT, str(KIT_ROOT), "template", str(theirs.fileno()),
                 str(os.getpid()), "+".join(["meta"] * warm_meta + ["figures"] * warm_figures) or "none",
                 "+".join(BANNED_NAMES), str(KIT_ROOT)],  # BANNED_NAMES: the kernels the template watches once
                pass_fds=[theirs.fileno()], env=child_environment(self._home), cwd=self._home,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True,  # a terminal's Ctrl-C is the grader's to handle (see stop())
            )  # fmt: skip
        except BaseException:
            theirs.close()
            ours.close()
            self._home_folder.release()
            raise
        self._home_folder.watch(self.process.pid)
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
        ready = b""
        with contextlib.suppress(TimeoutError):
            ready = self._control.recv(4096)
        if not ready:
            self.process.kill()
            err = self.process.stderr.read().decode(errors="replace") if self.process.stderr else ""
            raise RuntimeError(f"the sandbox template did not start: {err.strip()[-2000:]}")
        self._control.settimeout(None)
        self._ready = True

    def spawn(
        self, limits: Limits, gpu: str | None = None, deadline: float | None = None, without: Collection[str] = ()
    ) -> Child:
        """Fork a child; ``gpu`` is the one GPU it may see (``CUDA_VISIBLE_DEVICES``; CUDA is initialised there only,
        never in the template), else it sees none.  ``deadline`` is the submission's, by default
        ``limits.submission_seconds`` from now.  ``without`` names containment layers to leave out (``user-ns``,
        ``namespaces``, ``tmpfs-work``, ``dev``, ``keyring``, ``landlock``, ``seccomp``; ``libseccomp``: as if it
        were missing): for tests that check one layer alone, never for grading.
        """
        folder = Folder("attnkit-child-", self.sandbox_uid if os.geteuid() == 0 else -1)
        workdir = folder.path
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
        deadline = time.monotonic() + limits.submission_seconds if deadline is None else deadline
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        capture = capture_file()  # the child's fds 1 and 2: its output.txt, with no name
        heard, telling = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)  # the witness's lines (grader.child.witness)
        with contextlib.suppress(OSError):  # a full pipe refuses the event: room for every call's line
            fcntl.fcntl(heard, fcntl.F_SETPIPE_SZ, WITNESS_KEPT)
        try:
            with self._lock:
                if self._stopped:
                    raise RuntimeError("the sandbox template has stopped")
                self._wait_ready()
                socket.send_fds(self._control, [json.dumps(config).encode()], [theirs.fileno(), capture, telling])
                reply = self._control.recv(4096)
                if not reply:
                    raise RuntimeError("the sandbox template has stopped")
                pid = int(json.loads(reply)["pid"])
                folder.watch(pid)
                child = Child(
                    pid, ours, workdir, limits, deadline, capture=capture, folder=folder, pidfd=_pidfd(pid), heard=heard
                )
                self._live = {pid: c for pid, c in self._live.items() if not c.closed}
                self._live[child.pid] = child
                if self._stopped:  # stop() came while the template forked it
                    child.abort()
        except BaseException:
            ours.close()
            os.close(capture)
            os.close(heard)
            folder.release()
            raise
        finally:
            theirs.close()
            os.close(telling)
        return child

    def isolation(self) -> str:
        """The containment layers this machine gives a child (``user-ns+pid-ns+...+seccomp``, or ``none``), asked of a
        throwaway child once: the kernel decides, not the configuration (docs/security.md lists the layers)."""
        if self._isolation is None:
            child = self.spawn(Limits())
            try:
                child.send({"op": "hello"})
                header, _ = child.receive(30.0)
            finally:
                child.close()
            if header.get("unreadable"):  # every hand-in importing a module the template had not would fail
                raise RuntimeError(
                    f"learner processes (uid {header.get('uid')}) cannot read this Python's files under "
                    f"{header['unreadable']!r}, and this machine gives them no mount namespace to bind them back in: "
                    "run the grader from a Python that uid can read (a virtual environment outside that folder, "
                    "/usr), or as an unprivileged user; nothing was graded"
                )
            self._isolation = str(header.get("isolation", "none"))
        return self._isolation

    def stop(self) -> None:
        """End the work in flight, from any thread: kill every live child, fork no more, wake every waiter (a reader
        gets ChildGone, a spawner or a wait for the boot RuntimeError).  Call ``close()`` after."""
        self._stopped = True
        for child in list(self._live.values()):  # a snapshot: spawn() may replace the dict meanwhile
            if not child.closed:
                child.abort()
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Close the template and every child still open (each reclaims its folder), then the template's folder."""
        try:
            self._control.close()
        finally:
            for child in list(self._live.values()):
                child.close()
            # its last sweep (the children's groups, then what they left: serve_template) before it goes
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=TEMPLATE_SWEEP_SECONDS)
            self.process.kill()
            self.process.wait(timeout=10)
            if self.process.stderr:
                self.process.stderr.close()
            self._home_folder.release()

    def __enter__(self) -> Template:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
