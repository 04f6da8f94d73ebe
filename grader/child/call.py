"""One hook call in the learner's process: arguments decoded, the call run under the recording modes
(banned calls, the peak memory), the results described and returned as plain data and tensors.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import site
import sys
import time
import types
import weakref
from collections.abc import Callable, Iterable, Iterator
from gc import disable as _stop_collecting
from gc import enable as _collect
from gc import isenabled as _collecting
from typing import Any

from .allocations import allocator_record
from .figures import FIGURE_TEXT, _close_figures, _open_figures, figure_facts, recording_show
from .gradients import describe, error_info, function_vjp
from .kernels import banned_op
from .load import _torch, on_device, tensor_facts
from .modules import _run_module
from .spawns import _spawn_facts, spawns_heard
from .wire import PRINTED_CHARS, plain_from_wire, sent_back_keys


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
    """``torch.ops.aten.<op>`` where ``func`` is an aten operator (an overload: ``softmax.int``; a private kernel:
    ``_safe_softmax``) whose name holds every word of a banned name; None for anything else."""
    schema = getattr(func, "_schema", None)  # torch.ops.aten.softmax (the packet) resolves to an overload: here too
    op = str(getattr(schema, "name", "")).split("::")[-1]
    return f"torch.ops.aten.{op}" if schema is not None and banned_op(op, banned) else None


def _recording_mode(banned: list[str], tell: Callable[[str], None] | None = None) -> Any:
    """A recorder of every banned torch call made inside it (``seen``), both ways in.

    A TorchFunctionMode names the call as the learner wrote it (``torch.softmax``, ``Tensor.softmax``, ``F.softmax``;
    ``banned`` holds base names).  It cannot see what runs while it handles a call (``F.softmin`` calls
    ``Tensor.softmax`` inside its own handler, a backward hook inside ``Tensor.backward``'s): a TorchDispatchMode sees
    every aten op under it and names the kernel (``torch.ops.aten._softmax``) instead.  Each name is also told to the
    witness (``tell``) as it is recorded: a reply that leaves it out is caught on the grader's side.  A learning aid,
    not a security boundary: code can leave the modes (the review scan and the witness flag what that takes).
    """
    torch = _torch()
    from torch.utils._python_dispatch import TorchDispatchMode

    function_base: Any = torch.overrides.TorchFunctionMode
    dispatch_base: Any = TorchDispatchMode

    def note(seen: list[str], name: str | None) -> None:
        if name and name not in seen:
            seen.append(name)
            if tell is not None:
                tell(name)

    class CallRecorder(function_base):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            base = getattr(func, "__name__", "")
            note(self.seen, _func_name(func) if base in banned else _aten_name(func, banned))
            return func(*args, **(kwargs or {}))

    class KernelRecorder(dispatch_base):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            note(self.seen, _aten_name(func, banned))
            return func(*args, **(kwargs or {}))

    class Recorder(contextlib.ExitStack):
        def __init__(self) -> None:
            super().__init__()
            self.calls, self.kernels = CallRecorder(), KernelRecorder()
            self.calls.seen, self.kernels.seen = [], []

        @property
        def seen(self) -> list[str]:
            return self.calls.seen or self.kernels.seen

        def __enter__(self) -> Recorder:
            super().__enter__()
            self.enter_context(self.calls)
            if banned:
                self.enter_context(self.kernels)
            return self

    return Recorder()


CONVERSIONS = ("numpy", "__array__", "tolist", "__dlpack__", "untyped_storage", "storage", "data_ptr", "__reduce_ex__",
               "share_memory_", "apply_", "map_", "map2_")  # fmt: skip
"""Tensor methods that carry a tensor's values out of torch (numpy, a list, raw memory, a pickle's bytes) or hand them
to a Python callable (``apply_``), unseen by the measuring mode: a measured call may not call them."""

COPIES_ATTRIBUTES = ("__deepcopy__", "__reduce_ex__", "__setstate__")
"""Tensor methods that copy a tensor's own attributes, and so run what those attributes' classes define."""

CALLS_BACK = "gc.enable or saved-tensor hooks of its own (torch runs what either leaves inside its operations)"
"""Noted when a measured call turns the collector on (off for the call) or sets saved-tensor hooks: either runs the
learner's callables (a finaliser, ``pack``) inside torch's functions, where the modes stand aside, and a C callable
(``functools.partial``) runs there with no frame to watch."""

_LIBRARIES = tuple(
    dict.fromkeys(
        os.path.join(folder, "")
        for place in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages(),
                      site.getusersitepackages(), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for folder in (place, os.path.realpath(place))
    )
) + ("<",)  # fmt: skip
"""Where Python's, the libraries' and the grader's code lives (taken before learner code runs), and code made from
text (``<string>``: a dataclass's ``__init__``; the learner's such code is the witness's); any other file is the
learner's (:func:`_watch_nested`)."""


def _watch_nested(noted: list[str]) -> tuple[list[Any], Callable[..., None]]:
    """``(handing, watch)``: a profile function that notes ``"<function> (your code ran inside it)"`` in ``noted``
    when learner code (a frame outside :data:`_LIBRARIES`) starts while ``handing[-1]`` (what a mode hands on) runs.

    The function mode steps aside while the function it was handed runs, and learner code may run inside it: a
    callback (``Tensor.apply_``'s: round 9's a3), a subclass's ``__torch_function__``, an attribute's
    ``__deepcopy__``, saved-tensor hooks (round 10's a2), a finaliser, a signal's handler.  The dispatch mode marks its
    own bookkeeping with None; a kernel of the learner's own under it is ``torch.library``'s, which the scan flags.
    """
    libraries, setprofile = _LIBRARIES, sys.setprofile
    handing: list[Any] = []

    def watch(frame: Any, event: str, arg: Any) -> None:
        func = handing[-1] if handing else None
        if func is not None and event == "call" and not frame.f_code.co_filename.startswith(libraries):
            name = f"torch.ops.{func}" if hasattr(func, "_schema") else _func_name(func)  # an operator, a function
            shown = f"{name} (your code ran inside it)"
            if shown not in noted:
                noted.append(shown)
            setprofile(None)  # once is enough: the rest of the call runs unwatched

    return handing, watch


FOREIGN = "memory torch did not allocate (from_numpy, frombuffer, as_tensor of an array or a buffer)"
"""What the meter notes when an op of a measured call is given a tensor over such memory."""

PACKERS = ("fbgemm_pack_gemm_matrix_fp16", "fbgemm_pack_quantized_matrix", "_wrapped_linear_prepack")
"""torch functions that keep a matrix packed in fbgemm's memory behind a small handle: unseen by the mode and the
allocator, so a measured call may not call them (one returning packed weights as an object is caught by that)."""


class _MemoryMeter:
    """Around a measured call: the peak of the memory its tensors hold at once, and the conversions it made.

    A ``TorchDispatchMode`` weighs the storage under every tensor an op returns, and under those an op writes into
    before it runs.  A storage first seen as the output of an op that aliases nothing counts whole; so does one an op
    first writes into that is not the inputs' (``frombuffer``, ``from_numpy``, ``UntypedStorage``, ``set_``).  The
    inputs' storages count only for what they grow by (``resize_``, ``out=``).  A storage counts until freed (a weak
    reference: views keep it alive), in bytes and in elements of the narrowest dtype that views it.  The largest storage
    live at the peak of elements is kept, with its shape (as ``_unsafe_view`` hands it back) and op.  A
    ``TorchFunctionMode`` notes :data:`CONVERSIONS`.  Both see the calling thread only (hence no thread may start):
    a learning aid, like the recorder.
    """

    def __init__(self, inputs: Iterable[Any] = ()) -> None:
        torch = _torch()
        from torch.utils._python_dispatch import TorchDispatchMode

        self._inputs = [t.untyped_storage() for t in inputs if isinstance(t, torch.Tensor) and t.device.type != "meta"]
        self._input_keys = {id(s) for s in self._inputs}  # the storages are held: their ids stay theirs
        self.elements = self.bytes = 0  # live now, beyond what was there before the call
        self.peak_elements = self.peak_bytes = 0
        self.largest: list[int] | None = None  # the largest storage live at the peak of elements, and its op
        self.op = ""
        self._largest_key = 0
        self.converted: list[str] = []
        self._collected = False  # whether the collector ran before the call: it runs again after
        self._live: dict[int, list[Any]] = {}  # id(storage) -> [ref, base bytes, bytes, itemsize, elements, shape, op]
        self._heap: list[tuple[int, int, int]] = []  # (-elements, order, id): the largest live, lazily
        self._order = 0
        meter, dispatch_base, function_base = self, TorchDispatchMode, torch.overrides.TorchFunctionMode
        unsafe_view = torch.ops.aten._unsafe_view.default  # a view whose schema does not say so
        disabled = torch._C.DisableTorchFunction  # the meter's own storage reads are no learner's conversion
        script_object = torch.ScriptObject  # what a packing op hands back
        copies = {torch.ops.aten.lift_fresh.default, torch.ops.aten._to_copy.default}  # torch.tensor(an array)
        tensor, strided, inputs, converted = torch.Tensor, torch.strided, self._input_keys, self.converted
        (handing, watch), getprofile, setprofile = _watch_nested(converted), sys.getprofile, sys.setprofile
        collecting, saved_hooks = _collecting, torch._C._autograd._top_saved_tensors_default_hooks
        values = {torch.Tensor, torch.nn.Parameter, int, float, bool, complex, str, type(None), slice, type(...),
                  torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format}  # fmt: skip
        function, libraries, hook_files = types.FunctionType, _LIBRARIES, ("checkpoint.py", "graph.py")

        def torch_hooks(hooks: Any) -> bool:
            """No saved-tensor hooks, or torch's own (``torch.utils.checkpoint``'s, ``save_on_cpu``'s)."""
            if hooks is None:
                return True
            code = hooks[0].__code__ if type(hooks[0]) is function else None
            name = "" if code is None else code.co_filename
            return name.startswith(libraries) and not name.startswith("<") and name.endswith(hook_files)

        def plain(items: Iterable[Any]) -> bool:
            """Only values that call nothing back: tensors, numbers, slices, dtypes … (and tuples, lists of them)."""
            return all(type(v) in values or (type(v) in (tuple, list) and plain(v)) for v in items)

        def note_foreign(args: tuple, kwargs: dict) -> None:
            """Note :data:`FOREIGN` once, when an op is given a tensor (not an input) whose storage cannot be resized:
            memory weighed by neither record (red team 8's a1, a3); ``torch.tensor`` of an array copies (not noted)."""
            for arg in (*args, *kwargs.values()):
                for value in arg if isinstance(arg, (list, tuple)) else (arg,):
                    if isinstance(value, tensor) and value.device.type == "cpu" and value.layout == strided:
                        storage = value.untyped_storage()
                        if id(storage) not in inputs and not storage.resizable():
                            converted.append(FOREIGN)
                            return

        kinds: dict[Any, tuple[str, tuple[tuple[int, str], ...], tuple[bool, ...]]] = {}
        # op -> (its name, the arguments it writes into (position, name), which of its returns are new)

        class Weigh(dispatch_base):  # type: ignore[misc, valid-type]
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                handing.append(None)  # the meter's own bookkeeping: nothing handed on
                try:
                    return weigh(func, args, kwargs or {})
                finally:
                    handing.pop()

        def weigh(func: Any, args: tuple, kwargs: dict) -> Any:
            kind = kinds.get(func)
            if kind is None:
                schema, name = func._schema, str(getattr(func, "__name__", func)).split(".")[0]
                new = tuple(r.alias_info is None and func is not unsafe_view for r in schema.returns)
                written = tuple(
                    (i, a.name) for i, a in enumerate(schema.arguments) if a.alias_info and a.alias_info.is_write
                )
                kind = kinds[func] = (name, written, new or (True,))
            op, written, new = kind
            if func not in copies and FOREIGN not in converted:
                with disabled():
                    note_foreign(args, kwargs)
            if written:  # in place or out=: what it writes into is weighed before it runs
                with disabled():
                    for i, name in written:
                        arg = args[i] if i < len(args) else kwargs.get(name)
                        for value in arg if isinstance(arg, (list, tuple)) else (arg,):
                            if isinstance(value, torch.Tensor):
                                meter._weigh(value, op, new=None)
            out = func(*args, **kwargs)  # a kernel of the learner's own is torch.library's: the scan's flag
            with disabled():
                for i, value in enumerate(out if isinstance(out, (tuple, list)) else (out,)):
                    if isinstance(value, torch.Tensor):
                        meter._weigh(value, op, new[min(i, len(new) - 1)], renamed=func is unsafe_view)
                    elif isinstance(value, script_object) and str(func) not in meter.converted:
                        meter.converted.append(str(func))  # packed weights: held by no tensor (red team 8's a10)
            meter._note_peak()
            return out

        class Converted(function_base):  # type: ignore[misc, valid-type]
            def __torch_function__(self, func, types, args=(), kwargs=None):
                name = getattr(func, "__name__", "")
                if name in CONVERSIONS and f"Tensor.{name}" not in meter.converted:
                    meter.converted.append(f"Tensor.{name}")
                elif name in PACKERS and f"torch.{name}" not in meter.converted:
                    meter.converted.append(f"torch.{name}")
                if CALLS_BACK not in converted and (collecting() or not torch_hooks(saved_hooks(False))):
                    converted.append(CALLS_BACK)  # C code may run the learner's there, with no frame of its own
                kwargs = kwargs or {}
                if name not in COPIES_ATTRIBUTES and plain(args) and plain(kwargs.values()):
                    return func(*args, **kwargs)  # given nothing of the learner's, it calls nothing of the learner's
                previous = getprofile()
                handing.append(func)
                setprofile(watch)
                try:
                    return func(*args, **kwargs)
                finally:
                    setprofile(previous)
                    handing.pop()

        self._modes = (Converted(), Weigh())

    def _weigh(self, tensor: Any, op: str, new: bool | None, renamed: bool = False) -> None:
        """Weigh ``tensor``'s storage: ``new`` from an op that made it, False under one that views it, None
        under one that writes into it.  A storage seen first counts whole unless it is the inputs'."""
        try:
            storage = tensor.untyped_storage()
            nbytes = storage.nbytes()
        except (RuntimeError, NotImplementedError):  # a sparse tensor, say: no storage of its own, weighed itself
            storage, nbytes = tensor, tensor.numel() * tensor.element_size()
        key, itemsize = id(storage), tensor.element_size()
        entry = self._live.get(key)
        if entry is None:
            new = bool(new) or key not in self._input_keys  # what the call holds and is not its inputs
            ref = weakref.ref(storage, lambda _: self._free(key))
            entry = self._live[key] = [ref, 0 if new else nbytes, 0, itemsize, 0, list(tensor.shape), op]
        elif renamed and entry[6]:
            entry[5] = list(tensor.shape)
            if key == self._largest_key:  # the peak's largest, named as the learner's code sees it
                self.largest = list(entry[5])
        counted = max(0, nbytes - entry[1])
        entry[3] = min(entry[3], itemsize)
        elements = counted // max(entry[3], 1)
        if counted != entry[2] or elements != entry[4]:
            self.bytes += counted - entry[2]
            self.elements += elements - entry[4]
            entry[2], entry[4] = counted, elements
            if elements:
                self._order += 1
                heapq.heappush(self._heap, (-elements, self._order, key))
            if len(self._heap) > 2 * len(self._live) + 1024:  # mostly stale: built again from what lives
                live = self._live.copy()  # a weak reference's callback may free one meanwhile
                self._heap = [(-e[4], i, k) for i, (k, e) in enumerate(live.items()) if e[4]]
                heapq.heapify(self._heap)

    def _free(self, key: int) -> None:
        if key == self._largest_key:
            self._largest_key = 0  # its id may name another storage from now on
        entry = self._live.pop(key, None)
        if entry is not None:
            self.bytes -= entry[2]
            self.elements -= entry[4]

    def _note_peak(self) -> None:
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        if self.elements <= self.peak_elements:
            return
        self.peak_elements = self.elements
        heap, live = self._heap, self._live
        while heap and (heap[0][2] not in live or live[heap[0][2]][4] != -heap[0][0]):
            heapq.heappop(heap)  # freed, or weighed again since: a stale entry
        if heap:
            self._largest_key = heap[0][2]
            entry = live[self._largest_key]
            self.largest, self.op = list(entry[5]), entry[6]

    def facts(self) -> dict[str, Any]:
        """The reply's ``memory`` record (``grader.child.wire.MemoryFacts``)."""
        peaks = {"peak_elements": self.peak_elements, "peak_bytes": self.peak_bytes, "largest": self.largest}
        return {**peaks, "op": self.op[:100], "converted": self.converted[:16]}

    def __enter__(self) -> _MemoryMeter:
        self._collected = _collecting()
        _stop_collecting()  # while the call is measured: CALLS_BACK
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        if self._collected:
            _collect()
        self._live.clear()  # the peaks are kept; the weak references (and their callbacks) go
        self._heap.clear()


@contextlib.contextmanager
def _measured(reply: dict[str, Any], device: str, inputs: Iterable[Any] = ()) -> Iterator[None]:
    """Around a call that asks for it: the peak memory its tensors held (and on CUDA the allocator's) into ``reply``."""
    torch = _torch()
    on_cuda = device.startswith("cuda") and torch.cuda.is_available()
    if on_cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    meter = _MemoryMeter(inputs)
    allocated: dict[str, Any] = {}  # the allocator's record, which no mode switched off can hide
    try:
        with allocator_record(allocated) if device == "cpu" else contextlib.nullcontext(), meter:
            yield
    finally:
        reply["memory"] = {**meter.facts(), **allocated}
        if on_cuda:
            torch.cuda.synchronize(device)
            reply["memory"]["cuda_peak_bytes"] = max(0, torch.cuda.max_memory_allocated(device) - before)


def _decode_args(spec: dict[str, Any], tensors: dict[str, Any], device: str) -> dict[str, Any]:
    torch = _torch()
    out: dict[str, Any] = {}
    for name, arg in spec.items():
        if "tensor" in arg:
            value = on_device(tensors[arg["tensor"]], device)
            if arg.get("transposed"):
                value = value.transpose(-2, -1)
            if arg.get("requires_grad") and value.is_floating_point():
                value = value.detach().requires_grad_(True)  # a leaf that requires grad, as a model's weights do
            out[name] = value
        elif "generator" in arg:
            gen = torch.Generator(device="cpu" if device == "meta" else device)  # meta has none: a CPU one draws there
            gen.manual_seed(int(arg["generator"]))
            out[name] = gen
        elif "device" in arg:
            out[name] = device
        else:
            out[name] = plain_from_wire(arg.get("value"))
    return out


def _cotangent(call: dict[str, Any], tensors: dict[str, Any], device: str) -> Any:
    """The cotangent the grader sent for this call's gradient pass, on ``device``; None where it asks for none."""
    key = (call.get("vjp") or {}).get("cotangent")
    return None if key is None else on_device(tensors[key], device)


def sent_back(call: dict[str, Any], args: dict[str, Any], tensors: dict[str, Any], forwarded: list[Any]) -> dict:
    """Each input as the call left it, laid out as it came (:func:`.wire.sent_back_keys`; the grader compares the
    bytes): a tensor argument as the hook got it, a module's forward input as ``forwarded`` (its forwards got it)."""
    torch = _torch()
    spec = call.get("args", {})
    back = {}
    for key, sent in sent_back_keys(call).items():
        name = key.removeprefix("in.")
        if name not in spec:  # x<i>: a module's i-th forward
            i = int(name[1:])
            back[key] = _plain(forwarded[i] if i < len(forwarded) else tensors[sent])
        elif isinstance(value := args.get(name), torch.Tensor):
            back[key] = _plain(value.transpose(-2, -1) if spec[name].get("transposed") else value)
    return back


def _describe_result(value: Any) -> dict[str, Any]:
    torch = _torch()
    info: dict[str, Any] = {"type": f"{type(value).__module__}.{type(value).__qualname__}"}
    if isinstance(value, torch.Tensor):
        info.update(is_tensor=True, exact_tensor=type(value) is torch.Tensor, **tensor_facts(value))
        info["contiguous"] = bool(value.is_contiguous())
    return info


def _early_copy(value: Any) -> Any:
    """A call's tensor result copied (:func:`_plain`) as the call returns, while its records are still open, or
    None where it is no tensor.  A tensor that cannot be copied raises: the call failed (never read later).

    Learner code may run after a call returns (a finaliser, a thread): round 9's a6 and a8 filled returned zeros from a
    finaliser once the modes had closed.  The collector stays off until the reply is built, and the values sent are
    these copies (round 10's a4 made the copy raise, from a signal handler, to have the value read later).
    """
    tensor = _torch().Tensor
    if issubclass(type(value), tensor):
        return _plain(value)
    if isinstance(value, tensor):  # by its __class__ alone
        raise TypeError(f"{type(value).__qualname__} claims to be a torch.Tensor and is none")
    return None


def _plain(value: Any) -> Any:
    """A tensor as a plain ``torch.Tensor`` on the CPU, whatever subclass it claims to be."""
    torch = _torch()
    data = value.detach()
    if type(data) is not torch.Tensor:
        data = data.as_subclass(torch.Tensor)
    return data.to("cpu").contiguous().clone()


class _Printed:
    """Around one call: ``sys.stdout``/``sys.stderr`` also copied into a buffer of ``PRINTED_CHARS`` (then a count).

    What the learner prints still reaches the output file; the reply carries the call's own part, shown per exercise.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.kept = self.lost = 0

    def write(self, text: str) -> int:
        text = str(text)
        kept = text[: max(PRINTED_CHARS - self.kept, 0)]
        self.parts.append(kept)
        self.kept, self.lost = self.kept + len(kept), self.lost + len(text) - len(kept)
        return len(text)

    def __enter__(self) -> _Printed:
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _Tee(sys.stdout, self), _Tee(sys.stderr, self)  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
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


def call_hook(
    hooks: dict[str, Callable[..., Any]],
    call: dict[str, Any],
    tensors: dict[str, Any],
    tell: Callable[[str], None] | None = None,
    kernels: Callable[[list[str], Callable[[str], None] | None], None] | None = None,
) -> tuple[dict, dict]:
    """Run one call; return (reply header, output tensors).  ``tell`` writes to the witness (``banned <id> <name>``);
    ``kernels`` is :func:`.kernels.watch_kernels`' switch, on for the call's bans while it runs."""
    device = call.get("device", "cpu")
    reply: dict[str, Any] = {"id": call["id"], "ok": False}
    outputs: dict[str, Any] = {}
    fn = hooks.get(call["hook"])
    if fn is None:
        reply["error"] = {"type": "HookMissing", "mro": [], "message": f"no function {call['hook']}", "where": None}
        return reply, outputs
    args = _decode_args(call.get("args", {}), tensors, device)
    call_id = call["id"]
    told: list[str] = []

    def first_told(name: str) -> None:  # one line per call: the grader needs to know there was one
        if tell is not None and not told:
            told.append(name)
            tell(f"banned {call_id} {name}")

    heard: list[str] = []  # banned kernels run, on any thread, whatever modes the call stepped out of

    def kernel_ran(name: str) -> None:
        if name not in heard:
            heard.append(name)
        first_told(name)

    recorder = _recording_mode(call.get("banned", []), first_told)
    printed = _Printed()
    measuring = call.get("measure_memory") and device != "meta"
    measured = _measured(reply, device, args.values()) if measuring else contextlib.nullcontext()
    figures = call.get("output") == "figure"
    shown: list[str] = []
    showing = recording_show(shown) if figures else contextlib.nullcontext()
    figures_before = _open_figures() if figures else set()
    spawned = _spawn_facts(since := spawns_heard())
    started = time.perf_counter()
    forwarded: list[Any] = []  # what a module's forwards got
    if kernels is not None:
        kernels(call.get("banned", []), kernel_ran)
    collecting, stop_collecting = _collecting(), _stop_collecting  # bound at import: before any learner code
    copies: list[Any] = []
    gradient: tuple[dict, dict] | None = None
    cotangent = _cotangent(call, tensors, device)  # where the call asks for its gradient pass
    try:
        with recorder, printed, measured, showing:
            module_spec = call.get("module")
            if module_spec is not None:
                results, reply["module"], forwarded, gradient = _run_module(
                    fn, args, module_spec, tensors, device, cotangent
                )
            else:
                result = fn(**args)
                stop_collecting()  # no allocation since the return: no collection ran learner code in between
                results = [result]
                # fresh arguments: a generator restarts; then "also", other arguments (a generator seeded anew)
                again = [call.get("args", {})] * (int(call.get("repeat", 1)) - 1) + list(call.get("also", []))
                for other in again:
                    result = fn(**_decode_args(other, tensors, device))
                    stop_collecting()
                    results.append(result)
            if device != "meta":
                copies = [_early_copy(value) for value in results]
        if module_spec is None and cotangent is not None:  # the hook once more, on fresh arguments, then backward
            fresh = _decode_args(call.get("args", {}), tensors, device)
            gradient = function_vjp(fn, fresh, list(call["vjp"]["wrt"]), cotangent)
        reply["ok"] = True
    except Exception as exc:
        reply["error"] = error_info(exc)
        results = []
    finally:
        if kernels is not None:
            kernels([], None)
        stop_collecting()
    reply["seconds"] = time.perf_counter() - started
    reply["banned"] = (recorder.seen or heard) + shown  # the modes' names, as the learner wrote the call
    spawned = list(dict.fromkeys(spawned + _spawn_facts(since)))
    if spawned:
        reply["spawned"] = spawned[:16]
    if printed.text:
        reply["printed"] = printed.text
    if reply["ok"] and device != "meta":  # the inputs as they are now, sent back: the grader compares (sent_back)
        outputs.update(sent_back(call, args, tensors, forwarded))
    described = []
    for i, value in enumerate(results):
        info = _describe_result(value)
        if info.get("is_tensor") and device != "meta":
            outputs[f"out{i}"] = copies[i]
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
    if gradient is not None:
        facts, grads = gradient
        reply["gradient"] = {**facts, "grads": describe(grads)}
        if device != "meta":
            outputs.update({f"grad.{name}": _plain(g) for name, g in grads.items()})
    if collecting:
        _collect()  # the results are copies now: what a finaliser of the learner's does from here on is too late
    return reply, outputs
