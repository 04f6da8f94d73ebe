"""The sandbox: a cold template process, one forked child per submission, limits, and cleanup.

These tests drive the raw :class:`grader.instructor.sandbox.Child` API: spawn a child from
the template, ``load`` a small probe submission (handed over as text), ``call``
one call and read the reply header and the safetensors blob.  A probe reports
what it saw from inside the child as a tensor (numbers, or UTF-8 bytes of JSON),
because that is the only thing that crosses back.

Process checks read ``/proc``: a process counts as gone when its entry is
missing or it is a zombie (dead, waiting for PID 1 to reap it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from processes import alive, proc_stat
from safetensors.torch import load as load_tensors

from grader.instructor.sandbox import KIT_ROOT, Child, ChildGone, Limits, Template, child_environment

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; Linux only")

SECRET_VAR = "ATTNKIT_TEST_SECRET"
SECRET_VALUE = "hunter2-do-not-leak"
FAST = Limits(call_seconds=2, submission_seconds=30)


# --- /proc helpers ------------------------------------------------------------------------------


def wait_until_gone(pids, seconds: float = 5.0) -> list[int]:
    """Poll until none of ``pids`` is alive; return those still alive at the deadline."""
    deadline = time.monotonic() + seconds
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


def live_in_group(pgrp: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            info = proc_stat(int(entry.name))
            if info is not None and info[0] not in "ZX" and info[2] == pgrp:
                found.append(int(entry.name))
    return found


def host_pids_with_arg(token: str) -> list[int]:
    """Host pids of live processes whose command line holds ``token``.

    A learner's process may live in its own PID namespace, where the pid it
    sees means nothing out here; a unique argument finds it from outside.
    """
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if token.encode() in argv and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def started_with_arg(token: str, seconds: float = 5.0) -> list[int]:
    """:func:`host_pids_with_arg`, once it finds one (or ``seconds`` pass).

    ``Popen`` returns once the new program's exec has closed its descriptors,
    which is before the kernel has set its arguments: on a loaded machine its
    ``cmdline`` is empty a while longer (a CI run found none at once).
    """
    deadline = time.monotonic() + seconds
    while not (found := host_pids_with_arg(token)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def kill_if_alive(pid: int) -> None:
    """Clean up a process one of our probes started (by its pid, nothing broader)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def namespaces_available() -> bool:
    """Whether an unprivileged process here may unshare user, network and mount namespaces (DESIGN: Facts)."""
    code = (
        "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
        "sys.exit(0 if libc.unshare(0x10000000 | 0x40000000 | 0x00020000) == 0 else 1)"
    )
    try:
        return subprocess.run([sys.executable, "-I", "-c", code], timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template():
    """One warm template for the module, started while a secret sits in this process's environment."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET_VAR, SECRET_VALUE)
        tpl = Template()
        tpl.isolation()  # the template boots in the background: wait until it is up and has forked once
        try:
            yield tpl
        finally:
            tpl.close()


@pytest.fixture
def spawn(template):
    """``spawn(source, limits=FAST) -> Child``, loaded with ``source`` as ``probe.py``; closed after the test."""
    children: list[Child] = []

    def make(source: str, limits: Limits = FAST) -> Child:
        child = template.spawn(limits)
        children.append(child)
        child.send(
            {"op": "load", "files": {"probe.py": textwrap.dedent(source)}, "entry": "probe.py", "hooks": ["probe"]}
        )
        header, _ = child.receive(limits.load_seconds)
        assert "import_error" not in header, header
        assert "probe" in header.get("hooks", {}), header
        return child

    yield make
    for child in children:
        child.close()


def send_call(child: Child, **values) -> None:
    args = {name: {"value": value} for name, value in values.items()}
    child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": args}]})


def call(child: Child, timeout: float = 5.0, **values) -> tuple[dict, dict[str, torch.Tensor]]:
    """Run ``probe(**values)`` once in ``child``; return the reply header and the tensors sent back."""
    send_call(child, **values)
    header, blob = child.receive(timeout)
    return header, (load_tensors(blob) if blob else {})


def probe(child: Child, timeout: float = 5.0, **values) -> torch.Tensor:
    """The tensor ``probe(**values)`` returned; fails the test if the call raised."""
    header, outputs = call(child, timeout, **values)
    assert header.get("ok"), f"the probe raised: {header.get('error')}"
    return outputs["out0"]


def as_json(tensor: torch.Tensor):
    return json.loads(bytes(tensor.tolist()).decode())


JSON_HELPER = """
import json
import torch

def _send(value):
    return torch.tensor(list(json.dumps(value).encode()), dtype=torch.uint8)
"""


# --- the template and its children -------------------------------------------------------------


@pytest.mark.slow
def test_template_is_a_separate_cold_interpreter(template):
    pid = template.process.pid
    assert template.process.poll() is None, "the template is not running"
    assert pid != os.getpid()
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert argv[1] == b"-I", f"the template must run isolated (python -I), argv: {argv[:3]}"
    threads = int(Path(f"/proc/{pid}/status").read_text().split("Threads:")[1].split()[0])
    assert threads == 1, f"the template has {threads} threads: it ran a parallel op (children would deadlock)"


def test_children_are_forked_from_the_template_into_their_own_session(template, spawn):
    first = spawn("def probe():\n    return None\n")
    second = spawn("def probe():\n    return None\n")
    assert first.pid != second.pid
    for child in (first, second):
        state, ppid, pgrp, session = proc_stat(child.pid)
        assert ppid == template.process.pid, "the child is not forked from the template"
        assert pgrp == child.pid and session == child.pid, "the child must lead its own session and process group"


def test_a_child_holds_no_handle_on_its_siblings(spawn):
    """The template holds a pidfd of each live child (P2: a pid reused after a child's death is not taken for
    it); a child forked while others live holds none of theirs: its open files are its socket, its output,
    its witness pipe and what Python opened."""
    first = spawn("def probe():\n    return None\n")
    second = spawn(JSON_HELPER + """
import os

def probe():
    opened = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            opened.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own
            pass
    return _send(sorted(opened))
""")
    opened = as_json(probe(second))
    assert first.pid != second.pid
    assert not [f for f in opened if "pidfd" in f], opened


@pytest.mark.parametrize("n", [8, 256], ids=["8x8", "256x256"])
def test_child_matmul_does_not_deadlock_after_trusted_parallel_op(spawn, n):
    a = torch.randn(512, 512)
    assert (a @ a).shape == (512, 512)  # this process has now run a parallel op (warm OpenMP pool)
    child = spawn(
        """
        import torch

        def probe(n):
            ones = torch.ones(n, n)
            return ones @ ones
        """
    )
    started = time.monotonic()
    out = probe(child, timeout=10.0, n=n)
    elapsed = time.monotonic() - started
    assert torch.equal(out, torch.full((n, n), float(n)))
    assert elapsed < 3.0, f"a {n}x{n} matmul took {elapsed:.1f} s in the child"


def test_child_environment_is_scrubbed(spawn):
    assert os.environ.get(SECRET_VAR) == SECRET_VALUE  # the trusted side does hold the secret
    child = spawn(
        JSON_HELPER
        + """
import os

def probe(secret, grader_pid):
    with open("/proc/self/environ", "rb") as fh:
        raw = fh.read()
    parent_raw = False
    for pid in {os.getppid(), grader_pid}:  # the parent may be outside the child's PID namespace (ppid 0)
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                parent_raw = parent_raw or secret.encode() in fh.read()
        except OSError:
            pass
    return _send({"env": dict(os.environ), "raw": secret.encode() in raw, "parent_raw": parent_raw})
"""
    )
    seen = as_json(probe(child, secret=SECRET_VALUE, grader_pid=os.getpid()))
    assert SECRET_VAR not in seen["env"]
    assert SECRET_VALUE not in json.dumps(seen["env"])
    assert not seen["raw"], "the secret is in the child's initial environment block"
    assert not seen["parent_raw"], "the secret is readable in the template's or the grader's environment"
    assert sorted(seen["env"]) == sorted(child_environment("x"))
    assert seen["env"]["HOME"] == str(child.workdir)


@pytest.mark.parametrize(
    "module", ["solutions", "solutions.reference", "grader", "grader.instructor.cases", "exercises"], ids=lambda m: m
)
def test_child_cannot_import_the_kit(spawn, module):
    child = spawn(
        """
        import importlib
        import sys

        import torch

        def probe(name):
            try:
                importlib.import_module(name)
                imported = 1
            except ImportError:
                imported = 0
            loaded = sum(1 for key in sys.modules if key.split(".")[0] in ("grader", "solutions", "exercises"))
            return torch.tensor([imported, loaded])
        """
    )
    imported, loaded = probe(child, name=module).tolist()
    assert imported == 0, f"the learner's process imported {module}"
    assert loaded == 0, "kit modules are in the learner's sys.modules"


def test_child_cannot_read_the_reference_source(spawn):
    """The issue: a grader where a submission can read the reference is not a grader.

    The kit root is no secret to learner code (it is on the template's command
    line, and torch lives in the kit's .venv), so reading the reference's source
    and exec-ing it would pass every case without doing the exercises.
    """
    reference = KIT_ROOT / "solutions" / "reference.py"
    assert reference.is_file()
    child = spawn(
        """
        import sys

        import torch

        def probe(path):
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:
                return torch.tensor([0, 0])
            return torch.tensor([1, int("def softmax_weights" in text)])
        """
    )
    readable, has_answers = probe(child, path=str(reference)).tolist()
    assert readable == 0, "the learner's process can read solutions/reference.py"


def test_child_has_no_network(spawn):
    """DESIGN: the child runs with no network where the OS allows it (a network namespace works here)."""
    if not namespaces_available():
        pytest.skip("unprivileged user/network namespaces are not available on this machine")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        child = spawn(
            """
            import socket

            import torch

            def probe(port):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    return torch.tensor([1])
                except OSError:
                    return torch.tensor([0])
            """
        )
        connected = probe(child, port=listener.getsockname()[1]).item()
    finally:
        listener.close()
    assert connected == 0, "the learner's process reached a listener on 127.0.0.1"


def test_child_cannot_write_outside_its_workdir(spawn, tmp_path):
    """DESIGN: a read-only view of the filesystem where the OS allows it (mount namespaces work here)."""
    if not namespaces_available():
        pytest.skip("unprivileged user/mount namespaces are not available on this machine")
    target = tmp_path / "written-by-the-learner.txt"
    child = spawn(
        """
        import torch

        def probe(path):
            try:
                with open(path, "w") as fh:
                    fh.write("pwned")
                return torch.tensor([1])
            except OSError:
                return torch.tensor([0])
        """
    )
    wrote = probe(child, path=str(target)).item()
    assert wrote == 0 and not target.exists(), f"the learner's process wrote {target}"


def test_child_cwd_is_a_private_temp_dir_removed_on_close(template, spawn):
    child = spawn(
        JSON_HELPER
        + """
import os
import tempfile

def probe():
    with open("scratch.txt", "w") as fh:
        fh.write("mine")
    return _send([os.getcwd(), tempfile.gettempdir()])
"""
    )
    cwd, temp = map(Path, as_json(probe(child)))
    assert cwd.resolve() == child.workdir.resolve()
    assert temp.resolve() == cwd.resolve(), "tempfile's folder is not the child's own (the template's, cached?)"
    if "tmpfs-work" in template.isolation():  # its files are on a tmpfs of its mount namespace, not on the disk
        assert not (child.workdir / "scratch.txt").exists()
        cwd = Path(f"/proc/{child.pid}/root") / str(cwd.resolve()).lstrip("/")
    assert (cwd / "scratch.txt").read_text() == "mine"
    mode = stat.S_IMODE(child.workdir.stat().st_mode)
    assert mode & 0o077 == 0, f"the workdir is readable by others (mode {oct(mode)})"
    child.close()
    assert not child.workdir.exists(), "the child's workdir survived close()"


def test_close_kills_the_whole_process_group(spawn):
    token = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"
    child = spawn(
        f"""
        import subprocess

        import torch

        def probe():
            subprocess.Popen(["sleep", "{token}"])
            return torch.tensor([1])
        """
    )
    probe(child)
    (sleeper,) = started_with_arg(token)
    try:
        assert proc_stat(sleeper)[2] == child.pid, "the sleeper should be in the child's process group"
        child.close()
        assert wait_until_gone([sleeper, child.pid], 3.0) == [], "a learner process survived close()"
        assert live_in_group(child.pid) == []
    finally:
        kill_if_alive(sleeper)


def test_close_kills_a_process_that_left_the_group(spawn):
    """A learner's process can ``setsid`` out of its group; close() must still leave nothing behind."""
    token = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"
    child = spawn(
        f"""
        import subprocess

        import torch

        def probe():
            subprocess.Popen(["sleep", "{token}"], start_new_session=True)
            return torch.tensor([1])
        """
    )
    probe(child)
    (escaped,) = started_with_arg(token)
    try:
        assert proc_stat(escaped)[2] != child.pid  # it did leave the child's process group
        child.close()
        assert wait_until_gone([escaped], 3.0) == [], (
            f"pid {escaped} (sleep, started by the learner in a new session) outlived close()"
        )
    finally:
        kill_if_alive(escaped)


DOUBLE_FORKED_SLEEPER = """
    import os
    import subprocess

    import torch

    def probe():
        if os.fork() == 0:  # a double fork: the sleeper's parent dies, the template adopts it
            subprocess.Popen(["sleep", "{token}"], start_new_session=True)
            os._exit(0)
        return torch.tensor([1])
    """


def _leave_a_sleeper(child: Child, token: str) -> int:
    """Have ``child`` (spawned without namespaces) start a ``sleep token`` in a session of its own, adopted by
    the template; its pid."""
    child.send({"op": "load", "files": {"probe.py": textwrap.dedent(DOUBLE_FORKED_SLEEPER.format(token=token))},
                "entry": "probe.py", "hooks": ["probe"]})  # fmt: skip
    child.receive(FAST.load_seconds)
    probe(child)
    (escaped,) = started_with_arg(token)
    return escaped


def test_a_process_that_left_the_group_dies_with_the_template_where_no_pid_namespace_ends_it(template):
    """Without a PID namespace (a grader whose user namespaces are refused) a ``setsid`` process outlives its
    child; the template, its subreaper, kills what it adopted before it forks the next (red team files4 n1)."""
    token = f"301.{os.getpid()}{time.monotonic_ns() % 10**6}"
    try:
        child = template.spawn(FAST, without=["namespaces"])
        escaped = _leave_a_sleeper(child, token)
        child.close()
        template.spawn(FAST).close()  # the next request
        assert wait_until_gone([escaped], 3.0) == [], f"pid {escaped} (sleep, in a session of its own) outlived it"
    finally:
        for pid in host_pids_with_arg(token):
            kill_if_alive(pid)


@pytest.mark.slow
def test_what_the_last_hand_in_left_dies_when_the_template_closes():
    """Round 6's P1: the last hand-in of a class has no next request; the grader waits for the template's own
    last sweep before it kills the template, so what that hand-in left does not pass to init and run on."""
    token = f"302.{os.getpid()}{time.monotonic_ns() % 10**6}"
    try:
        with Template() as last:
            child = last.spawn(FAST, without=["namespaces"])
            escaped = _leave_a_sleeper(child, token)
            child.close()  # graded: the class has no next hand-in
        assert wait_until_gone([escaped], 3.0) == [], f"pid {escaped} (the last hand-in's) outlived the template"
    finally:
        for pid in host_pids_with_arg(token):
            kill_if_alive(pid)


def _named(comm: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/comm").read_text().strip() == comm:
                found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_process_that_hops_to_a_fresh_pid_dies_with_the_next_request(template):
    """Round 5's p1: a daemon in a session of its own that forks and exits in a loop holds a new pid every
    moment; a kill aimed at pids read a while before misses it, run after run."""
    comm = f"hop{os.getpid() % 10**6}{time.monotonic_ns() % 10**5}"[:15]
    child = template.spawn(FAST, without=["namespaces"])
    source = f"""
        import ctypes
        import os

        import torch

        def probe():
            if os.fork() == 0:
                os.setsid()
                ctypes.CDLL(None).prctl(15, b"{comm}", 0, 0, 0)  # PR_SET_NAME: how the test finds it
                while True:
                    if os.fork():
                        os._exit(0)
            return torch.tensor([1])
        """
    try:
        child.send({"op": "load", "files": {"probe.py": textwrap.dedent(source)}, "entry": "probe.py",
                    "hooks": ["probe"]})  # fmt: skip
        child.receive(FAST.load_seconds)
        probe(child)
        deadline = time.monotonic() + 5
        while not _named(comm) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _named(comm), "the hopper never started"
        child.close()
        template.spawn(FAST).close()  # the next request
        time.sleep(0.3)
        assert _named(comm) == [], "the hopper lived on through the next request"
    finally:
        for _ in range(200):
            for pid in _named(comm):
                kill_if_alive(pid)


def test_memory_blowup_is_a_clean_error(spawn):
    child = spawn(
        """
        import torch

        def probe(gib):
            if gib:
                hoard = torch.empty(gib * 2**30, dtype=torch.uint8)
                return hoard[:1]
            a = torch.ones(64, 64)
            return a @ a
        """
    )
    header, outputs = call(child, gib=8)
    assert header["ok"] is False, "an 8 GiB allocation succeeded: no address-space limit"
    assert header["error"]["type"] in ("RuntimeError", "MemoryError"), header["error"]
    assert "alloc" in header["error"]["message"].lower(), header["error"]["message"]
    assert outputs == {}
    # the same process still works afterwards
    assert torch.equal(probe(child, gib=0), torch.full((64, 64), 64.0))


def test_call_timeout_raises_childgone_and_close_leaves_no_process(spawn):
    child = spawn(
        """
        def probe():
            while True:
                pass
        """
    )
    send_call(child)
    started = time.monotonic()
    with pytest.raises(ChildGone, match="timed out"):
        child.receive(FAST.call_seconds)
    elapsed = time.monotonic() - started
    assert FAST.call_seconds - 0.1 <= elapsed < FAST.call_seconds + 2.0
    # killed at the deadline, not only at close()
    assert wait_until_gone([child.pid], 3.0) == [], "the spinning child outlived its deadline"
    assert live_in_group(child.pid) == []
    child.close()
    assert not child.workdir.exists()


def test_submission_wall_clock_limit(spawn):
    limits = Limits(call_seconds=5, submission_seconds=1.5)
    child = spawn(
        """
        import time

        import torch

        def probe():
            time.sleep(3)
            return torch.zeros(1)
        """,
        limits,
    )
    send_call(child)
    started = time.monotonic()
    with pytest.raises(ChildGone, match=r"used up its 1\.5 s time limit"):
        child.receive(limits.call_seconds)
    assert time.monotonic() - started < limits.call_seconds - 2.0
    assert time.monotonic() < child.deadline + 0.5, "the read went on past the submission's deadline"
    assert wait_until_gone([child.pid], 3.0) == [], "the child outlived the submission's deadline"


def test_a_child_spawned_with_a_deadline_keeps_it(template):
    """The session passes its deadline in: a second child of the same submission gets only what is left."""
    deadline = time.monotonic() + 0.5
    child = template.spawn(FAST, deadline=deadline)
    try:
        time.sleep(0.6)
        child.send({"op": "hello"})
        with pytest.raises(ChildGone, match="used up its 30 s time limit"):
            child.receive(FAST.call_seconds)
    finally:
        child.close()


def test_resource_limits_are_set_in_the_child(spawn):
    limits = Limits(
        call_seconds=2,
        submission_seconds=30,
        memory_bytes=5 << 30,
        cpu_seconds=77,
        file_bytes=3 << 20,
        open_files=123,
        processes=45,
    )
    child = spawn(
        """
        import resource

        import torch

        def probe():
            names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE")
            return torch.tensor([resource.getrlimit(getattr(resource, n))[0] for n in names])
        """,
        limits,
    )
    got = probe(child).tolist()
    # RLIMIT_NPROC counts every process of the user machine-wide, so the child allows 45 more than exist
    nproc = got.pop(4)
    address_space = got.pop(0)  # 5 GiB more than the child's address space at start (torch maps GBs)
    assert got == [77, 3 << 20, 123, 0]
    assert 5 << 30 < address_space < (5 << 30) + (64 << 30)
    assert 45 < nproc < 45 + 100_000


@pytest.mark.parametrize("size", [40, 100_000], ids=["short-print", "huge-print"])
def test_child_output_is_captured_and_truncated(spawn, size):
    child = spawn(
        """
        import sys

        import torch

        def probe(size):
            print("learner says hi " + "x" * size)
            print("to stderr", file=sys.stderr)
            return torch.zeros(1)
        """
    )
    probe(child, size=size)
    text = child.output()
    assert "learner says hi" in text, f"the learner's print is missing from the captured output: {text[:200]!r}"
    if size > 64 * 1024:
        assert "more bytes not kept" in text
        assert len(text) < 64 * 1024 + 200


CLASS_ONLY = "class SelfAttention:\n    def __init__(self, d_in, d_out, qkv_bias=False):\n        self.d = d_out\n"


@pytest.mark.parametrize(
    ("aliases", "found"), [({"make_self_attention": "SelfAttention"}, True), ({}, False)], ids=["aliases", "none"]
)
def test_the_chapters_class_names_come_in_the_load_message(template, aliases, found):
    """The runtime imports nothing of the kit: the class standing in for a module hook is named in ``load``."""
    child = template.spawn(FAST)
    try:
        load = {"op": "load", "files": {"mine.py": CLASS_ONLY}, "entry": "mine.py", "hooks": ["make_self_attention"]}
        child.send(dict(load, aliases=aliases))
        header, _ = child.receive(FAST.load_seconds)
    finally:
        child.close()
    assert "import_error" not in header, header
    assert ("make_self_attention" in header["hooks"]) is found, header
    if found:
        assert header["hooks"]["make_self_attention"]["where"] == "mine.py:2"  # the class's __init__


# --- the wire format: absolute deadlines, caps, and nothing but ChildGone out of receive ---------------


def _drip(sock: socket.socket, data: bytes, interval: float, stop) -> None:
    for byte in data:
        if stop.is_set():
            return
        with contextlib.suppress(OSError):
            sock.sendall(bytes([byte]))
        stop.wait(interval)


def test_recv_message_stops_at_the_deadline_however_the_bytes_drip():
    """One byte every 0.3 s: each recv alone would be in time; the whole message must not be."""
    import threading

    from grader.child.wire import recv_message

    ours, theirs = socket.socketpair()
    stop = threading.Event()
    header = json.dumps({"id": 0, "ok": True}).encode()
    message = len(header).to_bytes(8, "big") + header + (0).to_bytes(8, "big")
    dripper = threading.Thread(target=_drip, args=(theirs, message, 0.3, stop), daemon=True)
    dripper.start()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            recv_message(ours, deadline=started + 1.0)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        dripper.join(5)
        ours.close()
        theirs.close()
    assert 0.9 <= elapsed < 1.5, f"the read took {elapsed:.2f} s for a 1 s deadline"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "too deeply nested"),
        (b'{"a": "\xff\xfe"}', "not UTF-8"),
        (b"[1, 2, 3]", "not an object"),
        (b"{nope", "not JSON"),
    ],
    ids=["deep-nesting", "bad-utf8", "not-an-object", "not-json"],
)
def test_recv_message_refuses_a_malformed_header_as_protocol_error(raw, why):
    from grader.child.wire import ProtocolError, recv_message

    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(len(raw).to_bytes(8, "big") + raw + (0).to_bytes(8, "big"))
        with pytest.raises(ProtocolError):
            recv_message(ours, deadline=time.monotonic() + 5)
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("which", ["header", "blob"], ids=["header", "blob"])
def test_recv_message_refuses_oversized_parts_from_the_length_alone(which):
    from grader.child.wire import ProtocolError, recv_message

    ours, theirs = socket.socketpair()
    try:
        if which == "header":
            theirs.sendall((10_000).to_bytes(8, "big"))  # and nothing after it: the cap decides unread
            match = "header of 10000 bytes is over the 100 byte limit"
        else:
            theirs.sendall((2).to_bytes(8, "big") + b"{}" + (10_000).to_bytes(8, "big"))
            match = "data of 10000 bytes is over the 100 byte limit"
        with pytest.raises(ProtocolError, match=match):
            recv_message(ours, max_blob=100, max_header=100, deadline=time.monotonic() + 5)
    finally:
        ours.close()
        theirs.close()


