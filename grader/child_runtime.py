"""What runs on the learner's side: load a submission, find its hooks, run calls.

This file is self-contained (the standard library, torch and safetensors) on
purpose.  The grader starts it as ``python -I -c <this source> template ...``:
a *template* process that imports torch once and then forks one child per
submission.  A child holds only the learner's code, written from text into its
own temporary folder; never the reference, the catalogue of mistakes or the
hidden cases.  Trusted code imports the loading helpers from here too, so the
sandbox and in-process loading find hooks the same way.

The wire format, both ways, is data only: a message is an 8-byte length, a JSON
header, an 8-byte length and a safetensors blob (possibly empty).  Nothing is
ever pickled.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import socket
import struct
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CLASS_ALIASES = {
    "make_self_attention": "SelfAttention",
    "make_causal_attention": "CausalAttention",
    "make_multihead_attention": "MultiHeadAttention",
}
"""The chapter's class names, adopted when a module hook's function is absent."""

MAX_HEADER = 4 << 20
_LEN = struct.Struct(">Q")

# --- the wire format -------------------------------------------------------------


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


def send_message(sock: socket.socket, header: dict[str, Any], blob: bytes = b"") -> None:
    data = json.dumps(header, allow_nan=True).encode()
    sock.sendall(_LEN.pack(len(data)) + data + _LEN.pack(len(blob)) + blob)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        part = sock.recv(min(n - len(chunks), 1 << 20))
        if not part:
            raise EOFError("the other side closed the connection")
        chunks += part
    return bytes(chunks)


def recv_message(sock: socket.socket, max_blob: int = 1 << 30) -> tuple[dict[str, Any], bytes]:
    (size,) = _LEN.unpack(_recv_exact(sock, 8))
    if size > MAX_HEADER:
        raise ProtocolError(f"header of {size} bytes is over the {MAX_HEADER} byte limit")
    try:
        header = json.loads(_recv_exact(sock, size))
    except ValueError as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    (blob_size,) = _LEN.unpack(_recv_exact(sock, 8))
    if blob_size > max_blob:
        raise ProtocolError(f"data of {blob_size} bytes is over the {max_blob} byte limit")
    return header, _recv_exact(sock, blob_size)


# --- loading a submission ----------------------------------------------------------


def describe_parameters(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """The parameters of ``fn`` as plain data: ``[{"name", "kind", "default"}]``."""
    sig = inspect.signature(fn)
    return [{"name": p.name, "kind": p.kind.name, "default": p.default is not p.empty} for p in sig.parameters.values()]


def find_callable(namespaces: list[Any], hook: str) -> Callable[..., Any] | None:
    """The first function named ``hook`` (or its chapter class) in ``namespaces``."""
    for ns in namespaces:
        candidate = getattr(ns, hook, None)
        if candidate is None and hook in CLASS_ALIASES:
            candidate = getattr(ns, CLASS_ALIASES[hook], None)
            if not inspect.isclass(candidate):
                candidate = None
        if callable(candidate):
            return candidate
    return None


def where_defined(fn: Callable[..., Any], fallback: str, root: str | None = None) -> str:
    """``file:line`` of a function or class, relative to ``root`` when inside it."""
    target = getattr(fn, "__init__", fn) if inspect.isclass(fn) else fn
    try:
        target = inspect.unwrap(target)
        path = inspect.getsourcefile(target) or fallback
        line = target.__code__.co_firstlineno
    except (TypeError, AttributeError, ValueError):
        return fallback
    return f"{_relative(path, root)}:{line}"


def _relative(path: str, root: str | None) -> str:
    if root:
        with contextlib.suppress(ValueError):
            rel = os.path.relpath(path, root)
            if not rel.startswith(".."):
                return rel
    with contextlib.suppress(ValueError):
        return os.path.relpath(path)
    return path


class LoadError(Exception):
    """The submission could not be imported; the message is one line naming file:line."""


def _is_test_file(path: Path) -> bool:
    """Test files, conftest.py and hidden files are never part of a submission's code."""
    return path.name.startswith(("test_", ".")) or path.name == "conftest.py"


