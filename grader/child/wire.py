"""The wire format, both ways: an 8-byte length, a JSON header, an 8-byte length and a safetensors blob.

Data only: nothing is ever pickled.  Sizes over the caps are refused from the length prefix, unread.
"""

from __future__ import annotations

import json
import socket
import struct
import time
import types
from typing import Annotated, Any, TypedDict, Union, get_args, get_origin, get_type_hints, is_typeddict

import msgspec

MAX_HEADER = 4 << 20
_LEN = struct.Struct(">Q")

# --- the wire format -------------------------------------------------------------


def sent_back_keys(call: dict[str, Any]) -> dict[str, str]:
    """The inputs a call sends back as it left them (both sides read this): ``in.<name>`` for each tensor argument and
    ``in.x<i>`` for its module's i-th forward, each with the name of the tensor the grader sent."""
    back = {f"in.{name}": arg["tensor"] for name, arg in call.get("args", {}).items() if "tensor" in arg}
    forwards = (call.get("module") or {}).get("forwards", [])
    return {**back, **{f"in.x{i}": key for i, key in enumerate(forwards)}}


def gradient_keys(call: dict[str, Any]) -> dict[str, str]:
    """The gradients a call's gradient pass sends back (both sides read this): ``grad.<name>`` for each input of
    ``vjp.wrt`` (an argument; a module's ``x``, ``state.<parameter>``), named by the sent tensor of its shape."""
    vjp = call.get("vjp") or {}
    args, module = call.get("args", {}), call.get("module") or {}
    sent = {name: arg["tensor"] for name, arg in args.items() if "tensor" in arg}
    sent.update(dict(zip(["x"], module.get("forwards", []))))  # a module's first forward
    sent.update({f"state.{name}": key for name, key in (module.get("state") or {}).items()})
    return {f"grad.{name}": sent[name] for name in vjp.get("wrt", []) if name in sent}


