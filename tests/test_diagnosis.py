"""Diagnosis: a failing case that looks like a catalogued mistake names it and shows its hint.

Two layers:

* end to end, on the sample class: grading bob (softmax over ``dim=1``),
  carol.zip (``triu`` with diagonal 0), dave (dropout scaled by ``1/p``) and
  erin (``view`` without ``transpose``) names the right catalogue id and its
  hint in ``feedback.md``/``feedback.html``, in ``results.json`` output text,
  in the gradebook's ``results.mistake`` column and in ``attnkit check``; with
  ``--lang zh`` the Chinese hint; alice (perfect) is named after nothing;
* :func:`grader.instructor.diagnosis.diagnose_hook` on rows of trusted code (the mistake model with knobs on)
  judged on the hidden cases, with made-up learner text: every knob on is named, the reference gets nothing,
  an error is named only from a learner's line that shows the mistake, a discarded ``masked_fill`` is told
  apart by the text.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from grader.cli import main
from grader.instructor.class_grading import GradeOptions, grade_class
from grader.instructor.diagnosis import LANGUAGES, diagnose_hook, hint
from grader.instructor.fingerprints import Fingerprints
from grader.instructor.learner_source import LearnerSource
from grader.instructor.observations import HookRow, error_sizes, observe
from grader.instructor.reports import write_reports
from grader.instructor.rubric import load_rubric
from grader.instructor.verdict import FAILED, judge_in_process
from grader.registry import HOOK_NAMES
from solutions import mistake_model as mm
from solutions.mistakes import CATALOGUE, by_id, mistake_solution

KIT = Path(__file__).resolve().parent.parent
SUBMISSIONS = KIT / "examples" / "submissions"
SEED = 7
CJK = re.compile(r"[\u4e00-\u9fff]")

# (student, the path graded, the exercise, the catalogue id it must be named after)
EXPECTED = [
    ("bob", "bob", "softmax_weights", "softmax-over-dim-1"),
    ("carol", "carol.zip", "causal_mask", "triu-diagonal-0"),
    ("dave", "dave.py", "dropout_scale", "dropout-scale-by-inverse-p"),
    ("dave", "dave.py", "attention_dropout", "attention-dropout-scale-by-inverse-p"),
    ("erin", "erin", "split_heads", "split-heads-without-transpose"),
]
EXPECTED_IDS = [f"{student}-{mistake}" for student, _, _, mistake in EXPECTED]
ALSO = {("bob", "softmax_weights"): {"softmax-where-nan-grad"}}
"""Mistakes a hook shows beside the one its row expects: Bob guards an all -inf row with `torch.where(s > 0, e / s,
0)` (scores.py, line 20): right zeros, NaN gradients, on the fully masked row's cases only (issue 23)."""
GRADED = ["alice.py", "bob", "carol.zip", "dave.py", "erin"]
WIDE = {"COLUMNS": "300"}  # rich reads the width from COLUMNS; a wide table keeps each hint on one line


def md_text(markdown: str) -> str:
    """Markdown with the backslash escapes of feedback.md taken out (the hint is escaped there)."""
    return re.sub(r"\\([\\`*_\[\]<>|])", r"\1", markdown)


def flat(text: str) -> str:
    return " ".join(text.split())


def names(text: str, mistake_id: str) -> bool:
    """Whether ``text`` names ``mistake_id`` as a whole id (not as part of a longer one)."""
    return re.search(rf"(?<![\w-]){re.escape(mistake_id)}(?![\w-])", text) is not None


# --- grading the sample class ---------------------------------------------------------


@pytest.fixture(scope="module")
def graded_en(tmp_path_factory) -> Path:
    """The five students graded with the Python API, English reports written."""
    out = tmp_path_factory.mktemp("graded-en")
    run = grade_class([str(SUBMISSIONS / p) for p in GRADED], out, GradeOptions(seed=SEED, devices=["cpu", "meta"]))
    assert sorted(sub.student for sub, _ in run.graded) == ["alice", "bob", "carol", "dave", "erin"]
    write_reports(out, run.graded, load_rubric(), run.report_options, run.figures)
    return out


