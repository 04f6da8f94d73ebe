"""The containment as data: the filesystem grants (compiled into a tree), the temporary folders, the
device list and the syscall table (name -> action), in the spirit of DMOJ's cptbox policies.

:mod:`.contain` applies them; nothing here does anything.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

WORK_BYTES = 64 << 20
"""The default size of a child's work folder, a tmpfs of its own mount namespace (``Limits.work_bytes``)."""

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_SANDBOX_NAMESPACES = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC
_ANY_NAMESPACE = _SANDBOX_NAMESPACES | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWUSER
_KIT_PACKAGES = ("solutions", "grader", "exercises", "__editable__", "attnkit")


class Grant(NamedTuple):
    """One filesystem rule: ``access`` to ``path`` (a glob), a file or a folder with everything beneath it."""

    path: str
    access: str  # a key of ACCESS
    cuda: bool = False  # only for a child given a GPU


ACCESS = {
    "list": 8,  # READ_DIR: list folders, read no file
    "read": 1 | 4 | 8,  # EXECUTE | READ_FILE | READ_DIR
    "device": 2 | 4 | 1 << 14,  # WRITE_FILE | READ_FILE | TRUNCATE
    "gpu": 2 | 4 | 1 << 14 | 1 << 15,  # a device, and its ioctls (IOCTL_DEV)
    "write": (1 << 16) - 1,  # everything: make, remove, rename, truncate, ... (its work folder)
}
"""What each access of a :class:`Grant` allows, as Landlock's filesystem access bits (ABI 1 to 5)."""

DEVICES = ("null", "zero", "full", "random", "urandom")
"""The device files of a child's own ``/dev``; a CUDA child also gets ``/dev/nvidia*``."""

