"""Putting a freshly forked child in its sandbox before any learner code runs, one step after another (nsjail's
``containProc`` is the model), each returning the names of the layers that took.  A step the kernel refuses is left out
and the isolation line says so, except that a child that cannot stop being root exits rather than run learner code.
What each step allows is declared in :mod:`.policy`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
from typing import Any

from .policy import (
    _SANDBOX_NAMESPACES,
    CLONE_NEWUSER,
    DEVICES,
    FILESYSTEM,
    FOREIGN_ARCHITECTURE,
    NEWER_SYSCALLS,
    TEMPORARY_FOLDERS,
    WORK_BYTES,
    FilesystemPolicy,
    Grant,
    filesystem_policy,
    syscall_policy,
)

SANDBOX_UID = 65534  # The uid and gid (``nobody``, ``nogroup``) a learner's process runs as when the grader is root.
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 1, 4, 24, 38, 47
_PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def _libc() -> Any:
    """The C library, loaded once (in the template: ``find_library`` runs ``ldconfig``, which a child may not)."""
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _libseccomp() -> Any:
    """The libseccomp binding (pyseccomp), or None where it or the system's ``libseccomp.so.2`` is missing."""
    try:
        import pyseccomp
    except (ImportError, RuntimeError, OSError):
        return None
    return pyseccomp


def syscall_number(name: str) -> int | None:
    """This machine's number for syscall ``name``, from libseccomp; None where it has none (or no libseccomp)."""
    scmp = _libseccomp()
    if scmp is None:
        return None
    try:
        number = int(scmp.resolve_syscall(scmp.Arch.NATIVE, name))
    except (RuntimeError, OSError, ValueError):
        return None
    return number if number >= 0 else None


def _syscall(number: int, *args: int | None) -> int:
    """``syscall(2)`` with every argument passed as a C long (None: a NULL pointer)."""
    import ctypes

    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    return int(libc.syscall(ctypes.c_long(number), *[None if a is None else ctypes.c_long(a) for a in args]))


