"""The grading rules beyond a call's values, worded once, and enforced locally on the public cases.

The grader fails a case for more than wrong values: a banned torch call (the hook table's list, recorded in the
learner's process by the child runtime's recorder), a tensor built on the CPU whatever the input's device (found
by a pass on the meta device: "will fail on a GPU"), an input changed in place, a dtype not kept, a result that
is not exactly a ``torch.Tensor``, a non-contiguous result where the hook table asks for a contiguous one, as
much memory held at once as one batch-head's whole ``(Tq, Tk)`` scores where the table asks for bounded memory
(the peak of the tensors held, recorded like the banned calls), a thread or a process started by the learner's
code.  The verdict (:mod:`grader.instructor.verdict`) and the hidden cases word those failures with the
messages here.

:class:`RuledSolution` holds a solution to the same rules while the public tests call it (``attnkit check`` and
the notebook's check cell): each call runs under the same recorder, is watched for in-place changes, has its
result's properties checked, and runs once more on the meta device.  A banned call fails the test at once (the
grader judges it before the values); the other problems wait until the test's own checks have passed (the
grader judges them after the values), then fail it with the grader's wording.

This module ships in a learner's kit; it imports torch only when a call runs.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import traceback
from typing import Any, NamedTuple

from grader.child.gradients import learner_frame, raised_by_learner
from grader.gradients import local_module_problem, local_problem
from grader.hook_table import row
from grader.rule_words import KEY_AXIS_LABEL, QUERY_AXIS_LABEL, WORDS, Say, english

DEVICE_ERRORS = (
    "expected device",
    "expected all tensors to be on the same device",
    "is not on the expected device",
    "device meta",
    "on the meta device",
    "found at least two devices",
)
"""Pieces of torch's error messages that mean two devices met: on the meta device, a tensor built on the CPU."""

IN_PLACE = WORDS["in_place"]


def banned_message(hook: str, calls: list[str], say: Say = english) -> str:
    """``uses torch.softmax: <why>``: the failure for a banned call recorded while ``hook`` ran."""
    why = say(f"why_banned.{hook}") if row(hook).why_banned else say("not_allowed_here")
    return say("banned", calls=", ".join(calls), why=why)


SPAWN_KINDS: dict[str, tuple[str, dict[str, str]]] = {
    "_thread.start_new_thread": ("spawn.thread", {}),
    "_thread.start_joinable_thread": ("spawn.thread", {}),
    "thread-running": ("spawn.thread_running", {}),
    "os.fork": ("spawn.process", {"how": "os.fork"}),
    "os.forkpty": ("spawn.process", {"how": "os.forkpty"}),
    "pty.spawn": ("spawn.process", {"how": "pty.spawn"}),
    "os.posix_spawn": ("spawn.process", {"how": "os.posix_spawn"}),
    "os.spawn": ("spawn.process", {"how": "os.spawn*"}),
    "os.system": ("spawn.process", {"how": "os.system"}),
    "os.exec": ("spawn.program", {"how": "os.exec*"}),
    "subprocess.Popen": ("spawn.process", {"how": "subprocess"}),
    "_posixsubprocess.fork_exec": ("spawn.process", {"how": "multiprocessing"}),
    "process-running": ("spawn.process_running", {}),
    "process-ended": ("spawn.process_ended", {}),
}
"""What the learner's process reports it started (``grader.child.spawns.SPAWN_EVENTS`` and the measured facts),
worded (an id of :data:`WORDS` and its parameters); anything else it sends is "a thread or a process"."""


def spawn_message(started: list[str], say: Say = english) -> str:
    """The failure of every call made once the learner's code started a thread or a process (at import or in a call)."""
    worded = (SPAWN_KINDS.get(str(s), ("spawn.unknown", {})) for s in started)
    return say("spawned", kinds=list(dict.fromkeys(say(key, **params) for key, params in worded)))


def is_device_error(message: str) -> bool:
    """Whether an error raised on the meta device says that two devices met."""
    return any(piece in message.lower() for piece in DEVICE_ERRORS)


def gpu_error_message(error: str, say: Say = english) -> str:
    """The failure for an error raised on the meta device that :func:`is_device_error` recognises."""
    return say("gpu_error", error=error)


