"""The memory rule of chunked_attention: measured in the learner's process, judged on the trusted side.

* the child runtime's meter records the peak of the elements (and bytes) the call's tensors hold at once,
  beyond its inputs: every dtype, new storages only (views and in-place results hold no new memory), each
  until it is freed; and the calls that take values out of torch (``Tensor.numpy``, ``tolist`` …); only for
  calls that ask (``measure_memory``);
* the reply's ``memory`` field is declared and checked like every other field;
* :func:`grader.rules.memory_bound`: one batch-head's whole ``(Tq, Tk)`` scores never fit under the bound,
  and the rule applies only where a chunked version, with room to spare, stays below it;
* the red team's evasions, each once full marks while holding a whole ``(Tq, Tk)`` of one batch-head, fail
  the long case: the scores renamed ``(Tq, 1, Tk)`` by matmul (m1), computed in numpy (m2), held as two
  halves (m3), held as integers (m9); honest chunked versions pass (Alice's, the exercise's sketch, two
  passes, a loop over the batch-heads, one in float64 that broadcasts its blocks: its float64 temporaries
  once outweighed the float32 matrix's bytes), on the CPU, within the grader's own call time limit;
* ``attnkit check``'s rules hold a local run to the same rule.
"""

from __future__ import annotations

import functools
import gc
import sys
import types

import learner_code
import numpy as np
import pytest
import torch

from grader.child.call import CALLS_BACK, _MemoryMeter, call_hook
from grader.child.call import FOREIGN as NOT_ALLOCATED
from grader.instructor.case_properties import memory_rule
from grader.instructor.cases import make_cases
from grader.instructor.groups.chapter import LONG
from grader.instructor.replies import CallReply, MalformedReply, decode
from grader.instructor.sandbox import Limits
from grader.instructor.suite import Suite, build_suite
from grader.instructor.verdict import FAILED, PASSED
from grader.registry import adopt
from grader.rules import MemoryRule, RuledSolution, memory_bound, memory_problem
from solutions import reference
from solutions.mistakes import by_id, mistake_solution

HOOK = "chunked_attention"
LIMITS = Limits()  # the grader's own limits: the long cases must fit the default call time
BATCH, HEADS, TOKENS, D, DV, CHUNK = LONG
SHAPES = ((BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, DV))
MATRIX = TOKENS * TOKENS  # one batch-head's scores
EVASIONS = {  # the red team's: each held a whole (Tq, Tk) of one batch-head and scored full marks
    "m1": "scores_renamed",
    "m2": "scores_in_numpy",
    "m3": "scores_in_halves",
    "m9": "scores_as_integers",
    "a4": "scores_in_a_buffer",  # round 3: memory no op of the call returns, filled in place
    "a6": "scores_in_foreign_memory",
    "rt8-a6": "scores_causal_triangle",  # red team 8: every unmasked score of a causal call, under the whole matrix
    "rt12a-packed": "scores_causal_triangle_in_float64",  # red team 12a: that triangle, two scores to a float64
    "rt13a-bool": "scores_causal_triangle_in_bool_bytes",  # red team 13a: its bytes in a storage made as bool
}
MODES_OFF = {  # tests/hostile/submissions: the meter (a dispatch mode, the local check's too) sees none of these
    "m1'": "scores_with_modes_off",  # round 5's m1: the modes off, by a route the scan cannot read
    "m1''": "allocator_record_off",  # and the allocator's record (the profiler) closed too
    "rt8-a4": "allocator_record_forged",  # red team 8: the record closed by a public call, a forged one opened
    "rt8-a2-off": "scores_in_bytearray_with_modes_off",  # red team 8's a2 below the modes: the allocator's record
}
HELD = {  # tests/hostile/submissions: only the kernel's record of the process, read by the grader, sees these
    "premade-off": "scores_in_a_buffer_made_at_import_with_modes_off",  # every page resident before the call
    "rt11-a8": "scores_in_room_of_dropped_file_pages",  # library pages given back, then read again: the samples
    "a8-anon": "scores_in_room_of_memory_given_back",  # memory made at import given back, file pages read in its place
    "rt12a-int16": "scores_packed_in_int16",  # every score at once, 16 bits with a scale per row: float32's answers
}
FOREIGN = {"rt8-a2": "scores_in_bytearray_slabs"}  # red team 8: memory torch never allocated; the grader's record only
UNALLOCATED = {  # memory torch never allocated, reached by a maker the grader does not wrap, or before the call
    "rt8-a1-before": "scores_in_numpy_made_before_the_call",
    "rt8-a2-asarray": "scores_in_asarray_slabs",
}
PACKED = {"rt8-a10": "scores_in_packed_weights"}  # red team 8: fbgemm's packed weights, which no tensor holds
NESTED = {  # red team 9: where a mode steps aside, inside a function it hands on
    "rt9-a2": "scores_pickled",  # Tensor.__reduce_ex__ (torch.save) of a tensor with an attribute
    "rt9-a3": "scores_in_numpy_inside_a_callback",  # Tensor.apply_'s callback
    "rt9-a6": "full_attention_after_the_call",  # a finaliser, after the call: the result is copied as it returns
    "rt10-a1": "scores_in_numpy_through_dlpack",  # torch.utils.dlpack.to_dlpack: a capsule, heard below the modes
    "rt10-a2": "scores_in_numpy_from_a_saved_tensor_hook",  # autograd calls the learner's hook inside an op
}
HONEST = ["chunked_chapter", "chunked_two_pass", "chunked_per_head", "chunked_float64_broadcast"]  # and Alice's


def measured(fn, *args):
    meter = _MemoryMeter(args)
    with meter:
        fn(*args)
    return meter


def long_inputs(tokens=TOKENS):
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(BATCH, HEADS, tokens, D, generator=gen) for _ in range(2))
    return q, k, torch.randn(BATCH, HEADS, tokens, DV, generator=gen)


