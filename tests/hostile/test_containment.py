"""Containment (issue 10): every layer of the learner's sandbox, attacked through a real child.

Each test spawns a real child from a template (``Template().spawn``), loads a small
probe submission into it and runs it, exactly as ``tests/test_sandbox.py`` drives
a child.  A probe reports what it saw from inside as JSON bytes in a tensor (the
only thing that crosses back); the test checks from outside too, where it can
(``/proc/<pid>/status`` of the learner's process, who owns the files it wrote,
what is left in the machine's SysV IPC tables).

Some tests leave layers out (``spawn(..., without=[...])``): to show that one
layer alone holds (the fresh session keyring without seccomp, Landlock without any
namespace), or as a control, to show that the attack is real where the layers
are missing.  The policy each layer applies is declared once, as data, in
``grader/child/policy.py`` (FILESYSTEM, DEVICES, SYSCALLS, the work folder's
tmpfs); tests here check that what a child meets is what is declared.  The
containment runs again under uids 1001 and 2345 (and 65534) as an unprivileged
grader.  ``tests/hostile/README.md`` has the table.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import select
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import torch
from safetensors.torch import load as load_tensors

from grader.child.contain import SANDBOX_UID, highest_named_syscall, seccomp_filter, syscall_number
from grader.child.policy import (
    _KIT_PACKAGES,
    CPU_SYSCALLS,
    DEVICES,
    FILESYSTEM,
    NEWER_SYSCALLS,
    SYSCALLS,
    filesystem_policy,
    syscall_policy,
)
from grader.instructor.class_grading import FULL_ISOLATION
from grader.instructor.sandbox import KIT_ROOT, Child, ChildGone, Limits, Template

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux containment; reads /proc"),
]

FAST = Limits(call_seconds=5, submission_seconds=60)
TOKEN = f"attnkit-{os.getpid()}-{uuid.uuid4().hex[:8]}"
ROOT = os.geteuid() == 0
X86_64 = platform.machine() == "x86_64"
SIGSYS = 31

try:
    import pyseccomp

    HAVE_LIBSECCOMP = True
except (ImportError, RuntimeError, OSError):
    HAVE_LIBSECCOMP = False


# --- the trusted side's view --------------------------------------------------------------------------------


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def syscall(name: str, *args) -> tuple[int, int]:
    """(result, errno) of syscall ``name`` in this (the test's) process."""
    number = syscall_number(name)
    assert number is not None, name
    ctypes.set_errno(0)
    result = _libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return int(result), ctypes.get_errno()


def learner_pid(child: Child) -> int:
    """Host pid of the process running learner code: the child's child (PID 1 of its namespace), or the child."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                text = (entry / "stat").read_text()
                if int(text[text.rindex(")") + 2 :].split()[1]) == child.pid:
                    return int(entry.name)
    return child.pid


def in_workdir(child: Child, name: str) -> Path:
    """``name`` in the child's work folder as the learner's process sees it (its mount namespace's tmpfs)."""
    return Path(f"/proc/{learner_pid(child)}/root") / os.path.realpath(child.workdir).lstrip("/") / name


def status_of(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in "ZX":
            return True
        time.sleep(0.05)
    return False


def host_ipc_keys(kind: str) -> set[int]:
    """The keys of the machine's SysV objects of ``kind`` (shm, msg, sem), as this process sees them."""
    lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines if line.strip()}


# --- the learner's side ----------------------------------------------------------------------------------------

LEARNER = '''
import ctypes
import errno
import json
import os

import torch

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def sc(number, *args):
    """[result, errno name] of a raw syscall."""
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    err = ctypes.get_errno()
    return [int(result), errno.errorcode.get(err, str(err)) if result < 0 else "ok"]


def try_open(path, flags=os.O_RDONLY):
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    try:
        if flags & (os.O_WRONLY | os.O_RDWR):
            os.write(fd, b"FAKE: every student 24/24\\n")
        return "opened"
    except OSError:
        return "opened"
    finally:
        os.close(fd)


def forked(fn):
    """Run fn() in a forked process: {"signal": n, "exit": code}."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if fn() >= 0 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return {"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}


def machine_code(code):
    """Call machine code placed on an executable page; return what it leaves in eax."""
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 7, 0x22, -1, 0)  # PROT_READ|WRITE|EXEC, MAP_PRIVATE|MAP_ANONYMOUS
    ctypes.memmove(page, code, len(code))
    return ctypes.CFUNCTYPE(ctypes.c_int)(page)()


# i386 socket(AF_UNIX, SOCK_STREAM, 0) through int 0x80: push rbx; mov eax, 359; mov ebx, 1; mov ecx, 1;
# xor edx, edx; int 0x80; pop rbx; ret
INT80_SOCKET = bytes.fromhex("53b867010000bb01000000b90100000031d2cd805bc3")


def send(value):
    return torch.tensor(list(json.dumps(value).encode()), dtype=torch.uint8)
'''


@pytest.fixture(scope="module")
def session_key():
    """A secret in this process's session keyring, put there before the template starts (it inherits it)."""
    if syscall_number("add_key") is None:
        pytest.skip("no add_key syscall number for this machine")
    description = f"{TOKEN}-key".encode()
    payload = b"grader-secret-" + uuid.uuid4().hex.encode()
    serial, err = syscall("add_key", b"user", description, payload, len(payload), -3)  # KEY_SPEC_SESSION_KEYRING
    if serial < 0:
        pytest.skip(f"add_key to the session keyring failed here (errno {err})")
    yield {"serial": serial, "description": description.decode(), "payload": payload.decode()}
    syscall("keyctl", 3, serial)  # KEYCTL_REVOKE


@pytest.fixture(scope="module")
def template(session_key):
    tpl = Template()
    tpl.isolation()  # boots, and forks once
    try:
        yield tpl
    finally:
        tpl.close()


@pytest.fixture(scope="module")
def layers(template) -> list[str]:
    return template.isolation().split("+")


@pytest.fixture
def spawn(template):
    """``spawn(source, limits=FAST, without=()) -> Child`` loaded with LEARNER + ``source`` as ``probe.py``."""
    children: list[Child] = []

    def make(source: str, limits: Limits = FAST, without=()) -> Child:
        child = template.spawn(limits, without=without)
        children.append(child)
        code = LEARNER + textwrap.dedent(source)
        child.send({"op": "load", "files": {"probe.py": code}, "entry": "probe.py", "hooks": ["probe"]})
        header, _ = child.receive(limits.load_seconds)
        assert "import_error" not in header, (header, child.output())
        assert "probe" in header.get("hooks", {}), header
        return child

    yield make
    for child in children:
        child.close()


def hello(child: Child) -> dict:
    child.send({"op": "hello"})
    header, _ = child.receive(10)
    return header


def run(child: Child, timeout: float = 10.0, **values) -> dict:
    """What ``probe(**values)`` sent back (decoded JSON); fails the test if the probe raised."""
    args = {name: {"value": value} for name, value in values.items()}
    child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": args}]})
    header, blob = child.receive(timeout)
    assert header.get("ok"), f"the probe raised: {header.get('error')}\n{child.output()[-2000:]}"
    return json.loads(bytes(load_tensors(blob)["out0"].tolist()).decode())


def needs(layers: list[str], *names: str) -> None:
    missing = [n for n in names if n not in layers]
    if missing:
        pytest.skip(f"isolation here: {'+'.join(layers)} (no {', '.join(missing)})")


def numbers(*names: str) -> dict[str, int]:
    found = {name: syscall_number(name) for name in names}
    if any(v is None for v in found.values()):
        pytest.skip(f"no syscall numbers for {platform.machine()}")
    return found  # type: ignore[return-value]


# --- every layer named in the isolation line took ---------------------------------------------------------------

LAYERS = ["uid", "user-ns", "pid-ns", "net-ns", "ipc-ns", "mount-ns", "tmpfs-work", "dev", "keyring", "no-caps"]
LAYERS += ["landlock", "seccomp"]
NOTICES = ["seccomp-missing"]  # not a layer: what is missing, said in the line

LAYER_PROBE = """
def probe(nr):
    with open("written-by-the-learner.txt", "w") as fh:
        fh.write("x")
    out = {"pid": os.getpid(), "proc": sorted(p for p in os.listdir("/proc") if p.isdigit())}
    with open("/proc/self/net/dev") as fh:  # the network namespace's interfaces (seccomp refuses any socket)
        out["interfaces"] = [line.split(":")[0].strip() for line in fh.read().splitlines()[2:]]
    out["hostname"] = try_open("/etc/hostname")
    return send(out)
"""


def _layer_kind(layer: str) -> str:
    """``uid`` for ``uid-65534``, the layer itself otherwise."""
    return "uid" if layer.startswith("uid-") else layer


@pytest.mark.slow
def test_the_isolation_line_names_only_known_layers_and_nobody_for_root(layers):
    unknown = [layer for layer in layers if _layer_kind(layer) not in LAYERS + NOTICES]
    assert unknown == [], f"layers the README does not list: {unknown}"
    if ROOT:
        assert f"uid-{SANDBOX_UID}" in layers, f"the grader is root, and the learner is not nobody: {layers}"
    else:
        assert not any(layer.startswith("uid-") for layer in layers)


@pytest.mark.parametrize("layer", LAYERS, ids=LAYERS)
def test_each_layer_in_the_isolation_line_really_took(spawn, layers, layer):
    named = [name for name in layers if _layer_kind(name) == layer]
    if not named:
        pytest.skip(f"isolation here: {'+'.join(layers)} (no {layer})")
    child = spawn(LAYER_PROBE)
    seen = run(child, nr=0)
    pid = learner_pid(child)
    status = status_of(pid)
    if layer == "uid":
        uid = int(named[0].split("-", 1)[1])
        assert uid != 0 and uid == SANDBOX_UID
        assert status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(uid)] * 4, status
        assert status["Groups"] == "", f"supplementary groups followed the learner: {status['Groups']}"
        assert in_workdir(child, "written-by-the-learner.txt").stat().st_uid == uid
    elif layer.endswith("-ns"):
        kind = {"user-ns": "user", "pid-ns": "pid", "net-ns": "net", "ipc-ns": "ipc", "mount-ns": "mnt"}[layer]
        assert os.readlink(f"/proc/{pid}/ns/{kind}") != os.readlink(f"/proc/self/ns/{kind}")
        if layer == "pid-ns":
            assert seen["pid"] == 1 and seen["proc"] == ["1"], seen
        if layer == "net-ns":
            assert seen["interfaces"] == ["lo"], seen
        if layer == "mount-ns":  # an empty /tmp of its own: only the way to its workdir, and to Python when it is there
            needed = [child.workdir, Path(sys.prefix), Path(sys.base_prefix), *map(Path, filter(None, sys.path))]
            on_the_way = {part for path in needed for part in path.resolve().parts}
            assert set(os.listdir(f"/proc/{pid}/root/tmp")) <= on_the_way
    elif layer == "tmpfs-work":  # the learner's file is on a tmpfs of the work size, not on the grader's disk
        assert not (child.workdir / "written-by-the-learner.txt").exists()
        assert in_workdir(child, "written-by-the-learner.txt").read_text() == "x"
        fs = os.statvfs(in_workdir(child, "."))
        assert fs.f_blocks * fs.f_frsize == FAST.work_bytes, fs
        assert os.stat(in_workdir(child, ".")).st_dev != os.stat(child.workdir).st_dev
    elif layer == "dev":
        inside = sorted(os.listdir(f"/proc/{pid}/root/dev"))
        assert inside == sorted([*DEVICES, "fd", "stdin", "stdout", "stderr", "shm"]), inside
    elif layer == "keyring":  # keyctl is denied by seccomp: ask a child without it which keyring it has
        unfiltered = spawn(KEYRING_ID_PROBE, without=["seccomp"])
        inside = run(unfiltered, nr=numbers("keyctl"))
        ours, _ = syscall("keyctl", 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of our session keyring
        assert inside["id"][0] > 0 and ours > 0 and inside["id"][0] != ours, (inside, ours)
        assert inside["description"].startswith("keyring;") and inside["description"].endswith(";_ses"), inside
    elif layer == "no-caps":
        for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            assert int(status[key], 16) == 0, f"{key} {status[key]}"
        if ROOT or "user-ns" in layers:
            assert int(status["CapBnd"], 16) == 0, f"CapBnd {status['CapBnd']}"
    elif layer == "landlock":  # a world-readable file outside the allowlist
        if not os.access("/etc/hostname", os.R_OK):
            pytest.skip("no readable /etc/hostname here")
        assert seen["hostname"] == "EACCES", seen
    elif layer == "seccomp":
        assert status["Seccomp"] == "2" and int(status.get("Seccomp_filters", "1")) >= 1, status


KEYRING_ID_PROBE = """
def probe(nr):
    serial = sc(nr["keyctl"], 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of @s, not creating one
    buf = ctypes.create_string_buffer(256)
    sc(nr["keyctl"], 6, serial[0], buf, 256)  # KEYCTL_DESCRIBE: type;uid;gid;perm;description
    return send({"id": serial, "description": buf.value.decode(errors="replace")})
"""


# --- the session keyring ---------------------------------------------------------------------------------------

KEYRING_PROBE = """
def probe(nr, serial, description):
    buf = ctypes.create_string_buffer(256)
    out = {
        "search": sc(nr["keyctl"], 10, -3, b"user", description.encode(), 0),  # KEYCTL_SEARCH in @s
        "read": sc(nr["keyctl"], 11, serial, buf, 256),  # KEYCTL_READ by serial
        "request": sc(nr["request_key"], b"user", description.encode(), None, 0),
        "add": sc(nr["add_key"], b"user", b"planted", b"x", 1, -3),
    }
    out["payload"] = buf.value.decode(errors="replace")
    try:
        with open("/proc/keys") as fh:
            out["proc_keys"] = description in fh.read()
    except OSError as exc:
        out["proc_keys"] = errno.errorcode.get(exc.errno)
    return send(out)
"""


def test_a_plain_subprocess_does_reach_the_session_key(session_key):
    """The control outside any sandbox: the key really sits in the session keyring children inherit."""
    code = (
        "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); libc.syscall.restype = ctypes.c_long; "
        f"sys.exit(0 if libc.syscall({syscall_number('keyctl')}, 10, -3, b'user', "
        f"{session_key['description'].encode()!r}, 0) == {session_key['serial']} else 1)"
    )
    assert subprocess.run([sys.executable, "-I", "-c", code], timeout=60).returncode == 0


def test_the_grader_session_keyring_is_out_of_reach(spawn, layers, session_key):
    needs(layers, "seccomp")
    child = spawn(KEYRING_PROBE)
    assert hello(child)["seccomp"] == "libseccomp"
    nr = numbers("keyctl", "add_key", "request_key")
    seen = run(child, nr=nr, serial=session_key["serial"], description=session_key["description"])
    for op in ("search", "read", "request", "add"):
        assert seen[op] == [-1, "EPERM"], (op, seen)
    assert session_key["payload"] not in seen["payload"]
    assert seen["proc_keys"] is not True


def test_a_fresh_session_keyring_alone_hides_the_grader_keys(spawn, layers, session_key):
    """The keyring layer with seccomp left out: the grader's session keyring is no longer possessed."""
    needs(layers, "keyring")
    child = spawn(KEYRING_PROBE, without=["seccomp"])
    nr = numbers("keyctl", "add_key", "request_key")
    seen = run(child, nr=nr, serial=session_key["serial"], description=session_key["description"])
    assert seen["search"] == [-1, "ENOKEY"], seen
    assert session_key["payload"] not in seen["payload"]
    if ROOT:  # another uid and no possession: the key by its serial is refused too
        assert seen["read"] == [-1, "EACCES"], seen


def test_without_keyring_and_seccomp_the_learner_would_read_the_key(spawn, session_key):
    """The control inside the sandbox: the attack the keyring and seccomp layers stop is real."""
    child = spawn(KEYRING_PROBE, without=["seccomp", "keyring"])
    nr = numbers("keyctl", "add_key", "request_key")
    seen = run(child, nr=nr, serial=session_key["serial"], description=session_key["description"])
    assert seen["search"] == [session_key["serial"], "ok"], seen
    assert seen["payload"] == session_key["payload"]


# --- terminals, devices, /etc/shadow ------------------------------------------------------------------------------

DEVICE_PROBE = """
def probe(paths):
    out = {path: try_open(path, os.O_RDWR) for path in paths}
    out["/etc/shadow"] = try_open("/etc/shadow")
    return send(out)
"""


def _devices_to_attack(pty_path: str) -> list[str]:
    paths = [pty_path, "/dev/tty", "/dev/console", "/dev/kmsg", "/dev/ptmx", "/dev/mem", "/dev/loop-control"]
    paths += sorted(str(p) for p in Path("/dev").glob("loop[0-9]*"))[:2]
    paths += [f"/dev/{b.name}" for b in sorted(Path("/sys/block").iterdir())[:2]] if Path("/sys/block").is_dir() else []
    return paths


@pytest.mark.parametrize("mode", ["full", "landlock-only"], ids=["full", "landlock-only"])
def test_no_terminal_console_kmsg_or_disk_is_reachable(spawn, layers, mode):
    """The instructor's terminal (a pty this test opens), the console, /dev/kmsg, loop devices, disks, /etc/shadow.

    ``landlock-only`` leaves every namespace out: the machine's /dev is in plain
    view and Landlock alone must keep the learner from it.
    """
    needs(layers, "landlock")
    master, slave = os.openpty()
    try:
        pty_path = os.ttyname(slave)
        paths = _devices_to_attack(pty_path)
        existing = [p for p in paths if os.path.exists(p)]
        assert pty_path in existing
        child = spawn(DEVICE_PROBE, without=["namespaces"] if mode == "landlock-only" else [])
        seen = run(child, paths=paths)
        opened = {p: r for p, r in seen.items() if r == "opened"}
        assert opened == {}, f"the learner opened {opened}"
        if mode == "landlock-only":  # the files are there: Landlock refused them
            assert all(seen[p] == "EACCES" for p in existing), seen
        readable, _, _ = select.select([master], [], [], 0.2)
        assert not readable, f"something reached the terminal: {os.read(master, 200)!r}"
    finally:
        os.close(master)
        os.close(slave)


# --- SysV IPC and POSIX message queues ----------------------------------------------------------------------------

IPC_PROBE = """
def probe(nr, key, queue, create, big):
    flags = 0o1600 if create else 0  # IPC_CREAT | 0600
    out = {
        "shm": sc(nr["shmget"], key, 4096 if create else 0, flags),
        "shm_big": sc(nr["shmget"], key + 1, big if create else 0, flags),
        "msg": sc(nr["msgget"], key, flags),
        "sem": sc(nr["semget"], key, 1 if create else 0, flags),
        "mq": sc(nr["mq_open"], queue.encode(), (0o100 | 2) if create else 0, 0o600, None),  # O_CREAT|O_RDWR
    }
    if create and out["shm"][0] >= 0:  # the marker, and that it is found again from inside
        libc.shmat.restype = ctypes.c_void_p
        at = libc.shmat(ctypes.c_int(out["shm"][0]), None, 0)
        ctypes.memmove(at, b"MARKER", 6)
        out["found_again"] = sc(nr["shmget"], key, 0, 0)[0] == out["shm"][0]
    return send(out)
"""


def test_sysv_ipc_and_posix_queues_are_denied(spawn, layers):
    needs(layers, "seccomp")
    child = spawn(IPC_PROBE)
    nr = numbers("shmget", "msgget", "semget", "mq_open")
    seen = run(child, nr=nr, key=0x5A17_0000 + os.getpid() % 0xFFFF, queue=TOKEN, create=True, big=3 << 29)
    for kind in ("shm", "shm_big", "msg", "sem", "mq"):
        assert seen[kind] == [-1, "EPERM"], (kind, seen)


def test_an_ipc_object_dies_with_its_child_and_no_later_child_sees_it(spawn, layers):
    """The IPC namespace alone (seccomp and Landlock left out): objects are the child's own, and go when it goes.

    Landlock alone refuses a new POSIX queue (creating one is making a file in
    the namespace's mqueue filesystem), so it is left out here too.
    """
    needs(layers, "ipc-ns")
    nr = numbers("shmget", "msgget", "semget", "mq_open")
    key = 0x5A18_0000 + os.getpid() % 0xFFFF
    first = spawn(IPC_PROBE, without=["seccomp", "landlock"])
    made = run(first, nr=nr, key=key, queue=TOKEN, create=True, big=3 << 29)  # 1.5 GiB, over its address space
    assert all(made[kind][0] >= 0 for kind in ("shm", "shm_big", "msg", "sem", "mq")), json.dumps(made)
    assert made["found_again"] is True
    for kind in ("shm", "msg", "sem"):  # never in the machine's tables, even while the child lives
        assert key not in host_ipc_keys(kind) and key + 1 not in host_ipc_keys(kind), kind
    pid = learner_pid(first)
    first.close()
    assert gone(pid), "the first child outlived close()"
    for kind in ("shm", "msg", "sem"):
        assert key not in host_ipc_keys(kind), kind
    later = spawn(IPC_PROBE, without=["seccomp", "landlock"])
    seen = run(later, nr=nr, key=key, queue=TOKEN, create=False, big=0)
    for kind in ("shm", "shm_big", "msg", "sem", "mq"):
        assert seen[kind] == [-1, "ENOENT"], (kind, seen)


# --- syscalls that are escape aids ---------------------------------------------------------------------------------

SYSCALL_PROBE = """
import errno
import mmap

def probe(nr):
    params = ctypes.create_string_buffer(120)
    out = {
        "io_uring_setup": sc(nr["io_uring_setup"], 8, params),
        "bpf": sc(nr["bpf"], 5, ctypes.create_string_buffer(128), 128),  # BPF_PROG_LOAD
        "perf_event_open": sc(nr["perf_event_open"], ctypes.create_string_buffer(128), 0, -1, -1, 0),
        "userfaultfd": sc(nr["userfaultfd"], 0),
        "ptrace": sc(nr["ptrace"], 0, 0, 0, 0),  # PTRACE_TRACEME
        "process_vm_readv": sc(nr["process_vm_readv"], 1, None, 0, None, 0, 0),
        "unshare": sc(nr["unshare"], 0x10000000),  # CLONE_NEWUSER
        "setns": sc(nr["setns"], 0, 0),
        "mount": sc(nr["mount"], b"none", b"/tmp", b"tmpfs", 0, None),
        "clone3": sc(nr["clone3"], None, 0),
    }
    pid = sc(nr["clone"], 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
    if pid[0] == 0:
        os._exit(0)
    out["clone_newuser"] = pid
    out["socket_unix"] = sc(nr["socket"], 1, 1, 0)  # AF_UNIX, SOCK_STREAM
    out["socket_unix_high_bits"] = sc(nr["socket"], 1 | (1 << 32), 1, 0)  # the kernel reads an int: still AF_UNIX
    out["socket_vsock"] = sc(nr["socket"], 40, 1, 0)  # AF_VSOCK: the host, past the network namespace
    out["socket_alg"] = sc(nr["socket"], 38, 5, 0)  # AF_ALG, SOCK_SEQPACKET: the kernel's crypto
    out["memfd_create"] = sc(nr["memfd_create"], b"x", 0)  # memory that no cap counts
    out["fsetxattr"] = sc(nr["fsetxattr"], 1, b"user.x", b"v" * 64, 64, 0)  # kernel memory no cap counts
    out["setxattr"] = sc(nr["setxattr"], b".", b"user.x", b"v" * 64, 64, 0)
    out["setitimer"] = sc(nr["setitimer"], 0, None, None)  # a timer signal: its handler runs anywhere
    out["timer_create"] = sc(nr["timer_create"], 0, None, None)
    page = mmap.mmap(-1, 4096)  # shared anonymous memory: allowed, freed once unmapped
    page[0] = 1
    where = ctypes.addressof(ctypes.c_char.from_buffer(page))
    advices = {"madv_free": 8, "madv_cold": 20, "madv_pageout": 21, "madv_populate_read": 22, "madv_dontneed": 4}
    for name, advice in advices.items():
        out[name] = sc(nr["madvise"], where, 4096, advice)  # the first three clear the pages' accessed bits
    out["process_madvise"] = sc(nr["process_madvise"], 0, None, 0, 20, 0)
    out["socket_inet"] = sc(nr["socket"], 2, 2, 0)  # AF_INET, SOCK_DGRAM: no socket at all
    out["socket_netlink"] = sc(nr["socket"], 16, 3, 0)  # AF_NETLINK: its queue is kernel memory no count reads
    # metadata, which Landlock does not guard: an unprivileged grader's learner owns the instructor's files;
    # a mode, owner or time set is skipped (it returns 0 and changes nothing)
    before = os.stat(".")
    other = (before.st_mode & 0o7777) ^ 0o004  # others' read toggled: harmless, and seen if it took
    out["chmod"] = sc(nr["chmod"], b".", other)
    out["fchmodat2"] = sc(nr["fchmodat2"], -100, b".", other, 0)  # AT_FDCWD
    out["utimensat"] = sc(nr["utimensat"], -100, b".", None, 0)
    out["chown"] = sc(nr["chown"], b".", os.getuid(), os.getgid())
    after = os.stat(".")
    out["metadata_unchanged"] = (before.st_mode, before.st_mtime_ns) == (after.st_mode, after.st_mtime_ns)
    buffer = ctypes.create_string_buffer(64)
    out["getxattr"] = sc(nr["getxattr"], b".", b"user.x", buffer, 64)
    out["listxattr"] = sc(nr["listxattr"], b".", buffer, 64)
    out["removexattr"] = sc(nr["removexattr"], b".", b"user.x")
    here = os.open(".", os.O_RDONLY)
    out["fs_ioc_setflags"] = sc(nr["ioctl"], here, 0x40086602, ctypes.byref(ctypes.c_long(0)))
    out["fs_ioc_setversion"] = sc(nr["ioctl"], here, 0x40087602, ctypes.byref(ctypes.c_long(0)))  # an owner's
    out["io_setup"] = sc(nr["io_setup"], 1, ctypes.byref(ctypes.c_ulong(0)))  # writes no byte count sees
    out["inotify_init1"] = sc(nr["inotify_init1"], 0)  # watches counted per user, machine-wide
    out["newer"] = sc(nr["newer"])  # a syscall newer than libseccomp: getxattrat, say
    with open("mapped.bin", "w+b") as fh:
        fh.write(bytes(4096))
        fh.flush()
        for name, flags in (("mmap_shared", mmap.MAP_SHARED), ("mmap_private", mmap.MAP_PRIVATE)):
            try:
                mmap.mmap(fh.fileno(), 4096, flags=flags).close()
                out[name] = [0, "ok"]
            except OSError as exc:
                out[name] = [-1, errno.errorcode[exc.errno]]
    out["socketpair"] = sc(nr["socketpair"], 1, 1, 0, ctypes.create_string_buffer(8))  # kernel memory unread
    reading, writing = os.pipe()
    out["vmsplice"] = sc(nr["vmsplice"], writing, None, 0, 0)
    out["splice"] = sc(nr["splice"], reading, None, writing, None, 1, 0)
    return send(out)
"""

SYSCALL_NAMES = ["io_uring_setup", "bpf", "perf_event_open", "userfaultfd", "ptrace", "process_vm_readv"]
SYSCALL_NAMES += ["unshare", "setns", "mount", "clone3", "clone", "socket", "memfd_create", "fsetxattr", "setxattr"]
SYSCALL_NAMES += ["setitimer", "timer_create", "madvise", "process_madvise", "socketpair", "vmsplice", "splice"]
SYSCALL_NAMES += ["chmod", "fchmodat2", "utimensat", "chown", "getxattr", "listxattr", "removexattr", "ioctl"]
SYSCALL_NAMES += ["io_setup", "inotify_init1"]

DENIED = {
    "io_uring_setup": "ENOSYS",
    "bpf": "EPERM",
    "perf_event_open": "EPERM",
    "userfaultfd": "EPERM",
    "ptrace": "EPERM",
    "process_vm_readv": "EPERM",
    "unshare": "EPERM",
    "setns": "EPERM",
    "mount": "EPERM",
    "clone3": "ENOSYS",
    "clone_newuser": "EPERM",
    "socket_unix": "EACCES",
    "socket_unix_high_bits": "EACCES",
    "socket_vsock": "EACCES",
    "socket_alg": "EACCES",
    "socket_inet": "EACCES",
    "socket_netlink": "EACCES",
    "getxattr": "ENOTSUP",
    "listxattr": "ENOTSUP",
    "removexattr": "ENOTSUP",
    "fs_ioc_setflags": "EPERM",
    "fs_ioc_setversion": "EPERM",
    "io_setup": "ENOSYS",
    "inotify_init1": "ENOSYS",
    "newer": "ENOSYS",
    "mmap_shared": "EACCES",
    "memfd_create": "EPERM",
    "fsetxattr": "ENOTSUP",
    "setxattr": "ENOTSUP",
    "setitimer": "EPERM",
    "timer_create": "EPERM",
    "madv_free": "EINVAL",
    "madv_cold": "EINVAL",
    "madv_pageout": "EINVAL",
    "madv_populate_read": "EINVAL",
    "process_madvise": "EPERM",
    "socketpair": "EACCES",
    "vmsplice": "EPERM",
    "splice": "EPERM",
}


def probe_numbers() -> dict[str, int]:
    """The probe's syscall numbers, and ``newer``: the first number libseccomp cannot name."""
    if not HAVE_LIBSECCOMP:
        pytest.skip("pyseccomp or libseccomp.so.2 missing here")
    return numbers(*SYSCALL_NAMES) | {"newer": highest_named_syscall(pyseccomp) + 1}


def test_escape_aid_syscalls_are_denied(spawn, layers):
    needs(layers, "seccomp")
    child = spawn(SYSCALL_PROBE)
    assert hello(child)["seccomp"] == "libseccomp"
    seen = run(child, nr=probe_numbers())
    for name, err in DENIED.items():
        assert seen[name] == [-1, err], (name, seen[name])
    assert seen["madv_dontneed"] == [0, "ok"], seen  # what the C library's allocator uses stays allowed
    assert seen["mmap_private"] == [0, "ok"], seen  # what loading a library uses
    for name in ("chmod", "fchmodat2", "utimensat", "chown"):  # skipped: shutil.copy sets a mode (red team 13b)
        assert seen[name] == [0, "ok"], (name, seen[name])
    assert seen["metadata_unchanged"] is True, seen


def test_without_seccomp_io_uring_would_be_there(spawn):
    """The control: this kernel does give io_uring to a process that is not filtered."""
    child = spawn(SYSCALL_PROBE, without=["seccomp"])
    seen = run(child, nr=probe_numbers())
    if seen["io_uring_setup"][0] < 0:
        pytest.skip(f"io_uring is off on this kernel ({seen['io_uring_setup'][1]})")
    assert seen["io_uring_setup"][1] == "ok"


# --- foreign architectures ------------------------------------------------------------------------------------------

FOREIGN_PROBE = """
def probe(direct):
    if direct:
        return send({"fd": machine_code(INT80_SOCKET)})
    return send({
        "int80_socket": forked(lambda: machine_code(INT80_SOCKET)),
        "x32_getpid": forked(lambda: sc(0x40000000 | 39)[0]),
    })
"""

needs_x86_64 = pytest.mark.skipif(not X86_64, reason="int 0x80 and x32 are x86-64 attacks")


@needs_x86_64
def test_without_seccomp_int80_does_reach_the_i386_socket_call(spawn):
    """The control: an i386 syscall from a 64-bit process works on this kernel when nothing filters it."""
    child = spawn(FOREIGN_PROBE, without=["seccomp"])
    seen = run(child, direct=True)
    if seen["fd"] < 0:
        pytest.skip(f"no IA-32 emulation on this kernel (int 0x80 gave {seen['fd']})")
    assert seen["fd"] >= 3


@needs_x86_64
def test_a_foreign_architecture_syscall_kills_the_process(spawn, layers):
    """socket() through int 0x80 (i386) and getpid with the x32 bit: SIGSYS, not a socket."""
    needs(layers, "seccomp")
    child = spawn(FOREIGN_PROBE)
    seen = run(child, direct=False)
    assert seen["int80_socket"] == {"signal": SIGSYS, "exit": None}, seen
    assert seen["x32_getpid"] == {"signal": SIGSYS, "exit": None}, seen


@needs_x86_64
def test_int80_in_the_learner_process_itself_ends_it(spawn, layers):
    needs(layers, "seccomp")
    child = spawn(FOREIGN_PROBE)
    child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": {"direct": {"value": True}}}]})
    with pytest.raises(ChildGone, match="the process ended"):
        child.receive(10)


# --- the declared policy is the one applied -----------------------------------------------------------------------


def test_every_syscall_of_the_policy_is_one_libseccomp_knows():
    """A misspelt name would be no rule at all (names this architecture lacks are skipped): each is real somewhere."""
    if not HAVE_LIBSECCOMP:
        pytest.skip("pyseccomp or libseccomp.so.2 missing here")
    arches = (pyseccomp.Arch.X86_64, pyseccomp.Arch.AARCH64)
    names = {**SYSCALLS, **CPU_SYSCALLS}
    unknown = [name for name in names if all(pyseccomp.resolve_syscall(a, name) < 0 for a in arches)]
    assert unknown == []


@pytest.mark.parametrize("cuda", [False, True], ids=["cpu", "gpu"])
def test_the_filter_holds_exactly_the_declared_rules(cuda):
    """libseccomp's own rendering of the filter (PFC): one block per declared syscall with its action, nothing else;
    a CPU run's (:data:`CPU_SYSCALLS`: no socket, no shared file mapping) or a GPU run's."""
    import errno
    import re

    if not HAVE_LIBSECCOMP:
        pytest.skip("pyseccomp or libseccomp.so.2 missing here")
    policy = syscall_policy(cuda)
    assert (policy["socket"].when == ()) is not cuda and ("mmap" in policy) is not cuda
    with tempfile.TemporaryFile("w+") as fh:
        seccomp_filter(pyseccomp, cuda=cuda).export_pfc(fh)
        fh.seek(0)
        text = fh.read()
    block = r'# filter for syscall "(\w+)" \((\d+)\)[^\n]*\n(.*?)(?=\n\s*# filter for|\n\s*# default)'
    found = re.findall(block, text, re.S)
    blocks = {name: rules for name, _, rules in found if name != "UNKNOWN"}
    native = {name for name in policy if pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) >= 0}
    assert set(blocks) == native
    newest = highest_named_syscall(pyseccomp)
    newer = {int(number): rules for name, number, rules in found if name == "UNKNOWN"}
    assert sorted(newer) == list(range(newest + 1, newest + 1 + NEWER_SYSCALLS))
    assert all("action ERRNO(38);" in rules for rules in newer.values())  # ENOSYS
    for name in native:
        rule = policy[name]
        code = 0 if rule.action == "skip" else getattr(errno, rule.action)  # skip: it returns 0, nothing done
        assert f"action ERRNO({code});" in blocks[name], (name, blocks[name])
        assert all(f"$a{when.arg}" in blocks[name] for when in rule.when), (name, blocks[name])
        assert ("$a" in blocks[name]) == bool(rule.when), (name, blocks[name])
    assert re.search(r"# default action\s*\n\s*action ALLOW;", text), text[-300:]
    assert "action KILL_PROCESS;" in text  # every other architecture


@pytest.mark.skipif(ROOT and not HAVE_LIBSECCOMP, reason="pyseccomp or libseccomp.so.2 missing here")
def test_without_libseccomp_the_line_says_seccomp_is_missing_and_no_filter_is_loaded(spawn, layers):
    needs(layers, "seccomp")
    child = spawn(LAYER_PROBE, without=["libseccomp"])
    line = hello(child)["isolation"].split("+")
    assert "seccomp-missing" in line and "seccomp" not in line, line
    run(child, nr=0)
    assert status_of(learner_pid(child))["Seccomp"] == "0"


def _one_file_in(folder: str) -> str | None:
    """A file others may read, directly in ``folder``, or None."""
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            with contextlib.suppress(OSError):
                if entry.is_file() and entry.stat().st_mode & stat.S_IROTH:
                    return entry.path
    return None


FS_PROBE = """
def probe(paths):
    return send({path: try_open(path) for path in paths})
"""


def test_what_the_learner_may_read_is_what_the_filesystem_policy_grants(spawn, layers):
    """Each grant of FILESYSTEM that exists here is readable; the kit and files no grant covers are not.

    The expectation is the compiled policy's own answer (``FilesystemPolicy.rights``) for each path.
    """
    needs(layers, "landlock")
    import sysconfig

    policy = filesystem_policy([str(KIT_ROOT)])
    paths = []
    for grant in FILESYSTEM:
        if grant.cuda or "*" in grant.path or not os.path.exists(grant.path):
            continue
        path = grant.path if not os.path.isdir(grant.path) else _one_file_in(grant.path)
        if path and os.access(path, os.R_OK) and not path.startswith("/proc/"):
            paths.append(path)
    paths += ["/proc/self/status", "/proc/cpuinfo", "/etc/hostname", "/etc/passwd", "/etc/os-release"]
    paths += [str(KIT_ROOT / "grader" / "child" / "call.py"), str(KIT_ROOT / "solutions" / "__init__.py")]
    purelib = sysconfig.get_paths()["purelib"]
    kit_entries = [os.path.join(purelib, n) for n in sorted(os.listdir(purelib)) if n.startswith(_KIT_PACKAGES)]
    paths += [_one_file_in(p) if os.path.isdir(p) else p for p in kit_entries][:4]
    paths += [os.path.join(purelib, "torch", "__init__.py"), os.path.realpath(sys.executable)]
    paths = [p for p in dict.fromkeys(paths) if p and os.path.isfile(p)]  # files: a folder opens with a listing
    expected = {p: bool(policy.rights(p) & 4) for p in paths}  # READ_FILE
    assert any(expected.values()) and not all(expected.values()), expected
    seen = run(spawn(FS_PROBE), paths=paths)
    wrong = {p: (seen[p], expected[p]) for p in paths if (seen[p] == "opened") != expected[p]}
    assert wrong == {}, "(what the child got, what the policy grants)"


def test_the_policy_tree_cuts_the_kit_out_of_every_grant(tmp_path):
    """A folder holding the kit is granted entry by entry: everything else in it, not the kit, nor what is inside it."""
    from grader.child.policy import ACCESS, FilesystemPolicy, Grant

    (tmp_path / "packages" / "torch").mkdir(parents=True)
    (tmp_path / "packages" / "grader").mkdir()
    (tmp_path / "packages" / "grader" / "x.py").write_text("")
    (tmp_path / "packages" / "torch" / "y.py").write_text("")
    policy = FilesystemPolicy([Grant(str(tmp_path), "read")], holes=[str(tmp_path / "packages" / "grader")])
    assert policy.allows(str(tmp_path / "packages" / "torch" / "y.py"), "read")
    assert not policy.rights(str(tmp_path / "packages" / "grader" / "x.py")) & ACCESS["read"] & ~ACCESS["list"]
    assert policy.rights(str(tmp_path / "packages")) == ACCESS["list"]  # the importer lists it
    rules = dict(policy.rules())
    assert str(tmp_path / "packages" / "grader") not in rules and str(tmp_path / "packages" / "torch") in rules
    policy.grant(Grant(str(tmp_path / "packages"), "read"))  # granted again, whole: still cut
    assert not policy.rights(str(tmp_path / "packages" / "grader" / "x.py")) & ACCESS["read"] & ~ACCESS["list"]

# --- absolute deadlines: a dripped reply ----------------------------------------------------------------------------

DRIP_PROBE = """
import stat
import time

def probe(interval):
    fd = None
    for name in os.listdir("/proc/self/fd"):
        try:
            if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                fd = int(name)
        except OSError:
            pass
    os.write(fd, (64).to_bytes(8, "big"))  # a 64-byte header, then one byte at a time
    while True:
        os.write(fd, b" ")
        time.sleep(interval)
"""


@pytest.mark.slow
@pytest.mark.parametrize("which", ["call", "submission"], ids=["call-deadline", "submission-deadline"])
def test_a_dripped_reply_is_cut_at_the_deadline_and_the_child_killed(spawn, which):
    if which == "call":
        limits = Limits(call_seconds=2, submission_seconds=60)
    else:
        limits = Limits(call_seconds=30, submission_seconds=4)
    child = spawn(DRIP_PROBE, limits)
    pid = learner_pid(child)
    child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": {"interval": {"value": 0.4}}}]})
    started = time.monotonic()
    match = "timed out after 2 s" if which == "call" else "used up its 4 s time limit"
    with pytest.raises(ChildGone, match=match):
        child.receive(limits.call_seconds)
    elapsed = time.monotonic() - started
    assert elapsed < (2 if which == "call" else 4) + 1.0, f"the dripped reply held the grader {elapsed:.1f} s"
    assert time.monotonic() <= child.deadline + 1.0
    assert gone(pid, 3.0), "the dripping process outlived its deadline"


FORGED_HEADER_PROBE = """
import stat

def probe(kind):
    fd = [int(n) for n in os.listdir("/proc/self/fd") if n.isdigit() and _is_socket(int(n))][0]
    header = {
        "deep": b"[" * 200_000 + b"]" * 200_000,
        "bad-utf8": b'{"id": 0, "ok": "\\xff"}',  # the byte 0xff: not UTF-8
        "not-an-object": b"[0]",
        "huge-length": None,
    }[kind]
    if header is None:
        os.write(fd, (1 << 40).to_bytes(8, "big"))
    else:
        os.write(fd, len(header).to_bytes(8, "big") + header + (0).to_bytes(8, "big"))
    import time
    time.sleep(30)


def _is_socket(fd):
    try:
        return stat.S_ISSOCK(os.fstat(fd).st_mode)
    except OSError:
        return False
"""


@pytest.mark.parametrize("kind", ["deep", "bad-utf8", "not-an-object", "huge-length"])
def test_a_forged_header_is_childgone_and_nothing_else(spawn, kind):
    """Written straight to the socket by learner code: RecursionError, UnicodeDecodeError and the rest stay inside."""
    child = spawn(FORGED_HEADER_PROBE)
    pid = learner_pid(child)
    child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": {"kind": {"value": kind}}}]})
    started = time.monotonic()
    with pytest.raises(ChildGone, match="sent something unreadable"):
        child.receive(10)
    assert time.monotonic() - started < 5, "the grader waited for bytes of a refused message"
    assert gone(pid, 3.0), "a child that broke the protocol was left running"


# --- the work folder: a size-capped tmpfs of the child's own -------------------------------------------------------

FILL_PROBE = """
def probe(total, chunk):
    written, error = 0, None
    os.makedirs("box/deep", exist_ok=True)
    try:
        while written < total:
            with open(f"box/deep/f{written // chunk}", "wb") as fh:
                fh.write(b"x" * chunk)
            written += chunk
    except OSError as exc:
        error = errno.errorcode.get(exc.errno)
    try:  # a folder the grader could not enter, or empty, without being root (where seccomp does not refuse it)
        os.chmod("box/deep", 0)
        os.chmod("box", 0)
    except PermissionError:
        pass
    return send({"written": written, "error": error})
"""


def _used_bytes(folder: Path) -> int:
    return sum(p.lstat().st_size for p in folder.rglob("*"))


def test_a_hundred_megabytes_in_small_files_stop_at_the_cap_and_leave_nothing_on_the_grader_disk(spawn, layers):
    """ENOSPC in the learner's process near ``Limits.work_bytes``; nothing of it on the grader's disk, then or after."""
    needs(layers, "tmpfs-work")
    limits = Limits(call_seconds=60, submission_seconds=120)
    child = spawn(FILL_PROBE, limits)
    seen = run(child, timeout=60, total=100 << 20, chunk=64 << 10)
    assert seen["error"] == "ENOSPC", seen
    assert limits.work_bytes - (2 << 20) <= seen["written"] <= limits.work_bytes, seen
    assert os.listdir(child.workdir) == [], "the learner's files reached the grader's disk"
    pid = learner_pid(child)
    child.close()
    assert gone(pid) and not child.workdir.exists(), "the learner's folder outlived its child"


def test_the_cap_is_the_limits_own(spawn, layers):
    needs(layers, "tmpfs-work")
    child = spawn(FILL_PROBE, Limits(call_seconds=30, submission_seconds=60, work_bytes=8 << 20))
    seen = run(child, timeout=30, total=100 << 20, chunk=64 << 10)
    assert seen["error"] == "ENOSPC" and (6 << 20) <= seen["written"] <= (8 << 20), seen


def test_without_the_work_tmpfs_the_learner_would_fill_the_grader_disk(spawn, layers):
    """The control: the same files land in the grader's temporary folder when the tmpfs is left out."""
    needs(layers, "tmpfs-work")
    child = spawn(FILL_PROBE, without=["tmpfs-work"])
    seen = run(child, total=1 << 20, chunk=64 << 10)
    assert seen["error"] is None, seen
    os.chmod(child.workdir / "box", 0o700)
    os.chmod(child.workdir / "box" / "deep", 0o700)
    assert _used_bytes(child.workdir / "box") >= 1 << 20


# --- root: the learner is nobody --------------------------------------------------------------------------------------


@pytest.mark.skipif(not ROOT, reason="the grader is not root here: its learners keep its uid in a user namespace")
def test_as_root_the_learner_runs_as_nobody_and_the_grader_still_cleans_up(spawn):
    child = spawn(
        """
        def probe():
            print("hello from the learner")
            os.makedirs("made/deep", exist_ok=True)
            with open("made/deep/file.txt", "w") as fh:
                fh.write("x")
            try:
                os.chmod("made", 0o000)  # a folder the grader cannot enter without being root, where seccomp allows
            except PermissionError:
                pass
            return send({"uid": os.getuid(), "euid": os.geteuid()})
        """
    )
    run(child)
    status = status_of(learner_pid(child))
    assert status["Uid"].split() == [str(SANDBOX_UID)] * 4, status["Uid"]
    assert status["Gid"].split() == [str(SANDBOX_UID)] * 4, status["Gid"]
    assert in_workdir(child, "made").stat().st_uid == SANDBOX_UID
    assert child.workdir.stat().st_uid == SANDBOX_UID
    assert "hello from the learner" in child.output()
    child.close()
    assert not child.workdir.exists(), "the grader could not remove the learner's folder"


# --- torch, numpy, matplotlib and safetensors work inside ---------------------------------------------------


def test_torch_numpy_matplotlib_and_safetensors_run_inside(spawn, layers):
    needs(layers, "landlock")
    child = spawn(
        """
        def probe(values):
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            import numpy as np
            import safetensors.torch as st

            a = torch.tensor(values, dtype=torch.float64)
            product = st.load(st.save({"p": a @ a.T}))["p"]
            meta = (torch.empty(2, 3, 4, device="meta") @ torch.empty(2, 4, 5, device="meta")).softmax(-1)
            fig, ax = plt.subplots()
            ax.imshow(np.asarray(product))
            fig.savefig("weights.png")
            config = matplotlib.get_configdir()
            import shutil
            shutil.copy2("weights.png", "copied.png")  # sets mode and times: skipped (red team 13b's false fail)
            copied = open("copied.png", "rb").read() == open("weights.png", "rb").read()
            return send({"product": product.tolist(), "meta": list(meta.shape), "mplconfig": config, "copied": copied})
        """,
        Limits(call_seconds=60, submission_seconds=120),
    )
    values = torch.randn(5, 3, dtype=torch.float64)
    seen = run(child, timeout=60, values=values.tolist())
    assert torch.allclose(torch.tensor(seen["product"], dtype=torch.float64), values @ values.T, atol=1e-12)
    assert seen["meta"] == [2, 3, 5] and seen["copied"] is True
    # the learner's folder, or the warm template's where it imported pyplot before the fork (matplotlib keeps
    # the folder it found first): a folder of the grader's, never a home folder
    folder = Path(seen["mplconfig"])  # <tmp>/attnkit-child-XXXX/work: the learner's folder inside one of the grader's
    assert folder.name == "work" and folder.parent.name.startswith(("attnkit-child-", "attnkit-template-")), folder
    png = in_workdir(child, "weights.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- an unprivileged grader ---------------------------------------------------------------------------------

UNPRIVILEGED_PROBE = """
def probe(nr, serial, tty):
    buf = ctypes.create_string_buffer(64)
    with open("mine.txt", "w") as fh:
        fh.write("x")
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    return send({
        "ids": [os.getuid(), os.getgid()],
        "owner": os.stat("mine.txt").st_uid,
        "product": (a @ a.T).tolist(),
        "read": sc(nr["keyctl"], 11, serial, buf, 64),  # KEYCTL_READ: the same uid owns the key
        "payload": buf.value.decode(errors="replace"),
        "tty": try_open(tty, os.O_RDWR),
        "shm": sc(nr["shmget"], 1234, 4096, 0o1600),
        "unix": sc(nr["socket"], 1, 1, 0),
    })
"""

UNPRIVILEGED_GRADER = """
import ctypes, json, os, select, sys
sys.path.insert(0, sys.argv[1])
from safetensors.torch import load
from grader.child.contain import syscall_number
from grader.instructor.sandbox import Limits, Template

nr = {name: syscall_number(name) for name in ("keyctl", "add_key", "shmget", "socket")}
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.syscall(ctypes.c_long(nr["keyctl"]), ctypes.c_long(1), b"attnkit-unprivileged")  # a session keyring of its own
secret = b"unprivileged-secret"
session = ctypes.c_long(-3)  # KEY_SPEC_SESSION_KEYRING
serial = libc.syscall(ctypes.c_long(nr["add_key"]), b"user", b"key", secret, ctypes.c_long(len(secret)), session)
master, slave = os.openpty()
with Template() as template:
    child = template.spawn(Limits())
    child.send({"op": "hello"})
    hello, _ = child.receive(60)
    source = open(sys.argv[2], encoding="utf-8").read()
    child.send({"op": "load", "files": {"probe.py": source}, "entry": "probe.py", "hooks": ["probe"]})
    child.receive(60)
    args = {"nr": nr, "serial": serial, "tty": os.ttyname(slave)}
    call = {"id": 0, "hook": "probe", "args": {k: {"value": v} for k, v in args.items()}}
    child.send({"op": "call", "calls": [call]})
    header, blob = child.receive(60)
    seen = json.loads(bytes(load(blob)["out0"].tolist()).decode()) if blob else header
    child.close()
print(json.dumps({"grader_uid": os.getuid(), "serial": serial, "hello": hello, "seen": seen,
                  "tty_got": bool(select.select([master], [], [], 0.2)[0])}))
"""


def _searchable_by(path: Path, uid: int) -> bool:
    """Whether ``uid`` (not root, no groups) may reach and read ``path``: every folder on the way o+x, it o+r."""
    try:
        for folder in [*reversed(path.parents)]:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return False
        return bool(path.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


UNPRIVILEGED_UIDS = [SANDBOX_UID, 1001, 2345]  # nobody, and two uids with no name here: the map uses the ids read


@contextlib.contextmanager
def as_user(uid: int):
    """``(argv prefix, env, home)`` to run this environment's Python as ``uid`` (setpriv; gid = uid, no groups).

    No copy of the kit: a throwaway venv of a Python that uid can run, with a
    ``.pth`` pointing at this environment's packages; the checkout goes on ``sys.path``.
    """
    import sysconfig

    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("no setpriv here")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(os.path.realpath(sys.executable))]
    candidates += [Path(p) for p in (shutil.which(version, path="/usr/bin:/usr/local/bin:/bin"),) if p]
    base = next((c for c in candidates if _searchable_by(c, uid)), None)
    if base is None:
        pytest.skip(f"no {version} that uid {uid} may run (this one lives under a closed folder)")
    packages = Path(sysconfig.get_paths()["purelib"])
    kit = KIT_ROOT / "grader" / "instructor" / "sandbox.py"
    if not (_searchable_by(packages / "torch" / "__init__.py", uid) and _searchable_by(kit, uid)):
        pytest.skip(f"the kit or its packages are not readable by uid {uid}")
    home = Path(tempfile.mkdtemp(prefix="attnkit-unprivileged-"))
    try:
        venv = home / "venv"
        subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        site = next(venv.glob("lib/python3*/site-packages"))
        (site / "attnkit-packages.pth").write_text(f"{packages}\n{KIT_ROOT}\n")
        for path in [home, *home.rglob("*")]:
            os.chown(path, uid, uid, follow_symlinks=False)
        user = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", str(venv / "bin" / "python")]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8"}
        yield user, env, home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="needs root to start a grader as another, unprivileged user (setpriv)")
