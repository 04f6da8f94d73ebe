"""`attnkit check` and the public pytest run say what the grader says: its verdict, its count, its words.

Each learner here writes the chapter's way (or makes a catalogued mistake) in their own code; the grader's view
is :func:`grader.instructor.verdict.judge_in_process` over the hidden cases of the same code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from learner_code import reference_source

from grader.check import FAILING, PASSING, run_public_cases
from grader.rule_words import english

PROJECTIONS = (
    "        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
    "        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
    "        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
)
CHAPTER_MASK = "torch.triu(torch.ones(context_length, context_length), diagonal=1).bool()"


def multihead(check: str, mask: str) -> str:
    """The chapter's MultiHeadAttention, with its own check of the heads and its own way of holding the mask."""
    return (
        "class MultiHeadAttention(nn.Module):\n"
        "    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):\n"
        "        super().__init__()\n"
        f"        {check}\n"
        "        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads\n"
        + PROJECTIONS
        + "        self.out_proj = nn.Linear(d_out, d_out)\n"
        "        self.dropout = nn.Dropout(dropout)\n"
        f"        {mask}\n"
        "    def forward(self, x):\n"
        "        b, T, _ = x.shape\n"
        "        q = self.W_query(x).view(b, T, self.num_heads, self.head_dim).transpose(1, 2)\n"
        "        k = self.W_key(x).view(b, T, self.num_heads, self.head_dim).transpose(1, 2)\n"
        "        v = self.W_value(x).view(b, T, self.num_heads, self.head_dim).transpose(1, 2)\n"
        "        s = (q @ k.transpose(2, 3)).masked_fill(self.mask[:T, :T], -torch.inf)\n"
        "        w = self.dropout(torch.softmax(s / k.shape[-1] ** 0.5, dim=-1))\n"
        "        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(b, T, self.d_out))\n"
    )


def causal(mask: str) -> str:
    """The chapter's CausalAttention, holding the mask its own way."""
    return (
        "class CausalAttention(nn.Module):\n"
        "    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):\n"
        "        super().__init__()\n"
        + PROJECTIONS
        + "        self.dropout = nn.Dropout(dropout)\n"
        f"        {mask}\n"
        "    def forward(self, x):\n"
        "        b, T, _ = x.shape\n"
        "        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)\n"
        "        s = (q @ k.transpose(1, 2)).masked_fill(self.mask[:T, :T], -torch.inf)\n"
        "        return self.dropout(torch.softmax(s / k.shape[-1] ** 0.5, dim=-1)) @ v\n"
    )


ASSERTS = "assert d_out % num_heads == 0, 'd_out must be divisible by num_heads'"
BUFFER = f"self.register_buffer('mask', {CHAPTER_MASK})"
PLAIN = f"self.mask = {CHAPTER_MASK}"


def _learner(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "mine.py"
    path.write_text(reference_source() + "\n\n# --- mine ---\n" + code, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hidden_trials():
    from grader.instructor.suite import build_suite

    return build_suite(5, ("cpu", "meta")).trials


def _grader(path: Path, trials, hook: str):
    from grader.instructor.verdict import judge_in_process
    from grader.registry import load_solution

    solution = load_solution(path)
    return [(t, judge_in_process(solution, t)) for t in trials if t.hook == hook]


@pytest.fixture(scope="module")
def chapters_assert(tmp_path_factory):
    """The chapter's MultiHeadAttention (its assert) and what the check makes of it, run once for the module."""
    path = _learner(tmp_path_factory.mktemp("assert"), multihead(ASSERTS, BUFFER))
    (result,) = run_public_cases(str(path), ["make_multihead_attention"])
    return path, result


def test_the_chapters_assert_passes_the_check_with_the_graders_note(chapters_assert):
    _, result = chapters_assert
    assert result.status == PASSING, result
    note = english("prefer", kind="AssertionError", why=english("prefer.value_error"))
    assert result.notes == [note]


@pytest.mark.slow
def test_the_graders_note_on_the_assert_is_the_checks(tmp_path, hidden_trials):
    from grader.instructor.verdict import PASSED

    judged = _grader(_learner(tmp_path, multihead(ASSERTS, BUFFER)), hidden_trials, "make_multihead_attention")
    assert {v.status for _, v in judged} == {PASSED}
    notes = {str(v.note) for t, v in judged if t.case.name == "indivisible-raises"}
    assert notes == {english("prefer", kind="AssertionError", why=english("prefer.value_error"))}


def test_a_plain_mask_attribute_fails_one_test_on_the_gpu_rule_and_the_buffer_test(tmp_path):
    """As the grader fails one meta case and the mask-buffer case (2 of its cases), not every case."""
    (result,) = run_public_cases(str(_learner(tmp_path, causal(PLAIN))), ["make_causal_attention"])
    assert result.status == FAILING
    assert (result.passed, result.failed) == (7, 2), result
    assert "will fail on a GPU: a tensor is built on the CPU" in result.first_failure


def test_the_public_buffer_test_says_the_graders_words(tmp_path):
    from exercises.test_modules import expect_mask_buffer
    from grader.registry import load_solution

    module = load_solution(_learner(tmp_path, causal(PLAIN))).call("make_causal_attention", 3, 4, 5, 0.0)
    with pytest.raises(AssertionError) as failed:
        expect_mask_buffer(module, 5, "context_length=5", "cpu")
    assert str(failed.value) == f"case 'context_length=5': {english('mask_buffer.missing', found='')}"


@pytest.mark.slow
def test_a_plain_mask_attribute_is_failed_by_the_grader_in_the_checks_words(tmp_path, hidden_trials):
    from grader.instructor.verdict import FAILED

    path = _learner(tmp_path, causal(PLAIN))
    (result,) = run_public_cases(str(path), ["make_causal_attention"])
    failed = {t.case.name: str(v.message) for t, v in _grader(path, hidden_trials, "make_causal_attention")
              if v.status == FAILED}  # fmt: skip
    # the training case runs on meta too: a mask left on the CPU fails there as well
    assert set(failed) == {"reference-weights", "mask-buffer", "train-dropout"}, failed
    local = result.first_failure.partition(": ")[2].split(" (raised")[0]
    assert local in failed["reference-weights"]
    assert english("mask_buffer.missing", found="") in failed["mask-buffer"]


def test_the_note_shows_in_the_check_table_and_the_notebooks_check_cell(chapters_assert):
    import importlib.util

    from click.testing import CliRunner

    from grader.cli import main
    from grader.notebook_check import as_text, collect

    path, _ = chapters_assert
    shown = CliRunner().invoke(main, ["check", "make_multihead_attention", "--solution", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "note: raising AssertionError" in " ".join(shown.output.split()), shown.output  # the table wraps it
    spec = importlib.util.spec_from_file_location("notebook_cells", path)
    assert spec is not None and spec.loader is not None
    cells = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cells)
    (row,) = collect(vars(cells), ["make_multihead_attention"])
    assert row.status == PASSING and row.note.startswith("raising AssertionError here is accepted.")
    assert "note: raising AssertionError" in as_text([row])
