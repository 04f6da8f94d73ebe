"""What the learner's process may send back: the declared shape of every reply, and what it may weigh.

Every byte a child sends is data from an untrusted process.  Before the trusted
side uses a reply it passes here: the JSON header is checked against the
declared schema of its kind (:data:`LOAD_REPLY`, :data:`HELLO_REPLY`,
:data:`CALL_REPLY`) and rebuilt from the declared fields only -- right types,
finite non-negative numbers, lists of bounded length, text cut to its cap
(an error message to :data:`MESSAGE_CHARS`, whatever the child claims) -- and a
call reply's safetensors blob is pre-checked (header length, names, dtypes,
shapes, offsets against the blob's length) before any tensor is loaded, so
only the tensors the call can return are ever built.

:func:`caps_for` sizes what one call may legitimately send from what the
trusted side already knows (how many outputs the call returns, and the gold
answers' sizes), generously enough that a wrong shape is still reported as a
wrong shape.  Anything that does not fit raises :class:`MalformedReply`, which
the caller makes that call's failure.

The schema is plain Python (a few small classes and one validator) rather than
a schema library: the replies are small, the rules are few, and what matters
-- rejecting NaN, cutting text on this side, bounding depth by construction --
is easier to see here than in a general validator's options.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from grader.registry import HOOK_NAMES

MESSAGE_CHARS = 2000
"""The longest error message kept from a child (the rest is cut here, on the trusted side)."""

PRINTED_CHARS = 4000
"""The most of what one call printed that is kept from its reply (``grader.child.call`` sends no more)."""

HEADER_BYTES = 256 << 10
"""The largest JSON header of a call reply."""

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

MAX_DIMS = 16


class MalformedReply(Exception):
    """A reply that does not fit its declared schema or its caps; the message says where and how."""


# --- the schema vocabulary ---------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A string, cut to ``limit`` characters (with an ellipsis) and made valid UTF-8."""

    limit: int


@dataclass(frozen=True)
class Number:
    """A finite number from 0 to ``maximum``; a whole one (never a bool) when ``whole``."""

    maximum: float
    whole: bool = False


@dataclass(frozen=True)
class Flag:
    """``true`` or ``false``."""


@dataclass(frozen=True)
class Items:
    """A list of at most ``limit`` items, each of ``of``."""

    of: Any
    limit: int


@dataclass(frozen=True)
class Maybe:
    """``null``, or ``of``."""

    of: Any


@dataclass(frozen=True)
class Record:
    """An object: the declared ``fields`` (others are dropped), ``required`` ones present, ``defaults`` filled in."""

    fields: dict[str, Any]
    required: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)