@pytest.mark.parametrize("uid", UNPRIVILEGED_UIDS)
def test_an_unprivileged_grader_contains_its_children_the_same_way(uid):
    """The grader as ``uid``: its children keep its uid in a user namespace, with every other layer, and work."""
    with as_user(uid) as (user, env, home):
        script, probe = home / "grade.py", home / "probe.py"
        script.write_text(UNPRIVILEGED_GRADER)
        probe.write_text(LEARNER + UNPRIVILEGED_PROBE)
        done = subprocess.run(
            [*user, "-I", str(script), str(KIT_ROOT), str(probe)],
            capture_output=True, text=True, timeout=300, env=env, cwd=home,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["grader_uid"] == uid
    layers = report["hello"]["isolation"].split("+")
    assert not any(layer.startswith("uid-") for layer in layers), "an unprivileged grader's children keep its uid"
    if "user-ns" not in layers:
        pytest.skip(f"no unprivileged user namespaces here: {report['hello']['isolation']}")
    assert set(FULL_ISOLATION.split("+")) | {"tmpfs-work", "seccomp"} <= set(layers), layers
    assert report["hello"]["uid"] == uid
    seen = report["seen"]
    assert seen["ids"] == [0, 0] and seen["owner"] == 0, seen  # root of its namespace, which is the grader's uid
    assert seen["product"] == [[5.0, 11.0], [11.0, 25.0]], seen  # torch works in there
    assert report["serial"] > 0 and seen["read"] == [-1, "EPERM"] and seen["payload"] == "", seen
    assert seen["tty"] != "opened" and not report["tty_got"], seen
    assert seen["shm"] == [-1, "EPERM"] and seen["unix"] == [-1, "EACCES"], seen


JOIN_KEYRING_AND_RUN_PYTEST = """
import ctypes, os, sys
import pyseccomp
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall(ctypes.c_long(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "keyctl")), ctypes.c_long(1), None)
os.execv(sys.executable, [sys.executable, "-m", "pytest", *sys.argv[1:]])
"""


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="needs root to run these tests again as another, unprivileged user (setpriv)")
@pytest.mark.skipif(os.environ.get("ATTNKIT_CONTAINMENT_AS") is not None, reason="already the run as another uid")
@pytest.mark.parametrize("uid", [1001, 2345])
def test_every_containment_check_here_holds_for_an_unprivileged_grader(uid):
    """This file's tests again, the grader (pytest, its template, its children) as ``uid``, a session keyring of
    its own: every check that does not need root passes, none is skipped for want of a layer."""
    with as_user(uid) as (user, env, home):
        env = dict(env, ATTNKIT_CONTAINMENT_AS=str(uid))
        args = ["-q", "-p", "no:cacheprovider", "-rs", f"--basetemp={home / 'pytest'}", "-x", __file__]
        done = subprocess.run(
            [*user, "-I", "-c", JOIN_KEYRING_AND_RUN_PYTEST, *args],
            capture_output=True, text=True, timeout=540, env=env, cwd=KIT_ROOT,
        )  # fmt: skip
    tail = done.stdout[-4000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    if "user-ns" not in done.stdout and "no unprivileged user namespaces" in done.stdout:
        pytest.skip("no unprivileged user namespaces here")
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    lacking = [line for line in skipped if "isolation here" in line and not line.endswith("(no uid)")]
    why = lacking + [line for line in skipped if "no syscall numbers" in line]  # "no uid": it keeps the grader's
    assert why == [], "\n".join(why)
    assert " passed" in done.stdout, tail
