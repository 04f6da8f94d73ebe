"""Half precision on the CPU: float16/bfloat16 cases run there, and their tolerances are calibrated.

The calibration (:func:`grader.instructor.audit.half_precision_errors`, printed by
``benchmarks/half_tolerances.py``) measures the reference's own error on each hook's half cases against the
float64 gold; the tolerance in force must hold that error with the stated safety factor (too tight fails
here), must be what the rule gives (no looser), must let other correct orders of the same arithmetic pass
(a learner's correct code is never failed for rounding), and must leave the half pass sharp: a softmax
without the max subtracted fails a float16 and a bfloat16 case on the CPU, and every catalogued mistake the
float32 pass of a half case kills is killed by each half dtype's pass too.
"""

from __future__ import annotations

import math
import types

import pytest
import torch

from grader.instructor.audit import half_precision_errors
from grader.instructor.cases import HALF, make_cases
from grader.instructor.suite import _gold_args, _prepare, _vjp, build_suite
from grader.instructor.verdict import (
    FAILED,
    HALF_EPS,
    HALF_FLOOR_ULPS,
    HALF_SAFETY,
    HALF_TOLERANCES,
    PASSED,
    judge_in_process,
    tolerance,
    trial_id,
)
from grader.registry import adopt, load_solution
from solutions import reference
from solutions.mistakes import CATALOGUE, by_id, mistake_solution

SEED = 5
HALF_HOOKS = list(dict.fromkeys(c.hook for c in make_cases(0) if c.half))
PAIRS = [(hook, dtype) for hook in HALF_HOOKS for dtype in HALF]
PAIR_IDS = [f"{hook}-{dtype}" for hook, dtype in PAIRS]


@pytest.fixture(scope="module")
def errors():
    return {(row.hook, row.dtype): row for row in half_precision_errors(SEED)}


@pytest.fixture(scope="module")
def cpu_trials():
    return build_suite(SEED, ("cpu",)).trials


@pytest.mark.slow
def test_half_cases_run_on_the_cpu(cpu_trials):
    ran = {(t.hook, t.dtype) for t in cpu_trials if t.device == "cpu" and t.dtype in HALF}
    assert ran == set(PAIRS)
    assert {"softmax_weights", "softmax_with_temperature", "scaled_dot_product_scores"} <= set(HALF_HOOKS)


@pytest.mark.slow
@pytest.mark.parametrize(("hook", "dtype"), PAIRS, ids=PAIR_IDS)
def test_the_reference_passes_its_half_cases_with_the_safety_margin(errors, hook, dtype):
    row = errors[(hook, dtype)]
    assert row.trials > 0 and row.failed == []
    assert HALF_SAFETY * row.needed <= row.in_force, (row.needed, row.in_force)


@pytest.mark.parametrize(("hook", "dtype"), PAIRS, ids=PAIR_IDS)
def test_the_tolerance_in_force_is_the_calibration_rule(errors, hook, dtype):
    """Never looser than the rule gives from the measurement: the floor, or the override the benchmark prints."""
    row = errors[(hook, dtype)]
    assert row.in_force >= HALF_FLOOR_ULPS * HALF_EPS[dtype]
    if (hook, dtype) in HALF_TOLERANCES:
        assert row.calibrated <= row.in_force <= 1.01 * row.calibrated
    else:
        assert row.in_force == pytest.approx(row.calibrated, rel=1e-12)


@pytest.mark.slow
def test_the_measurement_sees_an_error():
    """Not vacuous: on real arithmetic (the softmax in bfloat16) the measured error is above zero."""
    row = next(r for r in half_precision_errors(SEED) if (r.hook, r.dtype) == ("softmax_weights", "bfloat16"))
    assert row.needed > 0 and row.max_abs > 0


@pytest.mark.parametrize(
    "mistake",
    ["softmax-without-max", "temperature-without-max"],
    ids=["softmax_weights", "softmax_with_temperature"],
)
@pytest.mark.parametrize("dtype", HALF)
def test_a_softmax_without_the_max_fails_a_half_case_on_the_cpu(cpu_trials, mistake, dtype):
    entry = by_id(mistake)
    trials = [t for t in cpu_trials if t.hook == entry.exercise and t.dtype == dtype]
    solution = mistake_solution(entry)
    failed = {t.case.name: v.message for t in trials if (v := judge_in_process(solution, t)).status == FAILED}
    assert "logits-20-to-100" in failed, failed
    assert "NaN" in failed["logits-20-to-100"]
    assert all(judge_in_process(load_solution("reference"), t).status == PASSED for t in trials)


@pytest.mark.slow
def test_every_mistake_the_float32_pass_kills_each_half_pass_kills_too(cpu_trials):
    """The half tolerances keep the suite sharp: a mistake caught on a half case in float32 is caught in half."""
    half_cases = {(t.hook, t.case.name) for t in cpu_trials if t.dtype in HALF}
    escaped = []
    for mistake in CATALOGUE:
        mine = [t for t in cpu_trials if t.hook in mistake.overrides and (t.hook, t.case.name) in half_cases]
        if not mine:
            continue
        solution = mistake_solution(mistake)
        killed = {t.dtype for t in mine if judge_in_process(solution, t).status == FAILED}
        if "float32" in killed:
            escaped += [f"{mistake.id}: {dtype}" for dtype in HALF if dtype not in killed]
    assert escaped == []