@contextlib.contextmanager
def _on_path(folder: Path, *module_names: str) -> Iterator[None]:
    """Put ``folder`` first on ``sys.path`` and shadow ``module_names`` while importing.

    Like tox's inline plugin loader: stale ``sys.modules`` entries for the names
    are dropped so the file on disk is what gets imported, and the previous
    entries come back afterwards so the kit's own packages are not replaced.
    """

    inside = str(folder.resolve()) + os.sep

    def owned(key: str) -> bool:
        return any(key == n or key.startswith(n + ".") for n in module_names)

    def from_folder(module: Any) -> bool:
        return str(getattr(module, "__file__", None) or "").startswith(inside)

    saved = {key: mod for key, mod in sys.modules.items() if owned(key)}
    for key in saved:
        del sys.modules[key]
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))
        # the submission's own modules and any sibling it imported leave with it,
        # so the next submission's `import helper` finds its own helper
        for key in [k for k, mod in list(sys.modules.items()) if owned(k) or (k not in before and from_folder(mod))]:
            del sys.modules[key]
        sys.modules.update(saved)


def _error_line(root: Path, exc: BaseException) -> str:
    inside = str(root if root.is_dir() else root.parent)
    if isinstance(exc, SyntaxError):
        return f"{_relative(exc.filename or str(root), inside)}:{exc.lineno}: {type(exc).__name__}: {exc.msg}"
    where = None
    tb = exc.__traceback__
    while tb is not None:  # the deepest frame inside the submission
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(inside):
            where = f"{_relative(filename, inside)}:{tb.tb_lineno}"
        tb = tb.tb_next
    text = f"{where or root.name}: {type(exc).__name__}: {exc}"
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def import_submission(path: Path, keep_modules: bool = False) -> list[Any]:
    """Import a ``.py`` file or a folder and return its module namespaces.

    A folder with ``__init__.py`` is imported as a package (and its modules);
    any other folder as loose modules side by side.  Test files and
    ``conftest.py`` are never imported.  Any exception at import time, a
    ``SystemExit`` included, becomes a :class:`LoadError` with one line naming
    the file and line.
    """
    path = path.resolve()
    try:
        if path.is_file():
            name = f"attnkit_submission_{uuid.uuid4().hex[:12]}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise LoadError(f"{path.name}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            with _on_path(path.parent, name):
                spec.loader.exec_module(module)
            return [module]
        if (path / "__init__.py").exists():
            with _on_path(path.parent, path.name):
                package = importlib.import_module(path.name)
                return [package] + [
                    importlib.import_module(f"{path.name}.{p.stem}")
                    for p in sorted(path.glob("*.py"))
                    if p.stem != "__init__" and not _is_test_file(p)
                ]
        files = [p for p in sorted(path.glob("*.py")) if not _is_test_file(p)]
        if not files:
            raise LoadError(f"{path.name}: no .py files to load")
        with _on_path(path, *[p.stem for p in files]):
            return [importlib.import_module(p.stem) for p in files]
    except LoadError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a learner's import may raise anything, SystemExit included
        raise LoadError(_error_line(path, exc)) from None


# --- the child: running calls ------------------------------------------------------------


def _torch():
    import torch

    return torch


def _func_name(func: Any) -> str:
    """How a learner would have written the call: ``torch.softmax``, ``Tensor.softmax``, ``F.softmax``."""
    name = getattr(func, "__name__", None) or repr(func)
    owner = getattr(func, "__objclass__", None)
    module = getattr(func, "__module__", None) or ""
    if owner is not None and getattr(owner, "__name__", "") in ("Tensor", "TensorBase", "_TensorBase"):
        return f"Tensor.{name}"
    if module.startswith(("torch.nn.functional", "torch._C._nn")):
        return f"F.{name}"
    if module.startswith("torch._C._special") or name.startswith("special_"):
        return f"torch.special.{name.removeprefix('special_')}"
    return f"torch.{name}"


def _recording_mode(banned: list[str]):
    """A TorchFunctionMode that notes every banned torch call made inside it.

    ``banned`` holds base names (``softmax``); what is recorded says where the
    call came from (``torch.softmax``, ``Tensor.softmax``, ``F.softmax``).
    A learning aid, not a security boundary: code can leave the mode.
    """
    torch = _torch()

    mode_base: Any = torch.overrides.TorchFunctionMode

    class CallRecorder(mode_base):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            base = getattr(func, "__name__", "")
            if base in banned:
                name = _func_name(func)
                if name not in self.seen:
                    self.seen.append(name)
            return func(*args, **(kwargs or {}))

    return CallRecorder()