class _Plan:
    """What :func:`contain` works from: the child's config, and what it learns on the way."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.workdir = os.path.realpath(config["workdir"])
        self.without = set(config.get("without") or ())  # layers left out on purpose (tests)
        self.cuda = bool(config.get("cuda"))
        # read before any namespace: inside a new user namespace our own ids read as the overflow id until mapped
        self.root = os.geteuid() == 0
        self.uid = int(config.get("sandbox_uid", SANDBOX_UID)) if self.root else os.geteuid()
        self.gid = self.uid if self.root else os.getegid()
        self.work_bytes = int(config.get("work_bytes") or WORK_BYTES)
        self.filesystem: FilesystemPolicy = config.get("filesystem") or filesystem_policy([])
        self.parent_pid = os.getppid()
        self.map_fd: int | None = config.get("map_fd")  # root: where the template maps this child's ids
        self.parent_fd: int | None = None  # reads end-of-file once the parent is gone
        self.namespaces = ""  # "user": with a user namespace; "plain": root's, without one; "": none
        self.ids_dropped = False
        self.processes_before: int | None = None  # processes of the sandbox uid outside any namespace of ours
        self.seccomp = ""  # which filter is in place: "libseccomp", or "" for none
        self.closed = _closed_folders(_needed_folders(self), self.uid, self.gid) if self.root else []


def contain(config: dict[str, Any]) -> list[str]:
    """Put this process (a fresh fork of the template) in its sandbox; return the layers that took, in order.
    ``config["contained"]`` gets what the hello reply reports (the seccomp backend, the uid outside)."""
    plan = _Plan(config)
    if plan.root:  # the workdir handed to the sandbox uid, and no supplementary group of root's follows
        os.chown(plan.workdir, plan.uid, plan.gid)
        os.setgroups([])
    took = enter_namespaces(plan)
    sources = open_mount_sources(plan) if plan.namespaces else None
    took += take_mapped_ids(plan)
    took += private_mounts(plan, sources)
    took += join_fresh_session_keyring(plan)
    took += drop_privileges(plan)
    set_limits(config.get("limits") or {}, plan)
    took += restrict_filesystem(plan)
    took += filter_syscalls(plan)
    config["contained"] = {"seccomp": plan.seccomp or None, "uid": _outside_uid()}
    if plan.parent_fd is not None:
        os.close(plan.parent_fd)  # no id changes any more: nothing left to learn from it
    return took


def enter_namespaces(plan: _Plan) -> list[str]:
    """New user, PID, network, mount and IPC namespaces; then fork, and go on as PID 1 of the new PID namespace.

    As root, the template maps the new namespace's root to the sandbox uid; unprivileged, the child maps it to the
    grader's own ids; where a user namespace is refused, root makes the others without one.  When PID 1 ends the kernel
    kills everything left in its namespace (``setsid`` escapees too); the network namespace has no interface up; the IPC
    namespace holds no one else's SysV object or POSIX queue.
    """
    if "namespaces" in plan.without or not sys.platform.startswith("linux"):
        if plan.root:
            plan.processes_before = _processes_of(plan.uid)
        return []
    libc = _libc()
    took = []
    wants_user_ns = "user-ns" not in plan.without and (plan.map_fd is not None or not plan.root)
    if wants_user_ns and libc.unshare(CLONE_NEWUSER | _SANDBOX_NAMESPACES) == 0:
        if not (_parent_maps_ids(plan) if plan.root else _map_ids("self", plan.uid, plan.gid)):
            raise OSError("the new user namespace got no uid map")
        plan.namespaces = "user"
        took.append("user-ns")
    elif plan.root and libc.unshare(_SANDBOX_NAMESPACES) == 0:
        plan.namespaces = "plain"
    if plan.root and plan.namespaces != "user":
        plan.processes_before = _processes_of(plan.uid)  # /proc is still the machine's here
    if plan.map_fd is not None:
        with contextlib.suppress(OSError):
            os.close(plan.map_fd)  # tells the template there is nothing to map, when it was not used
        plan.map_fd = None
    if not plan.namespaces:
        return []
    # fork: the parent waits and exits, holding a pipe whose end-of-file tells the child it has gone
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid != 0:
        os.close(read_end)
        os.closerange(3, write_end)  # the learner's socket among them: only the child holds it
        os.closerange(write_end + 1, 1 << 16)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os._exit(0)
    os.close(write_end)
    plan.parent_fd = read_end
    die_with_parent(0, read_end)
    return took + ["pid-ns", "net-ns", "ipc-ns"]


def _parent_maps_ids(plan: _Plan) -> bool:
    """Ask the template, root in the parent user namespace, to map our namespace's root to the sandbox uid."""
    if plan.map_fd is None:
        raise RuntimeError("no channel to the template to ask for the id maps")
    channel = socket.socket(fileno=plan.map_fd)
    plan.map_fd = None
    try:
        channel.sendall(b"u")
        return channel.recv(1) == b"y"
    except OSError:
        return False
    finally:
        channel.close()


