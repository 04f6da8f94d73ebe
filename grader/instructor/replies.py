"""What the learner's process may send back: the declared shape of every reply, and what it may weigh.

Every byte a child sends is data from an untrusted process.  Before the trusted side uses a reply it passes here:
the JSON header is decoded with msgspec against the one declaration of its kind in :mod:`grader.child.wire`
(:class:`CallReply`, :class:`LoadReply`, :class:`HelloReply`), the same the child fits its replies to -- right
types, finite numbers in range (never a bool for a number), bounded lists and text, undeclared fields dropped, lone
surrogates made ``?`` -- and a call reply's safetensors blob is pre-checked (header length, names, dtypes, shapes,
offsets against the blob's length) before any tensor is loaded, so only the tensors the call can return are built.

:func:`caps_for` sizes what one call may legitimately send from what the trusted side already knows (how many
outputs the call returns, and the gold answers' sizes), generously enough that a wrong shape is still reported as a
wrong shape.  Anything that does not fit raises :class:`MalformedReply`, which the caller makes that call's failure.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from grader.child.wire import (
    FIGURE_TEXT,
    FIGURE_TICKS,
    MAX_DIMS,
    MESSAGE_CHARS,
    PRINTED_CHARS,
    CallReply,
    ErrorInfo,
    FigureFacts,
    HelloReply,
    HookFound,
    LoadReply,
    MemoryFacts,
    ModuleFacts,
    ResultInfo,
    gradient_keys,
    sent_back_keys,
)
from grader.registry import HOOK_NAMES

__all__ = ["FIGURE_TEXT", "FIGURE_TICKS", "MESSAGE_CHARS", "PRINTED_CHARS", "CallReply", "ErrorInfo", "FigureFacts",
           "HelloReply", "HookFound", "LoadReply", "MemoryFacts", "ModuleFacts", "ResultInfo"]  # fmt: skip

HEADER_BYTES = 256 << 10  # The largest JSON header of a call reply.

LOAD_HEADER_BYTES = 1 << 20
"""The largest JSON header of a load reply (an import error's text is cut to MESSAGE_CHARS after reading)."""

BLOB_HEADER_BYTES = 64 << 10
"""The largest safetensors header inside a reply's blob: a handful of tensors need a few hundred bytes."""

MIN_BLOB_BYTES = 1 << 20
BLOB_MULTIPLE = 4
"""A call's blob may hold ``max(BLOB_MULTIPLE x its expected outputs, MIN_BLOB_BYTES)`` bytes of tensor data."""

SAFETENSORS_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E4M3FNUZ": 1, "F8_E5M2": 1, "F8_E5M2FNUZ": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}  # fmt: skip
"""The safetensors dtypes torch reads, with their size in bytes; any other dtype is refused."""


class MalformedReply(Exception):
    """A reply that does not fit its declared schema or its caps; the message says where and how."""


# --- caps --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caps:
    """What one reply may weigh: its JSON header, its blob, and the tensors the blob may hold."""

    max_header: int
    max_blob: int
    outputs: tuple[str, ...] = ()  # the tensor names the blob may hold: out0, out1, ...
    results: int = 0  # how many results the reply may describe


LOAD_CAPS = Caps(LOAD_HEADER_BYTES, 0)


def output_count(call: dict[str, Any]) -> int:
    """How many values a call returns: one per forward of a module (and its eval-mode one where the call asks),
    else one per repeat and per extra call."""
    module = call.get("module")
    if module is not None:
        forwards = len(module.get("forwards", []))
        return forwards + (1 if module.get("eval_too") and forwards else 0)
    return int(call.get("repeat", 1)) + len(call.get("also", []))


def caps_for(trial: Any) -> Caps:
    """The caps of one trial's reply, from what the trusted side knows it should return.

    Tensor data may be ``BLOB_MULTIPLE`` times the gold answers' size at 8 bytes an element (the widest dtype), and
    never less than ``MIN_BLOB_BYTES``; tensors come back only from a trial not on the meta device, named ``out0``
    ... in order, each tensor argument as the call left it (``in.<name>``, its own size more), and the gradients of
    a gradient pass (``grad.<name>``: :func:`~grader.child.wire.gradient_keys`).
    """
    count = output_count(trial.call)
    grads = gradient_keys(trial.call)
    elements = sum(int(g.numel()) for g in trial.golds) + sum(int(trial.tensors[k].numel()) for k in grads.values())
    expected = elements * 8
    back = sent_back(trial)
    sent = sum(int(trial.tensors[key].nbytes) for key in back.values())
    names = () if trial.device == "meta" else (*(f"out{i}" for i in range(count)), *back, *grads)
    blob = max(BLOB_MULTIPLE * expected, MIN_BLOB_BYTES) + sent + BLOB_HEADER_BYTES
    return Caps(HEADER_BYTES, blob, names, count)


def sent_back(trial: Any) -> dict[str, str]:
    """The inputs ``trial``'s call sends back (:func:`grader.child.wire.sent_back_keys`)."""
    return sent_back_keys(trial.call)


# --- checking replies -----------------------------------------------------------------------------------

Reply = TypeVar("Reply")


def decode(header: Any, kind: type[Reply], where: str) -> Reply:
    """``header`` checked against its declaration in :mod:`grader.child.wire` (undeclared fields dropped),
    with lone surrogates made ``?``; or :class:`MalformedReply` naming the first thing that does not fit."""
    try:
        checked = msgspec.convert(header, kind)
    except msgspec.ValidationError as exc:
        text = str(exc)
        message, _, path = text.rpartition(" - at `$")
        if not message:
            message, path = text, "`"
        raise MalformedReply(f"{where}{path.rstrip('`')}: {message[:1].lower()}{message[1:300]}") from None
    clean = json.dumps(checked, ensure_ascii=False).encode("utf-8", "replace")
    return msgspec.json.decode(clean, type=kind)


def validate_load_reply(header: Any) -> LoadReply:
    reply = decode(header, LoadReply, "load reply")
    if "hooks" in reply:  # only the kit's hooks are kept
        reply["hooks"] = {h: v for h, v in reply["hooks"].items() if h in HOOK_NAMES}
    if "load_errors" in reply:
        reply["load_errors"] = {h: v for h, v in reply["load_errors"].items() if h in HOOK_NAMES}
    return reply


def validate_call_reply(header: Any, caps: Caps) -> CallReply:
    """A call reply checked against its declaration; it may describe no more results than the call returns."""
    reply = decode(header, CallReply, "reply")
    if len(reply.get("results", [])) > caps.results:
        raise MalformedReply(f"reply.results: {len(reply.get('results', []))} results, the call returns {caps.results}")
    return reply


def validate_blob(blob: bytes, caps: Caps) -> dict[str, dict[str, Any]]:
    """The safetensors header of ``blob``, checked before anything is loaded from it: only names in ``caps.outputs``,
    known dtypes, at most ``MAX_DIMS`` dimensions, and offsets that tile the data exactly, as safetensors writes them.
    """
    if len(blob) > caps.max_blob:
        raise MalformedReply(f"data: {len(blob)} bytes, at most {caps.max_blob} allowed")
    if len(blob) < 8:
        raise MalformedReply(f"data: {len(blob)} bytes, too short for a safetensors header")
    (size,) = struct.unpack("<Q", blob[:8])
    if size > min(BLOB_HEADER_BYTES, len(blob) - 8):
        raise MalformedReply(f"data: a safetensors header of {size} bytes (at most {BLOB_HEADER_BYTES}, in the data)")
    try:
        header = json.loads(blob[8 : 8 + size])
    except (ValueError, RecursionError) as exc:
        raise MalformedReply(f"data: the safetensors header is not JSON ({type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise MalformedReply("data: the safetensors header is not a JSON object")
    data_length = len(blob) - 8 - size
    tensors: dict[str, dict[str, Any]] = {}
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if name not in caps.outputs:
            wanted = ", ".join(caps.outputs) or "none"
            raise MalformedReply(f"data: a tensor named {_shown(name)} (this call returns {wanted})")
        if not isinstance(info, dict):
            raise MalformedReply(f"data: {name} is not described by an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in SAFETENSORS_ITEMSIZE:
            raise MalformedReply(f"data: {name} has dtype {_shown(dtype)}")
        if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(_whole(d, 2**48) for d in shape)):
            raise MalformedReply(f"data: {name} has shape {_shown(shape)}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_whole(o, data_length) for o in offsets)):
            raise MalformedReply(f"data: {name} has offsets {_shown(offsets)} for {data_length} bytes of data")
        begin, end = offsets
        if end - begin != math.prod(shape) * SAFETENSORS_ITEMSIZE[dtype]:
            raise MalformedReply(f"data: {name} takes {end - begin} bytes, its shape and dtype need another size")
        spans.append((begin, end))
        tensors[name] = info
    covered = 0
    for begin, end in sorted(spans):
        if begin != covered:
            raise MalformedReply("data: tensors overlap or leave gaps in the data")
        covered = end
    if covered != data_length:
        raise MalformedReply(f"data: {data_length} bytes of data, the tensors take {covered}")
    return tensors


def _shown(value: Any) -> str:
    """A short, printable account of a value a child sent (never the whole of it)."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        return "a very long number"
    return text if len(text) <= 40 else text[:37] + "..."


def _whole(value: Any, maximum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum


def read_outputs(blob: bytes, caps: Caps) -> dict[str, Any]:
    """The tensors of a call reply's blob (``{}`` for none), loaded only after :func:`validate_blob`."""
    if not blob:
        return {}
    validate_blob(blob, caps)
    from safetensors.torch import load as load_tensors

    try:
        return dict(load_tensors(blob))
    except Exception as exc:  # whatever safetensors still refuses is the reply's fault
        raise MalformedReply(f"data: safetensors refused it ({type(exc).__name__})") from None
