"""Issue 25 (hidden): heads merged back without ``.contiguous()``.

* ``x.transpose(1, 2).view(b, T, H*hd)``: view raises on the transposed tensor (``merge-view-after-transpose``);
* ``x.permute(0, 2, 1, 3).reshape(...)`` (or ``transpose``, ``flatten``): the right values, but on a non-contiguous
  input the result is a non-contiguous view (``merge-not-contiguous``).

Each is named only where the learner's own ``merge_heads`` reorders dimensions (and, for the first, calls
``.view``); a right merge, or another wrong one, gets neither.  The "submissions" are trusted code of this test,
judged in this process as the grader judges a child's reply.
"""

from __future__ import annotations

import ast
import types

import pytest
import torch

from grader.instructor import learner_source as src
from grader.instructor.text_rules import code_rule
from solutions.mistakes import by_id, merge_not_contiguous, merge_view_after_transpose
from solutions.reference import merge_heads as reference_merge

HOOK = "merge_heads"
IDS = ("merge-view-after-transpose", "merge-not-contiguous")

# --- the learners' merges, as text (each defines merge_heads) --------------------------------------------------

MERGES = {
    "view-one-line": ("return x.transpose(1, 2).view(b, T, H * hd)", {"merge-view-after-transpose"}),
    "view-two-lines": ("x = x.transpose(1, 2)\n    return x.view(b, T, -1)", {"merge-view-after-transpose"}),
    "permute-reshape": ("return x.permute(0, 2, 1, 3).reshape(b, T, H * hd)", {"merge-not-contiguous"}),
    "transpose-flatten": ("return x.transpose(1, 2).flatten(2)", {"merge-not-contiguous"}),
    "contiguous-view": ("return x.transpose(1, 2).contiguous().view(b, T, H * hd)", set()),
    "contiguous-reshape": ("return x.permute(0, 2, 1, 3).contiguous().reshape(b, T, H * hd)", set()),
    "cat-of-heads": ("return torch.cat([x[:, h] for h in range(H)], dim=-1)", set()),
    "einsum-contiguous": ("return torch.einsum('bhtd->bthd', x).contiguous().view(b, T, H * hd)", set()),
    "no-transpose-view": ("return x.view(b, T, H * hd)", {"merge-without-transpose"}),
    "wrong-dims-view": ("return x.transpose(2, 3).view(b, T, H * hd)", set()),
    "wrong-dims-reshape": ("return x.transpose(2, 3).reshape(b, T, H * hd)", set()),
}


def _text(body: str) -> str:
    return f"import torch\n\n\ndef merge_heads(x):\n    b, H, T, hd = x.shape\n    {body}\n"


def _code(body: str) -> ast.AST:
    return ast.parse(_text(body)).body[-1]


# --- fast: the programs, the code rules, the hints ---------------------------------------------------------------


def test_the_view_program_raises_on_a_contiguous_input_and_keeps_a_view_of_a_transposed_one():
    x = torch.randn(2, 3, 5, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        merge_view_after_transpose(x)
    y = torch.randn(2, 3, 4, 5).transpose(-2, -1)  # the hidden suite's non-contiguous input
    got = merge_view_after_transpose(y)
    assert torch.equal(got, reference_merge(y)) and not got.is_contiguous()


def test_the_reshape_program_has_the_right_values_and_is_not_contiguous_on_a_transposed_input():
    x = torch.randn(2, 3, 5, 4)
    assert torch.equal(merge_not_contiguous(x), reference_merge(x)) and merge_not_contiguous(x).is_contiguous()
    y = torch.randn(2, 3, 4, 5).transpose(-2, -1)
    got = merge_not_contiguous(y)
    assert torch.equal(got, reference_merge(y)) and not got.is_contiguous()
    assert reference_merge(y).is_contiguous()


@pytest.mark.parametrize(
    ("body", "swaps", "views"),
    [
        ("return x.transpose(1, 2).view(b, T, H * hd)", True, True),
        ("x = x.permute(0, 2, 1, 3)\n    return x.view(b, T, -1)", True, True),
        ("return torch.swapaxes(x, 1, 2).view(b, T, -1)", True, True),
        ("return x.movedim(1, 2).flatten(2)", True, False),
        ("return x.transpose(1, 2).reshape(b, T, H * hd)", True, False),
        ("return x.view(b, T, H * hd)", False, False),
        ("return x.reshape(b, T, H * hd)", False, False),
        ("return torch.cat(x.unbind(1), dim=-1)", False, False),
    ],
)
def test_the_code_rules_read_a_reordering_and_a_view(body, swaps, views):
    code = _code(body)
    assert src.swaps_dims(code) is swaps
    assert src.views_swapped(code) is views
    assert code_rule("merge-not-contiguous", code, []) is swaps
    assert code_rule("merge-view-after-transpose", code, []) is views


def test_no_text_is_no_evidence():
    assert not src.swaps_dims(None) and not src.views_swapped(None)


@pytest.mark.parametrize("mistake", IDS)
def test_the_hints_ask_in_english_and_chinese_and_give_no_line_of_the_answer(mistake):
    entry = by_id(mistake)
    assert entry.exercise == HOOK and entry.hint.rstrip().endswith("?") and entry.hint_zh.rstrip().endswith("？")
    for text in (entry.hint, entry.hint_zh):
        assert ".contiguous()" not in text and "reshape(b" not in text and ".view(" not in text


# --- slow: the diagnosis on the hidden suite's merge_heads cases ---------------------------------------------------


@pytest.fixture(scope="module")
def trials():
    from grader.instructor.suite import build_suite

    return [t for t in build_suite(3, ("cpu", "meta")).trials if t.hook == HOOK]


@pytest.fixture(scope="module")
def fingerprints():
    from grader.instructor.fingerprints import Fingerprints

    return Fingerprints()


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(MERGES))
def test_a_merge_is_named_after_what_its_code_did_and_a_right_one_after_nothing(trials, fingerprints, kind):
    from grader.instructor.diagnosis import diagnose_hook
    from grader.instructor.learner_source import LearnerSource
    from grader.instructor.observations import HookRow, observe
    from grader.instructor.verdict import judge_in_process
    from grader.registry import adopt
    from solutions import reference

    body, ids = MERGES[kind]
    text = _text(body)
    space: dict = {"torch": torch}
    exec(compile(text, "m.py", "exec"), space)  # trusted text of this test, judged in process
    learner = adopt("merge", "merge", [types.SimpleNamespace(merge_heads=space["merge_heads"]), reference])
    rows = []
    for trial in trials:
        verdict = judge_in_process(learner, trial)
        rows.append(HookRow(trial, observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)))
    if kind.startswith(("contiguous", "cat", "einsum")):
        assert all(r.seen.kind == "pass" for r in rows if r.trial.device != "meta"), "a right merge: full marks"
    found = diagnose_hook(HOOK, rows, fingerprints, LearnerSource({"m.py": text}, {HOOK: "m.py:4"}))
    assert (set().union(*found.values()) if found else set()) == ids
    if ids & set(IDS):  # the text decides: with none to read, neither is named
        found = diagnose_hook(HOOK, rows, fingerprints, LearnerSource({}))
        assert not (set().union(*found.values()) if found else set()) & set(IDS)