def snippet_hook(snippet):
    """The snippet's chunked_attention, run in this process (Alice's own is the reference here)."""
    namespace: dict = {"_alice_chunked_attention": reference.chunked_attention}
    exec(compile((learner_code.SNIPPETS / f"{snippet}.py").read_text(), snippet, "exec"), namespace)
    return namespace[HOOK]


# --- the meter --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_the_meter_sees_the_full_scores_and_the_blocks(causal):
    q, k, v = long_inputs()
    sliced = measured(by_id("full-attention-sliced").overrides[HOOK], q, k, v, CHUNK, causal)
    assert sliced.peak_elements >= BATCH * HEADS * MATRIX and sliced.largest == [BATCH, HEADS, TOKENS, TOKENS]
    online = measured(reference.chunked_attention, q, k, v, CHUNK, causal)
    assert BATCH * HEADS * TOKENS * DV <= online.peak_elements < MATRIX // 2  # the output, at least; far below
    assert online.peak_bytes == pytest.approx(4 * online.peak_elements, rel=0.01)  # float32, bar a few masks


def test_views_and_in_place_results_hold_no_new_memory():
    x = torch.randn(4, 8)
    assert measured(lambda t: t.expand(100, 4, 8).transpose(0, 1)[0].unsqueeze(0), x).peak_elements == 0
    assert measured(lambda t: t.clone().mul_(2).add_(1).T.contiguous().T, x).peak_elements == 2 * 32  # 2 copies
    assert measured(lambda t: (t @ t.T).view(2, 8), x).peak_elements == 16
    meter = measured(lambda a, b: a @ b.T, torch.randn(2, 3, 4, 8), x)  # one (24, 4) mm, handed back (2, 3, 4, 4)
    assert (meter.peak_elements, meter.largest, meter.op) == (96, [2, 3, 4, 4], "mm")


def test_a_tensor_counts_until_its_storage_is_freed():
    x = torch.randn(64, 64)

    def one_at_a_time(t):
        for _ in range(10):
            t * 2  # made and dropped: one (64, 64) at a time

    def all_kept(t):
        return [t * 2 for _ in range(10)]

    def a_view_keeps_it(t):
        rows = [(t * 2)[:1] for _ in range(10)]  # each a (1, 64) view of a whole (64, 64)
        return rows

    assert measured(one_at_a_time, x).peak_elements == 64 * 64
    assert measured(all_kept, x).peak_elements == 10 * 64 * 64
    assert measured(a_view_keeps_it, x).peak_elements == 10 * 64 * 64
    meter = measured(lambda t: (t * 2, t * 3), x)
    assert meter.elements == 0 and meter.peak_elements == 2 * 64 * 64  # nothing left once the results go


def test_every_dtype_counts_and_a_narrower_view_counts_its_elements():
    x = torch.randn(32, 32)
    assert measured(lambda t: (t * 1e6).to(torch.int64), x).peak_elements == 2 * 32 * 32  # the float, the int
    assert measured(lambda t: t > 0, x).peak_elements == 32 * 32  # a bool mask: 1024 elements, 1024 bytes (each
    assert measured(lambda t: t > 0, x).peak_bytes == 32 * 32  # byte may hold any bits: red team 13a's cat of views)
    wide = measured(lambda t: torch.zeros(32, 16, dtype=torch.float64).view(torch.float32), x)
    assert (wide.peak_elements, wide.peak_bytes) == (32 * 32, 4 * 32 * 32)  # 512 float64 seen as 1024 float32


def test_what_a_storage_grows_by_counts_even_one_made_before_the_call():
    a, b = torch.randn(64, 8), torch.randn(8, 64)
    early = torch.empty(0)  # made before the call: its growth is the call's
    assert measured(lambda: torch.mm(a, b, out=early)).peak_elements == 64 * 64
    assert measured(lambda: torch.empty(0).resize_(64, 64).copy_(a @ b)).peak_elements == 2 * 64 * 64
    assert measured(lambda t: t.add_(1), a).peak_elements == 0  # an input changed in place holds nothing new


def test_memory_the_call_writes_into_counts_whole_unless_it_is_the_inputs():
    """A buffer made before the call, or by no op (``frombuffer``), holds what the call writes into it."""
    a, b = torch.randn(64, 8), torch.randn(8, 64)
    made_before = torch.empty(64, 64)
    assert measured(lambda: torch.mm(a, b, out=made_before)).peak_elements == 64 * 64
    foreign = torch.frombuffer(bytearray(64 * 64 * 4), dtype=torch.float32).view(64, 64)
    assert measured(lambda: foreign[:32].copy_((a @ b)[:32])).peak_elements >= 64 * 64
    assert measured(lambda t: t[:4].mul_(2), made_before).peak_elements == 0  # an input's view: nothing new


@pytest.mark.parametrize(
    "convert, name",
    [
        (lambda t: t.numpy(), "Tensor.numpy"),
        (lambda t: np.asarray(t), "Tensor.__array__"),
        (lambda t: t.tolist(), "Tensor.tolist"),
        (lambda t: np.from_dlpack(t), "Tensor.__dlpack__"),
        (lambda t: bytes(t.untyped_storage()), "Tensor.untyped_storage"),
    ],
    ids=["numpy", "asarray", "tolist", "dlpack", "storage"],
)
def test_the_meter_notes_every_value_taken_out_of_torch(convert, name):
    meter = measured(convert, torch.randn(3, 4))
    assert meter.converted == [name]
    assert measured(lambda t: (t.sum().item(), repr(t), t.shape), torch.randn(3, 4)).converted == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.from_numpy(np.ones((4, 4), dtype=np.float32)),
        lambda: torch.frombuffer(bytearray(64), dtype=torch.float32),
        lambda: torch.asarray(memoryview(bytearray(64)).cast("f")),
        lambda: torch.as_tensor(np.ones(16, dtype=np.float32)),
    ],
    ids=["from_numpy", "frombuffer", "asarray-buffer", "as_tensor-array"],
)
def test_the_meter_notes_memory_torch_did_not_allocate_whenever_it_was_made(make):
    made_before = make()  # before the call: no maker of it is called while the call is measured
    assert measured(lambda t: t.clone(), made_before).converted == []  # the call's inputs are its own
    assert measured(lambda: made_before.sum()).converted == [NOT_ALLOCATED]  # read by an op
    assert measured(lambda: made_before.copy_(torch.zeros(made_before.shape))).converted == [NOT_ALLOCATED]
    assert measured(lambda: make() * 2).converted == [NOT_ALLOCATED]  # made in the call
    honest = measured(lambda: torch.as_tensor([1.0, 2.0]) + torch.asarray(torch.ones(2)) + torch.tensor(np.ones(2)))
    assert honest.converted == []