def _decode_args(spec: dict[str, Any], tensors: dict[str, Any], device: str) -> dict[str, Any]:
    torch = _torch()
    out: dict[str, Any] = {}
    for name, arg in spec.items():
        if "tensor" in arg:
            value = tensors[arg["tensor"]]
            if device == "meta":
                value = torch.empty(value.shape, dtype=value.dtype, device="meta")
            else:
                value = value.to(device)
            if arg.get("transposed"):
                value = value.transpose(-2, -1)
            out[name] = value
        elif "generator" in arg:
            gen = torch.Generator(device=device)
            gen.manual_seed(int(arg["generator"]))
            out[name] = gen
        elif "device" in arg:
            out[name] = device
        else:
            out[name] = arg.get("value")
    return out


def _describe_result(value: Any) -> dict[str, Any]:
    torch = _torch()
    info: dict[str, Any] = {"type": f"{type(value).__module__}.{type(value).__qualname__}"}
    if isinstance(value, torch.Tensor):
        info.update(
            is_tensor=True,
            exact_tensor=type(value) is torch.Tensor,
            dtype=str(value.dtype).replace("torch.", ""),
            shape=list(value.shape),
            device=str(value.device),
            contiguous=bool(value.is_contiguous()),
        )
    return info


def _plain(value: Any) -> Any:
    """A tensor as a plain ``torch.Tensor`` on the CPU, whatever subclass it claims to be."""
    torch = _torch()
    data = value.detach()
    if type(data) is not torch.Tensor:
        data = data.as_subclass(torch.Tensor)
    return data.to("cpu").contiguous().clone()


def run_call(hooks: dict[str, Callable[..., Any]], call: dict[str, Any], tensors: dict[str, Any]) -> tuple[dict, dict]:
    """Run one call; return (reply header, output tensors)."""
    torch = _torch()
    device = call.get("device", "cpu")
    reply: dict[str, Any] = {"id": call["id"], "ok": False}
    outputs: dict[str, Any] = {}
    fn = hooks.get(call["hook"])
    if fn is None:
        reply["error"] = {"type": "HookMissing", "mro": [], "message": f"no function {call['hook']}"}
        return reply, outputs
    args = _decode_args(call.get("args", {}), tensors, device)
    before = {k: v.clone() for k, v in args.items() if isinstance(v, torch.Tensor) and device != "meta"}
    recorder = _recording_mode(call.get("banned", []))
    started = time.perf_counter()
    try:
        with recorder:
            module_spec = call.get("module")
            if module_spec is not None:
                results, reply["module"] = _run_module(fn, args, module_spec, tensors, device)
            else:
                results = [fn(**args)]
                for _ in range(int(call.get("repeat", 1)) - 1):  # fresh arguments: a generator restarts
                    results.append(fn(**_decode_args(call.get("args", {}), tensors, device)))
        reply["ok"] = True
    except Exception as exc:
        reply["error"] = {
            "type": type(exc).__name__,
            "mro": [c.__name__ for c in type(exc).__mro__],
            "message": (str(exc) or type(exc).__name__)[:2000],
            "where": _learner_frame(exc),
        }
        results = []
    reply["seconds"] = time.perf_counter() - started
    reply["banned"] = recorder.seen
    reply["inputs_unchanged"] = all(
        isinstance(args[k], torch.Tensor) and args[k].shape == v.shape and torch.equal(args[k].cpu(), v.cpu())
        for k, v in before.items()
    )
    described = []
    for i, value in enumerate(results):
        info = _describe_result(value)
        if info.get("is_tensor") and device != "meta":
            outputs[f"out{i}"] = _plain(value)
        described.append(info)
    reply["results"] = described
    return reply, outputs


def _learner_frame(exc: BaseException) -> str | None:
    frames = traceback.extract_tb(exc.__traceback__)
    this_file = globals().get("__file__", "<string>")
    mine = [
        f for f in frames if f.filename != this_file and "site-packages" not in f.filename and "<" not in f.filename
    ]
    if not mine:
        return None
    f = mine[-1]
    return f"{_relative(f.filename, os.getcwd())}:{f.lineno}"