# --- figures: matplotlib under the full isolation, read as data -------------------------------------------------


def test_a_child_draws_a_figure_headless_and_sends_it_as_data(template, spawn):
    """matplotlib imports and draws under every layer (Landlock's allowlist holds it and its fonts); the figure
    comes back as data (the image's array as a tensor, the labels, ticks and colorbar as JSON), and a call to
    pyplot.show is recorded, never made."""
    pytest.importorskip("matplotlib", reason="the figure hooks need matplotlib")
    from safetensors.torch import save

    assert "landlock" in template.isolation() or not namespaces_available()
    child = spawn(
        """
        import os

        import torch

        def probe(weights, tokens):
            import matplotlib
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots()
            fig.colorbar(ax.imshow(weights.detach().numpy()), ax=ax)
            ax.set_xticks(range(weights.shape[1]), tokens[1])
            ax.set_yticks(range(weights.shape[0]), tokens[0])
            fig.savefig(os.path.join(os.getcwd(), "drawn.png"))  # Agg renders text: the fonts are readable
            print(matplotlib.get_backend(), os.environ["MPLCONFIGDIR"] == os.getcwd())
            plt.show()
            return fig
        """
    )
    weights = torch.rand(3, 5, dtype=torch.float64)
    tokens = [["a", "b", "c"], ["v", "w", "x", "y", "z"]]
    args = {"weights": {"tensor": "w"}, "tokens": {"value": tokens}}
    message = {"id": 0, "hook": "probe", "args": args, "output": "figure", "banned": ["show"]}
    child.send({"op": "call", "calls": [message]}, save({"w": weights}))
    header, blob = child.receive(30.0)
    assert header.get("ok"), header.get("error")
    assert header["banned"] == ["pyplot.show"]
    assert header["printed"].lower().split() == ["agg", "true"]
    facts = header["results"][0]["figure"]
    assert facts["images"] == 1 and facts["colorbar"] is True
    assert [t["text"] for t in facts["xticks"]] == tokens[1] and [t["at"] for t in facts["xticks"]] == [0, 1, 2, 3, 4]
    assert [t["text"] for t in facts["yticks"]] == tokens[0]
    assert torch.equal(load_tensors(blob)["out0"], weights)