def _map_ids(process: str, uid: int, gid: int) -> bool:
    """Map root of ``process``'s (``self``, a pid) new user namespace to ``uid`` and ``gid`` outside."""
    try:
        for name, text in (("uid_map", f"0 {uid} 1"), ("setgroups", "deny"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/{process}/{name}", "w") as fh:
                fh.write(text)
    except OSError:
        return False
    return True


def map_child_ids(pid: int, channel: socket.socket, uid: int, gid: int) -> None:
    """The template's half of a root child's user namespace: map its root to ``uid``/``gid`` when asked (only a
    process with CAP_SETUID in the parent namespace may map another uid than its own, as in nsjail)."""
    try:
        channel.settimeout(10.0)
        if channel.recv(1) != b"u":
            return  # the child made no user namespace
        channel.sendall(b"y" if _map_ids(str(pid), uid, gid) else b"n")
    except OSError:
        pass
    finally:
        channel.close()


def _become(plan: _Plan, uid: int, gid: int) -> list[str]:
    """Take ``uid`` and ``gid``; a change of uid clears the parent-death signal and makes /proc/self root's: put both
    back.  ``uid-<n>`` where this process is the sandbox uid outside."""
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    plan.ids_dropped = True
    _libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    die_with_parent(0 if plan.namespaces else plan.parent_pid, plan.parent_fd)
    return [f"uid-{plan.uid}"] if _outside_uid() == plan.uid else []


def take_mapped_ids(plan: _Plan) -> list[str]:
    """Root with a user namespace: become its root, which is the sandbox uid outside, before mounting anything."""
    return _become(plan, 0, 0) if plan.namespaces == "user" and plan.root else []


def _outside_uid() -> int:
    """The uid this process has outside every user namespace (from ``/proc/self/uid_map``)."""
    uid = os.geteuid()
    try:
        with open("/proc/self/uid_map", "rb") as fh:  # bytes: no codec to import while no longer root
            for line in fh:
                inside, outside, count = (int(x) for x in line.split())
                if inside <= uid < inside + count:
                    return outside + uid - inside
    except (OSError, ValueError):
        pass
    return uid


def _processes_of(uid: int) -> int:
    """Processes of ``uid`` this process can see in ``/proc``."""
    count = 0
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(f"/proc/{entry}").st_uid == uid
    return count


def _topmost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another one of them."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not _inside(path, kept):
            kept.append(path)
    return kept


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f + os.sep) for f in folders)


def _needed_folders(plan: _Plan) -> list[str]:
    """The folders the child needs from the filesystem: its workdir, and those its filesystem policy grants."""
    return [plan.workdir] + [
        p if os.path.isdir(p) else os.path.dirname(p)
        for p, _ in plan.filesystem.rules()
        if not p.startswith(("/proc/", "/sys/", "/dev/")) and os.path.exists(p)
    ]


def _closed_folders(folders: list[str], uid: int, gid: int) -> list[str]:
    """The topmost folders on the way to ``folders`` that ``uid`` may not enter (a 0700 ``/root`` holding pyenv); asked
    before any namespace, inside which root's files look as the overflow uid's (the sandbox uid)."""

    @functools.cache
    def searchable(path: str) -> bool:
        try:
            st = os.stat(path)
        except OSError:
            return False
        bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
        return uid == 0 or bool(st.st_mode & bit)

    closed: list[str] = []
    for path in folders:
        parts = path.split(os.sep)[1:-1]
        ancestors = (os.sep + os.path.join(*parts[:i]) for i in range(1, len(parts) + 1))
        closed += [a for a in ancestors if not searchable(a)][:1]  # the first on the way
    return _topmost(closed)


def open_mount_sources(plan: _Plan) -> dict[str, Any]:
    """What :func:`private_mounts` mounts, opened now (``O_PATH``), before any id is dropped: the folders shadowed by an
    empty tmpfs (:data:`TEMPORARY_FOLDERS`, closed folders on the way to Python or the workdir), what the child needs
    from under them (bound back in place), and the device files of its own ``/dev``."""
    import glob

    temporary = [p for p in _topmost([os.path.realpath(f) for f in TEMPORARY_FOLDERS]) if os.path.isdir(p)]
    if "dev" in plan.without and os.path.isdir("/dev/shm"):
        temporary.append(os.path.realpath("/dev/shm"))
    closed = [f for f in plan.closed if not _inside(f, temporary)]
    shadowed = [(f, "1777", "64m") for f in temporary] + [(f, "0755", "1m") for f in closed]
    folders = [f for f, _, _ in shadowed]
    keep = _topmost([p for p in _needed_folders(plan) if _inside(p, folders) and p not in folders])
    devices = [f"/dev/{name}" for name in DEVICES] + (sorted(glob.glob("/dev/nvidia*")) if plan.cuda else [])
    return {
        "shadowed": shadowed,
        "keep": {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in keep},
        "devices": {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in devices if os.path.exists(path)},
    }