@pytest.mark.parametrize(
    "pack, name",
    [
        (lambda w: torch.ops.quantized.linear_prepack_fp16(w), "quantized.linear_prepack_fp16.default"),
        (lambda w: torch.fbgemm_pack_gemm_matrix_fp16(w), "torch.fbgemm_pack_gemm_matrix_fp16"),
    ],
    ids=["prepack-op", "fbgemm-function"],
)
def test_the_meter_notes_weights_packed_where_no_tensor_holds_them(pack, name):
    if not torch.backends.quantized.supported_engines or "fbgemm" not in torch.backends.quantized.supported_engines:
        pytest.skip("this torch has no fbgemm: nothing packs outside its tensors")
    assert measured(pack, torch.randn(64, 32)).converted == [name]
    assert measured(lambda w: torch.nn.functional.linear(torch.randn(3, 32), w), torch.randn(64, 32)).converted == []


def test_only_calls_that_ask_are_measured():
    q, k, v = long_inputs(16)
    tensors = {"q": q, "k": k, "v": v}
    args = {"queries": {"tensor": "q"}, "keys": {"tensor": "k"}, "values": {"tensor": "v"},
            "chunk_size": {"value": 4}, "causal": {"value": False}}  # fmt: skip
    call = {"id": 0, "hook": HOOK, "args": args, "banned": []}
    plain, _ = call_hook({HOOK: reference.chunked_attention}, call, tensors)
    assert plain["ok"] and "memory" not in plain
    reply, _ = call_hook({HOOK: reference.chunked_attention}, dict(call, measure_memory=True), tensors)
    memory = decode(reply, CallReply, "reply")["memory"]  # as the trusted side reads it
    assert memory["largest"] == [BATCH, HEADS, 16, max(D, DV)] and memory["converted"] == []  # queries or values
    assert memory["peak_elements"] >= BATCH * HEADS * 16 * DV  # the float32 result, at least
    assert memory["peak_bytes"] >= 4 * BATCH * HEADS * 16 * DV and memory["peak_bytes"] >= memory["peak_elements"]
    meta, _ = call_hook({HOOK: reference.chunked_attention}, dict(call, measure_memory=True, device="meta"), tensors)
    assert meta["ok"] and "memory" not in meta  # nothing is allocated on the meta device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the peak of GPU memory is not read")
def test_on_cuda_the_peak_memory_is_reported_too():
    q, k, v = (t.cuda() for t in long_inputs())
    tensors = {"q": q, "k": k, "v": v}
    args = {"queries": {"tensor": "q"}, "keys": {"tensor": "k"}, "values": {"tensor": "v"},
            "chunk_size": {"value": CHUNK}, "causal": {"value": True}}  # fmt: skip
    call = {"id": 0, "hook": HOOK, "args": args, "banned": [], "measure_memory": True, "device": "cuda"}
    full_bytes = BATCH * HEADS * MATRIX * 4
    chunked, _ = call_hook({HOOK: reference.chunked_attention}, call, tensors)
    sliced, _ = call_hook({HOOK: by_id("full-attention-sliced").overrides[HOOK]}, call, tensors)
    assert 0 < chunked["memory"]["cuda_peak_bytes"] < full_bytes <= sliced["memory"]["cuda_peak_bytes"]
    assert chunked["memory"]["peak_elements"] < MATRIX <= sliced["memory"]["peak_elements"]  # the meter, on CUDA



class _Twice(torch.autograd.Function):  # a learner's own autograd function: its forward is the learner's code
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def _with_saved_hooks(q, pack):
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda saved: saved):
        q.detach().requires_grad_().exp()


def _on_cpu(q):
    with torch.autograd.graph.save_on_cpu():
        q.detach().requires_grad_().exp()


def _pickled(t):
    import io

    t = t.clone()
    t.mark = True  # an attribute of its own: Tensor.__reduce_ex__ goes through the modes' hands
    torch.save(t, io.BytesIO())


@pytest.mark.parametrize(
    "fn, noted",
    [
        (lambda q: torch.zeros(1).apply_(lambda x: x), ["Tensor.apply_", "Tensor.apply_ (your code ran inside it)"]),
        (lambda q: _with_saved_hooks(q, lambda t: t), [CALLS_BACK]),
        (lambda q: _with_saved_hooks(q, functools.partial(list.append, [])), [CALLS_BACK]),  # no frame to watch
        (lambda q: gc.enable() or q.exp(), [CALLS_BACK]),  # a finaliser could run inside the op
        (_pickled, ["Tensor.__reduce_ex__"]),
        (lambda q: _on_cpu(q), []),  # torch's own saved-tensor hooks
        (lambda q: _Twice.apply(q), []),
        (lambda q: repr(q.sum()), []),  # printing: torch's own code, and a dataclass's made from text
        (lambda q: torch.vmap(lambda row: row.exp())(q), []),
        (lambda q: torch.utils.checkpoint.checkpoint(lambda x: x.exp(), q, use_reentrant=False), []),
    ],
    ids=["apply-callback", "saved-hook", "saved-hook-in-c", "collector-on", "pickled", "save-on-cpu",
         "autograd-function", "repr", "vmap", "checkpoint"],
)
def test_the_meter_notes_learner_code_that_runs_where_a_mode_steps_aside(fn, noted):
    """A mode steps aside while the function it hands on runs: learner code called back from there (round 9's a3)
    is noted; torch's own code, the standard library's and what they make from text are not."""
    meter = measured(fn, torch.randn(4, 4))
    assert meter.converted == noted