def gpu_device_message(device: str, say: Say = english) -> str:
    """The failure for a result on ``device`` where the inputs were on the meta device."""
    return say("gpu_device", device=device)


def contiguous_message(hook: str, say: Say = english) -> str:
    """The failure for a non-contiguous result of a hook whose row asks for a contiguous one."""
    return say("contiguous", hook=hook)


class MemoryRule(NamedTuple):
    """The memory rule of one chunked call (:func:`memory_bound`): how much the call may hold at once."""

    bound: int
    """``Tq * Tk``, one batch-head's whole score matrix: the elements (of any dtype) no call may hold at once."""
    # for the message: what a chunked version holds at its peak (elements), a block of scores ``(..., Tq, chunk)``,
    # the running mix of values ``(..., Tq, dv)``, and ``(Tq, Tk)``
    needed: int
    block: tuple[int, ...]
    sums: tuple[int, ...]
    scores: tuple[int, int]
    whole: int
    """The elements of the whole ``(..., Tq, Tk)`` scores: what the GPU's peak is held to."""
    kept: int
    """In a causal call, the scores of one batch-head the mask keeps (its triangle, red team 8's a6), where a chunked
    version stays well below it: no call may hold that many elements at once either; else ``bound``."""


def memory_bound(
    queries: tuple[int, ...],
    keys: tuple[int, ...],
    values: tuple[int, ...],
    chunk_size: int,
    itemsize: int = 4,
    causal: bool = False,
) -> MemoryRule | None:
    """The memory rule of a chunked exercise for these shapes, or None where it cannot tell a chunked version apart.

    Measured: the peak of the elements (every dtype, however shaped or split) and of the bytes the call's tensors
    hold at once beyond its inputs (``grader.child.call._MemoryMeter``).

    The bounds.  Full attention one batch-head at a time holds, at some step, the whole ``(Tq, Tk)`` scores of one
    batch-head: ``Tq * Tk`` elements, whether in one tensor, renamed ``(Tq, 1, Tk)``, in two halves held together
    or cast to integers; a call that holds that many at once fails.  Packed into wider elements (two float32 in
    one int64 or float64) the matrix holds fewer elements but as many bytes: ``Tq * Tk * itemsize`` (the bytes of
    one element of the queries' dtype) is the byte bound (:func:`memory_problem`).

    What a chunked version needs.  Walking the keys in blocks of ``c = min(chunk_size, Tk)`` it holds at its peak,
    for each of the ``n = prod(batch dims) * Tq`` query rows: a few blocks of scores (masked, shifted,
    exponentiated: ``4c``), the running mix of values, the block's share, their sum and the output (``4 dv``),
    the scaled queries and one more of their size (``2 d``): ``needed = n * (4c + 4 dv + 2 d)`` elements (the
    reference, measured, holds 0.8 of that).  It may compute in float64 whatever it is given (for accuracy, as
    the kit's gold answers do), so its temporaries are ``needed`` elements of :data:`WIDEST_ITEMSIZE` bytes.

    The rule applies where twice ``needed`` stays within both bounds, its bytes counted in float64.  Elsewhere
    (short sequences, one block, many batch-heads sharing short keys, float32 queries whose float64 temporaries
    would outweigh the float32 matrix) the two cannot be told apart by memory and the rule stands aside: no
    bound on the peaks could pass the one and fail the other.
    """
    import math

    *batch, num_queries, dim = queries
    num_keys, value_dim = keys[-2], values[-1]
    block = min(max(chunk_size, 1), num_keys)
    bound = num_queries * num_keys
    needed = math.prod(batch) * num_queries * (4 * block + 4 * value_dim + 2 * dim)
    if 2 * needed > bound or 2 * needed * WIDEST_ITEMSIZE > bound * itemsize:
        return None
    whole = math.prod(batch) * bound
    kept = sum(max(0, min(num_keys, i + 1 + num_keys - num_queries)) for i in range(num_queries)) if causal else bound
    return MemoryRule(bound, needed, (*batch, num_queries, block), (*batch, num_queries, value_dim),
                      (num_queries, num_keys), whole, kept if 2 * needed <= kept else bound)  # fmt: skip