def plain_to_wire(value: Any) -> Any:
    """A plain argument (None, bool, int, float, str, tuple, list) as JSON that keeps its Python type: JSON has
    one kind of array, so a tuple travels as ``{"tuple": [...]}`` and every other list stays a list."""
    if isinstance(value, tuple):
        return {"tuple": [plain_to_wire(v) for v in value]}
    if isinstance(value, list):
        return [plain_to_wire(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a case's argument of type {type(value).__name__} cannot travel as plain data")


def plain_from_wire(value: Any) -> Any:
    """The inverse of :func:`plain_to_wire` (the child decodes what the trusted side sent; a JSON object other
    than a tuple's, which the grader never sends, stays a dict)."""
    if isinstance(value, dict) and value.keys() == {"tuple"} and isinstance(value["tuple"], list):
        return tuple(plain_from_wire(v) for v in value["tuple"])
    if isinstance(value, dict):
        return {k: plain_from_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_from_wire(v) for v in value]
    return value


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


def send_message(sock: socket.socket, header: dict[str, Any], blob: bytes = b"") -> None:
    data = json.dumps(header, allow_nan=True).encode()
    sock.sendall(_LEN.pack(len(data)) + data + _LEN.pack(len(blob)) + blob)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes from ``sock``; with a ``deadline`` (``time.monotonic()``), TimeoutError once it passes (recomputed
    before every ``recv``: a peer that drips one byte at a time cannot stretch a read past it)."""
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
    """One message: ``(header, blob)``; sizes over the caps are refused from the length prefix, unread.  Raises
    ProtocolError for a malformed one (a header that is no JSON object, too deep, bad UTF-8), EOFError when the peer
    closed, TimeoutError when ``deadline`` passed."""
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


# --- the replies, declared once: the child fits its replies to them, the trusted side decodes with them ----------
#
# Every str has a max_length, every list and dict a max_length, every number a range (a test walks them).

MESSAGE_CHARS = 2000  # The longest error message a reply may carry (the child cuts its own).

PRINTED_CHARS = 4000  # The most of what one call printed that a reply may carry.

FIGURE_TEXT = 200  # The longest axis or tick label (``grader.child.figures`` sends no more).

FIGURE_TICKS = 1024  # The most ticks of one axis.

FIGURE_IMAGES = 64  # The most images a figure's array stacks, and the most image shapes its facts list.

MAX_DIMS = 16


Seconds = Annotated[float, msgspec.Meta(ge=0, le=1e6)]
Name = Annotated[str, msgspec.Meta(max_length=300)]
Shape = Annotated[list[Annotated[int, msgspec.Meta(ge=0, le=2**48)]], msgspec.Meta(max_length=MAX_DIMS)]
Short = Annotated[str, msgspec.Meta(max_length=100)]
Label = Annotated[str, msgspec.Meta(max_length=FIGURE_TEXT)]
Message = Annotated[str, msgspec.Meta(max_length=MESSAGE_CHARS)]


class _Raised(TypedDict):
    type: Annotated[str, msgspec.Meta(max_length=200)]
    mro: Annotated[list[Annotated[str, msgspec.Meta(max_length=200)]], msgspec.Meta(max_length=64)]
    message: Message
    where: Annotated[str, msgspec.Meta(max_length=500)] | None


class ErrorInfo(_Raised, total=False):
    own: bool  # raised by a raise (or assert) of the learner's own code (grader.child.gradients.raised_by_learner)


class Tick(TypedDict):
    at: Annotated[float, msgspec.Meta(ge=0, le=2**24)]
    text: Label


class _FigureImages(TypedDict):
    images: Annotated[int, msgspec.Meta(ge=0, le=2**16)]


class FigureFacts(_FigureImages, total=False):
    """What a figure hook's call reports of the returned ``Figure`` (``grader.child.figures.figure_facts``)."""

    xlabel: Label
    ylabel: Label
    xticks: Annotated[list[Tick], msgspec.Meta(max_length=FIGURE_TICKS)]
    yticks: Annotated[list[Tick], msgspec.Meta(max_length=FIGURE_TICKS)]
    colorbar: bool
    array_problem: Label
    image_shapes: Annotated[list[Shape], msgspec.Meta(max_length=FIGURE_IMAGES)]  # several images of mixed shapes


class _ResultType(TypedDict):
    type: Name


class ResultInfo(_ResultType, total=False):
    is_tensor: bool
    exact_tensor: bool
    dtype: Annotated[str, msgspec.Meta(max_length=40)]
    shape: Shape
    device: Short
    contiguous: bool
    figure: FigureFacts | None


class ParameterFact(TypedDict):
    name: Name
    shape: Shape


class ModuleFacts(TypedDict, total=False):
    """What a module case reports of the learner's module (``grader.child.modules._run_module``)."""

    state_dict_keys: Annotated[list[Name], msgspec.Meta(max_length=1024)]
    buffers: Annotated[list[Name], msgspec.Meta(max_length=1024)]
    parameters: Annotated[list[ParameterFact], msgspec.Meta(max_length=1024)]
    loaded_by: Annotated[str, msgspec.Meta(max_length=20)] | None
    mask_device: Short | None


class MemoryFacts(TypedDict, total=False):
    """What a call that asks for it (``measure_memory``) reports of its memory (``grader.child.call._measured``)."""

    peak_elements: Annotated[int, msgspec.Meta(ge=0, le=2**50)]  # the call's tensors at once, beyond its inputs
    peak_bytes: Annotated[int, msgspec.Meta(ge=0, le=2**50)]
    largest: Shape | None  # the largest of them at the peak of elements, and the op that made it
    op: Short
    converted: Annotated[list[Short], msgspec.Meta(max_length=16)]  # Tensor.numpy and the like, called
    cuda_peak_bytes: Annotated[int, msgspec.Meta(ge=0, le=2**50)] | None
    cpu_peak_bytes: Annotated[int, msgspec.Meta(ge=0, le=2**50)]  # the CPU allocator's (``allocations``)
    cpu_record: Short  # "switched off": the allocator's record was closed or replaced during the call
    foreign: Annotated[list[Short], msgspec.Meta(max_length=16)]  # tensors made over memory torch never allocated


class GradientFacts(TypedDict, total=False):
    """What the gradient pass of a call reports (``grader.child.gradients``); its gradients come as ``grad.<name>``."""

    requires_grad: bool  # whether the result requires grad at all
    unreached: Annotated[list[Name], msgspec.Meta(max_length=64)]  # the inputs no gradient reached
    frozen: Annotated[list[Name], msgspec.Meta(max_length=1024)]  # a module's parameters that do not require grad
    error: ErrorInfo | None  # the pass raised (the call again, or backward)
    stage: Annotated[str, msgspec.Meta(max_length=20)]  # where it raised: "call" (again, inputs requiring grad)
    cut_at: Name  # where a gradient that did not reach left the graph: "file:line (call)", the learner's line
    grads: Annotated[dict[Name, ResultInfo], msgspec.Meta(max_length=64)]  # each gradient's dtype, shape, device


class _CallReplyId(TypedDict):
    id: Annotated[int, msgspec.Meta(ge=0, le=2**31)]


class CallReply(_CallReplyId, total=False):
    """One call's answer (``grader.child.call.call_hook``, plus ``peak_rss_kib``)."""

    ok: bool
    error: ErrorInfo | None
    seconds: Seconds
    banned: Annotated[list[Short], msgspec.Meta(max_length=64)]
    spawned: Annotated[list[Short], msgspec.Meta(max_length=16)]  # threads and processes the learner's code started
    results: Annotated[list[ResultInfo], msgspec.Meta(max_length=64)]
    module: ModuleFacts | None
    memory: MemoryFacts | None
    gradient: GradientFacts | None
    peak_rss_kib: Annotated[int, msgspec.Meta(ge=0, le=2**50)]
    printed: Annotated[str, msgspec.Meta(max_length=PRINTED_CHARS)]


class Parameter(TypedDict):
    name: Annotated[str, msgspec.Meta(max_length=200)]
    kind: Annotated[str, msgspec.Meta(max_length=40)]
    default: bool


class _HookWhere(TypedDict):
    params: Annotated[list[Parameter], msgspec.Meta(max_length=256)]
    where: Annotated[str, msgspec.Meta(max_length=500)]


class HookFound(_HookWhere, total=False):
    is_class: bool  # a class adopted for a module hook: built positionally where its names are not the contract's


class LoadReply(TypedDict, total=False):
    """The answer to ``load``: the hooks found and their parameters, or why the submission does not import."""

    hooks: Annotated[dict[Short, HookFound], msgspec.Meta(max_length=64)]
    import_error: Message | None
    load_errors: Annotated[dict[Short, Message], msgspec.Meta(max_length=64)]
    isolation: Annotated[str, msgspec.Meta(max_length=200)]
    cuda_init_seconds: Seconds | None


class _HelloReplyIsolation(TypedDict):
    isolation: Annotated[str, msgspec.Meta(max_length=200)]


class HelloReply(_HelloReplyIsolation, total=False):
    """The answer to ``hello`` from a throwaway child: the isolation it got, and the first folder of this Python
    its uid cannot read (or None)."""

    pid: Annotated[int, msgspec.Meta(ge=0, le=2**31)]
    unreadable: Annotated[str, msgspec.Meta(max_length=4096)] | None


def fit(value: Any, kind: Any) -> Any:
    """An honest reply cut to its declaration ``kind``: text and lists to their ``max_length`` (the child's side)."""
    meta = [m for m in getattr(kind, "__metadata__", ()) if isinstance(m, msgspec.Meta)]
    limit = meta[0].max_length if meta else None
    base = get_args(kind)[0] if meta else kind
    if get_origin(base) in (types.UnionType, Union):
        inner = [a for a in get_args(base) if a is not type(None)]
        return value if value is None else fit(value, inner[0])
    if isinstance(value, str):
        return value if limit is None or len(value) <= limit else value[: limit - 1] + "…"
    origin = get_origin(base)
    if isinstance(value, list) and origin is list:
        return [fit(item, get_args(base)[0]) for item in value[:limit]]
    if isinstance(value, dict) and origin is dict:
        return {k: fit(v, get_args(base)[1]) for k, v in list(value.items())[:limit]}
    if isinstance(value, dict) and is_typeddict(base):
        hints = _HINTS[base]
        return {k: fit(v, hints[k]) if k in hints else v for k, v in value.items()}
    return value


_HINTS = {kind: get_type_hints(kind, include_extras=True) for kind in list(globals().values()) if is_typeddict(kind)}
"""Resolved now: this package's names leave ``sys.modules`` before learner code loads, and with them what
``get_type_hints`` would resolve the annotations against."""
