"""The memory a learner's process held during one call, read by the trusted side from the kernel.

The child's own meter (``grader.child.call._MemoryMeter``) runs in the learner's process, where learner code can step
around it.  What the kernel keeps of a process cannot be shaped from inside it: before the call the grader resets the
child's peak of resident memory and the accessed bits of its pages (``/proc/<pid>/clear_refs``), and after the reply it
reads the rise of that peak, the pages the call touched and still holds (but files' clean ones), the resident memory it
gave back, the bytes it wrote to files and pipes (``/proc/<pid>/io``), the faults of the processes it started and waited
for, and those still there; while the call runs, it samples the child's anonymous and shared memory every millisecond.
A whole score matrix shows in one of them wherever it was kept: in new memory (the rise), in memory made before the call
and filled in it (touched; given back before the reply: dropped), in a file or a pipe (written), in another process, or
in room made by giving back other pages first, a file's clean ones or anonymous ones, and filling the room with file
pages again (the samples: the anonymous memory added at once over the lowest sample before it; red team 11's a8).
Computing a (2048, 16384) score matrix takes far longer than a millisecond, so no sample gap hides it.  seccomp refuses
the ``madvise`` advice that would clear the accessed bits or map pages untouched (``grader.child.policy``).

Read through a descriptor of the child's ``/proc`` folder opened while the child is known alive (its pidfd), so no other
process's numbers are read under its pid; Linux only, elsewhere :func:`open_meter` gives None.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import threading
from dataclasses import dataclass

from grader.instructor.said import said
from grader.rules import MemoryRule

PAGE = resource.getpagesize()
SAMPLE_SECONDS = 0.001


@dataclass(frozen=True)
class Held:
    """What one call held, in bytes (:mod:`grader.instructor.held_memory`)."""

    rise: int  # the peak of resident memory over what it was before the call
    touched: int  # pages the call read or wrote that it still holds (a file's clean private pages excepted)
    dropped: int  # resident memory held before the call and given back by its end
    sampled: int  # the most anonymous and shared memory added at once in the call (over its lowest sample before)
    written: int  # bytes written through any descriptor but sockets (files, pipes)
    others: int  # pages the processes it started and waited for touched, in bytes (the kernel's count of their faults)
    running: int  # processes it started that were still there (running, or never waited for) when it returned

    @property
    def kept(self) -> int:
        """The most the call can have held at once in its own memory: what it added, or what it filled in place."""
        return max(self.rise, self.touched + self.dropped, self.sampled)


class ProcessMeter:
    """Resets a child's memory records (:meth:`start`) and reads what a call did to them (:meth:`finish`)."""

    def __init__(self, folder: int, pidfd: int, own: int | None = None) -> None:
        self._folder, self._pidfd, self._own = folder, pidfd, own  # own: a pidfd this meter opened, and closes
        self._base: dict[str, int] = {}
        self._low, self._added, self._stop = 0, 0, threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self) -> bool:
        """Reset the records; False where the kernel refused (the measure is then not taken)."""
        try:
            fd = os.open("clear_refs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=self._folder)
            try:
                os.write(fd, b"1")  # every page's accessed bit cleared
                os.write(fd, b"5")  # the peak of resident memory set to what is resident now
            finally:
                os.close(fd)
            self._base = {**self._status(), **self._io(), **self._faults()}
        except OSError:
            return False
        self._low, self._added = self._base["anonymous"], 0
        self._sampler = threading.Thread(target=self._sample, name="held-memory-sampler", daemon=True)
        self._sampler.start()
        return alive(self._pidfd)

    def _sample(self) -> None:
        """Read the child's anonymous and shared memory every millisecond until :meth:`_stop_sampling`."""
        while not self._stop.wait(SAMPLE_SECONDS):
            try:
                self._note(self._status()["anonymous"])
            except (OSError, ValueError, KeyError):
                return  # the child is gone: finish() reads None

    def _note(self, anonymous: int) -> None:
        """The most added at once is measured from the lowest sample before it: memory given back first (anonymous
        or a file's) makes no room for new memory unseen."""
        self._low = min(self._low, anonymous)
        self._added = max(self._added, anonymous - self._low)

    def _stop_sampling(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
            self._sampler = None

    def finish(self) -> Held | None:
        """What the call held since :meth:`start`, or None where it could not be read (the child is gone)."""
        self._stop_sampling()
        try:
            now, touched, running = {**self._status(), **self._io(), **self._faults()}, self._touched(), self._running()
        except (OSError, ValueError, StopIteration):
            return None
        self._note(now["anonymous"])
        if not alive(self._pidfd) or not self._base:
            return None
        base = self._base
        return Held(
            rise=max(0, now["VmHWM"] - base["VmRSS"]),
            touched=touched,
            dropped=max(0, base["VmRSS"] - now["VmRSS"]),
            sampled=self._added,
            written=max(0, now["wchar"] - base["wchar"]),
            others=max(0, now["faults"] - base["faults"]) * PAGE,
            running=running,
        )

    def close(self) -> None:
        self._stop_sampling()
        for fd in (self._folder, self._own):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _read(self, name: str) -> str:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=self._folder)
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks).decode("ascii", "replace")
        finally:
            os.close(fd)

    def _status(self) -> dict[str, int]:
        fields = (line.split() for line in self._read("status").splitlines())
        kib = {f[0].rstrip(":"): int(f[1]) for f in fields if len(f) == 3 and f[2] == "kB"}
        anonymous = kib["RssAnon"] + kib["RssShmem"]
        return {"VmHWM": kib["VmHWM"] << 10, "VmRSS": kib["VmRSS"] << 10, "anonymous": anonymous << 10}

    def _io(self) -> dict[str, int]:
        fields = (line.split(":") for line in self._read("io").splitlines())
        return {"wchar": next(int(v) for k, v in fields if k == "wchar")}

    def _faults(self) -> dict[str, int]:
        """The page faults of the processes it waited for (``cminflt + cmajflt`` of ``stat``)."""
        fields = self._read("stat").rpartition(")")[2].split()  # after the name, which may hold anything
        return {"faults": int(fields[8]) + int(fields[10])}

    def _running(self) -> int:
        """Its child processes now, of every thread (``task/<tid>/children``; a thread gone meanwhile has none)."""
        tasks = os.open("task", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self._folder)
        try:
            count = 0
            for tid in os.listdir(tasks):
                with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                    count += len(self._read(f"task/{tid}/children").split())
            return count
        finally:
            os.close(tasks)

    def _touched(self) -> int:
        """The pages the call read or wrote and still holds, of every mapping but a file's private, unwritten one.

        Those (the libraries' code) are left out because their ``Referenced`` is the page cache's: under memory
        pressure another process's use of the same file marks them too (CI: honest hand-ins failed).  Clean file
        pages given back in the call and read again make room the peak does not see; the samples do (``sampled``)."""
        total, counted, referenced, anonymous = 0, True, 0, 0
        for line in self._read("smaps").splitlines():
            head, _, rest = line.partition(" ")
            if not head.endswith(":"):  # a mapping's header: range perms offset dev inode [path]
                total += referenced if counted or anonymous else 0
                fields = rest.split()
                counted = len(fields) < 4 or fields[3] == "0" or "w" in fields[0] or "s" in fields[0]
                referenced = anonymous = 0
            elif head == "Referenced:":
                referenced = int(rest.split()[0]) << 10
            elif head == "Anonymous:":
                anonymous = int(rest.split()[0])
        return total + (referenced if counted or anonymous else 0)