def _run_module(fn, args, spec, tensors, device):
    """Build a learner's module, load a state dict, run forwards; return outputs and facts."""
    torch = _torch()
    dtype = getattr(torch, spec.get("dtype", "float32"))
    if spec.get("init_seed") is not None:
        torch.manual_seed(int(spec["init_seed"]))
    module = fn(**args)
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"{type(module).__name__} is not an nn.Module")
    facts: dict[str, Any] = {
        "state_dict_keys": list(module.state_dict().keys()),
        "buffers": [name for name, _ in module.named_buffers()],
    }
    module = module.to(device=device, dtype=dtype) if device != "meta" else module.to(device="meta", dtype=dtype)
    state = spec.get("state")
    if state:
        loaded = {k: tensors[v].to(device) if device != "meta" else tensors[v].to("meta") for k, v in state.items()}
        result = module.load_state_dict(loaded, strict=False)
        facts["missing_keys"] = list(result.missing_keys)
        facts["unexpected_keys"] = list(result.unexpected_keys)
    mask = dict(module.named_buffers()).get("mask")
    facts["mask_device"] = str(mask.device) if mask is not None else None
    module.train(bool(spec.get("train", False)))
    outputs = []
    for key in spec.get("forwards", []):
        x = tensors[key]
        x = torch.empty(x.shape, dtype=x.dtype, device="meta") if device == "meta" else x.to(device)
        outputs.append(module(x))
    return outputs, facts


def _limit(resource_name: str, value: int) -> None:
    import resource

    kind = getattr(resource, resource_name)
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(kind)
        new_hard = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (min(value, new_hard), new_hard))


def _peak_rss_kib() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def _address_space_bytes() -> int:
    """This process's virtual memory size now (VmSize), 0 where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _processes_of_this_user() -> int:
    uid = os.getuid()
    count = 0
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
    return count


def child_main(sock: socket.socket, config: dict[str, Any]) -> None:
    """Serve one submission: ``load`` once, then ``run`` batches, until ``bye`` or EOF."""
    workdir = Path(config["workdir"])
    os.chdir(workdir)
    out = os.open(workdir / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.environ.clear()
    os.environ.update(config.get("env", {}))
    limits = dict(config.get("limits", {}))
    if "RLIMIT_NPROC" in limits:  # counted per user, machine-wide: allow this many more than exist now
        limits["RLIMIT_NPROC"] = int(limits["RLIMIT_NPROC"]) + _processes_of_this_user()
    if "RLIMIT_AS" in limits:  # torch's libraries already map GBs (far more in a CUDA build): allow this much more
        limits["RLIMIT_AS"] = int(limits["RLIMIT_AS"]) + _address_space_bytes()
    for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE"):
        if name in limits:
            _limit(name, int(limits[name]))
    isolation = list(config.get("isolation", []))
    if config.get("landlock", True) and restrict_filesystem(str(workdir), config.get("readable") or readable_paths()):
        isolation.append("landlock")
    if config.get("seccomp", True) and deny_unix_sockets():
        isolation.append("seccomp")
    isolation_name = "+".join(isolation) or "none"
    torch = _torch()
    torch.set_num_threads(1)
    cuda_init_seconds = None
    if config.get("cuda_memory_fraction") and torch.cuda.is_available():
        started = time.perf_counter()  # CUDA start-up, paid once per submission per GPU
        torch.cuda.set_per_process_memory_fraction(float(config["cuda_memory_fraction"]))
        torch.zeros(1, device="cuda").sum().item()
        cuda_init_seconds = time.perf_counter() - started
    from safetensors.torch import load as load_tensors
    from safetensors.torch import save as save_tensors

    hooks: dict[str, Callable[..., Any]] = {}
    while True:
        try:
            header, blob = recv_message(sock)
        except (EOFError, ProtocolError):
            return
        op = header.get("op")
        if op == "bye":
            return
        if op == "load":
            reply = _load(header, workdir, hooks)
            reply["isolation"] = isolation_name
            reply["cuda_init_seconds"] = cuda_init_seconds
            send_message(sock, reply)
        elif op == "hello":
            send_message(sock, {"isolation": isolation_name, "pid": os.getpid()})
        elif op == "run":
            tensors = load_tensors(blob) if blob else {}
            for call in header["calls"]:
                reply, outputs = run_call(hooks, call, tensors)
                reply["peak_rss_kib"] = _peak_rss_kib()
                with contextlib.suppress(Exception):  # keep what the learner printed, even on os._exit later
                    sys.stdout.flush()
                    sys.stderr.flush()
                send_message(sock, reply, save_tensors(outputs) if outputs else b"")
        else:
            send_message(sock, {"error": f"unknown op {op!r}"})


def _load(header: dict[str, Any], workdir: Path, hooks: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """Write the submission's files (sent as text) and import them."""
    root = workdir / "submission"
    for rel, text in header["files"].items():
        target = (root / rel).resolve()
        if root.resolve() not in target.parents:
            return {"import_error": f"{rel}: path outside the submission"}
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    entry = root / header["entry"]
    try:
        namespaces = import_submission(entry)
    except LoadError as exc:
        return {"import_error": str(exc)}
    found: dict[str, Any] = {}
    for hook in header["hooks"]:
        fn = find_callable(namespaces, hook)
        if fn is None:
            continue
        hooks[hook] = fn
        try:
            params = describe_parameters(fn)
        except (TypeError, ValueError):
            params = []
        found[hook] = {"params": params, "where": where_defined(fn, header["entry"], str(root))}
    return {"hooks": found}