# --- other correct orders of the same arithmetic -----------------------------------------------------------


def _softmax(scores, dim):
    peak = torch.nan_to_num(scores.amax(dim=dim, keepdim=True), neginf=0.0)
    e = torch.exp(scores - peak)
    return e * (1 / e.sum(dim=dim, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny))


OTHER_ORDERS = types.SimpleNamespace(
    # the queries scaled before the product, by d ** -0.25 on both sides
    scaled_dot_product_scores=lambda queries, keys: (
        (queries * keys.shape[-1] ** -0.25) @ (keys * keys.shape[-1] ** -0.25).transpose(-2, -1)
    ),
    dot_product_scores=lambda queries, keys: (queries.unsqueeze(-2) * keys.unsqueeze(-3)).sum(-1),
    softmax_weights=_softmax,  # times the reciprocal of the sum
    # divided first, the max of the scaled scores subtracted: the way most learners write it
    softmax_with_temperature=lambda scores, temperature, dim=-1: _softmax(scores / temperature, dim),
    context_vectors=lambda weights, values: (weights.unsqueeze(-1) * values.unsqueeze(-3)).sum(-2),
)


@pytest.mark.parametrize("hook", sorted(vars(OTHER_ORDERS)))
def test_other_correct_orders_pass_every_half_case(cpu_trials, hook):
    solution = adopt("other-orders", "correct, in another order", [OTHER_ORDERS, reference])
    mine = [t for t in cpu_trials if t.hook == hook and t.dtype in HALF]
    assert mine
    failed = [f"{trial_id(t)}: {v.message}" for t in mine if (v := judge_in_process(solution, t)).status != PASSED]
    assert failed == []


def test_other_orders_are_other_arithmetic():
    """Not the reference under another name: in float16 the results differ from the reference's in the last bits."""
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 7, 9, generator=gen).half() for _ in range(2))
    mine = OTHER_ORDERS.scaled_dot_product_scores(q, k)
    theirs = reference.scaled_dot_product_scores(q, k)
    assert not torch.equal(mine, theirs)
    assert torch.allclose(mine.double(), theirs.double(), atol=8 * HALF_EPS["float16"] * math.sqrt(9))


def test_a_tolerance_is_looked_up_per_hook_and_dtype(monkeypatch):
    monkeypatch.setitem(HALF_TOLERANCES, ("softmax_weights", "float16"), (0.5, 0.25))
    assert tolerance("softmax_weights", "float16") == (0.5, 0.25)
    assert tolerance("context_vectors", "float16") == (HALF_FLOOR_ULPS * HALF_EPS["float16"],) * 2
    assert tolerance("context_vectors", "float32") == (1e-5, 1e-5)


# --- other correct orders in float32, over many draws --------------------------------------------------------

ORDER_SEEDS = range(40)


@pytest.mark.slow
@pytest.mark.parametrize("hook", sorted(vars(OTHER_ORDERS)))
def test_other_correct_orders_pass_every_float32_case_values_and_gradients_whatever_the_draw(hook):
    """A draw must never fail a correct answer for its order of arithmetic: at temperature 1e-4 a near tie made
    the chapter's ``softmax(scores / T)`` (dividing first) miss the reference's float32 gradient by 1e-4 in one draw
    of six.  Each case goes through the suite's own preparation (its gold, cotangent and gradient tolerance)."""
    other = adopt("other-orders", "correct, in another order", [OTHER_ORDERS, reference])
    gold_solution = load_solution("reference")
    rtol, atol = tolerance(hook, "float32")
    failed = []
    for seed in ORDER_SEEDS:
        for ci, case in enumerate(make_cases(seed)):
            if case.hook != hook or case.expect_error or case.module is not None or "float32" not in case.dtypes:
                continue
            _, tensors, golds, inputs, (grads, grad_atol) = _prepare(gold_solution, case, ci, "float32", seed)
            cast = {n: v.float() if v.is_floating_point() else v for n, v in inputs.items()}
            mine = other.call(hook, **_gold_args(case, cast)).double()
            if not torch.allclose(mine, golds[0].double(), rtol=rtol, atol=atol, equal_nan=True):
                failed.append(f"seed {seed} {case.name}: values")
            if grads:
                cotangent = tensors[f"c{ci}.float32.cotangent"].double()
                theirs = _vjp(other, case, "float32", inputs, cotangent, "float32") or {}
                grad_tol = max(atol, grad_atol or 0.0)
                for key, gold in grads.items():
                    if not torch.allclose(theirs[key], gold, rtol=rtol, atol=grad_tol, equal_nan=True):
                        failed.append(f"seed {seed} {case.name}: {key}")
    assert failed == []
