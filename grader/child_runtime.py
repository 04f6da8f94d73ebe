"""What runs on the learner's side: load a submission, find its hooks, run calls.

This file is self-contained (the standard library, torch and safetensors, and
pyseccomp where installed) on purpose.  The grader starts it as ``python -I -c <this source> template ...``:
a *template* process that imports torch once and then forks one child per
submission.  A child holds only the learner's code, written from text into its
own temporary folder; never the reference, the catalogue of mistakes or the
hidden cases.  Before any learner code runs, :func:`contain` puts the child in
its sandbox (namespaces, its own ``/proc`` and ``/dev``, an unprivileged uid,
Landlock, seccomp).  Trusted code imports the loading helpers from here too, so
the sandbox and in-process loading find hooks the same way.

The wire format, both ways, is data only: a message is an 8-byte length, a JSON
header, an 8-byte length and a safetensors blob (possibly empty).  Nothing is
ever pickled.  What this side must know of the exercises comes in the messages
(it imports nothing of the kit): ``load`` names the hooks to find and the
chapter's class names standing in for them (``aliases``); each call names the
torch calls it records as banned.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import socket
import struct
import sys
import time
import traceback
import types
import uuid
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

MAX_HEADER = 4 << 20
_LEN = struct.Struct(">Q")

# --- the wire format -------------------------------------------------------------


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


def send_message(sock: socket.socket, header: dict[str, Any], blob: bytes = b"") -> None:
    data = json.dumps(header, allow_nan=True).encode()
    sock.sendall(_LEN.pack(len(data)) + data + _LEN.pack(len(blob)) + blob)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes from ``sock``; with a ``deadline`` (``time.monotonic()``), TimeoutError once it passes.

    The time left is recomputed before every ``recv``, so a peer that drips one
    byte at a time cannot stretch a read past the deadline.
    """
    chunks = bytearray()
    while len(chunks) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the deadline passed")
            sock.settimeout(left)
        part = sock.recv(min(n - len(chunks), 1 << 20))
        if not part:
            raise EOFError("the other side closed the connection")
        chunks += part
    return bytes(chunks)