FILESYSTEM: tuple[Grant, ...] = (
    # shared libraries and programs (a learner may start `sleep`), time zones, locale aliases, fonts
    *(Grant(p, "read") for p in ("/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/local/lib")),
    *(Grant(p, "read") for p in ("/lib", "/lib32", "/lib64", "/libx32", "/usr/bin", "/bin")),
    *(Grant(p, "read") for p in ("/usr/share/zoneinfo", "/usr/share/locale/locale.alias")),
    *(Grant(p, "read") for p in ("/usr/share/fonts", "/usr/local/share/fonts", "/usr/share/fontconfig")),
    # of /etc only the loader's cache, the time zone, NSS and fontconfig (plots)
    *(Grant(p, "read") for p in ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf", "/etc/fonts")),
    # the CPU facts; of /proc a listing (in a PID namespace of its own: its own processes), its own
    # folder, and the files torch and the standard library read
    *(Grant(p, "read") for p in ("/sys/devices/system/cpu", "/sys/devices/system/node")),
    Grant("/proc", "list"),
    *(Grant(p, "read") for p in ("/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg")),
    *(Grant(f"/dev/{name}", "device") for name in DEVICES),
    # a CUDA child: the driver's parameters, the PCI devices, the GPUs
    *(Grant(p, "read", cuda=True) for p in ("/proc/driver/nvidia", "/sys/bus/pci", "/sys/devices")),
    Grant("/sys/module/nvidia", "read", cuda=True),
    Grant("/dev/nvidia*", "gpu", cuda=True),
)
"""Everything a learner's process may touch on the filesystem besides Python itself (:func:`filesystem_policy`, less
the kit) and its own work folder (``write``): not ``/etc`` or ``/dev`` whole, not ``/home``, ``/root`` or the kit."""

TEMPORARY_FOLDERS = ("/tmp", "/run", "/var/run")
"""Each an empty tmpfs (mode 1777, 64 MiB) in the child's mount namespace: no other process's files or
unix sockets; what the child needs from under one (its work folder, Python) is bound back in place."""

class When(NamedTuple):
    """A condition on a syscall's argument: ``args[arg] & mask == value``."""

    arg: int
    mask: int
    value: int


class Action(NamedTuple):
    """What a syscall gets: ``allow``, ``kill`` (the process), ``skip`` (it returns 0 and does nothing), or an errno
    name (``EPERM``); ``when`` any holds."""

    action: str
    when: tuple[When, ...] = ()  # none: always


_MAP_SHARED, _MAP_ANONYMOUS = 0x01, 0x20  # MAP_SHARED_VALIDATE (0x03) holds MAP_SHARED too
_AF_UNIX = 1
_SOCKET_FAMILIES_REFUSED = (_AF_UNIX, 17, 21, 29, 30, 31, 38, 40, 41, 44)
"""AF_UNIX, PACKET, RDS, CAN, TIPC, BLUETOOTH, ALG, VSOCK, KCM, XDP (a CPU run: no family at all); a GPU run keeps
INET, INET6 and NETLINK, which see only the child's own, empty, network namespace, for the driver's sake."""
_FILE_IOCTLS = tuple(t << 8 for t in (ord("f"), ord("v"), ord("X"), 0x94))
"""The ioctl types of files' own attributes (bits 8-15 of the request): ``f`` (FS_IOC_SETFLAGS …), ``v``, ``X``
(FS_IOC_FSSETXATTR) and btrfs's; an owner may use several on a file it cannot write (red team 13b)."""
SYSCALLS: dict[str, Action] = {
    **dict.fromkeys(("keyctl", "add_key", "request_key"), Action("EPERM")),  # the keyrings: the grader's secrets
    **dict.fromkeys(("bpf", "perf_event_open", "userfaultfd"), Action("EPERM")),  # kernel-exploit tools
    # memory no cap counts: a memfd is neither the work folder's tmpfs nor address space until mapped
    **dict.fromkeys(("memfd_create", "memfd_secret"), Action("EPERM")),
    # nor extended attributes, kept in kernel memory past any size or inode cap (red team files4 x1)
    **dict.fromkeys(("setxattr", "lsetxattr", "fsetxattr"), Action("ENOTSUP")),
    # nor any file's metadata, which Landlock does not guard: an unprivileged grader's learner has the grader's uid
    # outside, so owns the instructor's files (red team 12b: chmod 000, utime forged --latest); a mode, owner or time
    # set is skipped, as copying a file sets them (red team 13b); xattrs neither read nor removed, as on a filesystem
    # without them
    **dict.fromkeys(("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
                     "utimes", "futimesat", "utimensat"), Action("skip")),  # fmt: skip
    **dict.fromkeys(("getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr",
                     "lremovexattr", "fremovexattr"), Action("ENOTSUP")),  # fmt: skip
    "ioctl": Action("EPERM", tuple(When(1, 0xFF00, kind) for kind in _FILE_IOCTLS)),  # chattr's, and the like
    # other processes' memory and files
    **dict.fromkeys(("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"), Action("EPERM")),
    **dict.fromkeys(("shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl"), Action("EPERM")),
    **dict.fromkeys(("semget", "semop", "semctl", "semtimedop"), Action("EPERM")),  # SysV IPC
    **dict.fromkeys(
        ("mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"), Action("EPERM")
    ),  # POSIX message queues
    # no namespace and no mount after setup, old mount API or new
    **dict.fromkeys(("unshare", "setns", "mount", "umount2", "pivot_root", "chroot"), Action("EPERM")),
    **dict.fromkeys(
        ("fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr"), Action("EPERM")
    ),
    **dict.fromkeys(("open_by_handle_at", "name_to_handle_at"), Action("EPERM")),  # files by handle, past path checks
    **dict.fromkeys(("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"), Action("EPERM")),
    **dict.fromkeys(("swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "vhangup"), Action("EPERM")),
    **dict.fromkeys(("lookup_dcookie", "iopl", "ioperm", "modify_ldt"), Action("EPERM")),  # the last three: x86
    # no timer signals: a handler runs inside the recording modes while they stand aside too (red team 10's a3)
    **dict.fromkeys(("setitimer", "alarm", "timer_create"), Action("EPERM")),
    # nor a way to make the kernel forget which pages a call touched (held_memory reads their accessed bits):
    # MADV_FREE, _COLD, _PAGEOUT clear them, _POPULATE_READ and _WRITE map untouched pages
    "madvise": Action("EINVAL", tuple(When(2, 0xFFFFFFFF, advice) for advice in (8, 20, 21, 22, 23))),
    "process_madvise": Action("EPERM"),
    # as on a kernel without them: the C library falls back from clone3 to clone, whose flags the filter sees
    **dict.fromkeys(("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register"), Action("ENOSYS")),
    # nor kernel AIO (writes no byte count sees; contexts the machine's: red team 13b), nor file watches (per user)
    **dict.fromkeys(
        ("io_setup", "io_submit", "io_getevents", "io_pgetevents", "io_cancel", "io_destroy"), Action("ENOSYS")
    ),
    **dict.fromkeys(
        ("inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark"), Action("ENOSYS")
    ),
    # nor kernel buffers holding what a call puts there, out of its memory: socket pairs' queues, splice's pipes
    "socketpair": Action("EACCES"),
    **dict.fromkeys(("splice", "vmsplice", "tee"), Action("EPERM")),
    # no unix socket reached by path (the family: the low 32 bits), no family a network namespace does not wall off
    # (vsock reaches the host), nor raw packets, the kernel's crypto, XDP, or rare ones with a history of exploits
    "socket": Action("EACCES", tuple(When(0, 0xFFFFFFFF, family) for family in _SOCKET_FAMILIES_REFUSED)),
    # clone with any namespace flag
    "clone": Action("EPERM", tuple(When(0, 1 << b, 1 << b) for b in range(32) if _ANY_NAMESPACE & (1 << b))),
}
"""The syscall policy: name -> :class:`Action`.  Every other syscall is allowed; one of another
architecture (i386 through ``int 0x80``, x32 on x86-64) gets :data:`FOREIGN_ARCHITECTURE`."""

CPU_SYSCALLS: dict[str, Action] = {
    # held_memory reads what a CPU call held: no socket at all, whose queue is kernel memory (red team 12a: netlink)
    "socket": Action("EACCES"),
    # nor a file's pages written through a shared mapping and unmapped (red team 12a); the CUDA driver maps its
    # devices shared, and its sockets, so a GPU run keeps both
    "mmap": Action("EACCES", (When(3, _MAP_SHARED | _MAP_ANONYMOUS, _MAP_SHARED),)),
}
"""What a child given no GPU is refused besides :data:`SYSCALLS` (its entries replace theirs)."""


def syscall_policy(cuda: bool) -> dict[str, Action]:
    """The seccomp policy of a child given a GPU (``cuda``) or not."""
    return SYSCALLS if cuda else {**SYSCALLS, **CPU_SYSCALLS}


FOREIGN_ARCHITECTURE = "kill"

NEWER_SYSCALLS = 128
"""The syscall numbers just above the highest libseccomp can name get ENOSYS, as on an older kernel: a syscall newer
than the library (``getxattrat``, ``removexattrat`` of Linux 6.13) is no way around a rule of :data:`SYSCALLS`."""


class _Node:
    __slots__ = ("rights", "children")

    def __init__(self) -> None:
        self.rights = 0
        self.children: dict[str, _Node] = {}


class FilesystemPolicy:
    """Grants compiled into a tree of path components; a node's rights hold beneath it, as Landlock's do.

    Paths are resolved (``/proc/self`` kept as it is); a path that does not exist is no rule.  ``holes`` are cut out of
    every grant: a folder holding one is granted entry by entry, and only listed itself (Python's importer lists it).
    A grant inside a hole still holds (a virtual environment in the kit's checkout).
    """

    def __init__(self, grants: tuple[Grant, ...] | list[Grant] = (), holes: list[str] | None = None) -> None:
        self.root = _Node()
        self.holes = [os.path.realpath(h) for h in holes or []]
        for grant in grants:
            self.grant(grant)

    def grant(self, grant: Grant) -> None:
        import glob

        for path in sorted(glob.glob(grant.path)):
            self._grant(path if path.startswith("/proc/self") else os.path.realpath(path), ACCESS[grant.access])

    def _grant(self, path: str, rights: int) -> None:
        if not os.path.exists(path) or path in self.holes:
            return
        inner = [h for h in self.holes if h.startswith(path + os.sep)]
        if not inner or not os.path.isdir(path):
            self._node(path).rights |= rights
            return
        self._node(path).rights |= ACCESS["list"]
        for name in sorted(os.listdir(path)):
            self._grant(os.path.join(path, name), rights)

    def _node(self, path: str) -> _Node:
        node = self.root
        for part in path.strip(os.sep).split(os.sep):
            node = node.children.setdefault(part, _Node())
        return node

    def rights(self, path: str) -> int:
        """What Landlock would allow on ``path``: the rights of its node and of every folder above it."""
        real = path if path.startswith("/proc/self") else os.path.realpath(path)
        node, rights = self.root, self.root.rights
        for part in real.strip(os.sep).split(os.sep):
            next_node = node.children.get(part)
            if next_node is None:
                break
            node = next_node
            rights |= node.rights
        return rights

    def allows(self, path: str, access: str) -> bool:
        return self.rights(path) & ACCESS[access] == ACCESS[access]

    def rules(self) -> list[tuple[str, int]]:
        """(path, rights) for Landlock, one per node that adds rights to what the folders above it have."""
        found: list[tuple[str, int]] = []

        def walk(node: _Node, path: str, above: int) -> None:
            if node.rights & ~above:
                found.append((path or os.sep, node.rights))
            for name, child in node.children.items():
                walk(child, f"{path}{os.sep}{name}", above | node.rights)

        walk(self.root, "", 0)
        return found


def filesystem_policy(kit_roots: list[str]) -> FilesystemPolicy:
    """:data:`FILESYSTEM` (less its CUDA grants) and Python itself (the standard library, every folder of ``sys.path``,
    the interpreter, its ``pyvenv.cfg``), less the kit (granted around entry by entry): computed once, in the template.
    """
    import sysconfig

    paths = [sysconfig.get_paths().get(key) or "" for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths += [sysconfig.get_config_var("LIBDIR") or "", sys.executable, os.path.realpath(sys.executable)]
    paths += [os.path.dirname(sys.executable), os.path.join(sys.prefix, "pyvenv.cfg")]
    paths += [p for p in sys.path if p]
    grants = [g for g in FILESYSTEM if not g.cuda] + [Grant(p, "read") for p in paths if p]
    return FilesystemPolicy(grants, holes=_kit_holes(kit_roots))


def _kit_holes(kit_roots: list[str]) -> list[str]:
    """The kit's folders, and the kit's entries in every folder of packages on ``sys.path``."""
    folders = [entry for entry in sys.path if entry and os.path.isdir(entry)]
    found = [os.path.join(folder, n) for folder in folders for n in os.listdir(folder) if n.startswith(_KIT_PACKAGES)]
    return [os.path.realpath(path) for path in [*kit_roots, *found]]