def _shown(value: Any) -> str:
    """A short, printable account of a value a child sent (never the whole of it)."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        return "a very long number"
    return text if len(text) <= 40 else text[:37] + "..."


def validate(value: Any, schema: Any, where: str = "reply") -> Any:
    """``value`` rebuilt to fit ``schema``, or :class:`MalformedReply` naming the first thing that does not.

    The depth of recursion is the schema's, never the value's.
    """
    if isinstance(schema, Text):
        if not isinstance(value, str):
            raise MalformedReply(f"{where}: expected text, got {_shown(value)}")
        if len(value) > schema.limit:
            value = value[: schema.limit - 1] + "…"
        return value.encode("utf-8", "replace").decode("utf-8")  # lone surrogates become '?'
    if isinstance(schema, Number):
        number = isinstance(value, int) or (isinstance(value, float) and not schema.whole and math.isfinite(value))
        if isinstance(value, bool) or not number or not 0 <= value <= schema.maximum:
            kind = "a whole number" if schema.whole else "a finite number"
            raise MalformedReply(f"{where}: expected {kind} from 0 to {schema.maximum:g}, got {_shown(value)}")
        return int(value) if schema.whole else float(value)
    if isinstance(schema, Flag):
        if not isinstance(value, bool):
            raise MalformedReply(f"{where}: expected true or false, got {_shown(value)}")
        return value
    if isinstance(schema, Maybe):
        return None if value is None else validate(value, schema.of, where)
    if isinstance(schema, Items):
        if not isinstance(value, list):
            raise MalformedReply(f"{where}: expected a list, got {_shown(value)}")
        if len(value) > schema.limit:
            raise MalformedReply(f"{where}: {len(value)} items, at most {schema.limit} allowed")
        return [validate(item, schema.of, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(schema, Record):
        if not isinstance(value, dict):
            raise MalformedReply(f"{where}: expected an object, got {_shown(value)}")
        missing = [key for key in schema.required if key not in value]
        if missing:
            raise MalformedReply(f"{where}: missing {', '.join(missing)}")
        out = dict(schema.defaults)
        for key, sub in schema.fields.items():
            if key in value:
                out[key] = validate(value[key], sub, f"{where}.{key}")
        return out
    raise TypeError(f"not a schema: {schema!r}")


# --- the declared replies ---------------------------------------------------------------------------

SECONDS = Number(maximum=1e6)
NAME = Text(300)

ERROR = Record(
    {"type": Text(200), "mro": Items(Text(200), 64), "message": Text(MESSAGE_CHARS), "where": Maybe(Text(500))},
    required=("type",),
    defaults={"mro": [], "message": "", "where": None},
)
FIGURE_TEXT = 200
"""The longest axis or tick label kept from a child (``grader.child.figures`` sends no more)."""

FIGURE_TICKS = 1024
"""The most ticks of one axis kept from a child."""

TICK = Record({"at": Number(maximum=2**24), "text": Text(FIGURE_TEXT)}, required=("at", "text"))
FIGURE_FACTS = Record(
    {
        "images": Number(maximum=2**16, whole=True),
        "xlabel": Text(FIGURE_TEXT),
        "ylabel": Text(FIGURE_TEXT),
        "xticks": Items(TICK, FIGURE_TICKS),
        "yticks": Items(TICK, FIGURE_TICKS),
        "colorbar": Flag(),
        "array_problem": Text(FIGURE_TEXT),
    },
    required=("images",),
)
"""What a figure hook's call reports of the returned ``Figure`` (``grader.child.figures.figure_facts``): how many
images, and of the first one its axis labels, its ticks (position and text), whether a colorbar is drawn for it,
and why its array could not be read; the array itself travels as the tensor ``out0``."""

RESULT = Record(
    {
        "type": NAME,
        "is_tensor": Flag(),
        "exact_tensor": Flag(),
        "dtype": Text(40),
        "shape": Items(Number(maximum=2**48, whole=True), MAX_DIMS),
        "device": Text(100),
        "contiguous": Flag(),
        "figure": Maybe(FIGURE_FACTS),
    },
    required=("type",),
)
PARAMETER_FACT = Record(
    {"name": NAME, "shape": Items(Number(maximum=2**48, whole=True), MAX_DIMS)}, required=("name", "shape")
)
MODULE_FACTS = Record(
    {
        "state_dict_keys": Items(NAME, 1024),
        "buffers": Items(NAME, 1024),
        "parameters": Items(PARAMETER_FACT, 1024),
        "loaded_by": Maybe(Text(20)),
        "mask_device": Maybe(Text(100)),
    }
)
"""What a module case reports of the learner's module (``grader.child.modules._run_module``): its parameters
(name and shape, in creation order), buffers, ``state_dict`` keys, the mask buffer's device after
``.to(device)``, and how the reference's parameters were loaded: ``name``, ``order`` or ``none``
(``grader.child.modules.map_parameters``), absent where the case loads nothing."""
MEMORY_FACTS = Record(
    {
        "largest": Maybe(Items(Number(maximum=2**48, whole=True), MAX_DIMS)),
        "op": Text(100),
        "matrix": Maybe(Items(Number(maximum=2**48, whole=True), MAX_DIMS)),
        "matrix_op": Text(100),
        "cuda_peak_bytes": Maybe(Number(maximum=2**50, whole=True)),
    }
)
"""What a call that asks for it (``measure_memory``) reports of the memory it used
(``grader.child.call._measured``): the shape of the largest tensor an op created (``None``: no op ran),
the op that made it, the same for the floating tensor with the widest last two dims (``matrix``), and on CUDA
the peak of allocated bytes above what the call started with."""
CALL_REPLY = Record(
    {
        "id": Number(maximum=2**31, whole=True),
        "ok": Flag(),
        "error": Maybe(ERROR),
        "seconds": SECONDS,
        "banned": Items(Text(100), 64),
        "spawned": Items(Text(100), 16),
        "inputs_unchanged": Flag(),
        "results": Items(RESULT, 64),
        "module": Maybe(MODULE_FACTS),
        "memory": Maybe(MEMORY_FACTS),
        "peak_rss_kib": Number(maximum=2**50, whole=True),
        "printed": Text(PRINTED_CHARS),
    },
    required=("id",),
)
"""One call's answer (``grader.child.call.call_hook``, plus ``peak_rss_kib``)."""