@pytest.fixture(scope="module")
def graded_zh(tmp_path_factory, graded_en) -> Path:
    """The same students graded through the command line with ``--lang zh``, into a copy of ``graded_en``.

    The language is the reports' alone (grading is the same in every language, and the out folder's class is
    the same seed and devices), so the command reuses every result of ``graded_en`` and writes the reports in
    Chinese: the diagnosis named at grading time, the hints in the reports' language.
    """
    out = tmp_path_factory.mktemp("graded-zh") / "out"
    shutil.copytree(graded_en, out)
    paths = [str(SUBMISSIONS / p) for p in GRADED]
    result = CliRunner().invoke(
        main,
        ["grade", *paths, "--out", str(out), "--seed", str(SEED), "--devices", "cpu,meta", "--lang", "zh"],
        catch_exceptions=False,
        env=WIDE,
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("student", "path", "hook", "mistake"), EXPECTED, ids=EXPECTED_IDS)
def test_feedback_md_names_the_mistake_and_its_english_hint(graded_en, student, path, hook, mistake):
    text = md_text((graded_en / student / "feedback.md").read_text(encoding="utf-8"))
    entry = by_id(mistake)
    assert entry.exercise == hook
    assert f"This looks like a known mistake** (`{mistake}`" in text, text
    assert f"**Hint:** {entry.hint}" in text
    assert entry.hint_zh not in text, "an English report shows the English hint only"
    # under that exercise's heading, not under another
    section = text.split(f"## `{hook}(", 1)[1].split("\n## `", 1)[0]
    assert f"`{mistake}`" in section


@pytest.mark.slow
@pytest.mark.parametrize(("student", "path", "hook", "mistake"), EXPECTED, ids=EXPECTED_IDS)
def test_feedback_html_names_the_mistake_and_its_hint(graded_en, student, path, hook, mistake):
    text = (graded_en / student / "feedback.html").read_text(encoding="utf-8")
    assert f"This looks like a known mistake (<code>{mistake}</code>" in text
    assert html.escape(by_id(mistake).hint) in text


@pytest.mark.slow
@pytest.mark.parametrize(("student", "path", "hook", "mistake"), EXPECTED, ids=EXPECTED_IDS)
def test_results_json_output_names_the_mistake(graded_en, student, path, hook, mistake):
    data = json.loads((graded_en / student / "results.json").read_text(encoding="utf-8"))
    (test,) = [t for t in data["tests"] if t["name"] == hook]
    assert test["status"] == "failed"
    assert names(test["output"], mistake)
    assert by_id(mistake).hint in test["output"]
    others = [t["output"] for t in data["tests"] if t["name"] != hook]
    assert not any(names(o, mistake) for o in others), "the id is named under its own exercise only"


@pytest.mark.slow
@pytest.mark.parametrize(("student", "path", "hook", "mistake"), EXPECTED, ids=EXPECTED_IDS)
def test_gradebook_mistake_column(graded_en, student, path, hook, mistake):
    with sqlite3.connect(graded_en / "gradebook.sqlite") as db:
        rows = db.execute(
            "SELECT status, mistake FROM results WHERE student = ? AND hook = ?", (student, hook)
        ).fetchall()
    named = {i for status, m in rows if status == FAILED and m for i in m.split(",")}
    assert named == {mistake} | ALSO.get((student, hook), set()), rows
    assert all(m == "" for status, m in rows if status != FAILED), "a passing case names no mistake"


@pytest.mark.slow
def test_alice_is_named_after_no_mistake(graded_en):
    folder = graded_en / "alice"
    for name in ("feedback.md", "feedback.html", "results.json"):
        text = (folder / name).read_text(encoding="utf-8")
        assert "known mistake" not in text, name
        assert [m.id for m in CATALOGUE if names(text, m.id)] == [], name
    with sqlite3.connect(graded_en / "gradebook.sqlite") as db:
        rows = db.execute("SELECT status, mistake FROM results WHERE student = 'alice'").fetchall()
    assert rows and {status for status, _ in rows} <= {"passed", "skipped"}
    assert {m for _, m in rows} == {""}