def recv_message(
    sock: socket.socket, max_blob: int = 1 << 30, max_header: int = MAX_HEADER, deadline: float | None = None
) -> tuple[dict[str, Any], bytes]:
    """One message: ``(header, blob)``.  Sizes over the caps are refused from the length prefix, unread.

    Raises ProtocolError for anything that is not a well-formed message (a
    header that is not a JSON object, too deeply nested JSON, bad UTF-8),
    EOFError when the peer closed, TimeoutError when ``deadline`` passed.
    """
    (size,) = _LEN.unpack(_recv_exact(sock, 8, deadline))
    if size > max_header:
        raise ProtocolError(f"header of {size} bytes is over the {max_header} byte limit")
    try:
        header = json.loads(_recv_exact(sock, size, deadline))
    except (ValueError, RecursionError, MemoryError) as exc:  # UnicodeDecodeError is a ValueError
        raise ProtocolError(f"header is not JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    (blob_size,) = _LEN.unpack(_recv_exact(sock, 8, deadline))
    if blob_size > max_blob:
        raise ProtocolError(f"data of {blob_size} bytes is over the {max_blob} byte limit")
    return header, _recv_exact(sock, blob_size, deadline)


# --- loading a submission ----------------------------------------------------------


def describe_parameters(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """The parameters of ``fn`` as plain data: ``[{"name", "kind", "default"}]``."""
    sig = inspect.signature(fn)
    return [{"name": p.name, "kind": p.kind.name, "default": p.default is not p.empty} for p in sig.parameters.values()]


def find_callable(
    namespaces: list[Any], hook: str, alias: str | list[str] | tuple[str, ...] | None = None
) -> Callable[..., Any] | None:
    """The first function named ``hook`` in ``namespaces``, else the first class named one of ``alias``.

    ``alias`` is the chapter's class name (or names, first preferred) for a
    module hook (``SelfAttention``, ``SelfAttention_v2``, ``SelfAttention_v1``),
    from :mod:`grader.hook_table`; the trusted side passes it, in-process or in
    the ``load`` message (this file imports nothing of the kit).
    """
    names = [alias] if isinstance(alias, str) else list(alias or ())
    for ns in namespaces:
        candidate = getattr(ns, hook, None)
        for name in names if candidate is None else ():
            candidate = getattr(ns, name, None)
            if inspect.isclass(candidate):
                break
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
    """Test files (``test_*.py``, ``*_test.py``, ``conftest.py``) and hidden files are never a submission's code.

    A copy of :func:`grader.handin.is_skipped_file` (this file imports nothing of the kit); a test holds them equal.
    """
    name = path.name
    return name.startswith(("test_", ".")) or name.endswith("_test.py") or name == "conftest.py"


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
    the file and line.  :func:`import_submission_parts` is the lenient form.
    """
    namespaces, broken = import_submission_parts(path)
    if broken:
        raise LoadError(broken[0][0])
    return namespaces


def defined_names(path: Path) -> tuple[str, ...]:
    """The names a module's top level defines (functions, classes, plain assignments), read without running it.

    With :mod:`ast`; where the source does not parse (the SyntaxError that broke
    it), the ``def`` and ``class`` lines at column 0.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return tuple(re.findall(r"^(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_]\w*)", text, re.MULTILINE))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return tuple(names)


Broken = tuple[str, tuple[str, ...]]
"""A module of a folder that did not import: ``(the one-line error, the names it defines)``."""


def import_submission_parts(path: Path) -> tuple[list[Any], list[Broken]]:
    """Like :func:`import_submission`, but a folder's module that fails to import costs only what it defines.

    Returns the namespaces that imported and, for each module that did not,
    its error line and :func:`defined_names`.  A package whose ``__init__``
    fails is imported module by module under a bare package of the same name.
    Raises :class:`LoadError` when nothing imports at all (an ``__init__`` that defines nothing does not
    count), or a single file does not.
    """
    path = path.resolve()
    broken: list[Broken] = []
    try:
        if path.is_file():
            name = f"attnkit_submission_{uuid.uuid4().hex[:12]}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise LoadError(f"{path.name}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            with _on_path(path.parent, name):
                spec.loader.exec_module(module)
            return [module], []
        if (path / "__init__.py").exists():
            modules = [p for p in sorted(path.glob("*.py")) if p.stem != "__init__" and not _is_test_file(p)]
            with _on_path(path.parent, path.name):
                try:
                    loaded = [importlib.import_module(path.name)]
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # a learner's import may raise anything, SystemExit included
                    broken.append((_error_line(path.parent, exc), defined_names(path / "__init__.py")))
                    for key in [k for k in sys.modules if k == path.name or k.startswith(path.name + ".")]:
                        del sys.modules[key]
                    bare = types.ModuleType(path.name)  # the package without its __init__: each module on its own
                    bare.__path__ = [str(path)]
                    bare.__package__ = path.name
                    sys.modules[path.name] = bare
                    loaded = []
                loaded += _import_each([f"{path.name}.{p.stem}" for p in modules], modules, path.parent, broken)
        else:
            files = [p for p in sorted(path.glob("*.py")) if not _is_test_file(p)]
            if not files:
                raise LoadError(f"{path.name}: no .py files to load")
            with _on_path(path, *[p.stem for p in files]):
                loaded = _import_each([p.stem for p in files], files, path, broken)
    except LoadError:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a learner's import may raise anything, SystemExit included
        raise LoadError(_error_line(path, exc)) from None
    if broken and not [m for m in loaded if m.__name__ != path.name or defined_names(path / "__init__.py")]:
        raise LoadError(broken[0][0])  # nothing but an __init__ that defines nothing imported
    return loaded, broken


def load_error_of(hook: str, alias: str | list[str] | tuple[str, ...] | None, broken: list[Broken]) -> str | None:
    """``exercise <hook>: could not load <file:line: error>`` where a module that did not import defines the hook
    (or one of its class names, ``alias``), else None."""
    names = {hook, *([alias] if isinstance(alias, str) else list(alias or ()))}
    error = next((error for error, defined in broken if names & set(defined)), None)
    return f"exercise {hook}: could not load {error}" if error else None


def _import_each(names: list[str], files: list[Path], root: Path, broken: list[Broken]) -> list[Any]:
    """Import each module by name; one that fails is noted in ``broken`` and the others go on."""
    loaded = []
    for name, file in zip(names, files, strict=True):
        try:
            loaded.append(importlib.import_module(name))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a learner's import may raise anything, SystemExit included
            broken.append((_error_line(root, exc), defined_names(file)))
    return loaded


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


def _largest_tensor_mode():
    """A TorchDispatchMode that notes the largest tensors any op creates inside it: their shapes and the ops.

    Two records: the tensor with the most elements (``shape``, ``op``), and the floating tensor with the
    widest last two dims (``matrix``, ``matrix_op``: one batch-head's ``(Tq, Tk)`` scores, however many
    batch-heads it holds; :func:`grader.rules.matrix_size`).  Every output of every op counts, but a view
    or an in-place result (its schema says it aliases an input): those hold no new memory.  ``matmul``
    computes on ``(8, T, T)`` and returns the learner a ``(2, 4, T, T)`` view of it (``_unsafe_view``),
    and folds ``(B, H, T, d) @ (d, c)`` into one ``(B*H*T, c)`` product: that view renames the tensor it
    views, so the shapes reported are the ones the learner's code saw.  Call ``settle()`` before reading
    ``matrix``.  For the calls that ask for it (``measure_memory``: the memory rule of a chunked exercise);
    it sees the calling thread only, which is why a call may start no thread (:func:`_watch_spawns`).
    """
    torch = _torch()
    from torch.utils._python_dispatch import TorchDispatchMode

    mode_base: Any = TorchDispatchMode
    unsafe_view = torch.ops.aten._unsafe_view.default  # a view whose schema does not say so

    def matrix_size(shape: list[int]) -> int:  # grader.rules.matrix_size, here so that the child imports no kit
        return math.prod(shape[-2:]) if shape else 0

    class LargestTensor(mode_base):
        def __init__(self) -> None:
            super().__init__()
            self.elements = -1
            self.shape: list[int] = []
            self.op = ""
            self._largest: Any = None  # a weak reference: the mode keeps nothing alive
            self.matrix: list[int] = []
            self.matrix_op = ""
            self._pending: tuple[Any, list[int], str] | None = None  # the last floating tensor: a view may rename it

        def settle(self) -> None:
            """The last floating tensor created can no longer be renamed: weigh it for ``matrix``."""
            if self._pending is not None:
                _, shape, op = self._pending
                self._pending = None
                if matrix_size(shape) > matrix_size(self.matrix):
                    self.matrix, self.matrix_op = shape, op

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            returns = func._schema.returns
            values = out if isinstance(out, (tuple, list)) else (out,)
            op = str(getattr(func, "__name__", func)).split(".")[0]
            for i, value in enumerate(values):
                if not isinstance(value, torch.Tensor):
                    continue
                declared = returns[min(i, len(returns) - 1)] if returns else None
                if func is unsafe_view:  # matmul's result, handed back in the learner's shape
                    if args and self._largest is not None and args[0] is self._largest():
                        self.shape, self._largest = list(value.shape), weakref.ref(value)
                    if args and self._pending is not None and args[0] is self._pending[0]():
                        self._pending = (weakref.ref(value), list(value.shape), self._pending[2])
                    continue
                if declared is not None and declared.alias_info is not None:
                    continue  # a view or an in-place result: no new memory
                if value.numel() > self.elements:
                    self.elements, self.shape, self._largest = value.numel(), list(value.shape), weakref.ref(value)
                    self.op = op
                if value.is_floating_point() or value.is_complex():
                    self.settle()
                    self._pending = (weakref.ref(value), list(value.shape), op)
            return out

    return LargestTensor()


# --- the child: threads and processes of the learner's code ----------------------------------------

SPAWN_EVENTS = frozenset(
    {
        "_thread.start_new_thread",
        "_thread.start_joinable_thread",
        "_posixsubprocess.fork_exec",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "os.system",
        "subprocess.Popen",
        "pty.spawn",
    }
)
"""The audit events of starting a thread, a process or a program (``grader.rules.SPAWN_KINDS`` words them)."""

_SPAWNS: list[str] | None = None
"""What the learner's code started since :func:`_watch_spawns` (None: not watched, as in the trusted process)."""


def _watch_spawns() -> None:
    """From now on, in this process, note every thread and process started (child side, before learner code loads).

    An audit hook (``sys.addaudithook``: it cannot be removed) hears every ``SPAWN_EVENTS`` event.  Python
    before 3.12 raises no event for a new thread, nor any Python for ``_posixsubprocess.fork_exec``
    (``multiprocessing``'s spawn): ``_thread``'s and ``threading``'s entry points and ``fork_exec`` are
    replaced by ones that raise the event first.  A call notes too (:func:`_spawn_facts`) a Python thread
    other than its own, a child process still there, a child process reaped: whatever started them.
    """
    global _SPAWNS
    seen: list[str] = []

    def hear(event: str, args: tuple[Any, ...]) -> None:
        if event in SPAWN_EVENTS and (event not in seen or event in _THREAD_EVENTS) and len(seen) < 1 << 16:
            seen.append(event)

    sys.addaudithook(hear)
    import _thread
    import threading

    def announcing(event: str, start: Callable[..., Any]) -> Callable[..., Any]:
        def started(*args: Any, **kwargs: Any) -> Any:
            sys.audit(event)
            return start(*args, **kwargs)

        return started

    if sys.version_info < (3, 12):
        original = _thread.start_new_thread
        wrapped = announcing("_thread.start_new_thread", original)
        for module in (_thread, threading):
            for name, value in list(vars(module).items()):
                if value is original:
                    setattr(module, name, wrapped)
    with contextlib.suppress(ImportError):
        import _posixsubprocess

        _posixsubprocess.fork_exec = announcing(  # type: ignore[attr-defined]
            "_posixsubprocess.fork_exec", _posixsubprocess.fork_exec
        )
    _SPAWNS = seen
    _spawn_facts()  # the baseline of reaped children


_REAPED: list[tuple[float, ...]] = []


_THREAD_EVENTS = ("_thread.start_new_thread", "_thread.start_joinable_thread")


def _spawn_facts(since: int = 0) -> list[str]:
    """What the learner's process started, for a reply: the events heard, and what is measured now.

    Every process heard since the watch began (one may escape measurement: a double fork without a
    PID namespace of its own), the threads heard from event ``since`` on (a thread still running is
    measured).  Measured where the learner's code cannot hide it: a Python thread other than this
    one (``sys._current_frames``, the interpreter's own list), a child process not yet reaped
    (``waitid`` without reaping it), a child process reaped since the watch began (the kernel's
    ``RUSAGE_CHILDREN`` accounting moved).  Empty where nothing is watched.
    """
    if _SPAWNS is None:
        return []
    import resource

    facts = [e for i, e in enumerate(_SPAWNS) if e not in _THREAD_EVENTS or i >= since]
    if len(sys._current_frames()) > 1:
        facts.append("thread-running")
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        facts.append("process-running")
    except ChildProcessError:
        pass
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (usage.ru_utime, usage.ru_stime, usage.ru_minflt, usage.ru_majflt, usage.ru_nvcsw, usage.ru_nivcsw)
    if not _REAPED:
        _REAPED.append(reaped)
    elif reaped != _REAPED[0]:
        facts.append("process-ended")
    return list(dict.fromkeys(facts))[:16]


@contextlib.contextmanager
def _measured(reply: dict[str, Any], device: str) -> Iterator[None]:
    """Around a call that asks for it: the largest tensor created (and on CUDA the peak memory) into ``reply``."""
    torch = _torch()
    on_cuda = device.startswith("cuda") and torch.cuda.is_available()
    if on_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    mode = _largest_tensor_mode()
    try:
        with mode:
            yield
    finally:
        mode.settle()
        reply["memory"] = {
            "largest": mode.shape if mode.elements >= 0 else None,
            "op": mode.op[:100],
            "matrix": mode.matrix or None,
            "matrix_op": mode.matrix_op[:100],
        }
        if on_cuda:
            torch.cuda.synchronize(device)
            reply["memory"]["cuda_peak_bytes"] = max(0, torch.cuda.max_memory_allocated(device) - before)


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
            if arg.get("requires_grad") and value.is_floating_point():
                value = value.detach().requires_grad_(True)  # a leaf that requires grad, as a model's weights do
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


# --- figures: a plot is read as data, never shown, never pickled ----------------------------------

FIGURE_TEXT = 200
"""At most this many characters of an axis label or a tick label travel (the trusted side cuts there too)."""

FIGURE_TICKS = 1024
"""At most this many ticks of one axis travel."""


def headless_pyplot() -> Any:
    """``matplotlib.pyplot``, imported headless (the Agg backend unless one is chosen already); None without matplotlib.

    The sandbox's environment sets ``MPLBACKEND=Agg`` and a writable ``MPLCONFIGDIR`` (the child's folder); a
    process that has not chosen a backend gets Agg here, before pyplot is imported.
    """
    if "matplotlib.pyplot" not in sys.modules:
        try:
            import matplotlib
        except ImportError:
            return None
        if not os.environ.get("MPLBACKEND"):
            matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


@contextlib.contextmanager
def recording_show(seen: list[str]) -> Iterator[None]:
    """For the block's duration, ``pyplot.show`` and ``Figure.show`` do nothing but note their name in ``seen``.

    The torch recorder sees torch calls only; this one sees the two ways to show a figure (a learner who
    kept ``show`` under another name before the block is not caught: a learning aid, like the recorder).
    """
    plt = headless_pyplot()
    if plt is None:
        yield
        return
    import matplotlib.figure

    def recorder(name: str) -> Callable[..., None]:
        def show(*args: Any, **kwargs: Any) -> None:
            if name not in seen:
                seen.append(name)

        return show

    saved = [(plt, plt.show), (matplotlib.figure.Figure, matplotlib.figure.Figure.show)]
    plt.show = recorder("pyplot.show")
    matplotlib.figure.Figure.show = recorder("Figure.show")  # type: ignore[method-assign]
    try:
        yield
    finally:
        for owner, show in saved:
            owner.show = show  # type: ignore[method-assign]


def _ticks(axis: Any) -> list[dict[str, Any]]:
    """The major ticks of one axis inside its view, at non-negative positions: ``[{"at", "text"}]``, without drawing."""
    low, high = sorted(float(v) for v in axis.get_view_interval())
    locs = [float(v) for v in axis.get_majorticklocs()]
    texts = axis.get_major_formatter().format_ticks(locs) if locs else []
    return [
        {"at": at, "text": str(text)[:FIGURE_TEXT]}
        for at, text in zip(locs, texts)
        if at == at and 0 <= at and low - 1e-9 <= at <= high + 1e-9
    ][:FIGURE_TICKS]


def figure_facts(value: Any) -> tuple[dict[str, Any], Any] | None:
    """What the grader reads of a returned figure: ``(facts, the image's array as a float64 tensor or None)``.

    None when ``value`` is not a matplotlib ``Figure``.  The facts: ``images`` (how many ``imshow`` images its
    axes hold) and, for the first one, its axes' ``xlabel`` and ``ylabel``, the ``xticks`` and ``yticks``
    (:func:`_ticks`), ``colorbar`` (a colorbar is drawn for that image) and ``array_problem`` (why its array
    could not be read as numbers).  Nothing is drawn; the figure is left open (the caller closes it).
    """
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is None or not isinstance(value, figure_module.Figure):
        return None
    images = [(ax, image) for ax in value.axes for image in ax.images]
    facts: dict[str, Any] = {"images": len(images)}
    if not images:
        return facts, None
    ax, image = images[0]
    facts.update(
        xlabel=str(ax.get_xlabel())[:FIGURE_TEXT],
        ylabel=str(ax.get_ylabel())[:FIGURE_TEXT],
        xticks=_ticks(ax.xaxis),
        yticks=_ticks(ax.yaxis),
        colorbar=getattr(image, "colorbar", None) is not None,
    )
    try:
        import numpy as np

        data = np.ma.asarray(image.get_array())
        array = _torch().from_numpy(np.ascontiguousarray(np.ma.filled(data.astype(np.float64), np.nan)))
    except Exception as exc:  # noqa: BLE001 - an image of strings, of objects …: a fact, not a crash
        facts["array_problem"] = f"{type(exc).__name__}: {exc}"[:FIGURE_TEXT]
        return facts, None
    return facts, array


def _open_figures() -> set[int]:
    plt = sys.modules.get("matplotlib.pyplot")
    return set(plt.get_fignums()) if plt is not None else set()


def _close_figures(value: Any, before: set[int]) -> None:
    """Close ``value`` if it is a figure, and every pyplot figure opened since ``before`` (none outlives its call)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    with contextlib.suppress(Exception):
        if isinstance(value, sys.modules["matplotlib.figure"].Figure):
            plt.close(value)
        for number in _open_figures() - before:
            plt.close(number)


PRINTED_CHARS = 4000
"""At most this many characters of what one call printed travel in its reply (the trusted side cuts there too)."""


class _Printed:
    """Around one call: ``sys.stdout``/``sys.stderr`` also copied into a buffer of ``PRINTED_CHARS`` (then a count).

    What the learner prints still reaches the process's output file as before;
    the reply carries the call's own part, so it can be shown per exercise.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kept = 0
        self.lost = 0
        self._saved: tuple[Any, Any] | None = None

    def write(self, text: str) -> int:
        text = str(text)
        room = PRINTED_CHARS - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.lost += max(0, len(text) - max(room, 0))
        return len(text)

    def __enter__(self) -> _Printed:
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Tee(sys.stdout, self), _Tee(sys.stderr, self)  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            sys.stdout, sys.stderr = self._saved

    @property
    def text(self) -> str:
        text = "".join(self.parts)
        return text + (f"\n[... {self.lost} more characters not kept]" if self.lost else "")


class _Tee:
    """A text stream writing to ``stream`` and to a :class:`_Printed`."""

    def __init__(self, stream: Any, copy: _Printed) -> None:
        self._stream, self._copy = stream, copy

    def write(self, text: str) -> int:
        self._copy.write(text)
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding …: the stream's own
        return getattr(self._stream, name)


def call_hook(hooks: dict[str, Callable[..., Any]], call: dict[str, Any], tensors: dict[str, Any]) -> tuple[dict, dict]:
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
    printed = _Printed()
    measured = _measured(reply, device) if call.get("measure_memory") and device != "meta" else contextlib.nullcontext()
    figures = call.get("output") == "figure"
    shown: list[str] = []
    showing = recording_show(shown) if figures else contextlib.nullcontext()
    figures_before = _open_figures() if figures else set()
    spawned = _spawn_facts(since := len(_SPAWNS or ()))
    started = time.perf_counter()
    try:
        with recorder, printed, measured, showing:
            module_spec = call.get("module")
            if module_spec is not None:
                results, reply["module"] = _run_module(fn, args, module_spec, tensors, device)
            else:
                results = [fn(**args)]
                for _ in range(int(call.get("repeat", 1)) - 1):  # fresh arguments: a generator restarts
                    results.append(fn(**_decode_args(call.get("args", {}), tensors, device)))
                for other in call.get("also", []):  # once more with other arguments (a generator seeded anew)
                    results.append(fn(**_decode_args(other, tensors, device)))
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
    reply["banned"] = recorder.seen + shown
    spawned = list(dict.fromkeys(spawned + _spawn_facts(since)))
    if spawned:
        reply["spawned"] = spawned[:16]
    if printed.text:
        reply["printed"] = printed.text
    reply["inputs_unchanged"] = all(
        isinstance(args[k], torch.Tensor) and args[k].shape == v.shape and torch.equal(args[k].cpu(), v.cpu())
        for k, v in before.items()
    )
    described = []
    for i, value in enumerate(results):
        info = _describe_result(value)
        if info.get("is_tensor") and device != "meta":
            outputs[f"out{i}"] = _plain(value)
        elif figures:
            try:
                read = figure_facts(value)
            except Exception as exc:  # noqa: BLE001 - a figure that cannot be read is the learner's, not ours
                read = {"images": 0, "array_problem": f"{type(exc).__name__}: {exc}"[:FIGURE_TEXT]}, None
            if read is not None:
                info["figure"], array = read
                if array is not None:
                    outputs[f"out{i}"] = array
        described.append(info)
    if figures:
        for value in results:
            _close_figures(value, figures_before)
        _close_figures(None, figures_before)
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


_ROLE_WORDS = {
    "query": ("q", "query", "queries"),
    "key": ("k", "key", "keys"),
    "value": ("v", "value", "values"),
    "out": ("o", "out", "output"),
}
_ROLE_AFFIXES = ("", "w", "proj", "projection", "to", "linear", "lin", "layer", "fc", "weight", "weights")


def _role_of(name):
    """``("query" | "key" | "value" | "out" | None, "weight" | "bias")`` read from a parameter's name.

    ``W_query.weight``, ``w_q.weight``, ``Wq``, ``q_proj.weight``, ``proj_k.bias``, ``to_v.weight``,
    ``out_proj.weight``, ``W_o`` all name their role; anything else (``qkv.weight``, ``last_layer.weight``,
    ``lin1.weight``) names none.  Only the words the chapter and its learners use, so it never guesses.
    """
    parts = name.split(".")
    kind = "bias" if parts[-1] == "bias" else "weight"
    stem = parts[-2] if parts[-1] in ("weight", "bias") and len(parts) > 1 else parts[-1]
    word = "".join(ch for ch in stem.lower() if ch.isalpha())
    for role, words in _ROLE_WORDS.items():
        for core in words:
            for before in _ROLE_AFFIXES:
                for after in _ROLE_AFFIXES:
                    if word == before + core + after and not (before and after):
                        return role, kind
    return None, kind


def _fits(mine, theirs):
    """How a learner's parameter of shape ``mine`` takes the contract's ``theirs``: "", "transposed" or None."""
    if mine == theirs:
        return ""
    if len(theirs) == 2 and theirs[0] != theirs[1] and mine == (theirs[1], theirs[0]):
        return "transposed"
    return None


def _by_role(learner, contract):
    """The mapping by role names (``Wq`` → ``W_query``): each contract parameter's role names exactly one of the
    learner's, of a shape that fits.  The learner's other parameters are extras, left as the module makes them."""
    roles: dict = {}
    for name, shape in learner:
        roles.setdefault(_role_of(name), []).append((name, shape))
    pairs = []
    for theirs, shape in contract:
        found = roles.get(_role_of(theirs), [])
        layout = _fits(found[0][1], shape) if len(found) == 1 else None
        if layout is None:
            return None
        pairs.append((found[0][0], theirs, layout))
    return pairs


def _by_order(learner, contract):
    """The mapping by creation order and shape, weights and biases each in their own order.

    A learner's parameter takes the next contract parameter of its kind (2-D weights, 1-D biases) of the same
    shape, or the non-square one transposed; or, where its first dimension is the sum of the next few of the
    same kind (``nn.Linear(d_in, 3 * d_out)`` for query, key and value at once), those few stacked by rows.
    """
    queues: dict[int, list] = {}
    for theirs, shape in contract:
        queues.setdefault(len(shape), []).append((theirs, shape))
    pairs = []
    for mine, my_shape in learner:
        queue = queues.get(len(my_shape), [])
        if not queue:
            return None
        theirs, shape = queue[0]
        layout = _fits(my_shape, shape)
        if layout is not None:
            pairs.append((mine, theirs, layout))
            queue.pop(0)
            continue
        rows, taken = 0, 0
        while taken < len(queue) and rows < my_shape[0] and queue[taken][1][1:] == my_shape[1:]:
            rows += queue[taken][1][0]
            taken += 1
        if taken < 2 or rows != my_shape[0]:
            return None
        start = 0
        for theirs, shape in queue[:taken]:
            pairs.append((mine, theirs, f"rows {start}:{start + shape[0]}"))
            start += shape[0]
        del queue[:taken]
    return pairs if not any(queues.values()) else None


def map_parameters(
    learner: list[tuple[str, tuple[int, ...]]], contract: list[tuple[str, tuple[int, ...]]]
) -> tuple[str, list[tuple[str, str, str]]]:
    """How the reference's parameters go onto a learner's module: ``(how, [(learner's, contract's, layout)])``.

    ``learner`` and ``contract`` are ``(name, shape)`` in creation order, as ``named_parameters()`` lists
    them (a module's own parameters first, then its submodules' in the order they were assigned).  A pair's
    ``layout`` is ``""`` (as it is), ``"transposed"`` or ``"rows a:b"`` (one block of a stacked parameter).

    - ``"name"``: every one of the contract's parameters is a parameter of the learner's module with that
      name and shape; each is loaded by name.  Other parameters of the learner's are left as they are.
    - ``"role"``: the names differ, but every parameter on both sides names its role in a word learners use
      (``Wq``, ``w_key``, ``value_proj``, ``W_o``), one of the learner's per role and kind, and the shapes
      fit: each takes its role's, whatever order the module created them in; others are left as they are.
    - ``"order"``: otherwise, the learner's parameters take the contract's in creation order (the chapter's:
      ``W_query``, ``W_key``, ``W_value``, then ``out_proj``), weights and biases each in their order, where
      the shapes fit.  A 2-D parameter whose shape is the contract's non-square shape transposed
      (``nn.Parameter(torch.rand(d_in, d_out))`` used as ``x @ W``, the chapter's ``SelfAttention_v1``) gets
      the contract's weight transposed (a square one is never transposed, so the mapping is never a guess);
      one whose rows are the next few stacked (``nn.Linear(d_in, 3 * d_out)``) gets them stacked.
    - ``"none"``: neither (another count of parameters, or a shape that fits no way); nothing is loaded.

    Pure data in, data out: the trusted side calls it too, on what a child reported, to write its messages.
    """
    learner = [(name, tuple(shape)) for name, shape in learner]
    contract = [(name, tuple(shape)) for name, shape in contract]
    shapes = dict(learner)
    if all(shapes.get(name) == shape for name, shape in contract):
        return "name", [(name, name, "") for name, _ in contract]
    for how, rule in (("role", _by_role), ("order", _by_order)):
        pairs = rule(learner, contract)
        if pairs is not None:
            return how, pairs
    return "none", []


def _load_parameters(module, state, tensors, device, facts):
    """Load the reference's parameters (``state``: contract name -> tensor key) as :func:`map_parameters` says.

    Only parameters: the learner's buffers (the mask) are the learner's own work.  Returns False where no
    mapping exists (nothing is loaded).  What ``load_state_dict`` did not take raises, naming every key.
    """
    torch = _torch()
    learner = [(name, tuple(p.shape)) for name, p in module.named_parameters()]
    contract = [(name, tuple(tensors[key].shape)) for name, key in state.items()]
    how, pairs = map_parameters(learner, contract)
    facts["loaded_by"] = how
    if how == "none":
        return False
    shapes = dict(learner)
    values: dict[str, Any] = {}
    for mine, theirs, layout in pairs:
        value = tensors[state[theirs]]
        if layout == "transposed":
            value = value.t()
        elif layout.startswith("rows "):
            start, stop = (int(n) for n in layout[5:].split(":"))
            whole = values.get(mine)
            if whole is None:
                whole = values[mine] = torch.empty(shapes[mine], dtype=value.dtype, device=device)
            whole[start:stop] = value.to(device)
            continue
        values[mine] = value.to(device)
    result = module.load_state_dict(values, strict=False)
    refused = [name for name in values if name in set(result.unexpected_keys)]
    if device != "meta":
        now = dict(module.named_parameters())
        refused += [
            name
            for name, value in values.items()
            if name not in refused and (name not in now or not torch.equal(now[name].detach(), value))
        ]
    if refused:
        raise RuntimeError(
            "load_state_dict did not load the reference's weights into "
            + ", ".join(refused)
            + " (does your module change state_dict or load_state_dict?)"
        )
    return True


def _run_module(fn, args, spec, tensors, device):
    """Build a learner's module, load the reference's parameters into it, run forwards; return outputs and facts.

    The facts (:data:`grader.instructor.replies.MODULE_FACTS`): the learner's parameters (name and shape, in
    creation order), its buffers and ``state_dict`` keys, the mask buffer's device after ``.to(device)``, and
    how the reference's parameters were loaded (``loaded_by``: name, order or none).  Where they cannot be
    loaded, no forward runs: every behaviour case says why from the facts.
    """
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
        "parameters": [{"name": name, "shape": list(p.shape)} for name, p in module.named_parameters()],
    }
    module = module.to(device=device, dtype=dtype)
    mask = dict(module.named_buffers()).get("mask")
    facts["mask_device"] = str(mask.device) if mask is not None else None
    state = spec.get("state")
    if state and not _load_parameters(module, state, tensors, device, facts):
        return [], facts
    module.train(bool(spec.get("train", False)))
    inputs = []
    for key in spec.get("forwards", []):
        x = tensors[key]
        inputs.append(torch.empty(x.shape, dtype=x.dtype, device="meta") if device == "meta" else x.to(device))
    outputs = [module(x) for x in inputs]
    if spec.get("eval_too") and inputs:  # then the first input once more in eval mode: the module's own weights
        module.eval()
        outputs.append(module(inputs[0]))
    return outputs, facts


def _peak_rss_kib() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux


def child_main(sock: socket.socket, config: dict[str, Any], isolation: list[str]) -> None:
    """Serve one submission, already contained (:func:`contain`): ``load`` once, then ``call`` batches.

    Until ``bye`` or end-of-file.  ``isolation`` names the layers that took; the
    ``hello`` reply says them, the seccomp backend and the uid outside.
    """
    workdir = Path(config["workdir"])
    os.chdir(workdir)
    out = config.get("output_fd")  # the grader's capture file (a memfd): what is printed lands where it reads
    if out is None:
        out = os.open(os.devnull, os.O_WRONLY)
    os.dup2(out, 1)
    os.dup2(out, 2)
    if out not in (1, 2):
        os.close(out)
    config["output_fd"] = 2
    os.environ.clear()
    os.environ.update(config.get("env", {}))
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
    _watch_spawns()  # before any learner code loads
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
            send_message(sock, {"isolation": isolation_name, "pid": os.getpid(), **config.get("contained", {})})
        elif op == "call":
            tensors = load_tensors(blob) if blob else {}
            for call in header["calls"]:
                reply, outputs = call_hook(hooks, call, tensors)
                reply["peak_rss_kib"] = _peak_rss_kib()
                with contextlib.suppress(Exception):  # keep what the learner printed, even on os._exit later
                    sys.stdout.flush()
                    sys.stderr.flush()
                send_message(sock, reply, save_tensors(outputs) if outputs else b"")
        else:
            send_message(sock, {"error": f"unknown op {op!r}"})


def _load(header: dict[str, Any], workdir: Path, hooks: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """Write the submission's files (sent as text) and import them; find ``hooks`` (or their ``aliases``)."""
    root = workdir / "submission"
    for rel, text in header["files"].items():
        target = (root / rel).resolve()
        if root.resolve() not in target.parents:
            return {"import_error": f"{rel}: path outside the submission"}
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    entry = root / header["entry"]
    try:
        namespaces, broken = import_submission_parts(entry)
    except LoadError as exc:
        return {"import_error": str(exc)}
    found: dict[str, Any] = {}
    load_errors: dict[str, str] = {}
    aliases = header.get("aliases") or {}
    for hook in header["hooks"]:
        fn = find_callable(namespaces, hook, aliases.get(hook))
        if fn is None:
            why = load_error_of(hook, aliases.get(hook), broken)
            if why:
                load_errors[hook] = why
            continue
        hooks[hook] = fn
        try:
            params = describe_parameters(fn)
        except (TypeError, ValueError):
            params = []
        found[hook] = {"params": params, "where": where_defined(fn, header["entry"], str(root))}
    return {"hooks": found, "load_errors": load_errors}


# --- containment: what the learner's process may touch ------------------------------------------
#
# contain() puts a freshly forked child in its sandbox before any learner code
# runs: one small step after another (nsjail's containProc is the model), each
# returning the names of the layers that took.  A step the kernel refuses is
# left out and the isolation line says so, with one exception: a child that
# cannot stop being root exits rather than run learner code.
#
# What the child may touch is declared once, as data, and the steps only apply it:
# FILESYSTEM (what it may read, list and write: Landlock, through a FilesystemPolicy
# tree), TEMPORARY_FOLDERS and the work folder's tmpfs (its mount namespace), DEVICES
# (its /dev) and SYSCALLS (seccomp, by name through libseccomp, the one filter there is).
#
# This block stands alone, to move into a module of its own as it is: of the imports at
# the top of the file it uses contextlib, os, socket, sys and typing's Any and NamedTuple;
# everything else it imports where it is used.

SANDBOX_UID = 65534
"""The uid and gid (``nobody``, ``nogroup``) a learner's process runs as when the grader is root."""

WORK_BYTES = 64 << 20
"""The default size of a child's work folder, a tmpfs of its own mount namespace (``Limits.work_bytes``)."""

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_SANDBOX_NAMESPACES = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC
_ANY_NAMESPACE = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 1, 4, 24, 38, 47
_PR_SET_CHILD_SUBREAPER = 36
_KIT_PACKAGES = ("solutions", "grader", "exercises", "__editable__", "attnkit")


# --- the policy, as data -------------------------------------------------------------------------


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
"""Everything a learner's process may touch on the filesystem, besides Python itself (the standard
library, every folder of packages on ``sys.path``, the interpreter: :func:`filesystem_policy`, less
the kit) and its own work folder, which it may ``write``.  Nothing else: not ``/etc`` or ``/dev``
whole, not ``/home``, not ``/root``, not the kit."""

TEMPORARY_FOLDERS = ("/tmp", "/run", "/var/run")
"""Each an empty tmpfs (mode 1777, 64 MiB) in the child's mount namespace: no other process's files or
unix sockets; what the child needs from under one (its work folder, Python) is bound back in place."""

class When(NamedTuple):
    """A condition on a syscall's argument: ``args[arg] & mask == value``."""

    arg: int
    mask: int
    value: int


class Action(NamedTuple):
    """What a syscall gets: ``allow``, ``kill`` (the process), or an errno name (``EPERM``); ``when`` any holds."""

    action: str
    when: tuple[When, ...] = ()  # none: always


def _fails(name: str, *when: When) -> Action:
    return Action(name, when)


_AF_UNIX = 1
SYSCALLS: dict[str, Action] = {
    **dict.fromkeys(("keyctl", "add_key", "request_key"), _fails("EPERM")),  # the keyrings: the grader's secrets
    **dict.fromkeys(("bpf", "perf_event_open", "userfaultfd"), _fails("EPERM")),  # kernel-exploit tools
    # other processes' memory and files
    **dict.fromkeys(("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"), _fails("EPERM")),
    **dict.fromkeys(("shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl"), _fails("EPERM")),
    **dict.fromkeys(("semget", "semop", "semctl", "semtimedop"), _fails("EPERM")),  # SysV IPC
    **dict.fromkeys(
        ("mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"), _fails("EPERM")
    ),  # POSIX message queues
    # no namespace and no mount after setup, old mount API or new
    **dict.fromkeys(("unshare", "setns", "mount", "umount2", "pivot_root", "chroot"), _fails("EPERM")),
    **dict.fromkeys(
        ("fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr"), _fails("EPERM")
    ),
    **dict.fromkeys(("open_by_handle_at", "name_to_handle_at"), _fails("EPERM")),  # files by handle, past path checks
    **dict.fromkeys(("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"), _fails("EPERM")),
    **dict.fromkeys(("swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "vhangup"), _fails("EPERM")),
    **dict.fromkeys(("lookup_dcookie", "iopl", "ioperm", "modify_ldt"), _fails("EPERM")),  # the last three: x86
    # as on a kernel without them: the C library falls back from clone3 to clone, whose flags the filter sees
    **dict.fromkeys(("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register"), _fails("ENOSYS")),
    # no unix socket of the machine's is reached by path (socketpair reaches nothing, and is allowed);
    # the kernel reads the family as an int: the low 32 bits
    "socket": _fails("EACCES", When(0, 0xFFFFFFFF, _AF_UNIX)),
    # clone with any namespace flag
    "clone": _fails("EPERM", *(When(0, 1 << b, 1 << b) for b in range(32) if _ANY_NAMESPACE & (1 << b))),
}
"""The syscall policy: name -> :class:`Action`.  Every other syscall is allowed; one of another
architecture (i386 through ``int 0x80``, x32 on x86-64) gets :data:`FOREIGN_ARCHITECTURE`."""

FOREIGN_ARCHITECTURE = "kill"


# --- the filesystem policy, compiled ------------------------------------------------------------------


class _Node:
    __slots__ = ("rights", "children")

    def __init__(self) -> None:
        self.rights = 0
        self.children: dict[str, _Node] = {}


class FilesystemPolicy:
    """Grants compiled into a tree of path components; a node's rights hold beneath it, as Landlock's do.

    Paths are resolved (``/proc/self`` is kept as it is, for the process that
    applies the rules); a path that does not exist is no rule.  ``holes`` are
    cut out of every grant: a folder holding one is granted entry by entry, and
    only listed itself (Python's importer lists the folders it imports from).
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
    """:data:`FILESYSTEM` (less its CUDA grants) and Python itself, less the kit: computed once, in the template.

    Python: the standard library and every folder of packages on ``sys.path``,
    the interpreter and its ``pyvenv.cfg``.  A folder that holds any of the kit
    (its checkout, an installed attnkit, an editable install's finder) is
    granted entry by entry, leaving the kit out.
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
    holes = [os.path.realpath(r) for r in kit_roots]
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            holes += [
                os.path.realpath(os.path.join(entry, n)) for n in os.listdir(entry) if n.startswith(_KIT_PACKAGES)
            ]
    return holes


# --- applying it --------------------------------------------------------------------------------------

_LIBC: Any = None


def _libc() -> Any:
    """The C library, loaded once (in the template: ``find_library`` runs ``ldconfig``, which a child may not)."""
    global _LIBC
    if _LIBC is None:
        import ctypes
        import ctypes.util

        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _LIBC


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

    The steps: leave the grader's uid behind when it is root; new user, PID,
    network, IPC and mount namespaces (forking once: the caller goes on as PID 1
    of the new PID namespace); a ``/proc``, empty temporary folders, a
    size-capped work folder and a minimal ``/dev`` of its own; a fresh session
    keyring; no capabilities; resource limits; Landlock; seccomp.
    ``config["contained"]`` gets what the hello reply reports (the seccomp
    backend, the uid outside).
    """
    plan = _Plan(config)
    took: list[str] = []
    prepare_sandbox_user(plan)
    took += enter_namespaces(plan)
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


def prepare_sandbox_user(plan: _Plan) -> None:
    """As root, the workdir handed to the sandbox uid, and no supplementary group of root's follows."""
    if plan.root:
        os.chown(plan.workdir, plan.uid, plan.gid)
        os.setgroups([])


def enter_namespaces(plan: _Plan) -> list[str]:
    """New user, PID, network, mount and IPC namespaces; then fork, and go on as PID 1 of the new PID namespace.

    As root, the template (in the parent namespace) maps the new namespace's
    root to the sandbox uid; unprivileged, the child maps its root to the
    grader's own uid and gid (read before ``unshare``).  Where a user namespace
    is refused, root makes the other namespaces without one.  When PID 1 ends
    the kernel kills everything left in its namespace, ``setsid`` escapees
    included; the new network namespace has no interface up, loopback
    included; the new IPC namespace has no SysV object or POSIX queue of anyone
    else's, and takes its own with it when it ends.
    """
    if "namespaces" in plan.without or not sys.platform.startswith("linux"):
        if plan.root:
            plan.processes_before = _processes_of(plan.uid)
        return []
    libc = _libc()
    took = []
    wants_user_ns = "user-ns" not in plan.without and (plan.map_fd is not None or not plan.root)
    if wants_user_ns and libc.unshare(CLONE_NEWUSER | _SANDBOX_NAMESPACES) == 0:
        if not (_parent_maps_ids(plan) if plan.root else _map_own_ids(plan.uid, plan.gid)):
            raise OSError("the new user namespace got no uid map")
        plan.namespaces = "user"
        took.append("user-ns")
    elif plan.root and libc.unshare(_SANDBOX_NAMESPACES) == 0:
        plan.namespaces = "plain"
        plan.processes_before = _processes_of(plan.uid)  # /proc is still the machine's here
    elif plan.root:
        plan.processes_before = _processes_of(plan.uid)
    if plan.map_fd is not None:
        with contextlib.suppress(OSError):
            os.close(plan.map_fd)  # tells the template there is nothing to map, when it was not used
        plan.map_fd = None
    if not plan.namespaces:
        return []
    _become_pid_one(plan)
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


def _map_own_ids(uid: int, gid: int) -> bool:
    """Map our own ``uid`` and ``gid`` (read before ``unshare``) to root of the new user namespace.

    Files made inside then belong to us outside.
    """
    try:
        for name, text in (("uid_map", f"0 {uid} 1"), ("setgroups", "deny"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    except OSError:
        return False
    return True


def map_child_ids(pid: int, channel: socket.socket, uid: int, gid: int) -> None:
    """The template's half of a root child's user namespace: map its root to ``uid``/``gid`` when asked.

    Only a process with CAP_SETUID in the parent namespace may map another uid
    than its own, so the parent writes the child's maps (as nsjail does).
    """
    try:
        channel.settimeout(10.0)
        if channel.recv(1) != b"u":
            return  # the child made no user namespace
        try:
            for name, text in (("uid_map", f"0 {uid} 1"), ("setgroups", "deny"), ("gid_map", f"0 {gid} 1")):
                with open(f"/proc/{pid}/{name}", "w") as fh:
                    fh.write(text)
            answer = b"y"
        except OSError:
            answer = b"n"
        channel.sendall(answer)
    except OSError:
        pass
    finally:
        channel.close()


def _become_pid_one(plan: _Plan) -> None:
    """Fork: the parent waits and exits, holding a pipe whose end-of-file tells the child it has gone."""
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


def _after_id_change(plan: _Plan) -> None:
    """A change of uid clears the parent-death signal and makes /proc/self root's: put both back."""
    _libc().prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    die_with_parent(0 if plan.namespaces else plan.parent_pid, plan.parent_fd)


def take_mapped_ids(plan: _Plan) -> list[str]:
    """Root with a user namespace: become its root, which is the sandbox uid outside, before mounting anything."""
    if plan.namespaces != "user" or not plan.root:
        return []
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    plan.ids_dropped = True
    _after_id_change(plan)
    return [f"uid-{plan.uid}"] if _outside_uid() == plan.uid else []


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
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
    return count


def _can_search(path: str, uid: int, gid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == gid:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)


def _topmost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another one of them."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == k or path.startswith(k + os.sep) for k in kept):
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
    """The topmost folders on the way to ``folders`` that ``uid`` may not enter (a 0700 ``/root`` holding pyenv).

    Asked before any namespace: inside a user namespace, root's files look as
    if they belonged to the overflow uid (which is the sandbox uid).
    """
    searchable: dict[str, bool] = {}
    closed: list[str] = []
    for path in folders:
        parts = path.split(os.sep)[1:-1]
        for i in range(1, len(parts) + 1):
            ancestor = os.sep + os.path.join(*parts[:i])
            if ancestor not in searchable:
                searchable[ancestor] = _can_search(ancestor, uid, gid)
            if not searchable[ancestor]:
                closed.append(ancestor)
                break
    return _topmost(closed)


def open_mount_sources(plan: _Plan) -> dict[str, Any]:
    """What :func:`private_mounts` binds back, opened now (``O_PATH``), before any id is dropped.

    Three kinds: the folders shadowed by an empty tmpfs (:data:`TEMPORARY_FOLDERS`,
    and any folder on the way to Python or the workdir that the sandbox uid may
    not enter); what the child needs from under them (its workdir, Python and
    its packages), bound back in place; and the device files of its own ``/dev``.
    """
    import glob

    temporary = [p for p in _topmost([os.path.realpath(f) for f in TEMPORARY_FOLDERS]) if os.path.isdir(p)]
    if "dev" in plan.without and os.path.isdir("/dev/shm"):
        temporary.append(os.path.realpath("/dev/shm"))
    closed = [f for f in plan.closed if not _inside(f, temporary)]
    shadowed = [(f, "1777", "64m") for f in temporary] + [(f, "0755", "1m") for f in closed]
    folders = [f for f, _, _ in shadowed]
    keep = _topmost([p for p in _needed_folders(plan) if _inside(p, folders) and p not in folders])
    devices = [f"/dev/{name}" for name in DEVICES]
    if plan.cuda:
        devices += sorted(glob.glob("/dev/nvidia*"))
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

    A fresh ``/proc`` (PID 1 of a new PID namespace mounts it) shows no process
    outside the sandbox: not the grader's command line, not its environment.
    Empty temporary folders hide other processes' files and unix sockets; what
    the child needs from under them is bound back (see
    :func:`open_mount_sources`).  ``mount-ns`` takes when all of that did;
    ``tmpfs-work`` when the work folder is a tmpfs of ``plan.work_bytes``
    (:func:`_work_tmpfs`); ``dev`` when the child's ``/dev`` holds only
    :data:`DEVICES` (and ``/dev/nvidia*`` for a CUDA child): no terminal, no
    ``/dev/kmsg``, no console, no disk, no loop device.
    """
    if sources is None:
        return []
    libc = _libc()
    try:
        if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            return []
        if libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
            return []
        for folder, mode, size in sources["shadowed"]:
            if not _mount_tmpfs(libc, folder, mode, size):
                return []
        for path, fd in sources["keep"].items():
            if not _bind(libc, fd, path):
                return []
        took = ["mount-ns"]
        if "tmpfs-work" not in plan.without and _work_tmpfs(libc, plan):
            took.append("tmpfs-work")
        if "dev" not in plan.without and _minimal_dev(libc, sources["devices"]):
            took.append("dev")
        return took
    finally:
        for fds in ("keep", "devices"):
            for fd in sources[fds].values():
                os.close(fd)


def _work_tmpfs(libc: Any, plan: _Plan) -> bool:
    """A tmpfs of ``plan.work_bytes`` (and an inode count to match) over the work folder, before learner code runs.

    Nothing the learner writes lands on the grader's filesystem; past the cap a
    write fails with ENOSPC; all of it goes when the namespace's last process
    ends, whatever its permissions.  The trusted side reads nothing from it: the child's output goes to a
    descriptor the grader made (:mod:`grader.reclaim`'s guardian reclaims the folder where no tmpfs took).
    """
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
    for path, fd in devices.items():
        if not _bind(libc, fd, path, recursive=False):
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
    """Root: become the sandbox uid (where no user namespace did it); then no capability at all.

    The bounding set goes first (dropping it needs CAP_SETPCAP, which a
    setresuid away from root takes), then the uid, then every capability
    left (a user namespace's root has them all inside it).  A root child that
    is still root afterwards raises: it never runs learner code.
    """
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
        os.setresgid(plan.gid, plan.gid, plan.gid)
        os.setresuid(plan.uid, plan.uid, plan.uid)
        plan.ids_dropped = True
        _after_id_change(plan)
        if _outside_uid() == plan.uid:
            took.append(f"uid-{plan.uid}")
    if plan.root and _outside_uid() == 0:
        raise PermissionError("the learner's process would run as root")
    libc.prctl(_PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    nothing = (Data * 2)()
    libc.capset(ctypes.byref(Header(0x20080522, 0)), nothing)  # _LINUX_CAPABILITY_VERSION_3, this process
    if _capabilities_left() == 0:
        took.append("no-caps")
    return took


def _capabilities_left() -> int:
    """The capabilities this process could still use (effective, permitted, inheritable, ambient), or -1."""
    left = 0
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith((b"CapInh:", b"CapPrm:", b"CapEff:", b"CapAmb:")):
                    left |= int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        return -1
    return left


def _limit(resource_name: str, value: int) -> None:
    import resource

    kind = getattr(resource, resource_name)
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(kind)
        new_hard = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (min(value, new_hard), new_hard))


def _address_space_bytes() -> int:
    """This process's virtual memory size now (VmSize), 0 where /proc does not say."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def set_limits(limits: dict[str, Any], plan: _Plan) -> None:
    """``setrlimit`` for each of ``limits``; the process and address-space counts are relative to now."""
    limits = dict(limits)
    if "RLIMIT_NPROC" in limits:  # counted per user (per user namespace): allow this many more than exist now
        before = plan.processes_before if plan.processes_before is not None else _processes_of(os.getuid())
        limits["RLIMIT_NPROC"] = int(limits["RLIMIT_NPROC"]) + before
    if "RLIMIT_AS" in limits:  # torch's libraries already map GBs (far more in a CUDA build): allow this much more
        limits["RLIMIT_AS"] = int(limits["RLIMIT_AS"]) + _address_space_bytes()
    for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CORE"):
        if name in limits:
            _limit(name, int(limits[name]))


def _landlock_abi(libc: Any) -> int:
    try:
        return max(0, int(libc.syscall(_LANDLOCK_CREATE_RULESET, None, 0, 1)))  # LANDLOCK_CREATE_RULESET_VERSION
    except (OSError, AttributeError):
        return 0


def restrict_filesystem(plan: _Plan) -> list[str]:
    """Landlock: the child's filesystem policy (:func:`filesystem_policy`), its work folder writable.

    No TCP; no signal to, and no abstract unix socket of, a process outside its
    sandbox (Landlock ABI 6).  This is the only fence for files where there is
    no mount namespace: ``/dev/pts``, ``/dev/kmsg`` or ``/etc/shadow`` are out
    of reach either way.
    """
    import ctypes

    if "landlock" in plan.without:
        return []
    libc = _libc()
    abi = _landlock_abi(libc)
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
    """seccomp: :data:`SYSCALLS`, by name through libseccomp, which knows every architecture's numbers.

    Without libseccomp there is no filter, and the isolation line says
    ``seccomp-missing``: never a weaker filter in silence.
    """
    if "seccomp" in plan.without:
        return []
    scmp = None if "libseccomp" in plan.without else _libseccomp()  # "libseccomp": as if it were missing (tests)
    if scmp is None:
        return ["seccomp-missing"]
    try:
        seccomp_filter(scmp).load()
    except OSError:
        return []
    plan.seccomp = "libseccomp"
    return ["seccomp"]


def seccomp_filter(scmp: Any) -> Any:
    """:data:`SYSCALLS` as a libseccomp filter (not loaded); a name this architecture lacks is no rule."""
    import errno

    def action(name: str) -> int:
        return {"allow": scmp.ALLOW, "kill": scmp.KILL_PROCESS}.get(name) or scmp.ERRNO(getattr(errno, name))

    policy = scmp.SyscallFilter(scmp.ALLOW)
    policy.set_attr(scmp.Attr.ACT_BADARCH, action(FOREIGN_ARCHITECTURE))  # i386, x32 and every other one
    for name, rule in SYSCALLS.items():
        if scmp.resolve_syscall(scmp.Arch.NATIVE, name) < 0:  # iopl on aarch64, say
            continue
        if not rule.when:
            policy.add_rule(action(rule.action), name)
        for when in rule.when:  # any one: a rule each
            policy.add_rule(action(rule.action), name, scmp.Arg(when.arg, scmp.MASKED_EQ, when.mask, when.value))
    return policy


def die_with_parent(parent_pid: int, parent_fd: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a no-op elsewhere).

    Each child dies with the template, and the template kills its children's
    process groups when the grader's end of the control socket closes, so a
    grader killed mid-run leaves no learner process behind.  ``parent_pid`` 0
    is a parent outside our PID namespace, whose pid we cannot see; then
    ``parent_fd``, a pipe the parent holds open, tells whether it is still there.
    """
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


# --- the template: a warm process that forks children -----------------------------------


def _drop_kit_from_path(kit_roots: list[str]) -> None:
    """Forget the kit's own folders and editable-install finders."""
    roots = [os.path.realpath(r) for r in kit_roots]
    environments = [os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)]

    def kit_folder(entry: str) -> bool:
        real = os.path.realpath(entry or ".")
        inside_kit = any(real == r or real.startswith(r + os.sep) for r in roots)
        inside_environment = any(real == e or real.startswith(e + os.sep) for e in environments)
        installed = os.path.basename(real) in ("site-packages", "dist-packages")  # Landlock leaves the kit out of it
        return inside_kit and not inside_environment and not installed

    def editable_install(obj: Any) -> bool:  # setuptools' finders for `pip install -e`
        owner = getattr(obj, "__self__", obj)
        return "__editable__" in (getattr(owner, "__module__", None) or type(owner).__module__ or "")

    sys.path[:] = [p for p in sys.path if not kit_folder(p) and "__editable__" not in p]
    sys.meta_path[:] = [f for f in sys.meta_path if not editable_install(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if not editable_install(h)]
    for name in [n for n in sys.modules if n.startswith("__editable__")]:
        del sys.modules[name]
    sys.path_importer_cache.clear()


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


def serve_template(
    control_fd: int, grader_pid: int, kit_roots: list[str], warm_meta: bool = True, warm_figures: bool = True
) -> None:
    """Import torch once, then fork a child for each request on the control socket.

    The control socket is a ``SOCK_SEQPACKET`` pair, one JSON object a packet.
    A request is a child's config with two file descriptors attached (the
    child's end of a socket pair, and the grader's capture file for its fds 1
    and 2); the reply is the child's pid.  The template never runs a torch op,
    so forked children start with a clean OpenMP state.  It never touches a
    child's folder: the grader's guardians (``grader/reclaim.py``) reclaim
    each, and the template's own, once the grader has gone.
    """
    # what containment imports, imported here: a child may not be able to read the standard library
    # before its mounts are in place (a pyenv Python under a 0700 /root, say)
    import glob  # noqa: F401
    import resource  # noqa: F401
    import select  # noqa: F401
    import signal
    import stat  # noqa: F401
    import sysconfig  # noqa: F401

    import safetensors.torch  # noqa: F401 - warm the import for the children
    import torch  # noqa: F401

    with contextlib.suppress(Exception):  # libseccomp's binding, where installed (its import runs ldconfig)
        import pyseccomp  # noqa: F401

    if warm_figures:
        with contextlib.suppress(Exception):  # matplotlib, where installed: a plot then pays no import, no font scan
            headless_pyplot()
            import matplotlib.figure  # noqa: F401

    if warm_meta:
        _warm_meta()
    _drop_kit_from_path(kit_roots)
    filesystem = filesystem_policy(kit_roots)  # what Landlock allows, the same for every child
    _libc()
    _release_free_memory()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    with contextlib.suppress(OSError, AttributeError):  # and so are their orphans: a dead child's group empties at once
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    control = socket.socket(fileno=control_fd)
    template_pid = os.getpid()
    children: list[int] = []  # the pid of each child still alive
    control.sendall(json.dumps({"ready": True, "pid": template_pid}).encode())
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_HEADER, 2)
        except OSError:
            data, fds = b"", []
        if not data:  # the grader closed the socket or died: nothing of its children may outlive it
            for pid in children:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            return
        config = json.loads(data)
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            continue
        config["filesystem"] = filesystem
        config["output_fd"] = fds[1]
        without = set(config.get("without") or ())
        mapping = None  # root: the socket on which this child asks for its user namespace's uid map
        if os.geteuid() == 0 and not without & {"namespaces", "user-ns"}:
            mapping = socket.socketpair()
            config["map_fd"] = mapping[1].fileno()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()
                if mapping is not None:
                    mapping[0].close()
                die_with_parent(template_pid)
                os.setsid()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                isolation = contain(config)
                child_main(socket.socket(fileno=fds[0]), config, isolation)
            except BaseException:
                code = 1
                _note_failure(config["output_fd"])
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        if mapping is not None:
            mapping[1].close()
            map_child_ids(pid, mapping[0], *(int(config.get("sandbox_uid", SANDBOX_UID)),) * 2)
        children[:] = [c for c in children if _alive(c)] + [pid]
        control.sendall(json.dumps({"pid": pid}).encode())


def _note_failure(output_fd: int) -> None:
    """Write the traceback of what stopped a child to its output (best effort): the grader's capture file, no name."""
    with contextlib.suppress(BaseException):
        os.write(output_fd, traceback.format_exc().encode("utf-8", "replace"))


if __name__ == "__main__" and len(sys.argv) >= 3 and sys.argv[1] == "template":
    warm = sys.argv[4].split("+")  # "meta+figures", "meta", "figures" or "none"
    serve_template(
        int(sys.argv[2]), int(sys.argv[3]), sys.argv[5:], warm_meta="meta" in warm, warm_figures="figures" in warm
    )
