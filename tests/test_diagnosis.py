"""Diagnosis: a failing case that looks like a catalogued mistake names it and shows its hint.

Two layers:

* end to end, on the sample class: grading bob (softmax over ``dim=1``),
  carol.zip (``triu`` with diagonal 0), dave (dropout scaled by ``1/p``) and
  erin (``view`` without ``transpose``) names the right catalogue id and its
  hint in ``feedback.md``/``feedback.html``, in ``results.json`` output text,
  in the gradebook's ``results.mistake`` column and in ``attnkit check``; with
  ``--lang zh`` the Chinese hint; alice (perfect) is named after nothing;
* :func:`grader.instructor.diagnosis.diagnose` on hand-made fingerprints, one rule at a time.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from grader.cli import main
from grader.instructor.class_grading import GradeOptions, grade_class
from grader.instructor.diagnosis import LANGUAGES, Fingerprint, diagnose, hint
from grader.instructor.reports import write_reports
from grader.instructor.rubric import load_rubric
from grader.instructor.verdict import FAILED
from grader.registry import HOOK_NAMES
from solutions.mistakes import CATALOGUE, by_id

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
    write_reports(out, run.graded, load_rubric(), dict(run.info, lang="en"), run.figures)
    return out


@pytest.fixture(scope="module")
def graded_zh(tmp_path_factory) -> Path:
    """The same students graded through the command line with ``--lang zh``."""
    out = tmp_path_factory.mktemp("graded-zh")
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
    named = {m for status, m in rows if status == FAILED and m}
    assert named == {mistake}, rows
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


@pytest.mark.parametrize(("student", "path", "hook", "mistake"), CHECKED, ids=CHECKED_IDS)
@pytest.mark.parametrize("lang", LANGUAGES, ids=list(LANGUAGES))
def test_check_names_the_mistake_and_its_hint(carol_folder, student, path, hook, mistake, lang):
    result = _check(_check_path(path, carol_folder), "--lang", lang)
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


def test_check_names_nothing_for_alice():
    result = _check(str(SUBMISSIONS / "alice.py"))
    assert result.exit_code == 0, result.output
    assert "looks like" not in result.output
    assert f"{len(HOOK_NAMES)} of {len(HOOK_NAMES)} exercises passing" in result.output


# --- diagnose, one rule at a time -----------------------------------------------------------


def _weights(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(2, 4, 4, generator=g, dtype=torch.float64).softmax(-1)


def _fp(mistake="m", outputs=None, error=None, unchanged=True, gpu=False) -> Fingerprint:
    return Fingerprint(mistake, "softmax_weights", list(outputs or []), error, unchanged, gpu)


def _reply(error: dict | None = None, unchanged: bool = True) -> dict:
    reply = {"id": 0, "ok": error is None, "inputs_unchanged": unchanged}
    if error is not None:
        reply["error"] = error
    return reply


NEAR = 1e-6


@pytest.mark.parametrize(
    ("theirs", "mine", "expected"),
    [
        (_weights(0), _weights(0), "m"),
        (_weights(0), _weights(0) + NEAR, "m"),
        (_weights(0), _weights(1), ""),
        (_weights(0), _weights(0) + 0.01, ""),
        (_weights(0), _weights(0).float(), ""),
        (_weights(0), _weights(0)[0], ""),
        (torch.eye(3, dtype=torch.bool), torch.eye(3, dtype=torch.bool), "m"),
        (torch.eye(3, dtype=torch.bool), ~torch.eye(3, dtype=torch.bool), ""),
        (torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]), "m"),
    ],
    ids=[
        "same-outputs",
        "within-tolerance",
        "different-outputs",
        "off-by-0.01",
        "other-dtype",
        "other-shape",
        "same-bool-mask",
        "other-bool-mask",
        "same-nans",
    ],
)
def test_diagnose_compares_outputs(theirs, mine, expected):
    assert diagnose([_fp(outputs=[theirs])], _reply(), {"out0": mine}, "values differ") == expected


def test_diagnose_compares_every_output_in_name_order():
    a, b = _weights(0), _weights(1)
    fps = [_fp(outputs=[a, b])]
    assert diagnose(fps, _reply(), {"out0": a, "out1": b}, "values differ") == "m"
    assert diagnose(fps, _reply(), {"out0": b, "out1": a}, "values differ") == ""
    assert diagnose(fps, _reply(), {"out0": a}, "values differ") == "", "fewer outputs than the mistake"


def test_diagnose_returns_the_first_matching_fingerprint():
    a, b = _weights(0), _weights(1)
    fps = [_fp("first", outputs=[b]), _fp("second", outputs=[a]), _fp("third", outputs=[a])]
    assert diagnose(fps, _reply(), {"out0": a}, "values differ") == "second"


def test_diagnose_without_a_reply_or_fingerprints_names_nothing():
    a = _weights(0)
    assert diagnose([_fp(outputs=[a])], None, {"out0": a}, "crashed") == ""
    assert diagnose([], _reply(), {"out0": a}, "values differ") == ""
    assert diagnose([_fp(outputs=[])], _reply(), {}, "no output") == "", "no outputs on either side is no evidence"


SPLIT_ERROR = "ValueError: d=# is not divisible by num_heads=#"


@pytest.mark.parametrize(
    ("theirs", "mine", "expected"),
    [
        (SPLIT_ERROR, {"type": "ValueError", "message": "d=10 is not divisible by num_heads=3"}, "m"),
        (SPLIT_ERROR, {"type": "ValueError", "message": "d=7 is not divisible by num_heads=2\nmore detail 12"}, "m"),
        (SPLIT_ERROR, {"type": "ValueError", "message": "d=1.5 is not divisible by num_heads=4"}, "m"),
        (SPLIT_ERROR, {"type": "AssertionError", "message": "d=10 is not divisible by num_heads=3"}, ""),
        (SPLIT_ERROR, {"type": "ValueError", "message": "num_heads must divide d"}, ""),
        (None, {"type": "ValueError", "message": "d=10 is not divisible by num_heads=3"}, ""),
        (SPLIT_ERROR, None, ""),
    ],
    ids=[
        "same-error-other-numbers",
        "first-line-only",
        "decimals-normalised",
        "other-type",
        "other-message",
        "error-vs-outputs",
        "outputs-vs-error",
    ],
)
def test_diagnose_compares_normalised_errors(theirs, mine, expected):
    a = _weights(0)
    fp = _fp(outputs=[] if theirs else [a], error=theirs)
    outputs = {} if mine else {"out0": a}
    assert diagnose([fp], _reply(mine), outputs, "raised") == expected


@pytest.mark.parametrize(
    ("fp_gpu", "message", "expected"),
    [
        (True, "will fail on a GPU: the mask is built on the CPU (Expected all tensors ...)", "m"),
        (True, "values differ: max abs diff 0.5", ""),
        (False, "will fail on a GPU: the mask is built on the CPU (Expected all tensors ...)", ""),
        (False, "values differ: max abs diff 0.5", "m"),
    ],
    ids=[
        "gpu-fingerprint-gpu-failure",
        "gpu-fingerprint-value-failure",
        "cpu-fingerprint-gpu-failure",
        "cpu-fingerprint-value-failure",
    ],
)
def test_will_fail_on_a_gpu_only_matches_a_gpu_fingerprint(fp_gpu, message, expected):
    a = _weights(0)
    # same outputs on both sides: only the GPU rule decides
    assert diagnose([_fp(outputs=[a], gpu=fp_gpu)], _reply(), {"out0": a}, message) == expected


@pytest.mark.parametrize(
    ("fp_unchanged", "mine_unchanged", "expected"),
    [(False, False, "m"), (False, True, ""), (True, False, ""), (True, True, "m")],
    ids=["mutation-vs-mutation", "mutation-vs-clean", "clean-vs-mutation", "clean-vs-clean"],
)
def test_an_input_mutation_fingerprint_needs_a_mutating_submission(fp_unchanged, mine_unchanged, expected):
    a = _weights(0)
    fp = _fp(outputs=[a], unchanged=fp_unchanged)
    assert diagnose([fp], _reply(unchanged=mine_unchanged), {"out0": a}, "modified its input") == expected


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
