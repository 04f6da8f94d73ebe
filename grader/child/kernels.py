"""Banned calls heard where every route to them ends: the kernel torch runs for the tensors' backend.

The recording modes name a banned call as the learner wrote it, but code can step out of them
(``DisableTorchFunction`` with ``_disable_current_modes``, a dispatch key excluded, ``redispatch``: round 5's f1, f2),
and a mode sees one thread.  Whatever the route, the work ends in an aten operator's kernel for a backend.  Before the
learner's code loads, every such kernel of an operator whose name holds a banned name's words is replaced by one that
notes it while a call that bans it runs, then runs the kernel it replaced, on any thread.  The replaced kernels, their
library and the running call's state live only in closures the dispatcher holds: nothing the learner's code can reach
without an audited step (``gc``, a frame) leads to them.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable
from typing import Any

Note = Callable[[str], None]
Switch = Callable[[list[str], "Note | None"], None]  # ``running(banned, note)``: what :func:`watch_kernels` returns.
MARK = "attnkit: a banned kernel, heard"
"""Where the dispatcher says a replaced kernel was registered (``SafeKernelFunction(debug='registered at …')``)."""


def banned_op(op: str, banned: Iterable[str]) -> bool:
    """Whether the aten operator ``op`` (``aten::_softmax.out``, ``_safe_softmax``) holds every word of a banned
    name (``softmax`` is in ``_log_softmax_backward_data``; ``dropout`` in ``feature_alpha_dropout``)."""
    words = set(op.split("::")[-1].split(".")[0].split("_"))
    return any(set(b.split("_")) <= words for b in banned)


def watch_kernels(universe: Iterable[str]) -> Switch:
    """Replace the kernels of every aten operator matching a name of ``universe``; return ``running(banned, note)``:
    from then on ``note("torch.ops.aten.<op>")`` is called for each kernel run of an operator matching ``banned``."""
    import torch

    universe = sorted(set(universe))
    current: list[Any] = [(), None]  # the running call's bans, its note (and the library of replacements)

    def running(banned: list[str], note: Note | None) -> None:
        current[:2] = [tuple(banned), note]

    if not universe:
        return running
    C = torch._C
    # The dispatcher's own registration handle, not ``torch.library.Library``: that one's finalizer sits in
    # ``weakref.finalize``'s registry, where any code could find it and reset the registrations.
    library: Any = C._dispatch_library("IMPL", "aten", "", MARK, 0)  # its replacements go with it: kept
    current.append(library)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel": that is the point
        for op in C._dispatch_get_all_op_names():
            if op.startswith("aten::") and banned_op(op, universe):
                for key, original in _kernels_of(C, op):
                    library.impl(op.removeprefix("aten::"), key, _heard(op, original, current), True)
    return running


def _heard(op: str, original: Any, current: list[Any]) -> Callable[..., Any]:
    name = "torch.ops.aten." + op.removeprefix("aten::").split(".")[0]

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        banned, note = current[0], current[1]
        if note is not None and banned_op(op, banned):
            note(name)
        return original.call_boxed(keyset, *args, **kwargs)

    kernel.__qualname__ = kernel.__name__ = name  # what a traceback through it shows
    return kernel


FORWARDING = re.compile(r"(Autograd|Autocast|FuncTorch|Python|Functionalize|ADInplaceOrView|BackendSelect|Conjugate|"
                        r"Negative|ZeroTensor|PreDispatch|Named|Tracer|Batched|VmapMode)")
"""Dispatch keys whose kernels hand the work on to other operators or keys (autograd, tracing, vmap …): heard there."""


def registered_keys(dump: str) -> list[str]:
    """The keys with a kernel of their own in ``_dispatch_dump(op)``'s table, but alias keys and :data:`FORWARDING`'s
    (a backend the enum does not name, ``MkldnnCPU``: round 6's a1)."""
    keys = re.findall(r"^(\w+): registered at", dump, flags=re.MULTILINE)
    return [k for k in keys if k != "debug" and not FORWARDING.match(k)]  # "debug:" is the schema's own line


def _backend_keys(C: Any) -> list[str]:
    """Every backend's dispatch key: the dense ones (CPU … Meta) and their quantized, sparse and nested kinds."""
    members = list(C.DispatchKey.__members__)
    dense = members[members.index("StartOfDenseBackends") + 1 : members.index("EndOfDenseBackends")]
    kinds = ("", "Quantized", "Sparse", "SparseCsr", "NestedTensor")
    return [kind + backend for kind in kinds for backend in dense if _parses(C, kind + backend)]


def _parses(C: Any, key: str) -> bool:
    """Whether the dispatcher takes ``key`` by name (an enum member such as ``QuantizedHIP`` may not parse)."""
    try:
        C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", key)
    except RuntimeError:
        return False
    return True


def _kernels_of(C: Any, op: str) -> list[tuple[str, Any]]:
    """``(key, kernel)`` for each kernel ``op`` runs now that is its own work: the backends' (one computed from
    ``CompositeExplicitAutograd`` too, any key its table lists) and a decomposition's (``CompositeImplicitAutograd``:
    ``scaled_dot_product_attention``'s math path runs as other operators, none banned by that name)."""
    composite = C._dispatch_has_kernel_for_dispatch_key(op, "CompositeImplicitAutograd")
    found = []
    if composite and (decomposition := _kernel_for(C, op, "AutogradCPU")) is not None:
        found.append(("CompositeImplicitAutograd", decomposition))  # as the Autograd keys run it
    for key in dict.fromkeys([*_backend_keys(C), *registered_keys(C._dispatch_dump(op))]):
        if composite and not C._dispatch_has_kernel_for_dispatch_key(op, key):
            continue  # the decomposition's, replaced once above
        if (kernel := _kernel_for(C, op, key)) is not None:
            found.append((key, kernel))
    return found


def _kernel_for(C: Any, op: str, key: str) -> Any:
    """The kernel ``op`` runs for ``key`` now, or None where there is none (or only a fallthrough)."""
    if not C._dispatch_has_computed_kernel_for_dispatch_key(op, key):
        return None
    try:
        if C._dispatch_kernel_for_dispatch_key_is_fallthrough(op, key):
            return None
    except RuntimeError:  # no kernel registered for the key itself: it computes one from an alias (CompositeExplicit…)
        pass
    return C._dispatch_get_computed_kernel_for_dispatch_key(op, key)