PARAMETER = Record({"name": Text(200), "kind": Text(40), "default": Flag()}, required=("name", "kind", "default"))
HOOK_FOUND = Record({"params": Items(PARAMETER, 256), "where": Text(500)}, required=("params",), defaults={"where": ""})
LOAD_REPLY = Record(
    {
        "hooks": Record({hook: HOOK_FOUND for hook in HOOK_NAMES}),
        "import_error": Maybe(Text(MESSAGE_CHARS)),
        "load_errors": Record({hook: Text(MESSAGE_CHARS) for hook in HOOK_NAMES}),
        "isolation": Text(200),
        "cuda_init_seconds": Maybe(SECONDS),
    }
)
"""The answer to ``load``: the hooks found and their parameters, or why the submission does not import;
``load_errors``: the hooks lost with a module of a folder that did not import, each with that module's error."""

HELLO_REPLY = Record({"isolation": Text(200), "pid": Number(maximum=2**31, whole=True)}, required=("isolation",))
"""The answer to ``hello`` from a throwaway child: the isolation it got."""


# --- the replies as types: what the trusted side reads, once a reply has passed its schema ---------------
#
# Each TypedDict has the keys of its schema above, those a checked reply always holds (required or
# defaulted) as required keys and the others as optional ones, read with ``.get`` (a test holds them in step).


class ErrorInfo(TypedDict):
    type: str
    mro: list[str]
    message: str
    where: str | None


class _ResultType(TypedDict):
    type: str


class Tick(TypedDict):
    at: float
    text: str


class _FigureImages(TypedDict):
    images: int


class FigureFacts(_FigureImages, total=False):
    xlabel: str
    ylabel: str
    xticks: list[Tick]
    yticks: list[Tick]
    colorbar: bool
    array_problem: str


class ResultInfo(_ResultType, total=False):
    is_tensor: bool
    exact_tensor: bool
    dtype: str
    shape: list[int]
    device: str
    contiguous: bool
    figure: FigureFacts | None


class ParameterFact(TypedDict):
    name: str
    shape: list[int]


class ModuleFacts(TypedDict, total=False):
    state_dict_keys: list[str]
    buffers: list[str]
    parameters: list[ParameterFact]
    loaded_by: str | None
    mask_device: str | None


class MemoryFacts(TypedDict, total=False):
    largest: list[int] | None
    op: str
    matrix: list[int] | None
    matrix_op: str
    cuda_peak_bytes: int | None


class _CallReplyId(TypedDict):
    id: int


