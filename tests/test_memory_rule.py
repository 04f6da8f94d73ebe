"""The memory rule of chunked_attention: measured in the learner's process, judged on the trusted side.

* the child runtime's mode records the largest tensor any op creates (views and in-place results hold no
  new memory; a view of the largest renames its shape), only for calls that ask (``measure_memory``);
* the reply's ``memory`` field is declared and checked like every other field;
* :func:`grader.rules.memory_bound` applies only where a chunked version stays below the bound, inputs
  and output included;
* end to end, in the sandboxed child: full attention sliced after the fact keeps every value case and
  fails the long case naming its largest tensor; Alice's online softmax passes every case, on the CPU,
  within the grader's own call time limit (a slower call times out and fails);
* ``attnkit check``'s rules hold a local run to the same rule.
"""

from __future__ import annotations

import sys
import types

import learner_code
import pytest
import torch

from grader.child.call import _largest_tensor_mode, call_hook
from grader.instructor.cases import LONG, make_cases, memory_rule
from grader.instructor.intake import read_submission
from grader.instructor.replies import CallReply, MalformedReply, decode
from grader.instructor.sandbox import Limits, Template
from grader.instructor.submission_grading import grade_submission
from grader.instructor.suite import Suite, build_suite
from grader.instructor.verdict import FAILED, PASSED
from grader.registry import adopt
from grader.rules import RuledSolution, memory_bound, memory_problem
from solutions import reference
from solutions.mistakes import by_id, mistake_solution

HOOK = "chunked_attention"
LIMITS = Limits()  # the grader's own limits: the long cases must fit the default call time
BATCH, HEADS, TOKENS, D, DV, CHUNK = LONG


def largest(fn, *args):
    mode = _largest_tensor_mode()
    with mode:
        fn(*args)
    return tuple(mode.shape), mode.op


def long_inputs(tokens=256):
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(BATCH, HEADS, tokens, D, generator=gen) for _ in range(2))
    return q, k, torch.randn(BATCH, HEADS, tokens, DV, generator=gen)


# --- the measuring mode --------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_the_mode_sees_the_full_scores_and_the_blocks(causal):
    q, k, v = long_inputs()
    full = by_id("full-attention-sliced").overrides[HOOK]
    assert largest(full, q, k, v, CHUNK, causal)[0] == (BATCH, HEADS, 256, 256)  # the shape matmul returns
    shape, op = largest(reference.chunked_attention, q, k, v, CHUNK, causal)
    assert shape == (BATCH, HEADS, 256, CHUNK) and op


def test_views_and_in_place_results_hold_no_new_memory():
    x = torch.randn(4, 8)
    assert largest(lambda t: t.expand(100, 4, 8).transpose(0, 1), x) == ((), "")  # views only: nothing created
    assert largest(lambda t: t.clone().mul_(2).add_(1), x) == ((4, 8), "clone")  # in place: the clone, still
    assert largest(lambda t: (t @ t.T).view(2, 8), x)[0] == (4, 4)  # a view of the learner's own: no new name
    assert largest(lambda t: t.expand(3, 4, 8) @ t.T, x)[0] == (3, 4, 4)  # matmul's (12, 4) result, as returned


def test_only_calls_that_ask_are_measured():
    q, k, v = long_inputs(16)
    tensors = {"q": q, "k": k, "v": v}
    args = {"queries": {"tensor": "q"}, "keys": {"tensor": "k"}, "values": {"tensor": "v"},
            "chunk_size": {"value": 4}, "causal": {"value": False}}  # fmt: skip
    call = {"id": 0, "hook": HOOK, "args": args, "banned": []}
    plain, _ = call_hook({HOOK: reference.chunked_attention}, call, tensors)
    assert plain["ok"] and "memory" not in plain
    measured, _ = call_hook({HOOK: reference.chunked_attention}, dict(call, measure_memory=True), tensors)
    assert measured["memory"]["largest"] == [BATCH, HEADS, 16, DV]  # the running mix of values: wider than a block
    meta, _ = call_hook({HOOK: reference.chunked_attention}, dict(call, measure_memory=True, device="meta"), tensors)
    assert meta["ok"] and "memory" not in meta  # nothing is allocated on the meta device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here: the peak of GPU memory is not read")