MEASURED_CALL_FACTOR = 6
"""A call whose memory is measured may take this many times the call limit: the meter (a dispatch mode, Python at
every op) and the allocator's record run inside it and slow an honest chunked version 6 to 30 times (red team 8b:
three honest versions timed out at 10 s), and the function mode's watch for learner code where it steps aside
half as much again (the suite's five honest versions, graded in the child: 0.75–1.13 s before it, 1.13–1.81 s with
it); the hand-in's own time limit still bounds it."""

WIDEST_ITEMSIZE = 8
"""The bytes of one float64 element: the widest dtype a chunked version may compute in, whatever it is given."""


def rule_bytes(rule: MemoryRule, itemsize: int) -> int:
    """The bytes no call may hold at once: the scores it keeps (a causal call's triangle) in the queries' dtype,
    where twice a chunked version's temporaries in float64 stay under them; else the whole matrix's."""
    if rule.kept < rule.bound and 2 * rule.needed * WIDEST_ITEMSIZE <= rule.kept * itemsize:
        return rule.kept * itemsize
    return rule.bound * itemsize


def memory_problem(memory: dict[str, Any], rule: MemoryRule, itemsize: int = 4, say: Say = english) -> str | None:
    """The failure when what a chunked call held breaks :func:`memory_bound`'s rule, or None.

    ``memory``: the call's record (``grader.child.wire.MemoryFacts``): the peak of elements and of bytes
    held at once, the largest tensor at that peak (``largest``, made by ``op``), the calls that took values
    out of torch (``converted``).  ``itemsize``: the bytes of one element of the queries' dtype, so that a
    whole score matrix packed into wider elements (two float32 in one int64) breaks the rule too; the rule
    (:func:`memory_bound` given the same ``itemsize``) leaves room under it for float64 temporaries.
    """
    import math

    converted = [str(c) for c in memory.get("converted") or []]
    if converted:
        return say("memory.converted", calls=", ".join(converted))
    tq, tk = rule.scores
    needs = say("memory.needs", needed=f"{rule.needed:,}", block=_shape(rule.block), sums=_shape(rule.sums))
    peak, largest, op = int(memory.get("peak_elements") or 0), memory.get("largest"), str(memory.get("op") or "")
    if peak >= rule.bound:
        held = say("memory.held", tq=tq, tk=tk, peak=f"{peak:,}", bound=f"{rule.bound:,}")
        if largest is None:
            return say("memory.elements", held=held, needs=needs)
        alone = math.prod(largest) >= rule.bound
        key = ("memory.alone" if alone else "memory.some") + ("_made" if op else "")
        return say(key, held=held, shape=_shape(largest), needs=needs, **({"op": op} if op else {}))
    if peak >= rule.kept:
        return say("memory.kept", peak=f"{peak:,}", bound=f"{rule.kept:,}", tq=tq, tk=tk, needs=needs)
    held_bytes, byte_bound = int(memory.get("peak_bytes") or 0), rule_bytes(rule, itemsize)
    if held_bytes >= byte_bound:
        held = _held_bytes_words(rule, itemsize, say)
        return say("memory.bytes", held=held, peak=f"{held_bytes:,}", bound=f"{byte_bound:,}", needs=needs)
    return _allocator_problem(memory, rule, itemsize, say)


def _allocator_problem(memory: dict[str, Any], rule: MemoryRule, itemsize: int, say: Say = english) -> str | None:
    """What the allocators' records (``grader.child.allocations``, where the grader runs them) say against the rule.

    On the CPU the allocator's own peak (the profiler's record, which no dispatch mode switched off hides) is held
    to one batch-head's scores in bytes of the queries' dtype, as the meter's bytes are.  On CUDA the peak of
    allocated memory is held to the whole ``(..., Tq, Tk)`` scores (it counts the allocator's rounding and the
    kernels' workspaces too: the looser bound).
    """
    if memory.get("cpu_record"):
        return say("memory.profiler")
    if memory.get("foreign"):
        return say("memory.foreign", calls=", ".join(str(f) for f in memory["foreign"]))
    allocated, byte_bound = memory.get("cpu_peak_bytes"), rule_bytes(rule, itemsize)
    if allocated is not None and allocated >= byte_bound:
        held = _held_bytes_words(rule, itemsize, say)
        return say("memory.allocator", allocated=f"{allocated:,}", held=held, bound=f"{byte_bound:,}")
    peak = memory.get("cuda_peak_bytes")
    if peak is not None and peak >= rule.whole * itemsize:
        return say("memory.cuda", peak=peak, bound=rule.whole * itemsize)
    return None


