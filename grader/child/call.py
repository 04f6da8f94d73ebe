"""One hook call in the learner's process: arguments decoded, the call run under the recording modes
(banned calls, the largest tensor), the results described and returned as plain data and tensors.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from .figures import FIGURE_TEXT, _close_figures, _open_figures, figure_facts, recording_show
from .load import _relative, _torch
from .modules import _run_module
from .spawns import _spawn_facts, spawns_heard


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


def _aten_name(func: Any, banned: list[str]) -> str | None:
    """``torch.ops.aten.<op>`` where ``func`` is an aten operator (an overload such as ``softmax.int``, or a
    private kernel such as ``_safe_softmax`` or ``_scaled_dot_product_flash_attention_for_cpu``) whose name
    holds every word of a banned name; None for anything else."""
    schema = getattr(func, "_schema", None)
    if schema is None:  # torch.ops.aten.softmax (the packet) resolves to an overload, which comes here too
        return None
    op = str(getattr(schema, "name", "")).split("::")[-1]
    words = set(op.split("_"))
    if any(set(b.split("_")) <= words for b in banned):
        return f"torch.ops.aten.{op}"
    return None


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
            name = _func_name(func) if base in banned else _aten_name(func, banned)
            if name and name not in self.seen:
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


def sent_back(spec: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """``in.<name>``: each tensor argument as the call left it, laid out as it came (the grader compares the bytes)."""
    torch = _torch()
    back = {}
    for name, arg in spec.items():
        value = args.get(name)
        if "tensor" in arg and isinstance(value, torch.Tensor):
            back[f"in.{name}"] = _plain(value.transpose(-2, -1) if arg.get("transposed") else value)
    return back


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
    device = call.get("device", "cpu")
    reply: dict[str, Any] = {"id": call["id"], "ok": False}
    outputs: dict[str, Any] = {}
    fn = hooks.get(call["hook"])
    if fn is None:
        reply["error"] = {"type": "HookMissing", "mro": [], "message": f"no function {call['hook']}", "where": None}
        return reply, outputs
    args = _decode_args(call.get("args", {}), tensors, device)
    recorder = _recording_mode(call.get("banned", []))
    printed = _Printed()
    measured = _measured(reply, device) if call.get("measure_memory") and device != "meta" else contextlib.nullcontext()
    figures = call.get("output") == "figure"
    shown: list[str] = []
    showing = recording_show(shown) if figures else contextlib.nullcontext()
    figures_before = _open_figures() if figures else set()
    spawned = _spawn_facts(since := spawns_heard())
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
    if reply["ok"] and device != "meta":  # the inputs as they are now, sent back: the grader compares (sent_back)
        outputs.update(sent_back(call.get("args", {}), args))
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
    ours = os.path.dirname(os.path.abspath(__file__))  # this package's frames are never the learner's
    mine = [
        f
        for f in frames
        if os.path.dirname(f.filename) != ours and "site-packages" not in f.filename and "<" not in f.filename
    ]
    if not mine:
        return None
    f = mine[-1]
    return f"{_relative(f.filename, os.getcwd())}:{f.lineno}"