def test_on_cuda_the_peak_memory_is_reported_too():
    q, k, v = (t.cuda() for t in long_inputs(TOKENS))
    tensors = {"q": q, "k": k, "v": v}
    args = {"queries": {"tensor": "q"}, "keys": {"tensor": "k"}, "values": {"tensor": "v"},
            "chunk_size": {"value": CHUNK}, "causal": {"value": True}}  # fmt: skip
    call = {"id": 0, "hook": HOOK, "args": args, "banned": [], "measure_memory": True, "device": "cuda"}
    full_bytes = BATCH * HEADS * TOKENS * TOKENS * 4
    chunked, _ = call_hook({HOOK: reference.chunked_attention}, call, tensors)
    sliced, _ = call_hook({HOOK: by_id("full-attention-sliced").overrides[HOOK]}, call, tensors)
    assert 0 < chunked["memory"]["cuda_peak_bytes"] < full_bytes <= sliced["memory"]["cuda_peak_bytes"]


# --- the reply's field -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "memory, problem",
    [
        ({"largest": [2, -4]}, "reply.memory.largest[1]"),
        ({"largest": [1] * 17}, "length <= 16"),
        ({"largest": [2.5]}, "expected `int`, got `float`"),
        ({"largest": [True]}, "expected `int`, got `bool`"),
        ({"largest": [2**60]}, "reply.memory.largest[0]: expected `int` <="),
        ({"cuda_peak_bytes": -1}, "reply.memory.cuda_peak_bytes"),
        ({"cuda_peak_bytes": float("nan")}, "reply.memory.cuda_peak_bytes"),
        ({"op": ["bmm"]}, "reply.memory.op: expected `str`"),
    ],
    ids=["negative", "too-many-dims", "fraction", "bool", "huge", "negative-bytes", "nan-bytes", "op-not-text"],
)
def test_the_reply_schema_refuses_a_forged_memory_record(memory, problem):
    with pytest.raises(MalformedReply, match=problem.replace("[", r"\[").replace("]", r"\]")):
        decode({"id": 0, "memory": memory}, CallReply, "reply")


def test_the_reply_schema_keeps_a_well_formed_memory_record():
    memory = {"largest": [2, 4, 1024, 64], "op": "x" * 100, "cuda_peak_bytes": None, "extra": 1}
    kept = decode({"id": 0, "memory": memory}, CallReply, "reply")["memory"]
    assert kept["largest"] == [2, 4, 1024, 64] and len(kept["op"]) == 100 and "extra" not in kept


# --- the bound ---------------------------------------------------------------------------------------------


def test_the_bound_of_the_long_case_and_its_message():
    rule = memory_bound((BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, DV), CHUNK)
    assert rule == (BATCH * HEADS * TOKENS * TOKENS, TOKENS * TOKENS, (BATCH, HEADS, TOKENS, CHUNK), (TOKENS, TOKENS))
    message = memory_problem([BATCH, HEADS, TOKENS, TOKENS], "bmm", rule)
    assert message.startswith(f"your largest tensor: ({BATCH}, {HEADS}, {TOKENS}, {TOKENS}), made by bmm; a chunked "
                              f"version needs at most ({BATCH}, {HEADS}, {TOKENS}, {CHUNK})")  # fmt: skip
    issue = memory_bound((2, 4, 1024, 32), (2, 4, 1024, 32), (2, 4, 1024, 32), 64)
    assert memory_problem([2, 4, 1024, 1024], "", issue).startswith(
        "your largest tensor: (2, 4, 1024, 1024); a chunked version needs at most (2, 4, 1024, 64)"
    )  # the issue's example, worded as the issue words it
    assert memory_problem([BATCH * HEADS, TOKENS, TOKENS - 1], "bmm", rule) is None  # just below the bound
    assert memory_problem([BATCH * HEADS, TOKENS, TOKENS], "", rule) is not None  # the bound itself fails


