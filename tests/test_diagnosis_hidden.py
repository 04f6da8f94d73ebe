"""Issue 25: a mistake hidden behind another is named with it, and the main mistake comes first.

* An inverted causal mask returned as ``(1, T, T)`` fails for its shape; the shape and the inversion are both named.
* A mask returned as a NumPy array fails for its type, and the reply carries no values: the type is named, and a
  wrong triangle the learner's own lines build (read with ast) with it; right values get the type alone.
* A temperature softmax with one sum over every element and no max subtraction: the sum over every element (it
  fails every value case) is named before the missing max (only the cases that overflow).

The "submissions" are trusted code judged in this process, as the grader judges a child's reply.
"""

from __future__ import annotations

import ast
import types

import numpy as np
import pytest
import torch

from grader.instructor.diagnosis import diagnose_hook, main_first
from grader.instructor.fingerprints import Fingerprints
from grader.instructor.learner_source import LearnerSource, numpy_triangle
from grader.instructor.observations import HookRow, observe
from grader.instructor.verdict import judge_in_process
from grader.registry import adopt
from solutions import mistake_model as mm
from solutions import reference
from solutions.mistakes import by_id

# each builds the suite and the fingerprints of the catalogue (about a minute): the full tier's
pytestmark = pytest.mark.slow

MASK, TEMPERATURE = "causal_mask", "softmax_with_temperature"


@pytest.fixture(scope="module")
def trials():
    from grader.instructor.suite import build_suite

    every = build_suite(3, ("cpu", "meta")).trials  # float32 temperatures: quick
    return [t for t in every if t.hook == MASK or (t.hook == TEMPERATURE and t.dtype == "float32")]


@pytest.fixture(scope="module")
def fingerprints(trials):
    """Every candidate's outcome on every mask trial, computed here once (a test's call stays quick)."""
    prints = Fingerprints()
    for trial in (t for t in trials if t.hook == MASK):
        for cand in prints.programs(trial.hook):
            prints.program_seen(cand, trial)
    return prints


def _rows(trials, functions: dict, hook: str) -> list[HookRow]:
    learner = adopt("hid", "hid", [types.SimpleNamespace(**functions), reference])
    rows = []
    for trial in (t for t in trials if t.hook == hook):
        verdict = judge_in_process(learner, trial)
        rows.append(HookRow(trial, observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)))
    return rows


def _named(rows, fingerprints, source=None) -> set[str]:
    found = diagnose_hook(rows[0].trial.hook, rows, fingerprints, source)
    return set().union(*found.values()) if found else set()


# --- a (1, T, T) mask --------------------------------------------------------------------------------------------


def _knobbed(*names: str):
    setting = frozenset(k for k in mm.knobs_for(MASK) if k.name in names)
    assert len(setting) == len(names)
    return mm.model_function(MASK, setting)


@pytest.mark.parametrize(
    ("knobs", "ids"),
    [
        (("mask_shape=tril_0", "mask_rank=batched"), {"causal-mask-extra-dim", "tril-instead-of-triu"}),
        (("mask_shape=triu_0", "mask_rank=batched"), {"causal-mask-extra-dim", "triu-diagonal-0"}),
        (("mask_rank=batched",), {"causal-mask-extra-dim"}),
        ((), set()),
    ],
    ids=["inverted", "diagonal-0", "right-values", "right"],
)
def test_a_mask_with_a_leading_dim_is_named_for_the_shape_and_for_what_its_values_show(
    trials, fingerprints, knobs, ids
):
    rows = _rows(trials, {MASK: _knobbed(*knobs)}, MASK)
    if knobs:
        assert all(str(r.seen.message).startswith("returned shape (1, ") for r in rows if r.seen.kind == "values")
    assert _named(rows, fingerprints) == ids


# --- a NumPy mask ------------------------------------------------------------------------------------------------

NUMPY_MASKS = {
    "right": ("np.triu(np.ones((num_tokens, num_tokens)), k=1).astype(bool)", {"causal-mask-numpy"}),
    "diagonal-0": ("np.triu(np.ones((num_tokens, num_tokens))).astype(bool)", {"causal-mask-numpy", "triu-diagonal-0"}),
    "inverted": ("np.tril(np.ones((num_tokens, num_tokens)), 0).astype(bool)",
                 {"causal-mask-numpy", "tril-instead-of-triu"}),
    "right-by-negation": ("~np.tril(np.ones((num_tokens, num_tokens))).astype(bool)", {"causal-mask-numpy"}),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(NUMPY_MASKS))