@pytest.mark.slow
@pytest.mark.parametrize(("student", "path", "hook", "mistake"), EXPECTED, ids=EXPECTED_IDS)
def test_lang_zh_shows_the_chinese_hint(graded_zh, student, path, hook, mistake):
    entry = by_id(mistake)
    md = md_text((graded_zh / student / "feedback.md").read_text(encoding="utf-8"))
    assert f"`{mistake}`" in md
    assert entry.hint_zh in md
    assert entry.hint not in md, "a Chinese report shows the Chinese hint instead of the English one"
    page = (graded_zh / student / "feedback.html").read_text(encoding="utf-8")
    assert html.escape(entry.hint_zh) in page
    data = json.loads((graded_zh / student / "results.json").read_text(encoding="utf-8"))
    (test,) = [t for t in data["tests"] if t["name"] == hook]
    assert names(test["output"], mistake) and entry.hint_zh in test["output"]


# --- attnkit check -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def carol_folder(tmp_path_factory) -> Path:
    """carol.zip unpacked: ``attnkit check`` loads a .py file or a folder in-process, not a .zip."""
    where = tmp_path_factory.mktemp("carol")
    with zipfile.ZipFile(SUBMISSIONS / "carol.zip") as archive:
        archive.extractall(where)
    return where / "carol"


def _check(path: str, *extra: str):
    return CliRunner().invoke(main, ["check", "--solution", path, *extra], terminal_width=250, env=WIDE)


def _cell(hook: str) -> str:
    """The hook as the first cell of a table row (a box-drawing or an ASCII border before it)."""
    return f" {hook} "


def _check_path(path: str, carol_folder: Path) -> str:
    return str(carol_folder) if path == "carol.zip" else str(SUBMISSIONS / path)


CHECKED = [e for e in EXPECTED if e[3] != "attention-dropout-scale-by-inverse-p"]
CHECKED_IDS = [f"{student}-{mistake}" for student, _, _, mistake in CHECKED]


@pytest.mark.slow
@pytest.mark.parametrize(("student", "path", "hook", "mistake"), CHECKED, ids=CHECKED_IDS)
@pytest.mark.parametrize("lang", LANGUAGES, ids=list(LANGUAGES))
def test_check_names_the_mistake_and_its_hint(carol_folder, student, path, hook, mistake, lang):
    """In English the whole check runs (the hint in the row of its own exercise, among all); in Chinese only the
    exercise's own (the language changes the words, not which exercise's row holds them)."""
    only = () if lang == "en" else (hook,)
    result = _check(_check_path(path, carol_folder), *only, "--lang", lang)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    entry = by_id(mistake)
    wanted, unwanted = (entry.hint, entry.hint_zh) if lang == "en" else (entry.hint_zh, entry.hint)
    lines = result.output.splitlines()
    at = next((i for i, ln in enumerate(lines) if f"looks like {mistake}" in ln), None)
    assert at is not None, result.output
    assert wanted in flat(lines[at]), result.output
    assert unwanted not in result.output
    # in the row of its own exercise: the last exercise row above the hint is the hook's, and it is failing
    (row,) = [ln for ln in lines[:at] if any(_cell(h) in ln for h in HOOK_NAMES)][-1:]
    assert _cell(hook) in row and "failing" in row, row


@pytest.mark.slow
def test_check_names_nothing_for_alice():
    result = _check(str(SUBMISSIONS / "alice.py"))
    assert result.exit_code == 0, result.output
    assert "looks like" not in result.output
    assert f"{len(HOOK_NAMES)} of {len(HOOK_NAMES)} exercises passing" in result.output


# --- diagnose_hook, one rule at a time -------------------------------------------------------
#
# The "submission" here is trusted code (the mistake model with knobs on, the reference), judged in this process
# as the grader judges a child's reply; the learner's text is made up to show (or not show) the mistake on the
# failing line.

UNIT_SEED = 3
CAUSAL_SOURCE = """\
import torch
from torch import nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys, queries, values = self.W_key(x), self.W_query(x), self.W_value(x)
        attn_scores = queries @ keys.T
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool(), -torch.inf)
        attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return self.dropout(attn_weights) @ values
"""
SELF_SOURCE = CAUSAL_SOURCE.replace("class CausalAttention", "class SelfAttention")


def _line(source: str, text: str) -> str:
    """``submission/attn.py:N``, the place of the (first) line of ``source`` that holds ``text``."""
    (number,) = [i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text][:1]
    return f"submission/attn.py:{number}"