def test_the_reply_carries_what_the_call_returned_whatever_a_finaliser_does_after():
    """A cycle with a ``__del__``, left as the call returns, runs at the next collection: with the collector's
    threshold at 1, that is the first allocation after the return (round 9's a6 filled its zeros so, once the modes
    had closed).  The values sent are copied as the call returns, the collector off until the reply is built."""
    import gc

    class Later:
        def __init__(self, out):
            self.out, self.me = out, self

        def __del__(self):
            self.out.fill_(7.0)

    def fills_later(x):
        out = torch.zeros_like(x)
        Later(out)
        return out

    thresholds = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1, 10, 10)
    try:
        reply, outputs = call_hook({"late": fills_later}, {"id": 0, "hook": "late", "args": {"x": {"tensor": "x"}}},
                                   {"x": torch.ones(3)})  # fmt: skip
    finally:
        gc.set_threshold(*thresholds)
    assert reply["ok"] and outputs["out0"].tolist() == [0.0, 0.0, 0.0], outputs
    assert gc.isenabled()

# --- the reply's field -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "memory, problem",
    [
        ({"largest": [2, -4]}, "reply.memory.largest[1]"),
        ({"largest": [1] * 17}, "length <= 16"),
        ({"largest": [2.5]}, "expected `int`, got `float`"),
        ({"largest": [True]}, "expected `int`, got `bool`"),
        ({"largest": [2**60]}, "reply.memory.largest[0]: expected `int` <="),
        ({"peak_elements": -1}, "reply.memory.peak_elements"),
        ({"peak_elements": True}, "reply.memory.peak_elements"),
        ({"peak_bytes": 2**60}, "reply.memory.peak_bytes"),
        ({"converted": ["Tensor.numpy"] * 17}, "reply.memory.converted"),
        ({"converted": "Tensor.numpy"}, "reply.memory.converted"),
        ({"cuda_peak_bytes": -1}, "reply.memory.cuda_peak_bytes"),
        ({"cuda_peak_bytes": float("nan")}, "reply.memory.cuda_peak_bytes"),
        ({"op": ["bmm"]}, "reply.memory.op: expected `str`"),
    ],
    ids=["negative", "too-many-dims", "fraction", "bool", "huge", "negative-peak", "bool-peak", "huge-bytes",
         "many-conversions", "conversions-not-a-list", "negative-bytes", "nan-bytes", "op-not-text"],
)  # fmt: skip
def test_the_reply_schema_refuses_a_forged_memory_record(memory, problem):
    with pytest.raises(MalformedReply, match=problem.replace("[", r"\[").replace("]", r"\]")):
        decode({"id": 0, "memory": memory}, CallReply, "reply")


def test_the_reply_schema_keeps_a_well_formed_memory_record():
    memory = {"peak_elements": 3, "peak_bytes": 12, "largest": [2, 4, 1024, 64], "op": "x" * 100,
              "converted": ["Tensor.numpy"], "cuda_peak_bytes": None, "extra": 1}  # fmt: skip
    kept = decode({"id": 0, "memory": memory}, CallReply, "reply")["memory"]
    assert kept["largest"] == [2, 4, 1024, 64] and len(kept["op"]) == 100 and "extra" not in kept
    assert (kept["peak_elements"], kept["peak_bytes"], kept["converted"]) == (3, 12, ["Tensor.numpy"])


# --- the bound ---------------------------------------------------------------------------------------------


def facts(peak, largest=None, op="", peak_bytes=0, converted=()):
    return {"peak_elements": peak, "peak_bytes": peak_bytes, "largest": largest, "op": op, "converted": list(converted)}