def _mount_tmpfs(libc: Any, folder: str, mode: str, size: str, flags: int = _MS_NOSUID | _MS_NODEV) -> bool:
    return libc.mount(b"tmpfs", folder.encode(), b"tmpfs", flags, f"size={size},mode={mode}".encode()) == 0


def _bind(libc: Any, fd: int, target: str, recursive: bool = True) -> bool:
    """Bind what ``fd`` (``O_PATH``) names onto ``target``, making the mount point first."""
    import stat

    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
    flags = _MS_BIND | (_MS_REC if recursive else 0)
    return libc.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None, flags, None) == 0


def private_mounts(plan: _Plan, sources: dict[str, Any] | None) -> list[str]:
    """In the child's mount namespace: its own ``/proc``, empty ``/tmp`` and ``/run``, work folder and ``/dev``.

    A fresh ``/proc`` shows no process outside the sandbox (not the grader's command line or environment); empty
    temporary folders hide other processes' files and unix sockets.  ``mount-ns`` takes when all of that did;
    ``tmpfs-work`` and ``dev`` (only :data:`DEVICES`, and ``/dev/nvidia*`` for CUDA: no terminal, kmsg, disk) each.
    """
    if sources is None:
        return []
    libc = _libc()
    try:
        if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            return []
        if libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
            return []
        if not all(_mount_tmpfs(libc, folder, mode, size) for folder, mode, size in sources["shadowed"]):
            return []
        if not all(_bind(libc, fd, path) for path, fd in sources["keep"].items()):
            return []
        took = ["mount-ns"]
        if "tmpfs-work" not in plan.without and _work_tmpfs(libc, plan):
            took.append("tmpfs-work")
        if "dev" not in plan.without and _minimal_dev(libc, sources["devices"]):
            took.append("dev")
        return took
    finally:
        for fd in [*sources["keep"].values(), *sources["devices"].values()]:
            os.close(fd)


def _work_tmpfs(libc: Any, plan: _Plan) -> bool:
    """A tmpfs of ``plan.work_bytes`` (and inodes to match) over the work folder: nothing the learner writes lands on
    the grader's filesystem, past the cap a write fails with ENOSPC, and all of it goes with the namespace."""
    size = max(plan.work_bytes, 1 << 20)
    options = f"size={size},nr_inodes={max(size >> 12, 1024)},mode=0700".encode()
    if libc.mount(b"tmpfs", plan.workdir.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
        return False
    if plan.namespaces == "plain":  # mounted by the real root, which drops to the sandbox uid later
        os.chown(plan.workdir, plan.uid, plan.gid)
    return True


def _minimal_dev(libc: Any, devices: dict[str, int]) -> bool:
    """A tmpfs on ``/dev`` holding binds of ``devices``, ``/dev/shm`` and the ``fd``/``std*`` links."""
    if not _mount_tmpfs(libc, "/dev", "0755", "1m", _MS_NOSUID | _MS_NOEXEC):
        return False
    if not all(_bind(libc, fd, path, recursive=False) for path, fd in devices.items()):
        return False
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "0"), ("stdout", "1"), ("stderr", "2")):
        os.symlink(target if name == "fd" else f"/proc/self/fd/{target}", f"/dev/{name}")
    os.mkdir("/dev/shm")
    return _mount_tmpfs(libc, "/dev/shm", "1777", "64m")


def join_fresh_session_keyring(plan: _Plan) -> list[str]:
    """A new, empty, anonymous session keyring: the keys of the grader's session are no longer this process's."""
    number = syscall_number("keyctl")
    if "keyring" in plan.without or number is None:
        return []
    keyctl_get_keyring_id, keyctl_join_session_keyring, key_spec_session_keyring = 0, 1, -3
    serial = _syscall(number, keyctl_join_session_keyring, None)  # no name: a fresh anonymous keyring
    if serial < 0:
        return []
    return ["keyring"] if _syscall(number, keyctl_get_keyring_id, key_spec_session_keyring, 0) == serial else []