# --- banned kernels: watched once by the template, or by the child for a name the template did not watch ------

BOTH_MODES_OFF = """
import torch

def probe():
    x = torch.arange(6.0).reshape(2, 3)
    with torch._C.DisableTorchFunction(), torch.utils._python_dispatch._disable_current_modes():
        torch.softmax(x, -1), torch.cumsum(x, -1)  # below both recording modes: only a kernel hears them
    return x
"""


@pytest.mark.parametrize(
    "load_bans, call_bans, heard",
    [
        (None, ["softmax"], ["torch.ops.aten._softmax", "torch.ops.aten.softmax"]),  # the template's watch
        (["cumsum"], ["cumsum"], ["torch.ops.aten.cumsum"]),  # a name it did not watch: the child's own
        (None, [], []),  # a call that bans nothing hears nothing
    ],
    ids=["template-watch", "child-watch", "no-ban"],
)
def test_a_banned_kernel_is_heard_in_a_child_whoever_watched_it(template, load_bans, call_bans, heard):
    from grader.hook_table import BANNED_NAMES

    child = template.spawn(FAST)
    try:
        child.send({"op": "load", "files": {"probe.py": BOTH_MODES_OFF}, "entry": "probe.py", "hooks": ["probe"],
                    "banned": list(BANNED_NAMES if load_bans is None else load_bans)})  # fmt: skip
        child.receive(FAST.load_seconds)
        child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": {}, "banned": call_bans}]})
        header, _ = child.receive(5.0)
    finally:
        child.close()
    assert header.get("ok"), header.get("error")
    assert sorted(header["banned"]) == heard