def test_the_bound_of_the_long_case_and_its_messages():
    rule = memory_bound(*SHAPES, CHUNK)
    needed = BATCH * HEADS * TOKENS * (4 * CHUNK + 4 * DV + 2 * D)  # worked out by hand: memory_bound's docstring
    block, sums = (BATCH, HEADS, TOKENS, CHUNK), (BATCH, HEADS, TOKENS, DV)
    assert rule == MemoryRule(MATRIX, needed, block, sums, (TOKENS, TOKENS), BATCH * HEADS * MATRIX, MATRIX)
    assert 2 * needed <= MATRIX  # the long case leaves a chunked version room for twice its temporaries
    triangle = TOKENS * (TOKENS + 1) // 2  # causal: row i keeps keys 0..i
    causal = memory_bound(*SHAPES, CHUNK, causal=True)
    assert causal == rule._replace(kept=triangle) and 2 * needed <= triangle
    assert memory_problem(facts(triangle - 1, [triangle - 1], "cat"), causal) is None
    held = memory_problem(facts(triangle, [TOKENS, 64], "mm"), causal)
    assert held.startswith(
        f"your call held at once every score a causal call keeps of one batch-head, or more: {triangle:,} at its "
        f"peak (the bound: {triangle:,}, the unmasked part of ({TOKENS}, {TOKENS})); a chunked version holds about"
    ), held
    assert memory_problem(facts(triangle, [TOKENS, 64], "mm"), rule) is None  # not causal: the whole matrix bounds
    wide = memory_bound((1, 64, 16), (1, 4096, 16), (1, 4096, 24), 8, causal=True)  # Tq < Tk: rows keep Tk - Tq + i + 1
    assert wide is not None and wide.kept == sum(4096 - 64 + i + 1 for i in range(64))
    one = memory_problem(facts(MATRIX + 5, [TOKENS, 1, TOKENS], "mm"), rule)
    assert one == (
        f"your call held at once as many elements as a whole ({TOKENS}, {TOKENS}) matrix of scores of one batch-head "
        f"or more: {MATRIX + 5:,} at its peak (the bound: {MATRIX:,}); your tensor ({TOKENS}, 1, {TOKENS}), made by "
        f"mm, holds that many alone; a chunked version holds about {needed:,} (blocks {block} and sums {sums}). "
        "Which step needs all of it at once? Walk the keys block by block, keeping a running max and sum"
    )
    two = memory_problem(facts(MATRIX, [TOKENS, TOKENS // 2], "mm"), rule)  # the bound itself fails
    assert f"though none of its tensors is that large (the largest: ({TOKENS}, {TOKENS // 2}), made by mm)" in two
    assert "What do you still hold from earlier blocks when you make the next one?" in two
    assert memory_problem(facts(MATRIX - 1, [TOKENS, TOKENS - 1], "mm", 4 * (MATRIX - 1)), rule) is None  # just below
    packed = memory_problem(facts(MATRIX // 2, [TOKENS, TOKENS // 2], "bitwise_or", 4 * MATRIX), rule)
    assert packed.startswith("your call held at once as many bytes as a whole"), packed
    assert f"(the bound: {4 * MATRIX:,})" in packed
    assert memory_problem(facts(MATRIX // 2, None, "", 4 * MATRIX), rule, itemsize=8) is None  # float64 queries
    numpy = memory_problem(facts(0, converted=["Tensor.numpy", "Tensor.__array__"]), rule)
    assert numpy == (
        "your call used Tensor.numpy, Tensor.__array__: the grader measures the memory torch's tensors hold, and a "
        "numpy array, a Python list, raw storage or packed weights escape it; compute with torch"
    )


@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 5, 4), (2, 8, 4), (2, 8, 3), 3),  # the public cases' small shapes
        ((2, 1024, 16), (2, 1024, 16), (2, 1024, 24), 1024),  # one block: the whole row at once
        ((8, 2, 1024, 16), (8, 2, 1024, 16), (8, 2, 1024, 24), 8),  # sixteen batch-heads of blocks outweigh one matrix
        ((1024, 16), (1024, 16), (1024, 200), 8),  # values so wide their sums outweigh the scores
        ((2, 1024, 16), (2, 1024, 16), (2, 1024, 24), 8),  # the old long case: float64 blocks outweigh float32 bytes
    ],
    ids=["small", "one-block", "many-batch-heads", "wide-values", "float64-blocks"],
)
def test_the_rule_stands_aside_where_a_chunked_version_has_no_room_below_it(shapes):
    assert memory_bound(*shapes) is None


def test_the_rule_applies_unbatched_and_for_the_public_long_test():
    unbatched = memory_bound((TOKENS, 16), (TOKENS, 16), (TOKENS, DV), 8)
    assert unbatched is not None and unbatched.bound == MATRIX and unbatched.whole == MATRIX
    public = memory_bound((2, TOKENS, 16), (2, TOKENS, 16), (2, TOKENS, DV), 8)  # exercises/test_long_sequences.py
    assert public is not None and public.bound == MATRIX and public.needed == memory_bound(*SHAPES, CHUNK).needed
    # the old long case's shapes: in float64 queries a float64 version has room, in float32 it has not
    assert memory_bound((2, 1024, 16), (2, 1024, 16), (2, 1024, 24), 8, itemsize=8) is not None


def test_a_float64_version_with_twice_its_temporaries_passes_and_a_packed_matrix_still_fails():
    rule = memory_bound(*SHAPES, CHUNK)  # float32 queries
    twice = 2 * rule.needed  # a chunked version that keeps twice the temporaries, every one float64
    assert memory_problem(facts(twice, [BATCH, HEADS, TOKENS, CHUNK, DV], "mul", 8 * twice), rule) is None
    # the same matrix of float32 scores, two to an int64 or a float64: half the elements, as many bytes
    packed = memory_problem(facts(MATRIX // 2, [TOKENS, TOKENS // 2], "add", 8 * (MATRIX // 2)), rule)
    assert packed is not None and packed.startswith("your call held at once as many bytes as a whole"), packed


def test_only_the_long_cases_measure_and_their_inputs_stay_below_the_bound():
    cases = [c for c in make_cases(0) if c.hook == HOOK]
    measured_cases = [c for c in cases if c.measure_memory]
    assert [(c.name, c.args["causal"], c.dtypes) for c in measured_cases] == [("long", True, ("float32",))]
    held = [c for c in cases if c.measure_held]  # the kernel's record, read by the grader: one case, alone
    assert [(c.name, c.args["causal"], c.dtypes) for c in held] == [("longest", False, ("float32",))]
    assert memory_rule(held[0], 4) is not None and not held[0].measure_memory  # no meter of the child's beside
    for case in measured_cases:
        rule = memory_rule(case, 4)
        assert tuple(case.args["queries"].shape) == SHAPES[0] and case.args["chunk_size"] == CHUNK
        assert rule is not None and rule.bound == MATRIX
        assert BATCH * HEADS * TOKENS * DV < rule.needed < rule.bound  # the output alone never breaks it
    assert all(not c.measure_memory for c in cases if c not in measured_cases)


# --- the evasions and honest versions, in this process --------------------------------------------------------


@pytest.fixture(scope="module")
def long_case():
    q, k, v = long_inputs()
    gold = reference.chunked_attention(q.double(), k.double(), v.double(), CHUNK, True)
    return q, k, v, gold


@pytest.mark.slow
@pytest.mark.parametrize("evasion", list(EVASIONS), ids=list(EVASIONS))
def test_each_evasion_keeps_the_values_and_breaks_the_rule(evasion, long_case):
    q, k, v, gold = long_case
    meter = _MemoryMeter((q, k, v))
    with meter:
        out = snippet_hook(EVASIONS[evasion])(q, k, v, CHUNK, True)
    torch.testing.assert_close(out.double(), gold, rtol=1e-5, atol=1e-5)  # right values: the memory is the catch
    rule = memory_bound(*SHAPES, CHUNK, causal=True)  # the call is causal: its kept scores are the triangle
    problem = memory_problem(meter.facts(), rule)
    if evasion == "m2":  # and the numpy array made a tensor again
        assert problem.startswith(f"your call used Tensor.numpy, Tensor.__array__, {NOT_ALLOCATED}: "), problem
    elif evasion == "a6":  # a bytearray: what it held is weighed, and what it is named first
        assert meter.peak_elements >= MATRIX, evasion
        assert problem.startswith(f"your call used {NOT_ALLOCATED}: "), problem
    elif evasion == "rt8-a6":
        assert rule.kept <= meter.peak_elements < MATRIX, meter.peak_elements
        assert problem.startswith("your call held at once every score a causal call keeps of one batch-head"), problem
    elif evasion == "rt13a-bool":  # every byte of a bool storage counts: the triangle's float32 bytes, as elements
        assert meter.peak_elements >= 4 * rule.kept, meter.peak_elements
        assert problem.startswith("your call held at once as many elements as a whole"), problem
    elif evasion == "rt12a-packed":  # half the elements of the triangle, as many bytes
        assert meter.peak_elements < rule.kept <= meter.peak_bytes // 4, (meter.peak_elements, meter.peak_bytes)
        assert problem.startswith("your call held at once as many bytes as every score a causal call keeps"), problem
    else:
        assert meter.peak_elements >= MATRIX, evasion
        assert problem.startswith("your call held at once as many elements as a whole"), problem


@pytest.mark.slow
@pytest.mark.parametrize("snippet", [None, *HONEST], ids=["alice", *HONEST])
def test_honest_chunked_versions_stay_well_below_the_bound(snippet, long_case):
    q, k, v, gold = long_case
    hook = snippet_hook(snippet) if snippet else learner_hook_of_alice()
    meter = _MemoryMeter((q, k, v))
    with meter:
        out = hook(q, k, v, CHUNK, True)
    torch.testing.assert_close(out.double(), gold, rtol=1e-5, atol=1e-5)
    assert meter.converted == [] and meter.peak_elements < MATRIX // 2, meter.facts()  # room to spare
    assert memory_problem(meter.facts(), memory_bound(*SHAPES, CHUNK)) is None


def pack_scores_in_int64(q, k, block=16):
    """Every float16 score of ``q @ k.T``, four to an int64 (their bits): (Tq, Tk / 4), a quarter of the elements."""
    shifts = torch.tensor([0, 16, 32, 48])
    packed = torch.zeros(q.shape[0], k.shape[0] // 4, dtype=torch.int64)
    for start in range(0, k.shape[0], block):
        bits = (q @ k[start : start + block].T).view(torch.int16).to(torch.int64) & 0xFFFF  # (Tq, block)
        packed[:, start // 4 : (start + block) // 4] = (bits.view(q.shape[0], -1, 4) << shifts).sum(-1)
    return packed


@pytest.mark.slow
def test_float16_given_computed_in_float64_passes_and_float16_scores_packed_in_int64_fail():
    q, k, v = (t[0, 0].half() for t in long_inputs())  # unbatched: (Tq, d), (Tk, d), (Tk, dv) float16
    rule = memory_bound(tuple(q.shape), tuple(k.shape), tuple(v.shape), CHUNK, itemsize=2)
    assert rule is not None and rule.bound == MATRIX  # room for float64 temporaries under the float16 matrix
    wide_values = ((BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, 24))
    assert memory_bound(*wide_values, CHUNK, itemsize=2) is None  # two batch-heads, dv = 24: over the float16 bytes
    wide = _MemoryMeter((q, k, v))
    with wide:
        out = snippet_hook("chunked_float64_broadcast")(q, k, v, CHUNK, True)
    assert out.dtype == torch.float16 and wide.peak_bytes >= 4 * wide.peak_elements  # float64 temporaries
    gold = reference.chunked_attention(q.double(), k.double(), v.double(), CHUNK, True)
    torch.testing.assert_close(out.double(), gold, rtol=1e-3, atol=1e-3)
    assert memory_problem(wide.facts(), rule, q.element_size()) is None
    packer = _MemoryMeter((q, k, v))
    with packer:
        packed = pack_scores_in_int64(q, k)
    unpacked = (packed.unsqueeze(-1) >> torch.tensor([0, 16, 32, 48])) & 0xFFFF
    unpacked = (unpacked - (unpacked >= 2**15).long() * 2**16).to(torch.int16).view(torch.float16).view(MATRIX)
    assert torch.equal(unpacked, torch.cat([q @ k[s : s + 16].T for s in range(0, TOKENS, 16)], -1).view(MATRIX))
    assert packer.peak_elements < MATRIX // 2  # a quarter of the elements: the element bound alone misses it
    problem = memory_problem(packer.facts(), rule, q.element_size())
    assert problem is not None and problem.startswith("your call held at once as many bytes as a whole"), problem


def learner_hook_of_alice():
    namespace: dict = {}
    exec(compile(learner_code.alice_with(None), "alice", "exec"), namespace)
    return namespace[HOOK]


# --- end to end, in the sandboxed child -------------------------------------------------------------------


@pytest.fixture(scope="module")
def chunked_suite():
    suite = build_suite(5, ("cpu", "meta"))
    return Suite(suite.seed, suite.devices, [b for b in suite.batches if b.hook == HOOK])


def graded(tmp_path, snippet, suite, template):
    hostile = snippet in (*MODES_OFF.values(), *HELD.values())  # lies: the scan flags how they reach the switches
    snippets = learner_code.HOSTILE_SNIPPETS if hostile else learner_code.SNIPPETS
    return learner_code.graded_snippet(tmp_path, snippet, suite, template, LIMITS, snippets)


def failed_cases(results):
    """The cases that did not pass, with their message; not those failed for a backward the trick broke too (an
    evasion of the memory rule that writes into a buffer cannot train: that is the gradient rule's, issue 23)."""
    failed = {(r.case, r.dtype): r.message for r in results if r.status != PASSED}
    return {key: m for key, m in failed.items() if not str(getattr(_said(m), "id", "")).startswith("grad.")}


def _said(message):
    """The message a case's description wraps (``said("case", what=..., message=...)``), or the message itself."""
    inner = getattr(message, "params", {}).get("message")
    return inner if hasattr(inner, "id") else message


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")


@pytest.mark.slow
@linux_only
def test_full_attention_sliced_keeps_the_values_and_fails_the_memory_cases(tmp_path, chunked_suite, template):
    results = graded(tmp_path, "full_attention_sliced", chunked_suite, template)
    failed = failed_cases(results)
    assert set(failed) == {("long", "float32"), ("longest", "float32")}
    message = failed["long", "float32"]
    assert f"your call held at once as many elements as a whole ({TOKENS}, {TOKENS}) matrix" in message, message
    assert f"your tensor ({BATCH}, {HEADS}, {TOKENS}, {TOKENS}), made by " in message
    assert [r for r in results if r.status == FAILED and not r.case.startswith("long")] == []


@pytest.mark.slow
@linux_only
def test_full_attention_one_batch_head_at_a_time_fails_the_memory_cases(tmp_path, chunked_suite, template):
    failed = failed_cases(graded(tmp_path, "full_attention_per_head", chunked_suite, template))
    assert set(failed) == {("long", "float32"), ("longest", "float32")}, failed  # right values everywhere else
    assert f"your tensor ({TOKENS}, {TOKENS}), made by " in failed["long", "float32"]


@pytest.mark.slow
@linux_only
@pytest.mark.parametrize(
    "evasion, phrase",
    [
        ("m1", f"your tensor ({TOKENS}, 1, {TOKENS}), made by "),
        ("m2", "your call used Tensor.numpy, Tensor.__array__, memory torch did not allocate (from_numpy, frombuffer"),
        ("m3", f"though none of its tensors is that large (the largest: ({TOKENS}, {TOKENS // 2}), made by mm)"),
        ("m9", f"your tensor ({TOKENS}, {TOKENS}), made by mm, holds that many alone"),
        ("a4", "your call held at once as many elements as a whole"),
        ("a6", "your call used memory torch did not allocate (from_numpy"),
        ("rt8-a6", "your call held at once every score a causal call keeps of one batch-head, or more: "),
        ("rt12a-packed", "your call held at once as many bytes as every score a causal call keeps of one batch-head"),
        ("rt13a-bool", "your call held at once as many elements as a whole"),
        ("m1'", "bytes at its peak, as many as every score a causal call keeps of one batch-head"),
        ("m1''", "torch's profiler, which records what your call allocates, was switched off or restarted"),
        ("rt8-a4", "torch's profiler, which records what your call allocates, was switched off or restarted"),
        ("rt8-a2-off", "your call used torch.frombuffer: a tensor over memory torch did not allocate"),
        ("rt8-a2", "your call used memory torch did not allocate (from_numpy"),
        ("rt8-a10", "your call used quantized.linear_prepack_fp16.default: the grader measures the memory torch's"),
        ("rt8-a1-before", "your call used memory torch did not allocate (from_numpy"),
        ("rt8-a2-asarray", "your call used memory torch did not allocate (from_numpy"),
        ("rt9-a2", "your call used Tensor.__reduce_ex__: the grader measures the memory torch's tensors hold"),
        ("rt9-a3", "your call used Tensor.apply_, Tensor.apply_ (your code ran inside it): the grader measures"),
        ("rt9-a6", "values differ: max abs diff 3.33 at (0, 0, 0, 10) (got 0, expected 3.326)"),
        ("rt10-a1", "your call used torch.utils.dlpack.to_dlpack: a tensor over memory torch did not allocate"),
        ("rt10-a2", f"your call used {CALLS_BACK}: the grader measures the memory torch's tensors hold"),
        ("premade-off", "the kernel's record of your process (read by the grader, outside it) says your call held "),
        ("rt11-a8", "in new memory, in room made by giving back other pages (the grader's samples while it ran)"),
        ("a8-anon", "in new memory, in room made by giving back other pages (the grader's samples while it ran)"),
        ("rt12a-int16", "2 bytes a score (a 16-bit copy keeps the answers)"),
    ],
    ids=[*EVASIONS, *MODES_OFF, *FOREIGN, *PACKED, *UNALLOCATED, *NESTED, *HELD],
)
def test_each_evasion_of_the_red_team_fails_the_long_cases(tmp_path, chunked_suite, template, evasion, phrase):
    """Each fails the long case by the child's meter and the longest by the kernel's record (read by the grader),
    but for the one only the kernel sees (it passes the long case), the causal triangle (the longest case is not
    causal) and two whose tricks break at its size first."""
    snippet = {**EVASIONS, **MODES_OFF, **FOREIGN, **PACKED, **UNALLOCATED, **NESTED, **HELD}[evasion]
    failed = failed_cases(graded(tmp_path, snippet, chunked_suite, template))
    long, longest = ("long", "float32"), ("longest", "float32")
    causal_only = ("rt8-a6", "rt12a-packed", "rt13a-bool")  # the triangle: the longest case is not causal
    wanted = {longest} if evasion in HELD else {long} if evasion in causal_only else {long, longest}
    assert set(failed) == wanted, failed  # full marks but for memory (the longest case is not causal)
    assert phrase in failed[longest if evasion in HELD else long], failed
    if evasion not in ("rt8-a4", "rt9-a6", *causal_only):  # the forged record needs a profiler; zeros came back
        assert "the kernel's record of your process (read by the grader, outside it)" in failed[longest], failed


@pytest.mark.slow
@linux_only
@pytest.mark.parametrize("snippet", [None, *HONEST], ids=["alice", *HONEST])
def test_honest_chunked_versions_pass_the_long_case_within_the_call_limit(tmp_path, chunked_suite, template, snippet):
    results = graded(tmp_path, snippet, chunked_suite, template)
    assert [f"{r.test_name}: {r.message}" for r in results if r.status != PASSED] == []
    assert [r.case for r in results if r.case.startswith("long")] == ["long", "longest"]  # passed, within the time
    # its time: python benchmarks/long_sequence_cost.py (a benchmark, never a timed assertion)


@pytest.mark.slow  # grades a whole submission in the sandbox: over 5 s on the 2-core machine
@linux_only
def test_the_allocator_record_leaves_nothing_in_what_the_learner_printed(tmp_path, chunked_suite, template):
    """Kineto writes a line to file descriptor 2 as a profiler session starts and stops: none of it is the learner's."""
    from grader.instructor.handin_reading import read_submission
    from grader.instructor.submission_grading import grade_submission

    path = tmp_path / "learner.py"
    path.write_text(learner_code.alice_with(None), encoding="utf-8")
    outcome = grade_submission(read_submission(path), chunked_suite, template, LIMITS)
    assert [r.status for r in outcome.results if r.case == "long"] == [PASSED]
    assert outcome.stats.output == "" and outcome.stats.printed.get(HOOK, "") == "", outcome.stats


@linux_only
def test_grade_help_says_how_long_a_measured_call_may_take():
    from click.testing import CliRunner

    from grader.cli import main
    from grader.rules import MEASURED_CALL_FACTOR

    text = " ".join(CliRunner().invoke(main, ["grade", "--help"]).output.split())
    assert f"measured (chunked_attention's long case) may take {MEASURED_CALL_FACTOR} times as long" in text


@pytest.mark.slow  # a measured call of several call limits: 5-8 s
def test_a_measured_call_may_take_a_multiple_of_the_call_limit(tmp_path, chunked_suite, template, monkeypatch):
    """The meter and the allocator's record slow an honest chunked call 6 to 30 times (red team 8b: three honest
    versions timed out at 10 s): the long case waits MEASURED_CALL_FACTOR times the call limit, the longest (512
    blocks, no meter) LONGEST_CALL_FACTOR times, the others once."""
    from grader import rules
    from grader.instructor import submission_grading
    from grader.instructor.groups.chapter import LONGEST_CALL_FACTOR

    waited: dict[str, float] = {}
    read = submission_grading._read_reply

    def timed(child, trial, call_id, timeout):
        waited[trial.case.name] = timeout
        return read(child, trial, call_id, timeout)

    monkeypatch.setattr(submission_grading, "_read_reply", timed)
    graded(tmp_path, None, chunked_suite, template)
    factor = rules.MEASURED_CALL_FACTOR
    assert factor > 1 and waited.pop("long") == factor * LIMITS.call_seconds
    assert LONGEST_CALL_FACTOR > 1 and waited.pop("longest") == LONGEST_CALL_FACTOR * LIMITS.call_seconds
    assert waited and set(waited.values()) == {LIMITS.call_seconds}, waited


# --- the local check ----------------------------------------------------------------------------------------


def ruled(name):
    return RuledSolution(mistake_solution(by_id(name)) if name else adopt("ref", "reference", [reference]))


def ruled_snippet(snippet):
    return RuledSolution(adopt(snippet, snippet, [types.SimpleNamespace(**{HOOK: snippet_hook(snippet)})]))


@pytest.mark.slow
def test_a_whole_mask_made_once_fails_and_is_named():
    """A (Tq, Tk) bool mask is a (Tq, Tk) tensor, its bytes as many as a 1-byte copy of the scores (red team 13a's
    bool storage held the triangle's float32 bytes): the long case fails, naming it."""
    q, k, v = long_inputs()
    meter = _MemoryMeter((q, k, v))
    with meter:
        out = snippet_hook("full_mask_made_once")(q, k, v, CHUNK, True)
    torch.testing.assert_close(out, reference.chunked_attention(q, k, v, CHUNK, True))
    problem = memory_problem(meter.facts(), memory_bound(*SHAPES, CHUNK, causal=True))
    assert problem is not None and f"your tensor ({TOKENS}, {TOKENS}), made by " in problem, problem


@pytest.mark.slow
def test_the_local_check_holds_a_long_call_to_the_same_rule():
    q, k, v = long_inputs()
    sliced = ruled("full-attention-sliced")
    sliced.chunked_attention(q, k, v, CHUNK, causal=True)  # right values: the problem waits for the test's checks
    assert sliced.pending and sliced.pending[0].startswith("your call held at once as many elements as a whole")
    online = ruled(None)
    online.chunked_attention(q, k, v, CHUNK, causal=True)
    assert online.pending == []


@pytest.mark.slow
@pytest.mark.parametrize("snippet", ["full_attention_per_head", *EVASIONS.values()], ids=["per-head", *EVASIONS])
def test_the_local_check_fails_one_batch_head_at_a_time_however_it_is_held(snippet):
    q, k, v = long_inputs()
    local = ruled_snippet(snippet)
    local.chunked_attention(q, k, v, CHUNK, causal=True)
    assert local.pending and local.pending[0].startswith(("your call held at once", "your call used "))


@pytest.mark.slow
@pytest.mark.parametrize("snippet", HONEST)
def test_the_local_check_passes_honest_chunked_versions(snippet):
    q, k, v = long_inputs()
    local = ruled_snippet(snippet)
    local.chunked_attention(q, k, v, CHUNK, causal=True)
    assert local.pending == []


def test_the_local_check_leaves_small_calls_alone():
    sliced = ruled("full-attention-sliced")
    q = torch.randn(3, 5)
    sliced.chunked_attention(q, torch.randn(4, 5), torch.randn(4, 2), 2)  # no chunked version fits below
    assert sliced.pending == []