def drop_privileges(plan: _Plan) -> list[str]:
    """Root: become the sandbox uid (where no user namespace did it); then no capability at all.  The bounding set
    goes first (that needs CAP_SETPCAP, which leaving root takes); a root child still root afterwards raises."""
    import ctypes

    libc = _libc()
    took = []
    last_cap = 63
    with contextlib.suppress(OSError, ValueError), open("/proc/sys/kernel/cap_last_cap", "rb") as fh:
        last_cap = int(fh.read())
    for cap in range(last_cap + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    if plan.root and not plan.ids_dropped:
        os.setgroups([])
        took += _become(plan, plan.uid, plan.gid)
    if plan.root and _outside_uid() == 0:
        raise PermissionError("the learner's process would run as root")
    libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, pid 0: this process
    nothing = (ctypes.c_uint32 * 6)()  # two of (effective, permitted, inheritable), all zero
    libc.capset(header, nothing)
    if _own_status((b"CapInh:", b"CapPrm:", b"CapEff:", b"CapAmb:"), 16) == 0:  # no capability it could still use
        took.append("no-caps")
    return took


def _own_status(keys: tuple[bytes, ...], base: int) -> int:
    """The numbers (in ``base``) of ``keys``' lines in ``/proc/self/status``, or'ed; -1 where it does not say."""
    found = -1
    try:
        with open("/proc/self/status", "rb") as fh:  # bytes: no codec to import while no longer root
            for line in fh:
                if line.startswith(keys):
                    found = max(found, 0) | int(line.split()[1], base)
    except (OSError, ValueError, IndexError):
        return -1
    return found


def set_limits(limits: dict[str, Any], plan: _Plan) -> None:
    """``setrlimit`` for each of ``limits``; the process and address-space counts are relative to now."""
    import resource

    limits = dict(limits)
    if "RLIMIT_NPROC" in limits:  # counted per user (per user namespace): allow this many more than exist now
        before = plan.processes_before if plan.processes_before is not None else _processes_of(os.getuid())
        limits["RLIMIT_NPROC"] = int(limits["RLIMIT_NPROC"]) + before
    if "RLIMIT_AS" in limits:  # torch's libraries already map GBs (far more in a CUDA build): allow this much more
        limits["RLIMIT_AS"] = int(limits["RLIMIT_AS"]) + max(0, _own_status((b"VmSize:",), 10)) * 1024  # kB
    for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE"):
        if name in limits:
            value, kind = int(limits[name]), getattr(resource, name)
            with contextlib.suppress(ValueError, OSError):
                hard = resource.getrlimit(kind)[1]
                new_hard = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(kind, (min(value, new_hard), new_hard))


def restrict_filesystem(plan: _Plan) -> list[str]:
    """Landlock: the child's filesystem policy, its work folder writable; no TCP; no signal to, or abstract unix socket
    of, a process outside its sandbox (ABI 6).  The only fence for files where there is no mount namespace."""
    import ctypes

    if "landlock" in plan.without:
        return []
    libc = _libc()
    try:
        abi = max(0, int(libc.syscall(_LANDLOCK_CREATE_RULESET, None, 0, 1)))  # LANDLOCK_CREATE_RULESET_VERSION
    except (OSError, AttributeError):
        abi = 0
    if abi < 1:
        return []
    truncate = 1 << 14 if abi >= 3 else 0
    ioctl_dev = 1 << 15 if abi >= 5 else 0
    handled_fs = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    handled_fs |= (1 << 13 if abi >= 2 else 0) | truncate | ioctl_dev  # REFER, TRUNCATE, IOCTL_DEV
    file_rights = 1 | 2 | 4 | truncate | ioctl_dev  # what a rule on a single file may carry
    handled_net = 0b11 if abi >= 4 else 0  # BIND_TCP | CONNECT_TCP, with no rule allowing any
    scoped = 0b11 if abi >= 6 else 0  # abstract unix sockets and signals
    attr = (ctypes.c_uint64 * 3)(handled_fs, handled_net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return []

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    policy = plan.filesystem
    policy.grant(Grant(plan.workdir, "write"))
    for grant in FILESYSTEM:
        if grant.cuda and plan.cuda:
            policy.grant(grant)
    try:
        for path, access in policy.rules():
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    access &= file_rights
                rule = PathBeneath(access & handled_fs, fd)
                libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0)  # LANDLOCK_RULE_PATH_BENEATH
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # required by landlock_restrict_self
            return []
        return ["landlock"] if libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0 else []
    finally:
        os.close(ruleset)


def filter_syscalls(plan: _Plan) -> list[str]:
    """seccomp: :data:`SYSCALLS`, by name through libseccomp (every architecture's numbers); without it no filter, and
    the isolation line says ``seccomp-missing``: never a weaker filter in silence."""
    if "seccomp" in plan.without:
        return []
    scmp = None if "libseccomp" in plan.without else _libseccomp()  # "libseccomp": as if it were missing (tests)
    if scmp is None:
        return ["seccomp-missing"]
    try:
        seccomp_filter(scmp, cuda=plan.cuda).load()
    except OSError:
        return []
    plan.seccomp = "libseccomp"
    return ["seccomp"]


def seccomp_filter(scmp: Any, cuda: bool = False) -> Any:
    """:func:`syscall_policy` as a libseccomp filter (not loaded) for a child given a GPU or not; a name this arch
    lacks is no rule; the :data:`NEWER_SYSCALLS` numbers above the highest libseccomp knows get ENOSYS."""
    import errno

    def action(name: str) -> int:
        named = {"allow": scmp.ALLOW, "kill": scmp.KILL_PROCESS, "skip": scmp.ERRNO(0)}  # skip: 0, nothing done
        return named.get(name) or scmp.ERRNO(getattr(errno, name))

    policy = scmp.SyscallFilter(scmp.ALLOW)
    policy.set_attr(scmp.Attr.ACT_BADARCH, action(FOREIGN_ARCHITECTURE))  # i386, x32 and every other one
    for name, rule in syscall_policy(cuda).items():
        if scmp.resolve_syscall(scmp.Arch.NATIVE, name) < 0:  # iopl on aarch64, say
            continue
        if not rule.when:
            policy.add_rule(action(rule.action), name)
        for when in rule.when:  # any one: a rule each
            policy.add_rule(action(rule.action), name, scmp.Arg(when.arg, scmp.MASKED_EQ, when.mask, when.value))
    newest = highest_named_syscall(scmp)
    for number in range(newest + 1, newest + 1 + NEWER_SYSCALLS):
        policy.add_rule(scmp.ERRNO(errno.ENOSYS), number)
    return policy


def highest_named_syscall(scmp: Any) -> int:
    """The highest syscall number of this architecture that libseccomp can name."""
    for number in range(1023, -1, -1):
        with contextlib.suppress(ValueError):
            if scmp.resolve_syscall(scmp.Arch.NATIVE, number):
                return number
    return -1


def die_with_parent(parent_pid: int, parent_fd: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a no-op elsewhere): a grader killed mid-run leaves no
    learner process behind.  ``parent_pid`` 0 is a parent outside our PID namespace; then ``parent_fd``, a pipe it
    holds open, tells whether it is still there."""
    import select
    import signal

    try:
        _libc().prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() not in (parent_pid, 0):  # the parent died before prctl took effect
        os._exit(1)
    if parent_fd is not None and select.select([parent_fd], [], [], 0)[0]:  # end-of-file: the parent is gone
        os._exit(1)