def test_one_batch_heads_scores_break_the_rule_whatever_the_batch():
    rule = memory_bound((BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, D), (BATCH, HEADS, TOKENS, DV), CHUNK)
    small = [BATCH, HEADS, TOKENS, DV]  # the largest by elements: the running sums, well below the whole scores
    message = memory_problem(small, "mul", rule, [TOKENS, TOKENS], "mm")
    assert message.startswith(f"your tensor ({TOKENS}, {TOKENS}), made by mm, holds a whole ({TOKENS}, {TOKENS}) ")
    assert f"needs at most ({BATCH}, {HEADS}, {TOKENS}, {CHUNK})" in message
    assert memory_problem(small, "mul", rule, [TOKENS * TOKENS], "mm") is not None  # flattened: the same matrix
    # the rule reads dims: one head's scores split over a batch dim look like the blocks of many heads
    assert memory_problem(small, "mul", rule, [2, TOKENS, TOKENS // 2], "bmm") is None
    assert memory_problem(small, "mul", rule, [TOKENS, TOKENS - 1], "mm") is None  # one key short of a whole matrix
    assert memory_problem(small, "mul", rule, [BATCH, HEADS, TOKENS, CHUNK], "bmm") is None  # the blocks
    assert memory_problem(small, "mul", rule, None, "") is None


@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 5, 4), (2, 4, 4), (2, 4, 2), 2),
        ((2, 8, 4), (2, 8, 4), (2, 8, 3), 8),
        ((2, 8, 16), (2, 64, 16), (2, 64, 4), 4),
    ],
    ids=["d-as-wide-as-Tk", "one-block", "keys-as-large-as-the-scores"],
)
def test_the_rule_stands_aside_where_a_chunked_version_cannot_stay_below(shapes):
    assert memory_bound(*shapes) is None


@pytest.mark.parametrize(
    "shapes, whole, matrix",
    [
        (((1, 16, 8), (1, 64, 8), (1, 64, 4), 4), False, True),  # one batch-head: the whole scores are its own
        (((64, 16), (64, 16), (64, 8), 4), False, True),  # no batch: the whole scores are one batch-head's
        (((4, 8, 2), (4, 8, 2), (4, 8, 2), 2), True, True),  # wherever the whole scores tell, one head's do too
    ],
    ids=["one-batch-head", "unbatched", "both"],
)
def test_each_bound_applies_where_a_chunked_version_stays_below_it(shapes, whole, matrix):
    rule = memory_bound(*shapes)
    assert rule is not None and (rule.bound is not None, rule.matrix is not None) == (whole, matrix)


def test_only_the_long_cases_measure_and_their_inputs_stay_below_the_bound():
    cases = [c for c in make_cases(0) if c.hook == HOOK]
    measured = [c for c in cases if c.measure_memory]
    assert [(c.name, c.args["causal"], c.dtypes) for c in measured] == [("long", True, ("float32",))]
    for case in measured:
        rule = memory_rule(case)
        sizes = [case.args[n].numel() for n in ("queries", "keys", "values")] + [BATCH * HEADS * TOKENS * DV]
        assert max(sizes) < rule.bound, case.name  # the inputs and the output are never the tensor to blame
        assert max(TOKENS * D, TOKENS * DV, TOKENS * CHUNK) < rule.matrix, case.name  # nor one head of them
        assert case.args["queries"].shape[-2:] == (TOKENS, D) and case.args["keys"].shape[-2] == TOKENS
    assert all(not c.measure_memory for c in cases if c not in measured)


# --- end to end, in the sandboxed child -------------------------------------------------------------------


@pytest.fixture(scope="module")
def chunked_suite():
    suite = build_suite(5, ("cpu", "meta"))
    return Suite(suite.seed, suite.devices, [b for b in suite.batches if b.hook == HOOK])


@pytest.fixture(scope="module")
def template():
    tpl = Template()
    try:
        yield tpl
    finally:
        tpl.close()


def graded(tmp_path, snippet, suite, template):
    path = tmp_path / "learner.py"
    path.write_text(learner_code.alice_with(snippet), encoding="utf-8")
    submission = read_submission(path)
    assert submission.error is None, submission.error
    return grade_submission(submission, suite, template, LIMITS).results


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")
def test_full_attention_sliced_keeps_the_values_and_fails_the_memory_cases(tmp_path, chunked_suite, template):
    results = graded(tmp_path, "full_attention_sliced", chunked_suite, template)
    failed = {(r.case, r.dtype): r.message for r in results if r.status != PASSED}
    assert set(failed) == {("long", "float32")}
    for message in failed.values():
        assert f"your largest tensor: ({BATCH}, {HEADS}, {TOKENS}, {TOKENS}), made by " in message, message
        assert f"a chunked version needs at most ({BATCH}, {HEADS}, {TOKENS}, {CHUNK})" in message
    assert [r for r in results if r.status == FAILED and not r.case.startswith("long")] == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")