@pytest.fixture(scope="module")
def unit_trials():
    from grader.instructor.suite import build_suite

    return build_suite(UNIT_SEED, ("cpu", "meta")).trials


@pytest.fixture(scope="module")
def fingerprints():
    return Fingerprints()


def _rows(trials, solution, hook: str, where: str | None = None) -> list[HookRow]:
    """``solution``'s rows of ``hook``, as the grader keeps them; an error's place moved to ``where``."""
    rows = []
    for trial in trials:
        if trial.hook != hook:
            continue
        verdict = judge_in_process(solution, trial)
        seen = observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)
        if where and seen.kind == "error":
            seen = dataclasses.replace(seen, where=where)
        rows.append(HookRow(trial, seen, dict(verdict.reply.get("module") or {})))
    return rows


def _knobs(hook: str, *names: str) -> frozenset:
    found = frozenset(k for k in mm.knobs_for(hook) if k.name in names)
    assert len(found) == len(names), names
    return found


def _named(rows, fingerprints, source: LearnerSource | None = None, hook: str | None = None) -> set[str]:
    found = diagnose_hook(hook or rows[0].trial.hook, rows, fingerprints, source)
    return set().union(*found.values()) if found else set()


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("The size of tensor a (11) must match the size of tensor b (7) at non-singleton dimension 2", (7, 11)),
        ("mat1 and mat2 shapes cannot be multiplied (6x4 and 3x2)", (2, 3, 4, 6)),
        ("Expected size for first two dimensions of batch2 tensor to be: [8, 5] but got: [8, 3].", (3, 5, 8, 8)),
        ("shape '[2, 3, 4]' is invalid for input of size 30", (2, 3, 4, 30)),
        ("no numbers at all", ()),
    ],
    ids=["broadcast", "mat1-mat2", "bmm", "view", "none"],
)
def test_error_sizes_are_the_numbers_of_the_message_without_dimension_positions(text, sizes):
    assert error_sizes(text) == sizes


@pytest.mark.slow
@pytest.mark.parametrize("hook", mm.MODULE_HOOKS, ids=list(mm.MODULE_HOOKS))
def test_the_reference_is_named_after_nothing(unit_trials, fingerprints, hook):
    rows = _rows(unit_trials, mm.knob_solution(hook, ()), hook)
    assert {r.seen.kind for r in rows} <= {"pass", "other"}
    assert diagnose_hook(hook, rows, fingerprints) == {}