class CallReply(_CallReplyId, total=False):
    """One call's answer, checked: :data:`CALL_REPLY`."""

    ok: bool
    error: ErrorInfo | None
    seconds: float
    banned: list[str]
    spawned: list[str]  # threads and processes the learner's code started (grader.child.spawns._spawn_facts)
    inputs_unchanged: bool
    results: list[ResultInfo]
    module: ModuleFacts | None
    memory: MemoryFacts | None
    peak_rss_kib: int
    printed: str  # what the call printed, cut to PRINTED_CHARS


class HookFound(TypedDict):
    params: list[dict[str, Any]]  # name, kind, default: what registry.signature_problem reads
    where: str


class LoadReply(TypedDict, total=False):
    """The answer to ``load``, checked: :data:`LOAD_REPLY`."""

    hooks: dict[str, HookFound]
    import_error: str | None
    load_errors: dict[str, str]
    isolation: str
    cuda_init_seconds: float | None


class _HelloReplyIsolation(TypedDict):
    isolation: str


class HelloReply(_HelloReplyIsolation, total=False):
    """The answer to ``hello``, checked: :data:`HELLO_REPLY`."""

    pid: int


TYPED_REPLIES: dict[str, tuple[Record, type]] = {}
"""Filled in below: each schema with the TypedDict that describes it (for the test that holds them in step)."""


# --- caps --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caps:
    """What one reply may weigh: its JSON header, its blob, and the tensors the blob may hold."""

    max_header: int
    max_blob: int
    outputs: tuple[str, ...] = ()  # the tensor names the blob may hold: out0, out1, ...
    results: int = 0  # how many results the reply may describe


LOAD_CAPS = Caps(LOAD_HEADER_BYTES, 0)
HELLO_CAPS = Caps(HEADER_BYTES, 0)


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

    Tensor data may be ``BLOB_MULTIPLE`` times the gold answers' size at 8 bytes
    an element (the widest dtype), and never less than ``MIN_BLOB_BYTES``;
    tensors come back only from a trial not on the meta device, named ``out0`` ... in order.
    """
    count = output_count(trial.call)
    expected = sum(int(gold.numel()) for gold in trial.golds) * 8
    names = () if trial.device == "meta" else tuple(f"out{i}" for i in range(count))
    return Caps(HEADER_BYTES, max(BLOB_MULTIPLE * expected, MIN_BLOB_BYTES) + BLOB_HEADER_BYTES, names, count)


# --- checking replies -----------------------------------------------------------------------------------


def validate_load_reply(header: Any) -> LoadReply:
    return cast(LoadReply, validate(header, LOAD_REPLY, "load reply"))


def validate_hello_reply(header: Any) -> HelloReply:
    return cast(HelloReply, validate(header, HELLO_REPLY, "hello reply"))


def validate_call_reply(header: Any, caps: Caps) -> CallReply:
    """A call reply rebuilt to its schema; it may describe no more results than the call returns."""
    reply = cast(CallReply, validate(header, CALL_REPLY, "reply"))
    if len(reply.get("results", [])) > caps.results:
        raise MalformedReply(f"reply.results: {len(reply.get('results', []))} results, the call returns {caps.results}")
    return reply


TYPED_REPLIES.update(
    {
        "error": (ERROR, ErrorInfo),
        "result": (RESULT, ResultInfo),
        "figure": (FIGURE_FACTS, FigureFacts),
        "tick": (TICK, Tick),
        "parameter": (PARAMETER_FACT, ParameterFact),
        "module": (MODULE_FACTS, ModuleFacts),
        "memory": (MEMORY_FACTS, MemoryFacts),
        "call": (CALL_REPLY, CallReply),
        "hook": (HOOK_FOUND, HookFound),
        "load": (LOAD_REPLY, LoadReply),
        "hello": (HELLO_REPLY, HelloReply),
    }
)


def validate_blob(blob: bytes, caps: Caps) -> dict[str, dict[str, Any]]:
    """The safetensors header of ``blob``, checked before anything is loaded from it.

    Only names in ``caps.outputs``, known dtypes, at most ``MAX_DIMS``
    dimensions, and offsets that tile the data exactly, as safetensors writes them.
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