def test_an_online_softmax_passes_the_long_cases_within_the_call_limit(tmp_path, chunked_suite, template):
    results = graded(tmp_path, None, chunked_suite, template)
    assert [f"{r.test_name}: {r.message}" for r in results if r.status != PASSED] == []
    assert [r.case for r in results if r.case.startswith("long")] == ["long"]  # passed: inside the call's time limit
    # its time: python benchmarks/long_sequence_cost.py (a benchmark, never a timed assertion)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")
def test_full_attention_one_batch_head_at_a_time_fails_the_memory_cases(tmp_path, chunked_suite, template):
    results = graded(tmp_path, "full_attention_per_head", chunked_suite, template)
    failed = {(r.case, r.dtype): r.message for r in results if r.status != PASSED}
    assert set(failed) == {("long", "float32")}, failed  # right values everywhere else
    assert f"your tensor ({TOKENS}, {TOKENS}), made by mm, holds a whole " in failed["long", "float32"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")
def test_an_online_softmax_looping_over_the_heads_passes(tmp_path, chunked_suite, template):
    results = graded(tmp_path, "chunked_per_head", chunked_suite, template)
    assert [f"{r.test_name}: {r.message}" for r in results if r.status != PASSED] == []


def test_the_mode_sees_one_heads_matrix_and_the_blocks():
    q, k, v = long_inputs()
    for snippet, matrix in (("full_attention_per_head", (256, 256)), ("chunked_per_head", (256, CHUNK))):
        namespace: dict = {}
        exec(compile((learner_code.SNIPPETS / f"{snippet}.py").read_text(), snippet, "exec"), namespace)
        mode = _largest_tensor_mode()
        with mode:
            namespace[HOOK](q, k, v, CHUNK, True)
        mode.settle()
        assert tuple(mode.matrix) == matrix, snippet
    mode = _largest_tensor_mode()
    with mode:
        reference.chunked_attention(q, k, v, CHUNK, True)
    mode.settle()
    assert tuple(mode.matrix) == (BATCH, HEADS, 256, CHUNK)  # matmul's (B*H, T, c), named as the learner sees it
    mode = _largest_tensor_mode()
    with mode:
        torch.ones(256, 256, dtype=torch.bool).triu(1)  # a mask is no score matrix
        q @ k[0, 0, :CHUNK].T  # (B, H, T, d) @ (d, c): one (B*H*T, c) product, handed back as (B, H, T, c)
    mode.settle()
    assert tuple(mode.matrix) == (BATCH, HEADS, 256, CHUNK)


# --- the local check ----------------------------------------------------------------------------------------


def ruled(name):
    return RuledSolution(mistake_solution(by_id(name)) if name else adopt("ref", "reference", [reference]))


def test_the_local_check_holds_a_long_call_to_the_same_rule():
    q, k, v = long_inputs()
    sliced = ruled("full-attention-sliced")
    sliced.chunked_attention(q, k, v, 32, causal=True)  # right values: the problem waits for the test's checks
    assert sliced.pending and sliced.pending[0].startswith(f"your largest tensor: ({BATCH}, {HEADS}, 256, 256)")
    online = ruled(None)
    online.chunked_attention(q, k, v, 32, causal=True)
    assert online.pending == []


def test_the_local_check_holds_one_batch_head_at_a_time_to_the_rule_too():
    q, k, v = long_inputs()
    namespace: dict = {}
    exec((learner_code.SNIPPETS / "full_attention_per_head.py").read_text(), namespace)
    local = RuledSolution(adopt("per-head", "per-head", [types.SimpleNamespace(**{HOOK: namespace[HOOK]})]))
    local.chunked_attention(q, k, v, 32, causal=True)
    assert local.pending and local.pending[0].startswith("your tensor (256, 256), made by mm, holds a whole")


def test_the_local_check_leaves_small_calls_alone():
    sliced = ruled("full-attention-sliced")
    q = torch.randn(3, 5)
    sliced.chunked_attention(q, torch.randn(4, 5), torch.randn(4, 2), 2)  # d > Tq: no chunked version fits below
    assert sliced.pending == []