# --- isolation: what the learner's process may touch ------------------------------------------

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_FS_READ = 1 | 4 | 8  # EXECUTE | READ_FILE | READ_DIR
_FS_FILE = 1 | 2 | 4  # EXECUTE | WRITE_FILE | READ_FILE: the rights a rule on a single file may carry
_KIT_PACKAGES = ("solutions", "grader", "exercises", "__editable__", "attnkit")


def _libc() -> Any:
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def enter_namespaces() -> bool:
    """Put this process in new user, PID, network and mount namespaces; True if the kernel allowed it.

    The caller must fork once more: its child is PID 1 of the new PID namespace,
    and when that process ends the kernel kills everything left inside it,
    ``setsid`` escapees included.  The new network namespace has no interface
    up, loopback included: no connection goes anywhere.  The mount namespace
    lets :func:`private_mounts` give the child its own ``/proc`` and ``/tmp``.
    """
    if not sys.platform.startswith("linux"):
        return False
    uid, gid = os.geteuid(), os.getegid()
    try:
        if _libc().unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS) != 0:
            return False
        # map our own user to root of the new namespace: files made here belong to us outside
        for name, text in (("uid_map", f"0 {uid} 1"), ("setgroups", "deny"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    except (OSError, AttributeError):
        return False
    return True


def private_mounts(workdir: str) -> bool:
    """In the child's mount namespace: a ``/proc`` of its own PID namespace, empty ``/tmp``, ``/run``, ``/dev/shm``.

    A fresh ``/proc`` shows the child no process outside its sandbox (not the
    grader's command line, not its environment); empty temporary folders hide
    other processes' files and unix sockets.  What the child needs from under
    them -- its ``workdir``, and Python and its packages when they live there
    (a kit checked out under ``/tmp``, say) -- is bound back in place.  Call as
    PID 1 of the new PID namespace.
    """
    libc = _libc()
    ms_nosuid, ms_nodev, ms_noexec, ms_bind, ms_rec, ms_private = 2, 4, 8, 4096, 16384, 1 << 18
    if libc.mount(None, b"/", None, ms_rec | ms_private, None) != 0:
        return False
    if libc.mount(b"proc", b"/proc", b"proc", ms_nosuid | ms_nodev | ms_noexec, None) != 0:
        return False
    shadowed = [
        f
        for f in dict.fromkeys(os.path.realpath(f) for f in ("/tmp", "/run", "/var/run", "/dev/shm"))
        if os.path.isdir(f)
    ]
    needed = [workdir, sys.prefix, sys.base_prefix, sys.exec_prefix] + [p for p in sys.path if p]
    keep: list[str] = []
    for path in sorted({os.path.realpath(p) for p in needed if os.path.isdir(p)}):
        under = any(path.startswith(f + os.sep) for f in shadowed)
        if under and not any(path.startswith(k + os.sep) for k in keep):
            keep.append(path)
    handles = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in keep}
    try:
        for folder in shadowed:
            libc.mount(b"tmpfs", folder.encode(), b"tmpfs", ms_nosuid | ms_nodev, b"size=64m,mode=1777")
        for path, fd in handles.items():
            os.makedirs(path, exist_ok=True)
            if libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, ms_bind | ms_rec, None) != 0:
                return False
        return True
    finally:
        for fd in handles.values():
            os.close(fd)