def alive(pidfd: int) -> bool:
    """Whether the process of ``pidfd`` still lives (a pidfd reads ready once its process has ended)."""
    return not select.select([pidfd], [], [], 0)[0]


def open_meter(pid: int, pidfd: int | None) -> ProcessMeter | None:
    """A meter of the process that runs the calls of child ``pid`` (whose pidfd is ``pidfd``), or None where there is
    none to read.  In a PID namespace of its own that is ``pid``'s one child, PID 1 there (``grader.child.contain``):
    no process of the learner's can be ``pid``'s child or PID 1 of a namespace (orphans go to that PID 1)."""
    if pidfd is None:
        return None
    target, own = _serving(pid)
    try:
        folder = os.open(f"/proc/{target}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        folder = -1
    if folder < 0 or (own is not None and _children(pid) != [target]):  # gone or reaped since: not the child
        for fd in (folder, own):
            if fd is not None and fd >= 0:
                os.close(fd)
        return None
    meter = ProcessMeter(folder, own if own is not None else pidfd, own)
    if not all(alive(fd) for fd in (pidfd, own) if fd is not None):
        meter.close()  # the pid may name another process now: nothing read under it is the child's
        return None
    return meter


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def _serving(pid: int) -> tuple[int, int | None]:
    """The pid that runs the calls and a pidfd of it opened here (None: ``pid`` itself runs them)."""
    children = _children(pid)
    if len(children) != 1:
        return pid, None
    try:
        own = os.pidfd_open(children[0])
    except OSError:
        return pid, None
    try:
        with open(f"/proc/{children[0]}/status", "rb") as f:
            nspid = next((line.split()[1:] for line in f if line.startswith(b"NSpid:")), [])
    except OSError:
        nspid = []
    if len(nspid) >= 2 and nspid[-1] == b"1" and _children(pid) == children:
        return children[0], own  # still pid's child after the pidfd was opened: the pidfd is of that process
    os.close(own)
    return pid, None


UNREAD = Held(rise=-1, touched=-1, dropped=-1, sampled=-1, written=-1, others=-1, running=-1)
"""What a call held where the grader reset the records before it but could not read them after: the case fails."""


def held_problem(held: Held, rule: MemoryRule, itemsize: int) -> str | None:
    """The failure when what the kernel says a call held (``held``), in its own memory, written out and in the
    processes it started, all told, had room for one batch-head's kept scores: in the queries' dtype (``itemsize``
    bytes each), or packed into :func:`packed_bytes` each, in the memory that holds no library's pages.  Measured at
    the longest case's shapes (``grader.instructor.groups.chapter.LONGEST``, 128 MiB and 64 MiB, each the first call
    of a fresh child; ``benchmarks/held_memory.py``): the suite's honest chunked versions raise the peak by 36-47
    MiB, touch 23-39 MiB and add 8-25 MiB of anonymous memory, its evasions 130 MiB or more wherever they keep the
    scores, and a 16-bit copy of them with a scale per row 85 MiB of anonymous memory (red team 12a)."""
    if held is UNREAD:
        return said("held.unread")
    if held.running:
        return said("held.running_many" if held.running > 1 else "held.running", n=held.running)
    whole, packed = rule.kept * itemsize, rule.kept * packed_bytes(itemsize)
    anonymous = max(held.touched + held.dropped, held.sampled)  # no library's pages: a packed copy shows here
    if held.kept + held.written + held.others >= whole:
        allowed, own = whole, held.kept
    elif anonymous + held.written + held.others >= packed:
        allowed, own = packed, anonymous
    else:
        return None
    parts = [
        (own, "held.new" if held.rise == own
         else "held.earlier" if held.touched + held.dropped == own
         else "held.reused"),
        (held.written, "held.written"),
        (held.others, "held.others"),
    ]  # fmt: skip
    amount = own + held.written + held.others
    mib = 1 << 20
    where = [said("held.part", mib=f"{size / mib:,.0f}", what=said(what)) for size, what in parts if size >= mib]
    form = "" if allowed == whole else said("held.packed", bytes=packed_bytes(itemsize))
    tq, tk = rule.scores
    scores = said("held.causal_scores" if rule.kept < rule.bound else "held.scores", tq=tq, tk=tk)
    shown = {"amount": f"{amount / mib:,.0f}", "allowed": f"{allowed / mib:,.0f}", "block": rule.block[-1]}
    return said("held.too_much", where=where, scores=scores, form=form, tq=tq, **shown)


def packed_bytes(itemsize: int) -> int:
    """The fewest bytes a score can be packed into while the answers stay within the tolerance of a dtype of
    ``itemsize`` bytes: half of them, at least 2 (a 16-bit integer with a scale per row keeps float32's answers
    over 16384 keys, an 8-bit one does not; red team 12a)."""
    return max(2, itemsize // 2)