VALUE_KNOBS = [
    (mm.SELF, ("scale=sqrt_T",), {"scale-by-num-tokens"}),
    (mm.SELF, ("scale=d_k",), {"scale-by-d-k-not-sqrt"}),
    (mm.SELF, ("product=k_at_q",), {"keys-times-queries"}),
    (mm.CAUSAL, ("softmax_dim=1",), {"softmax-over-dim-1"}),
    (mm.CAUSAL, ("mask_shape=triu_0",), {"triu-diagonal-0"}),
    (mm.CAUSAL, ("mask=zero",), {"mask-with-zero"}),
    (mm.CAUSAL, ("scale=sqrt_T", "softmax_dim=1"), {"scale-by-num-tokens", "softmax-over-dim-1"}),
    (mm.MHA, ("heads=view",), {"mha-heads-without-transpose"}),
    (mm.MHA, ("out_proj=missing",), {"no-out-proj"}),
    (mm.MHA, ("out_proj=missing", "scale=sqrt_d_out"), {"no-out-proj", "mha-scale-by-d-out"}),
    (mm.CAUSAL, ("dropout=never",), {"dropout-never-applied"}),
    (mm.CAUSAL, ("dropout=context",), {"dropout-on-context"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(("hook", "names", "ids"), VALUE_KNOBS, ids=["+".join(n) for _, n, _ in VALUE_KNOBS])
def test_a_setting_of_the_model_is_named_after_every_knob_it_has_on(unit_trials, fingerprints, hook, names, ids):
    rows = _rows(unit_trials, mm.knob_solution(hook, _knobs(hook, *names)), hook)
    assert any(r.seen.kind == "values" for r in rows)
    assert _named(rows, fingerprints) == ids


TEMPERATURE = "softmax_with_temperature"
TEMPERATURE_MISTAKES = [m for m in CATALOGUE if m.exercise == TEMPERATURE]


@pytest.mark.parametrize("mistake", TEMPERATURE_MISTAKES, ids=[m.id for m in TEMPERATURE_MISTAKES])
def test_a_temperature_mistake_is_named_after_itself_and_nothing_else(unit_trials, fingerprints, mistake):
    rows = _rows(unit_trials, mistake_solution(mistake), TEMPERATURE)
    assert any(r.seen.kind != "pass" for r in rows)
    assert _named(rows, fingerprints) == {mistake.id}


def test_the_temperature_reference_and_two_mistakes_at_once(unit_trials, fingerprints):
    assert _named(_rows(unit_trials, mm.knob_solution(TEMPERATURE, ()), TEMPERATURE), fingerprints) == set()
    both = _knobs(TEMPERATURE, "temperature=times", "argument_check=none")
    rows = _rows(unit_trials, mm.knob_solution(TEMPERATURE, both), TEMPERATURE)
    assert _named(rows, fingerprints) == {"temperature-multiplied", "temperature-unchecked"}


def _learners_temperature(scores, temperature, dim=-1):
    """A learner's: one sum over every element, no max subtracted, no ValueError for temperature <= 0."""
    e = torch.exp(scores / temperature)
    return e / e.sum()


def test_a_wrong_value_is_named_and_hinted_before_the_missing_value_error(unit_trials, fingerprints):
    import types

    from grader.instructor.feedback import render_feedback_md
    from grader.instructor.intake_model import Submission
    from grader.instructor.report_model import student_report
    from grader.instructor.verdict import CaseResult
    from grader.registry import adopt
    from solutions import reference

    learner = adopt("lu", "lu", [types.SimpleNamespace(softmax_with_temperature=_learners_temperature), reference])
    trials = [t for t in unit_trials if t.hook == TEMPERATURE and t.dtype == "float32"]  # float32: quick
    verdicts = [judge_in_process(learner, t) for t in trials]
    rows = [HookRow(t, observe(t, v.status, v.message, v.reply, v.outputs), {}) for t, v in zip(trials, verdicts)]
    assert {"values", "contract"} <= {r.seen.kind for r in rows}
    named = diagnose_hook(TEMPERATURE, rows, fingerprints)
    values = {"temperature-over-every-element", "temperature-without-max"}
    assert {i: ids for i, ids in named.items() if rows[i].seen.kind == "values"}, "the wrong values are named"
    assert all(ids == values for i, ids in named.items() if rows[i].seen.kind == "values")
    assert all(ids == {"temperature-unchecked"} for i, ids in named.items() if rows[i].seen.kind == "contract")
    results = [
        CaseResult("lu", TEMPERATURE, t.case.name, t.device, t.dtype, v.status, v.message, 0.0,
                   ",".join(sorted(named.get(i, ()))))
        for i, (t, v) in enumerate(zip(trials, verdicts))
    ]  # fmt: skip
    report = student_report(Submission("lu", "lu.py", "py", {}, "lu.py", "sha"), results, load_rubric())
    (ex,) = [e for e in report.exercises if e.hook == TEMPERATURE]
    order = [k.mistake for k in ex.known_mistakes]
    assert set(order[:2]) == values and order[2:] == ["temperature-unchecked"], order
    md = md_text(render_feedback_md(report))
    assert max(md.index(by_id(m).hint) for m in values) < md.index(by_id("temperature-unchecked").hint)


@pytest.mark.slow
def test_a_discarded_masked_fill_is_told_apart_from_a_mask_never_applied_by_the_text(unit_trials, fingerprints):
    rows = _rows(unit_trials, mm.knob_solution(mm.CAUSAL, _knobs(mm.CAUSAL, "mask=not_applied")), mm.CAUSAL)
    assert _named(rows, fingerprints) == {"mask-not-applied"}
    discarded = LearnerSource({"attn.py": CAUSAL_SOURCE})
    assert _named(rows, fingerprints, discarded) == {"mask-result-discarded"}
    kept = CAUSAL_SOURCE.replace(
        "        attn_scores.masked_fill(self", "        attn_scores = attn_scores.masked_fill(self"
    )
    assert _named(rows, fingerprints, LearnerSource({"attn.py": kept})) == {"mask-not-applied"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("attn_scores.masked_fill_(self.mask.bool(), -torch.inf)", {"mask-not-sliced"}),
        ("attn_scores = queries @ keys.T", set()),
        ("attn_scores = queries @ keys.transpose(1, 2)", set()),
    ],
    ids=["on-the-mask-line", "on-a-dot-T-line", "on-a-product-line"],
)
def test_a_mask_of_the_wrong_size_is_named_only_from_a_line_that_uses_the_mask(
    unit_trials, fingerprints, line, expected
):
    setting = _knobs(mm.CAUSAL, "mask_size=context_length")
    rows = _rows(unit_trials, mm.knob_solution(mm.CAUSAL, setting), mm.CAUSAL, _line(CAUSAL_SOURCE, line))
    assert any(r.seen.kind == "error" and "must match" in r.seen.message for r in rows)
    assert _named(rows, fingerprints, LearnerSource({"attn.py": CAUSAL_SOURCE})) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("attn_scores = queries @ keys.T", {"q-at-k-t-batched"}),
        ("attn_scores = queries @ keys.transpose(1, 2)", set()),
        ("attn_scores.masked_fill_(self.mask.bool(), -torch.inf)", set()),
    ],
    ids=["on-a-dot-T-line", "on-a-product-line", "on-the-mask-line"],
)
def test_dot_t_on_batched_input_is_named_only_from_a_line_that_takes_dot_t(unit_trials, fingerprints, line, expected):
    setting = _knobs(mm.SELF, "product=q_at_k_T")
    rows = _rows(unit_trials, mm.knob_solution(mm.SELF, setting), mm.SELF, _line(SELF_SOURCE, line))
    assert any(r.seen.kind == "error" for r in rows)
    assert _named(rows, fingerprints, LearnerSource({"attn.py": SELF_SOURCE})) == expected


