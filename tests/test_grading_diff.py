"""``attnkit diff``: what changed between two gradings of a class (issue 28), checked against the grades.csv files.

Two hand-ins graded once (ada correct, bea with a wrong causal mask), then graded again under a changed rubric, or
with bea's mistake fixed and only bea regraded.  The diff must list, per student and exercise, exactly the points
that differ between the two gradings' own grades.csv, with the reason.
"""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from learner_code import alice_with, other_groups_answers

from grader.cli import main
from grader.registry import HOOK_NAMES

SEED = "7"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="grading reads /proc; Linux only")


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def points_of(grades_csv: Path) -> dict[tuple[str, str], float]:
    """``(student, exercise or "total") -> points`` from a grades.csv."""
    return {
        (row["student"], column): float(row[column])
        for row in rows_of(grades_csv)
        for column in (*HOOK_NAMES, "total")
    }


def changed_points(before: Path, after: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """What an independent reader sees: the cells that differ between two grades.csv files."""
    old, new = points_of(before), points_of(after)
    return {key: (old[key], new[key]) for key in old.keys() & new.keys() if old[key] != new[key]}


def listed(out: Path) -> dict[tuple[str, str], tuple[float, float]]:
    return {
        (row["student"], row["exercise"]): (float(row["before"]), float(row["after"]))
        for row in rows_of(out / "diff.csv")
        if row["before"] != row["after"]
    }


@pytest.fixture(scope="module")
def hand_ins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hand-ins")
    others = other_groups_answers()
    (root / "ada.py").write_text(alice_with(None) + others, encoding="utf-8")
    (root / "bea.py").write_text(alice_with("wrong_causal_mask") + others, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory, hand_ins) -> Path:
    out = tmp_path_factory.mktemp("graded") / "D"
    result = invoke("grade", str(hand_ins / "ada.py"), str(hand_ins / "bea.py"), "--out", str(out), "--seed", SEED)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_a_changed_rubric_is_listed_for_every_student_as_grades_csv_changed(graded, hand_ins, tmp_path):
    out = tmp_path / "D"
    shutil.copytree(graded, out)
    shutil.copy(out / "grades.csv", tmp_path / "before.csv")
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("[points]\ncausal_mask = 4\nsoftmax_weights = 3\n", encoding="utf-8")
    paths = [str(hand_ins / "ada.py"), str(hand_ins / "bea.py")]
    result = invoke("grade", *paths, "--out", str(out), "--rubric", str(rubric))
    assert result.exit_code == 0, result.output
    result = invoke("diff", "--out", str(out))
    assert result.exit_code == 0, result.output
    expected = changed_points(tmp_path / "before.csv", out / "grades.csv")
    assert {student for student, _ in expected} == {"ada", "bea"}
    assert listed(out) == expected
    why = {(r["student"], r["exercise"]): r["why"] for r in rows_of(out / "diff.csv")}
    for student in ("ada", "bea"):
        assert why[student, "causal_mask"].startswith("rubric: worth 4.00, was ")
        assert why[student, "softmax_weights"].startswith("rubric: worth 3.00, was ")
    assert "2 of 2 student(s) changed" in " ".join(result.output.split())


@pytest.mark.slow
def test_a_fixed_hand_in_regraded_alone_lists_the_cases_that_now_pass(graded, hand_ins, tmp_path):
    out = tmp_path / "D"
    shutil.copytree(graded, out)
    shutil.copy(out / "grades.csv", tmp_path / "before.csv")
    fixed = tmp_path / "late" / "bea.py"
    fixed.parent.mkdir()
    fixed.write_text(alice_with(None) + other_groups_answers(), encoding="utf-8")
    result = invoke("grade", str(fixed), "--out", str(out), "--only", "bea")
    assert result.exit_code == 0 and "older hand-in" not in result.output, result.output
    result = invoke("diff", "--out", str(out))
    assert result.exit_code == 0, result.output
    expected = changed_points(tmp_path / "before.csv", out / "grades.csv")
    assert {student for student, _ in expected} == {"bea"} and ("bea", "causal_mask") in expected
    assert listed(out) == expected
    (row,) = [r for r in rows_of(out / "diff.csv") if (r["student"], r["exercise"]) == ("bea", "causal_mask")]
    assert row["why"].startswith("new hand-in; ") and " now pass (" in row["why"], row["why"]
    html = (out / "diff.html").read_text(encoding="utf-8")
    assert "1 of 2 students changed" in html and "causal_mask" in html
    # --only ada from the class folder: bea's first hand-in is there too, but bea is not regraded: nothing to say
    result = invoke("grade", str(hand_ins / "ada.py"), str(hand_ins / "bea.py"), "--out", str(out), "--only", "ada")
    assert result.exit_code == 0 and "older hand-in" not in result.output, result.output
    # the class folder still holds bea's first hand-in: grading it again takes her back to it, and says so
    result = invoke("grade", str(hand_ins / "ada.py"), str(hand_ins / "bea.py"), "--out", str(out))
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"older hand-in: bea: {hand_ins / 'bea.py'} is the hand-in graded in run 1, not the one graded since" in said
    assert said.count("older hand-in") == 1  # ada's is the one graded last: nothing to say
    assert (out / "grades.csv").read_bytes() == (tmp_path / "before.csv").read_bytes()


@pytest.mark.slow
def test_the_diff_page_renders_in_chromium(graded, hand_ins, tmp_path):
    from browser import dump_dom

    out = tmp_path / "D"
    shutil.copytree(graded, out)
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("all_or_nothing = ['causal_mask']\n", encoding="utf-8")
    result = invoke("grade", str(hand_ins / "ada.py"), str(hand_ins / "bea.py"), "--out", str(out), "--rubric",
                    str(rubric))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert invoke("diff", "--out", str(out)).exit_code == 0
    dom = dump_dom(out / "diff.html", tmp_path / "chromium")
    assert "<table class=\"changes\">" in dom and "now all or nothing" in dom, dom[-2000:]


@pytest.fixture()
def sample_out(graded_sample_class, tmp_path) -> Path:
    """A copy of the sample class's out folder (graded once per test run, seed 11): what the fast tests need."""
    copy = tmp_path / "sample"
    shutil.copytree(graded_sample_class / "out", copy)
    return copy


def test_diff_lists_the_gradings(sample_out):
    result = invoke("diff", "--out", str(sample_out), "--list")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("run 1 (") and "seed 11" in result.output
    assert "results of 9 students" in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [((), "two are needed to compare"), (("--from", "1", "--to", "9"), "run 9 is not a finished grading")],
    ids=["one-grading", "unknown-run"],
)
def test_diff_needs_two_gradings_it_knows(sample_out, args, said):
    result = invoke("diff", "--out", str(sample_out), *args)
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert not (sample_out / "diff.csv").exists()


def test_diff_without_a_gradebook_is_a_usage_error(tmp_path):
    result = invoke("diff", "--out", str(tmp_path / "none"))
    assert result.exit_code == 2 and "no gradebook at" in result.output, result.output