def deny_unix_sockets() -> bool:
    """seccomp: ``socket(AF_UNIX, ...)`` fails with EACCES, so no unix socket outside is reached.

    The child keeps the socket pair it was born with; it needs no other.  x86-64
    and aarch64 only; True if the filter is in place.
    """
    import ctypes
    import platform

    arch = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}.get(platform.machine())
    if arch is None:
        return False
    audit_arch, sys_socket = arch
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, deny = 0x7FFF0000, 0x00050000 | 13  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EACCES

    class Instruction(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction))]

    code = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 0, 4, audit_arch),  # another architecture: allow
        (ld, 0, 0, 0),  # seccomp_data.nr
        (jeq, 0, 2, sys_socket),  # not socket(): allow
        (ld, 0, 0, 16),  # args[0], the address family (low 32 bits)
        (jeq, 1, 0, 1),  # AF_UNIX: deny
        (ret, 0, 0, allow),
        (ret, 0, 0, deny),
    ]
    filters = (Instruction * len(code))(*[Instruction(*c) for c in code])
    program = Program(len(code), filters)
    libc = _libc()
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return libc.prctl(22, 2, ctypes.byref(program), 0, 0) == 0  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER


def _landlock_abi(libc: Any) -> int:
    try:
        return max(0, int(libc.syscall(_LANDLOCK_CREATE_RULESET, None, 0, 1)))  # LANDLOCK_CREATE_RULESET_VERSION
    except (OSError, AttributeError):
        return 0


def readable_paths() -> list[str]:
    """What the learner's process may read: the system, Python and its packages, never the kit.

    A folder of packages that also holds the kit's own packages (an installed
    attnkit) is opened entry by entry, leaving the kit's out.
    """
    paths = ["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys"]
    paths += [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        names = set(os.listdir(entry))
        if any(n.startswith(_KIT_PACKAGES) for n in names):
            paths += [os.path.join(entry, n) for n in sorted(names) if not n.startswith(_KIT_PACKAGES)]
        else:
            paths.append(entry)
    return paths


def restrict_filesystem(workdir: str, readable: list[str]) -> bool:
    """Landlock: read ``readable``, write only inside ``workdir`` and to devices; no TCP.

    Also scopes signals and abstract unix sockets to this process's own domain
    (Landlock ABI 6), so it cannot signal the grader.  True if applied.
    """
    import ctypes

    libc = _libc()
    abi = _landlock_abi(libc)
    if abi < 1:
        return False
    handled_fs = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        handled_fs |= 1 << 13  # REFER
    if abi >= 3:
        handled_fs |= 1 << 14  # TRUNCATE
    handled_net = 0b11 if abi >= 4 else 0  # BIND_TCP | CONNECT_TCP, with no rule allowing any
    scoped = 0b11 if abi >= 6 else 0  # abstract unix sockets and signals
    attr = (ctypes.c_uint64 * 3)(handled_fs, handled_net, scoped)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return False

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    def allow(path: str, access: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                access &= _FS_FILE | (1 << 14 if abi >= 3 else 0)
            rule = PathBeneath(access & handled_fs, fd)
            libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0)  # LANDLOCK_RULE_PATH_BENEATH
        finally:
            os.close(fd)

    try:
        for path in readable:
            allow(path, _FS_READ)
        allow("/dev", _FS_READ | 2 | (1 << 14 if abi >= 3 else 0))  # /dev/null, /dev/nvidia*: read and write
        allow(workdir, handled_fs)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS, required by landlock_restrict_self
            return False
        return libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0) == 0
    finally:
        os.close(ruleset)


# --- the template: a warm process that forks children -----------------------------------