@pytest.mark.slow
def test_an_error_with_no_text_to_read_is_named_after_nothing(unit_trials, fingerprints):
    """The sizes alone never name a mistake: no learner's line, no diagnosis (the old "mask not sliced" on Q @ K.T)."""
    for hook, names in ((mm.SELF, "product=q_at_k_T"), (mm.CAUSAL, "mask_size=context_length")):
        rows = _rows(unit_trials, mm.knob_solution(hook, _knobs(hook, names)), hook)
        assert any(r.seen.kind == "error" for r in rows)
        assert _named(rows, fingerprints) == set()


def test_the_evidence_is_computed_once_per_trial(unit_trials, fingerprints):
    trial = next(
        t for t in unit_trials if t.hook == mm.CAUSAL and t.device == "cpu" and t.call["module"].get("forwards")
    )
    model = fingerprints.module_model(trial)
    assert model is not None and fingerprints.module_model(trial) is model
    (program,) = [c for c in fingerprints.programs(mm.CAUSAL) if c.key == "catalogue:mask-not-applied"]
    assert fingerprints.program_seen(program, trial) is fingerprints.program_seen(program, trial)


def test_without_the_catalogue_nothing_is_named(unit_trials):
    empty = Fingerprints(catalogue=[], model=False)
    rows = _rows(unit_trials, mm.knob_solution(mm.SELF, _knobs(mm.SELF, "scale=sqrt_T")), mm.SELF)
    assert diagnose_hook(mm.SELF, rows, empty) == {}


# --- hint ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGUAGES, ids=list(LANGUAGES))
def test_hint_in_each_language(lang):
    entry = by_id("softmax-over-dim-1")
    description, text = hint(entry.id, lang)
    assert description == entry.description
    assert text == (entry.hint_zh if lang == "zh" else entry.hint)
    assert bool(CJK.search(text)) == (lang == "zh")


@pytest.mark.parametrize("lang", ["xx", "EN", "", "fr"], ids=["xx", "upper-EN", "empty", "fr"])
def test_hint_in_an_unknown_language_raises(lang):
    with pytest.raises(ValueError, match="unknown language"):
        hint("softmax-over-dim-1", lang)


def test_hint_for_an_unknown_id_raises_key_error_naming_the_known_ids():
    with pytest.raises(KeyError, match="softmax-over-dim-1"):
        hint("no-such-mistake", "en")