def test_a_child_is_alive_by_its_pidfd_not_by_a_pid_another_process_may_hold():
    """P2: a child's pid, once it has ended, may be a stray's; the template asks the pidfd it took at the fork."""
    from grader.child.serve import _alive, _hold

    ended = subprocess.Popen(["true"])
    held = _hold(ended.pid)
    if held is None:
        pytest.skip("no pidfd_open here (Linux before 5.3): the template asks the pid itself")
    ended.wait()
    stranger = subprocess.Popen(["sleep", "30"])  # a live process at a pid the child's ended life held, as it were
    its_own = _hold(stranger.pid)
    try:
        assert _alive(stranger.pid) and not _alive(stranger.pid, held)
        assert _alive(stranger.pid, its_own)
    finally:
        stranger.kill()
        stranger.wait()
        os.close(held)
        if its_own is not None:
            os.close(its_own)


def _closed_python() -> str | None:
    """The first folder on the way to this Python's standard library that others may not enter, or None."""
    import sysconfig

    parts = Path(sysconfig.get_paths()["stdlib"]).parts
    closed = [Path(*parts[:i]) for i in range(2, len(parts) + 1) if not Path(*parts[:i]).stat().st_mode & 0o001]
    return str(closed[0]) if closed else None


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or _closed_python() is None,
                    reason="needs a root grader whose Python lies under a folder closed to others (pyenv in /root)")
def test_a_python_the_learner_uid_cannot_read_is_refused_before_anything_is_graded():
    """F1': as root without a mount namespace, the learner's uid cannot read a Python under a 0700 /root: every
    hand-in importing a module the template had not imported would fail; the grader says so and grades nothing."""
    import functools

    with Template() as tpl:
        assert "mount-ns" in tpl.isolation() or pytest.skip("no mount namespace here: the refusal is the default")
    with Template() as tpl:
        tpl.spawn = functools.partial(tpl.spawn, without=["namespaces"])  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match=re.escape(repr(_closed_python())) + ".*nothing was graded"):
            tpl.isolation()
