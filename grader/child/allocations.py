"""The CPU allocator's own record of a measured call: the peak of the bytes torch allocated during it.

The memory meter is a dispatch mode, which code can step out of (round 5's m1); the allocator reports every allocation
to the profiler whatever modes are on, so the call runs inside a profiler session recording memory only.  The session
must be the one opened here: closing it succeeds, it started before the call, and a marker allocation of a size drawn
per call is its first event; one switched off or replaced during the call (red team 8's a4) is reported as such.
:func:`bind` takes what it uses while no learner code has run (the template, before it forks).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterator
from typing import Any

_bound: dict[str, Any] = {}


def bind() -> None:
    """Take the profiler's entry points now, before any hand-in loads (a later patch of them is not used)."""
    if _bound:
        return
    with contextlib.suppress(ImportError, AttributeError):  # a torch without this profiler: no record
        import torch
        from torch._C._autograd import _ProfilerResult
        from torch._C._profiler import RecordScope, _EventType
        from torch.autograd import _disable_profiler, _enable_profiler, _prepare_profiler, profiler

        _bound.update(
            profile=profiler.profile, prepare=_prepare_profiler, enable=_enable_profiler,
            scopes={RecordScope.USER_SCOPE}, disable=_disable_profiler, tree=_ProfilerResult.experimental_event_tree,
            allocation=_EventType.Allocation, empty=torch.empty, uint8=torch.uint8, sorted=sorted,
            started=_ProfilerResult.trace_start_ns, now=time.time_ns,
        )  # fmt: skip
        _note_foreign_memory(torch)


FOREIGN_MAKERS = (
    ("torch", "frombuffer"), ("torch", "from_numpy"), ("torch", "from_file"), ("torch", "from_dlpack"),
    ("torch", "asarray"), ("torch", "as_tensor"), ("torch.utils.dlpack", "from_dlpack"),
    ("torch.UntypedStorage", "from_buffer"), ("torch.UntypedStorage", "from_file"),
    ("torch.utils.dlpack", "to_dlpack"), ("torch", "to_dlpack"),
)  # fmt: skip
"""Where a tensor may be made over memory torch's allocator never gave (a ``bytearray``, an ``mmap``, numpy), or its
memory handed out of torch (``to_dlpack``: red team 10's a1), unweighed by the record (red team 8's a1-a5): noted when
its storage cannot be resized; a capsule always."""

_foreign: list[str] = []  # what the measured call now running made over foreign memory
_recording = [False]


def _note_foreign_memory(torch: Any) -> None:
    """Wrap each of :data:`FOREIGN_MAKERS`: a call of it while a record is open is noted; every call is forwarded."""
    import functools
    import importlib

    disabled, tensor, storages = torch._C.DisableTorchFunction, torch.Tensor, torch.UntypedStorage  # bound now
    for owner_name, name in FOREIGN_MAKERS:
        owner = importlib.import_module(owner_name) if owner_name != "torch.UntypedStorage" else torch.UntypedStorage
        made = getattr(owner, name, None)
        if made is None:
            continue
        shown = f"{owner_name}.{name}"

        def noted(*args: Any, _made: Any = made, _shown: str = shown, **kwargs: Any) -> Any:
            result = _made(*args, **kwargs)
            if _recording[0] and _shown not in _foreign:
                with disabled():  # the grader's own look at the storage is no conversion of the learner's
                    storage = result.untyped_storage() if isinstance(result, tensor) else result
                    if not isinstance(storage, storages) or not storage.resizable():  # a capsule, foreign memory
                        _foreign.append(_shown)
            return result

        functools.update_wrapper(noted, made)
        setattr(owner, name, staticmethod(noted) if owner_name == "torch.UntypedStorage" else noted)


@contextlib.contextmanager
def allocator_record(record: dict[str, Any]) -> Iterator[None]:
    """Around a CPU call: ``record["cpu_peak_bytes"]``, the peak of what torch allocated beyond what it freed,
    or ``record["cpu_record"] = "switched off"`` when the session was closed or replaced during the call."""
    bind()
    if not _bound:
        yield
        return
    size = 4096 + secrets.randbelow(1 << 16)  # the marker: no learner code knows its size
    session = _bound["profile"](use_kineto=True, profile_memory=True)
    with _stderr_dropped():  # every allocation, and of the ops only record_function's (its ops': a third of its cost)
        _bound["prepare"](session.config(create_trace_id=True), session.kineto_activities)
        _bound["enable"](session.config(), session.kineto_activities, _bound["scopes"])
    opened = _bound["now"]()  # a session the call opens starts after this (its record says when it started)
    marker = _bound["empty"](size, dtype=_bound["uint8"])
    del marker
    _foreign.clear()
    _recording[0] = True
    try:
        yield
    finally:
        _recording[0] = False
        if _foreign:
            record["foreign"] = list(_foreign)
        with _stderr_dropped():
            try:
                results = _bound["disable"]()
            except RuntimeError:  # no session open: the call closed it
                results = None
        if results is not None and _bound["started"](results) > opened:
            results = None  # the call closed this session (its record, marker and all, is the call's) and opened one
        record.update(_peak(results, size))


@contextlib.contextmanager
def _stderr_dropped() -> Iterator[None]:
    """Kineto writes a line to file descriptor 2 as a session starts and stops: not the learner's output."""
    saved = os.dup(2)
    drain, sink = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)  # a full pipe refuses a write; nothing waits on it
    os.dup2(sink, 2)
    os.close(sink)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(drain)


def _peak(results: Any, size: int) -> dict[str, Any]:
    if results is None:
        return {"cpu_record": "switched off"}
    allocations = []
    stack = list(_bound["tree"](results))
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.tag == _bound["allocation"]:
            allocations.append((event.start_time_ns, event.extra_fields.alloc_size))
    allocations = _bound["sorted"](allocations)
    if not allocations or allocations[0][1] != size:
        return {"cpu_record": "switched off"}  # not the session opened here: the marker is not its first event
    held = peak = 0
    for _, nbytes in allocations:  # frees are negative; the marker's few kilobytes count, next to megabytes
        held += nbytes
        peak = max(peak, held)
    return {"cpu_peak_bytes": peak}