def test_a_numpy_mask_is_named_for_its_type_and_for_the_triangle_its_lines_build(trials, fingerprints, kind):
    expression, ids = NUMPY_MASKS[kind]
    text = (
        "import numpy as np\n\n\ndef causal_mask(num_tokens, device=None):\n    if num_tokens < 1:\n"
        f"        raise ValueError('num_tokens')\n    mask = {expression}\n    return mask\n"
    )
    space: dict = {"np": np}
    exec(compile(text, "learner.py", "exec"), space)  # trusted text of this test, judged in process
    rows = _rows(trials, {MASK: space["causal_mask"]}, MASK)
    assert any(str(r.seen.message).startswith("returned numpy.ndarray") for r in rows)
    source = LearnerSource({"m.py": text}, {MASK: "m.py:4"})
    assert _named(rows, fingerprints, source) == ids
    assert _named(rows, fingerprints, LearnerSource({})) == set(), "no text: nothing to read the values off"


def test_a_numpy_mask_the_text_does_not_show_is_named_after_nothing(trials, fingerprints):
    def causal_mask(num_tokens, device=None):
        return np.triu(np.ones((num_tokens, num_tokens)), k=1).astype(bool)

    text = "def causal_mask(num_tokens, device=None):\n    return make(num_tokens)\n"  # no NumPy in its lines
    rows = _rows(trials, {MASK: causal_mask}, MASK)
    assert _named(rows, fingerprints, LearnerSource({"m.py": text}, {MASK: "m.py:1"})) == set()


@pytest.mark.parametrize(
    ("code", "triangle"),
    [
        ("np.triu(np.ones((n, n)), k=1)", ("triu", 1)),
        ("np.triu(np.ones((n, n)))", ("triu", 0)),
        ("numpy.tril(numpy.ones((n, n)), -1)", ("tril", -1)),
        ("np.triu(np.ones((n, n)), 1) == 0", None),
        ("1 - np.tril(np.ones((n, n)))", None),
        ("np.logical_not(np.tril(np.ones((n, n))))", None),
        ("np.triu(np.ones((n, n)), k=1).T", None),
        ("np.triu(np.ones((n, n)), k=n)", None),
        ("torch.triu(torch.ones(n, n), 1).numpy()", None),
        ("np.triu(np.full((n, n), -np.inf), 1)", None),
    ],
)
def test_numpy_triangle_reads_only_a_plain_triangle_of_ones(code, triangle):
    fn = ast.parse(f"def f(n):\n    if n < 1:\n        raise ValueError(n)\n    return {code}\n").body[0]
    assert numpy_triangle(fn) == triangle


# --- the main mistake first --------------------------------------------------------------------------------------


def _one_sum(scores, temperature, dim=-1):
    e = torch.exp(scores / temperature)
    return e / e.sum()


def test_the_mistake_that_fails_the_most_cases_is_named_first(trials, fingerprints):
    rows = _rows(trials, {TEMPERATURE: _one_sum}, TEMPERATURE)
    ordered = main_first(TEMPERATURE, rows, diagnose_hook(TEMPERATURE, rows, fingerprints), fingerprints)
    values = {ids for i, ids in ordered.items() if rows[i].seen.kind == "values"}
    assert values == {("temperature-over-every-element", "temperature-without-max")}
    assert {ids for i, ids in ordered.items() if rows[i].seen.kind == "contract"} == {("temperature-unchecked",)}


def test_main_first_orders_by_the_cases_each_program_fails_not_by_name(trials, fingerprints):
    rows = _rows(trials, {TEMPERATURE: _one_sum}, TEMPERATURE)
    failing = [i for i, r in enumerate(rows) if r.seen.kind == "values"]
    named = {i: frozenset({"temperature-unchecked", "temperature-without-max"}) for i in failing}
    ordered = main_first(TEMPERATURE, rows, named, fingerprints)  # unchecked's program fails no value case
    assert set(ordered.values()) == {("temperature-without-max", "temperature-unchecked")}


@pytest.mark.parametrize("mistake", ["causal-mask-extra-dim", "causal-mask-numpy"])
def test_the_new_hints_ask_in_english_and_chinese(mistake):
    entry = by_id(mistake)
    assert entry.hint.rstrip().endswith("?") or "?" in entry.hint
    assert "？" in entry.hint_zh