CONTEXT_SOURCE = '''\
import torch


def context_vectors(weights, values):
    # z_i = sum_j a_ij v_j
    return weights.mT @ values


def context_by_columns(weights, values):
    return torch.matmul(weights.transpose(-2, -1), values)


def context_values_transposed(weights, values):
    return weights @ values.transpose(-2, -1)
'''


def _context(name: str):
    import types

    from grader.registry import adopt
    from solutions import reference

    space: dict = {}
    exec(compile(CONTEXT_SOURCE, "submission/attn.py", "exec"), space)  # noqa: S102 - our own text, in the test
    return adopt("cv", "cv", [types.SimpleNamespace(context_vectors=space[name]), reference])


@pytest.mark.parametrize(
    ("name", "line", "expected"),
    [
        ("context_vectors", "return weights.mT @ values", {"weights-transposed"}),
        ("context_by_columns", "return torch.matmul(weights.transpose(-2, -1), values)", {"weights-transposed"}),
        ("context_values_transposed", "return weights @ values.transpose(-2, -1)", set()),
    ],
    ids=["dot-mT", "matmul-transpose", "values-transposed"],
)
def test_transposed_weights_are_named_from_a_line_that_multiplies_them_transposed(
    unit_trials, fingerprints, name, line, expected
):
    """Transposed batched weights raise where keys and queries differ in number: the line must show the transpose."""
    rows = _rows(unit_trials, _context(name), "context_vectors", _line(CONTEXT_SOURCE, line))
    assert any(r.seen.kind == "error" for r in rows)
    assert _named(rows, fingerprints, LearnerSource({"attn.py": CONTEXT_SOURCE})) == expected


GUARDED_NO_MAX = '''import torch


def softmax_weights(scores, dim=-1):
    e = scores.exp()  # no max subtracted: large logits overflow
    total = e.sum(dim, keepdim=True)
    return e / total.masked_fill(total == 0, 1.0)  # a row with nothing left stays zeros
'''


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_guarded_softmax_without_the_max_is_named_under_every_seed(tmp_path, seed):
    """The learner's softmax keeps its dim and only overflows; it guards a 0/0 row, which the catalogued no-max
    softmax does not, so that program fails cases this one passes.  The model's guarded no-max knob fails exactly its
    cases (heldout3's d05 was named under seed 1 only before it)."""
    from grader.instructor.diagnosis import diagnose_in_process
    from grader.registry import load_solution

    path = tmp_path / "learner.py"
    path.write_text(GUARDED_NO_MAX, encoding="utf-8")
    named = diagnose_in_process(load_solution(path), ["softmax_weights"], seed=seed).get("softmax_weights", ())
    assert tuple(named) == ("softmax-without-max",), named


@pytest.mark.slow
def test_a_program_of_two_mistakes_whose_numbers_match_by_chance_names_neither(tmp_path, monkeypatch):
    """Without the guarded knob, under seed 2, the only program whose overflowing numbers match the guarded softmax
    above is the model's naive softmax over dim 1 (two knobs, two mistakes): it fails most of the cases this softmax
    passes, so it names nothing, and the dim mistake, which this code does not make, is never named."""
    from grader.instructor.diagnosis import diagnose_in_process
    from grader.registry import load_solution
    from solutions import mistake_model as mm

    every = mm.settings
    unguarded = lambda hook, size: (s for s in every(hook, size) if all(k.value != "no_max_guarded" for k in s))  # noqa: E731
    monkeypatch.setattr(mm, "settings", unguarded)
    path = tmp_path / "learner.py"
    path.write_text(GUARDED_NO_MAX, encoding="utf-8")
    assert diagnose_in_process(load_solution(path), ["softmax_weights"], seed=2) == {}



@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_gradients_alike_only_within_an_absolute_tolerance_name_nothing(seed):
    """heldout4's d04, an uncatalogued temperature (a power of its own guarded softmax), fails one case in its
    gradients alone at near one-hot weights, where every entry is tiny: the temperature-ignored program's gradients
    there are as tiny, and matched within the absolute tolerance under seed 2.  A gradient matches relative to its own
    size: no name."""
    from grader.instructor.diagnosis import diagnose_in_process
    from grader.registry import load_solution

    path = Path(__file__).parent / "heldout4" / "d04_temperature_power.py"
    assert diagnose_in_process(load_solution(path), ["softmax_with_temperature"], seed=seed) == {}