def _drop_kit_from_path(kit_roots: list[str]) -> None:
    """Forget the kit's own folders and editable-install finders."""
    roots = [os.path.realpath(r) for r in kit_roots]
    environments = [os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]

    def kit_folder(entry: str) -> bool:
        real = os.path.realpath(entry or ".")
        inside_kit = any(real == r or real.startswith(r + os.sep) for r in roots)
        inside_environment = any(real == e or real.startswith(e + os.sep) for e in environments)
        return inside_kit and not inside_environment

    def editable_install(obj: Any) -> bool:  # setuptools' finders for `pip install -e`
        owner = getattr(obj, "__self__", obj)
        return "__editable__" in (getattr(owner, "__module__", None) or type(owner).__module__ or "")

    sys.path[:] = [p for p in sys.path if not kit_folder(p) and "__editable__" not in p]
    sys.meta_path[:] = [f for f in sys.meta_path if not editable_install(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not editable_install(h)]
    for name in [n for n in sys.modules if n.startswith("__editable__")]:
        del sys.modules[name]
    sys.path_importer_cache.clear()


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a no-op elsewhere).

    Each child dies with the template, and the template kills its children's
    process groups when the grader's end of the control socket closes, so a
    grader killed mid-run leaves no learner process behind.
    """
    import ctypes
    import ctypes.util
    import signal

    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() not in (parent_pid, 0):  # the parent died before prctl took effect (0: outside our PID ns)
        os._exit(1)


def _release_free_memory() -> None:
    """Hand freed heap back to the OS before forking: every child starts with the template's RSS."""
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        _libc().malloc_trim(0)


def _warm_meta() -> None:
    """Pay the meta device's one-off start-up (lazy imports) once, here, not in every child.

    Meta tensors carry shapes only and run no kernels, so this starts no
    OpenMP thread pool and forked children stay safe.
    """
    import torch

    a = torch.empty(2, 3, 4, device="meta")
    b = torch.empty(2, 5, 4, device="meta")
    scores = (a @ b.transpose(-2, -1)) / 2.0
    mask = torch.ones(3, 5, dtype=torch.bool, device="meta").triu(1)
    scores.masked_fill(mask, float("-inf")).exp().sum(dim=-1, keepdim=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def serve_template(control_fd: int, grader_pid: int, kit_roots: list[str], warm_meta: bool = True) -> None:
    """Import torch once, then fork a child for each request on the control socket.

    The control socket is a ``SOCK_SEQPACKET`` pair, one JSON object a packet.
    A request is a child's config with one file descriptor attached (the
    child's end of a socket pair); the reply is the child's pid.  The template never
    runs a torch op, so forked children start with a clean OpenMP state.
    """
    import signal

    import safetensors.torch  # noqa: F401 - warm the import for the children
    import torch  # noqa: F401

    if warm_meta:
        _warm_meta()
    _drop_kit_from_path(kit_roots)
    _release_free_memory()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    control = socket.socket(fileno=control_fd)
    template_pid = os.getpid()
    children: list[tuple[int, str]] = []  # (pid, workdir) of each child still alive
    control.sendall(json.dumps({"ready": True, "pid": template_pid}).encode())
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_HEADER, 1)
        except OSError:
            data = b""
        if not data:  # the grader closed the socket or died: nothing of its children may outlive it
            import shutil

            for pid, workdir in children:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                shutil.rmtree(workdir, ignore_errors=True)
            shutil.rmtree(os.getcwd(), ignore_errors=True)  # the template's own folder
            return
        config = json.loads(data)
        if not fds:
            continue
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()
                die_with_parent(template_pid)
                os.setsid()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                isolation = []
                if config.get("namespaces", True) and enter_namespaces():
                    inner = os.fork()  # PID 1 of the new namespace; its end ends everything in it
                    if inner != 0:
                        with contextlib.suppress(ChildProcessError):
                            os.waitpid(inner, 0)
                        os._exit(0)
                    die_with_parent(0)
                    if private_mounts(config["workdir"]):
                        isolation.append("namespaces")
                config["isolation"] = isolation
                child_main(socket.socket(fileno=fds[0]), config)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(fds[0])
        children[:] = [(c, w) for c, w in children if _alive(c)] + [(pid, config["workdir"])]
        control.sendall(json.dumps({"pid": pid}).encode())


if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "template":
    serve_template(int(sys.argv[2]), int(sys.argv[3]), sys.argv[5:], warm_meta=sys.argv[4] == "meta")
