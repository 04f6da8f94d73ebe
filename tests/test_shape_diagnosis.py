"""Issue 25: four families the second held-out set showed with no catalogue entry.

* ``torch.bmm`` for the scores or the context: right on 3-D input, an error on 2-D and 4-D input
  (``scores-bmm-3d-only``, ``context-bmm-3d-only``; their errors name sizes, so the hook's code must call ``bmm``);
* ``split_heads`` that views ``(b, T, H, hd)`` and never moves the heads in front (``split-heads-no-permute``);
* ``attention_dropout`` that divides by ``1 - p`` itself, unguarded: NaN at ``p == 1``
  (``attention-dropout-divides-by-zero``).

Each learner below is written the way the chapter's readers write it (several spellings per family); a right answer
of the same shape gets full marks and no hint, and a near miss of another kind is not named after these.  The
"submissions" are trusted code of this test, judged in this process as the grader judges a child's reply.
"""

from __future__ import annotations

import types

import pytest
import torch

from solutions.mistakes import by_id

IDS = ("scores-bmm-3d-only", "context-bmm-3d-only", "split-heads-no-permute", "attention-dropout-divides-by-zero")

SIGNATURES = {
    "dot_product_scores": "def dot_product_scores(queries, keys):",
    "context_vectors": "def context_vectors(weights, values):",
    "split_heads": "def split_heads(x, num_heads):\n    b, T, d = x.shape\n    hd = d // num_heads"
                   "\n    if d % num_heads:\n        raise ValueError('d must split into equal heads')",
    "attention_dropout": "def attention_dropout(weights, p, training=True, generator=None):\n"
                         "    if not 0 <= p <= 1:\n        raise ValueError('p is a probability')\n"
                         "    if not training or p == 0:\n        return weights.clone()",
}  # fmt: skip

LEARNERS = {
    # scores
    "bmm-one-line": ("dot_product_scores", "return torch.bmm(queries, keys.transpose(1, 2))", {"scores-bmm-3d-only"}),
    "bmm-two-lines": ("dot_product_scores", "keys_t = keys.transpose(1, 2)\n    return torch.bmm(queries, keys_t)",
                      {"scores-bmm-3d-only"}),
    "bmm-method": ("dot_product_scores", "return queries.bmm(keys.transpose(1, 2))", {"scores-bmm-3d-only"}),
    "matmul-right": ("dot_product_scores", "return torch.matmul(queries, keys.transpose(-2, -1))", set()),
    "einsum-right": ("dot_product_scores", "return torch.einsum('...qd,...kd->...qk', queries, keys)", set()),
    # context
    "context-bmm": ("context_vectors", "return torch.bmm(weights, values)", {"context-bmm-3d-only"}),
    "context-bmm-method": ("context_vectors", "return weights.bmm(values)", {"context-bmm-3d-only"}),
    "context-matmul-right": ("context_vectors", "return weights @ values", set()),
    # heads
    "split-view": ("split_heads", "return x.view(b, T, num_heads, hd)", {"split-heads-no-permute"}),
    "split-reshape": ("split_heads", "x = x.reshape(b, T, num_heads, hd)\n    return x", {"split-heads-no-permute"}),
    "split-right": ("split_heads", "return x.view(b, T, num_heads, hd).transpose(1, 2)", set()),
    "split-unflatten-right": ("split_heads", "return x.unflatten(-1, (num_heads, hd)).permute(0, 2, 1, 3)", set()),
    # dropout
    "dropout-inline": (
        "attention_dropout",
        "keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p\n"
        "    return weights * keep / (1 - p)",
        {"attention-dropout-divides-by-zero"},
    ),
    "dropout-inline-float-mask": (
        "attention_dropout",
        "draws = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype)\n"
        "    mask = (draws >= p).to(weights.dtype)\n    scale = 1.0 / (1.0 - p)\n    return weights * mask * scale",
        set(),  # 1 / 0 raises ZeroDivisionError in Python: a different failure, not NaN
    ),
    "dropout-guarded-right": (
        "attention_dropout",
        "if p == 1:\n        return torch.zeros_like(weights)\n"
        "    keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p\n"
        "    return weights * keep / (1 - p)",
        set(),
    ),
}  # fmt: skip


def _text(hook: str, body: str) -> str:
    return f"import torch\n\n\n{SIGNATURES[hook]}\n    {body}\n"


@pytest.mark.parametrize("mistake", IDS)
def test_the_hints_ask_in_english_and_chinese_and_give_no_line_of_the_answer(mistake):
    entry = by_id(mistake)
    assert entry.hint.rstrip().endswith("?") or "?" in entry.hint
    assert "？" in entry.hint_zh
    for text in (entry.hint, entry.hint_zh):
        assert "matmul" not in text and "einsum" not in text and ".transpose(1, 2)" not in text
        assert "zeros_like" not in text and "permute(" not in text


def test_the_bmm_rule_reads_the_hooks_code():
    import ast

    from grader.instructor import learner_source as src

    assert src.calls(ast.parse("torch.bmm(a, b)"), "bmm") and src.calls(ast.parse("a.bmm(b)"), "bmm")
    assert not src.calls(ast.parse("a @ b"), "bmm") and not src.calls(None, "bmm")


# --- slow: the diagnosis on the hidden suite's cases ---------------------------------------------------------------


@pytest.fixture(scope="module")
def trials():
    from grader.instructor.suite import build_suite

    return build_suite(5, ("cpu", "meta")).trials


@pytest.fixture(scope="module")
def fingerprints():
    from grader.instructor.fingerprints import Fingerprints

    return Fingerprints()


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(LEARNERS))
def test_a_learner_is_named_after_what_its_code_did_and_a_right_one_after_nothing(trials, fingerprints, kind):
    from grader.instructor.diagnosis import diagnose_hook
    from grader.instructor.learner_source import LearnerSource
    from grader.instructor.observations import HookRow, observe
    from grader.instructor.verdict import judge_in_process
    from grader.registry import adopt
    from solutions import reference

    hook, body, ids = LEARNERS[kind]
    text = _text(hook, body)
    space: dict = {"torch": torch}
    exec(compile(text, "m.py", "exec"), space)  # trusted text of this test, judged in process
    learner = adopt("learner", "learner", [types.SimpleNamespace(**{hook: space[hook]}), reference])
    rows = []
    for trial in (t for t in trials if t.hook == hook):
        verdict = judge_in_process(learner, trial)
        rows.append(HookRow(trial, observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)))
    if kind.endswith("right"):
        assert all(r.seen.kind == "pass" for r in rows if r.trial.device != "meta"), "a right answer: full marks"
    found = diagnose_hook(hook, rows, fingerprints, LearnerSource({"m.py": text}, {hook: "m.py:4"}))
    assert (set().union(*found.values()) if found else set()) & set(IDS) == ids