def _held_bytes_words(rule: MemoryRule, itemsize: int, say: Say) -> str:
    """What :func:`rule_bytes` holds the call to: the whole matrix, or a causal call's kept scores."""
    if rule_bytes(rule, itemsize) == rule.bound * itemsize:
        return say("memory.matrix", tq=rule.scores[0], tk=rule.scores[1])
    return say("memory.causal_scores")


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def dtype_message(got: str, expected: str, say: Say = english) -> str:
    if expected == "bool":  # a mask: its dtype never follows an input's
        return say("dtype.mask", got=got)
    return say("dtype", got=got, expected=expected)


def subclass_message(kind: str, say: Say = english) -> str:
    return say("subclass", kind=kind)


# --- figures: what a plot must show, read as data (grader.child.figures.figure_facts) -----------------


def not_a_figure_message(kind: str, say: Say = english) -> str:
    """The failure for a figure hook that returned ``kind`` (a type's name) instead of a ``Figure``."""
    if kind.rsplit(".", 1)[-1] in ("Axes", "AxesSubplot"):
        return say("figure.axes", kind=kind)
    return say("figure.not_a_figure", kind=kind)


def expected_images(answer: Any) -> int:
    """How many images a figure must hold: what its answer says (the gold, the reference's figure read as a
    learner's is; the local check's stand-in, the weights).  An ``(H, Tq, Tk)`` stack is ``H`` images, one per
    head, in axes order; anything else (a ``(Tq, Tk)`` image) is one.  The learner's process sends the array of
    at most :data:`grader.child.figures.FIGURE_IMAGES` images (a reference's figure of more has no gold)."""
    return int(answer.shape[0]) if answer.dim() == 3 else 1


def _shape_text(shape: Any) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def figure_form_problem(facts: dict[str, Any], say: Say = english, expected: int = 1) -> str | None:
    """What is wrong with a figure's images before their values are compared, or None: none, not ``expected``
    of them (:func:`expected_images`; for one image, several are refused as ever), several of different shapes,
    not numbers.  The count and the shapes are the child's word: the caller still checks the array it got."""
    images = int(facts.get("images", 0))
    if images == 0:
        return say("figure.no_image")
    if expected == 1:
        if images > 1:
            return say("figure.images", images=images)
    elif images != expected:
        if images == 1:
            return say("figure.image_count_one", expected=expected)
        return say("figure.image_count", images=images, expected=expected)
    else:
        shapes = list(dict.fromkeys(_shape_text(shape) for shape in facts.get("image_shapes") or []))
        if len(shapes) > 1:
            return say("figure.image_shapes", shapes=shapes, expected=expected)
    if facts.get("array_problem"):
        return say("figure.not_numbers", why=str(facts["array_problem"]))
    return None


def _close(a: Any, b: Any) -> bool:
    import torch

    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-4, atol=1e-6, equal_nan=True))


def image_stack_problem(got: Any, gold: Any, say: Say = english) -> str | None:
    """What a stack of images ``(H, ...)`` gets wrong against its gold ``(H, Tq, Tk)`` that is worth its own words:
    heads transposed (all, or one of square ones), heads drawn out of order; None otherwise (the values' and the
    shape's own comparison is the caller's)."""
    import torch

    if got.dim() != 3 or gold.dim() != 3 or got.shape[0] != gold.shape[0]:
        return None
    g, w = got.to(torch.float64), gold.to(torch.float64)
    flipped = [k for k in range(w.shape[0]) if is_transpose(g[k], w[k])]
    if flipped and len(flipped) == w.shape[0]:
        return say("figure.heads_transposed")
    if flipped:
        return say("figure.head_transposed", head=flipped[0])
    if g.shape != w.shape:
        return None
    for k in range(w.shape[0]):
        if _close(g[k], w[k]):
            continue
        shown = next((j for j in range(w.shape[0]) if _close(g[k], w[j])), None)
        if shown is not None:
            return say("figure.head_order", image=k, head=shown)
    return None


def transposed_message(say: Say = english) -> str:
    """The failure for an image whose array is the transpose of the weights."""
    return say("figure.transposed")


def is_transpose(got: Any, want: Any) -> bool:
    """Whether ``got`` is ``want`` transposed (and not ``want`` itself): two float tensors of 2 dims."""
    import torch

    if got.dim() != 2 or want.dim() != 2 or tuple(got.shape) != tuple(want.shape[::-1]):
        return False
    g, w = got.to(torch.float64), want.to(torch.float64)
    return not _close(g, w) and _close(g, w.T)


def token_axes(tokens: Any, num_queries: int, num_keys: int) -> tuple[list[str], list[str]] | None:
    """``(query_tokens, key_tokens)`` of a figure hook's ``tokens`` argument (the hookspec's two forms), or None.

    One sequence of strings names the queries and the keys alike; a pair of sequences is
    ``(query_tokens, key_tokens)``.  It raises nothing: the lengths are the hook's to check.
    """
    if tokens is None:
        return None
    items = list(tokens)
    if len(items) == 2 and all(not isinstance(t, str) for t in items):
        return [str(t) for t in items[0]], [str(t) for t in items[1]]
    return [str(t) for t in items], [str(t) for t in items]


def _labels_at(ticks: list[dict[str, Any]], count: int) -> list[str | None]:
    """The text of the tick at each position ``0 .. count - 1`` (None where there is none)."""
    at: dict[int, str] = {}
    for tick in ticks:
        position = float(tick.get("at", -1))
        if abs(position - round(position)) < 1e-6:
            at.setdefault(int(round(position)), str(tick.get("text", "")))
    return [at.get(j) for j in range(count)]


def figure_labels_problem(
    facts: dict[str, Any], tokens: tuple[list[str], list[str]] | None, say: Say = english
) -> str | None:
    """What a figure's labels, ticks and colorbar get wrong for ``tokens`` (:func:`token_axes`), or None."""
    if tokens is None:
        x, y = facts.get("xlabel", ""), facts.get("ylabel", "")
        if (x, y) == (QUERY_AXIS_LABEL, KEY_AXIS_LABEL):
            return say("labels.swapped")
        if x != KEY_AXIS_LABEL:
            return say("labels.x", label=repr(x))
        if y != QUERY_AXIS_LABEL:
            return say("labels.y", label=repr(y))
    else:
        queries, keys = tokens
        xticks, yticks = list(facts.get("xticks", [])), list(facts.get("yticks", []))
        across, down = _labels_at(xticks, len(keys)), _labels_at(yticks, len(queries))
        if across != keys or down != queries:
            if _labels_at(xticks, len(queries)) == queries and _labels_at(yticks, len(keys)) == keys:
                return say("labels.tokens_swapped")
            for axis, got, want in (("x", across, keys), ("y", down, queries)):
                for j, (mine, theirs) in enumerate(zip(got, want)):
                    if mine != theirs:
                        shown = say("labels.no_tick") if mine is None else say("labels.the_tick", tick=repr(mine))
                        return say(f"labels.{axis}_tick", position=j, shown=shown, token=repr(theirs))
    if not facts.get("colorbar"):
        return say("labels.colorbar")
    return None


# --- the local check -------------------------------------------------------------------------------


class RuleBroken(AssertionError):
    """A public test's call broke one of the grader's rules; the message is the grader's."""


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def _same(a: Any, b: Any) -> bool:
    """Equal tensors, NaN where NaN was (``torch.equal`` alone calls NaN unequal to itself)."""
    import torch

    if a.shape != b.shape:
        return False
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def _on_meta(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty_like(value, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(_on_meta(v) for v in value)
    if isinstance(value, torch.Generator):  # meta has none: a CPU one in the same state draws there, as in grading
        copy = torch.Generator()
        copy.set_state(value.get_state())
        return copy
    return value


def _meta_problem(run: Any) -> str | None:
    """Run ``run()`` (meta inputs) and say what the grader's meta pass would fail, or None."""
    import torch

    with torch.random.fork_rng(devices=[]):
        try:
            result = run()
        except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything on meta tensors
            text = (str(exc) or type(exc).__name__).splitlines()[0]
            return gpu_error_message(f"raised {type(exc).__name__}: {text}") if is_device_error(str(exc)) else None
    outputs = result if isinstance(result, (tuple, list)) else [result]
    for out in outputs:
        if isinstance(out, torch.Tensor) and out.device.type != "meta":
            return gpu_device_message(str(out.device))
    return None


def _memory_rule(hook: str, arguments: dict[str, Any]) -> MemoryRule | None:
    """:func:`memory_bound` for a call of a hook whose row asks for bounded memory, where it can tell."""
    import torch

    if not row(hook).bounded_memory:
        return None
    tensors = queries, keys, values = tuple(arguments.get(name) for name in ("queries", "keys", "values"))
    chunk = arguments.get("chunk_size")
    if not all(isinstance(t, torch.Tensor) and t.dim() >= 2 for t in tensors) or not isinstance(chunk, int):
        return None
    if queries.device.type == "meta":  # type: ignore[union-attr]
        return None
    q, k, v = (tuple(t.shape) for t in tensors)  # type: ignore[union-attr]
    causal = arguments.get("causal") is True
    return memory_bound(q, k, v, chunk, queries.element_size(), causal)  # type: ignore[union-attr]


class RuledSolution:
    """A solution whose hooks, called by the public tests, are held to the grader's rules (module docstring).

    ``pending`` collects the problems found after a call returned; the caller
    (:mod:`grader.check`'s pytest plugin) clears it before each test and fails
    the test with its first entry once the test's own checks have passed.
    """

    def __init__(self, solution: Any) -> None:
        self.solution = solution
        self.pending: list[str] = []
        self.failed_on_meta: set[str] = set()
        """The module hooks whose meta pass failed once: the grader fails one case for it (its module's meta case),
        so the check fails one test, not every test that calls the module's forward."""

    def __getattr__(self, name: str) -> Any:
        from grader.registry import HOOK_NAMES, hook_signature

        if name in HOOK_NAMES:
            call = functools.partial(self.call, name)
            call.__name__ = name  # type: ignore[attr-defined]
            call.__signature__ = hook_signature(name)  # type: ignore[attr-defined]
            return call
        return getattr(self.solution, name)

    def _note(self, problem: str | None) -> None:
        if problem and problem not in self.pending:
            self.pending.append(problem)

    def call(self, hook: str, *args: Any, **kwargs: Any) -> Any:
        import torch

        from grader.child.call import _MemoryMeter, _recording_mode
        from grader.child.figures import recording_show
        from grader.registry import hook_signature

        bound = hook_signature(hook).bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        before = {k: v.clone() for k, v in arguments.items() if isinstance(v, torch.Tensor)}
        generators = {k: v.get_state() for k, v in arguments.items() if isinstance(v, torch.Generator)}
        recorder = _recording_mode(list(row(hook).banned))
        rule = _memory_rule(hook, arguments)
        meter = _MemoryMeter(arguments.values()) if rule else None
        figures = row(hook).output == "figure"
        shown: list[str] = []
        with (
            recorder,
            meter if meter is not None else contextlib.nullcontext(),
            recording_show(shown) if figures else contextlib.nullcontext(),
        ):
            try:
                result = self.solution.call(hook, **arguments)
            except ValueError as exc:  # a case that asks for a raise counts the learner's own (as the grader does)
                if raised_by_learner(exc):
                    raise
                where = learner_frame(traceback.extract_tb(exc.__traceback__)) or "?"
                raise RuleBroken(english("raised_in_library", kind=type(exc).__name__, where=where, text=exc)) from exc
        if recorder.seen or shown:
            raise RuleBroken(banned_message(hook, recorder.seen + shown))
        if rule and meter is not None:
            self._note(memory_problem(meter.facts(), rule, arguments["queries"].element_size()))
        if figures:
            self._note(self._figure_problem(result, arguments))
        elif isinstance(result, torch.nn.Module):
            self._watch_module(hook, result)
        elif isinstance(result, torch.Tensor):
            self._note(self._result_problem(hook, result, arguments))
            sent = {k: before.get(k, v) for k, v in arguments.items()}  # as the test passed them
            self._note(local_problem(hook, functools.partial(self.solution.call, hook), sent, result, generators))
            meta = {k: "meta" if k == "device" else _on_meta(v) for k, v in arguments.items()}
            self._note(_meta_problem(lambda: self.solution.call(hook, **meta)))
        if any(not _same(arguments[k], v) for k, v in before.items()):
            self._note(IN_PLACE)
        return result

    @staticmethod
    def _result_problem(hook: str, result: Any, arguments: dict[str, Any]) -> str | None:
        import torch

        if type(result) is not torch.Tensor:
            return subclass_message(f"{type(result).__module__}.{type(result).__qualname__}")
        floats = [v for v in arguments.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
        expected = row(hook).expected_dtype or (_dtype_name(floats[0].dtype) if floats else None)
        if expected and _dtype_name(result.dtype) != expected:
            return dtype_message(_dtype_name(result.dtype), expected)
        if row(hook).contiguous_result and not result.is_contiguous():
            return contiguous_message(hook)
        return None

    @staticmethod
    def _figure_problem(result: Any, arguments: dict[str, Any]) -> str | None:
        """The figure read as the grader reads it (:func:`grader.child.figures.figure_facts`), judged alike."""
        import torch

        from grader.child.figures import figure_facts

        read = figure_facts(result)
        if read is None:
            return not_a_figure_message(f"{type(result).__module__}.{type(result).__qualname__}")
        facts, array = read
        weights = arguments["weights"].detach().to("cpu", torch.float64)
        expected = expected_images(weights)  # the weights stand in for the gold: the figure's answer is them
        if weights.dim() == 3 and expected == 1:
            weights = weights[0]  # one head, (1, Tq, Tk): one image, its (Tq, Tk), as the gold of such a figure is
        problem = figure_form_problem(facts, english, expected)
        if problem or array is None:
            return problem or "the image's data cannot be read as numbers"
        stack = expected > 1
        if stack and (problem := image_stack_problem(array, weights)):
            return problem
        if not stack and is_transpose(array, weights):
            return transposed_message()
        if tuple(array.shape) != tuple(weights.shape):
            shapes = f"shape {tuple(array.shape)}{' stacked' * stack}, the weights {tuple(weights.shape)}"
            return f"the images' arrays have {shapes}" if stack else f"the image's array has {shapes}"
        if not torch.allclose(array, weights, rtol=1e-5, atol=1e-6, equal_nan=True):
            if stack:
                return "the images' arrays differ from the weights: imshow each head's weights themselves"
            return "the image's array differs from the weights: imshow the weights themselves"
        return figure_labels_problem(facts, token_axes(arguments.get("tokens"), *weights.shape[-2:]))

    def _watch_module(self, hook: str, module: Any) -> None:
        """Record banned calls in the module's forward too, and run each forward once more on the meta device."""
        forward = module.forward
        banned = list(row(hook).banned)

        @functools.wraps(forward)
        def ruled_forward(*args: Any, **kwargs: Any) -> Any:
            import torch

            from grader.child.call import _recording_mode

            recorder = _recording_mode(banned)
            with recorder:
                out = forward(*args, **kwargs)
            if recorder.seen:
                raise RuleBroken(banned_message(hook, recorder.seen))
            del module.__dict__["forward"]  # a copy without this wrapper: its forward is its own
            try:
                if args and isinstance(args[0], torch.Tensor):  # the gradient rule, on the module's own forward
                    self._note(local_module_problem(module, args[0], out))
                twin = copy.deepcopy(module).to("meta")
            except Exception:  # noqa: BLE001 - a module that cannot be copied gets no meta pass
                return out
            finally:
                module.forward = ruled_forward
            if hook not in self.failed_on_meta:
                problem = _meta_problem(lambda: twin(*_on_meta(args), **{k: _on_meta(v) for k, v in kwargs.items()}))
                if problem:
                    self.failed_on_meta.add(hook)
                    self._note(problem)
            return out

        module.forward = ruled_forward
