"""``attnkit override``: an instructor's grade that every file says and every regrade keeps (issue 28).

A class of two (ada correct, bea with a wrong causal mask) graded once with ``--lms canvas``; each test works on a
copy.  Undoing an override must give back every file byte for byte: the reports written again from the gradebook
are exactly what ``attnkit grade`` wrote.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from learner_code import alice_with, other_groups_answers

from grader.cli import main
from grader.registry import HOOK_NAMES

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="grading reads /proc; Linux only")

REASON = "regrade request: the mask was right & <b>only</b> its dtype was not"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def row_in(grades_csv: Path, student: str) -> dict[str, str]:
    with grades_csv.open(newline="", encoding="utf-8") as fh:
        (found,) = [r for r in csv.DictReader(fh) if r["student"] == student]
    return found


def row(out: Path, student: str) -> dict[str, str]:
    return row_in(out / "grades.csv", student)


def files(out: Path) -> dict[str, bytes]:
    """Every file the reports wrote (the gradebook left out: it holds the overrides)."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in out.rglob("*")
        if p.is_file() and not p.name.startswith("gradebook.sqlite")
    }


@pytest.fixture(scope="module")
def hand_ins(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("hand-ins")
    others = other_groups_answers()
    (root / "ada.py").write_text(alice_with(None) + others, encoding="utf-8")
    (root / "bea.py").write_text(alice_with("wrong_causal_mask") + others, encoding="utf-8")
    return [str(root / "ada.py"), str(root / "bea.py")]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, hand_ins) -> Path:
    out = tmp_path_factory.mktemp("graded") / "D"
    result = invoke("grade", *hand_ins, "--out", str(out), "--seed", "7", "--lms", "canvas")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture()
def out(graded, tmp_path) -> Path:
    copy = tmp_path / "D"
    shutil.copytree(graded, copy)
    return copy


@pytest.fixture()
def sample_out(graded_sample_class, tmp_path) -> Path:
    """A copy of the sample class's out folder (graded once per test run): what the fast tests need."""
    copy = tmp_path / "sample"
    shutil.copytree(graded_sample_class / "out", copy)
    return copy


@pytest.mark.slow
def test_an_override_is_in_every_file_and_undoing_it_gives_every_file_back(out):
    before = files(out)
    bea = row(out, "bea")
    assert float(bea["causal_mask"]) < 1.0
    result = invoke("override", "bea", "causal_mask", "1", "--reason", REASON, "--by", "prof", "--out", str(out))
    assert result.exit_code == 0, result.output
    adjusted = row(out, "bea")
    assert adjusted["status"] == "adjusted: causal_mask" and float(adjusted["causal_mask"]) == 1.0
    gain = 1.0 - float(bea["causal_mask"])
    assert float(adjusted["total"]) == pytest.approx(float(bea["total"]) + gain)
    canvas = (out / "canvas.csv").read_text(encoding="utf-8")
    assert f"{float(adjusted['total']):.2f}" in canvas
    results = json.loads((out / "bea" / "results.json").read_text(encoding="utf-8"))
    (test,) = [t for t in results["tests"] if t["name"] == "causal_mask"]
    assert test["score"] == 1.0 and REASON in test["output"] and results["score"] == float(adjusted["total"])
    assert f"Why: {REASON}" in (out / "bea" / "feedback.md").read_text(encoding="utf-8").replace("\\", "")
    html = (out / "bea" / "feedback.html").read_text(encoding="utf-8")
    assert "&amp; &lt;b&gt;only&lt;/b&gt; its dtype" in html and "<b>only</b>" not in html  # text, never markup
    class_html = (out / "class.html").read_text(encoding="utf-8")
    assert "adjusted: causal_mask" in class_html
    assert "(override 1, by prof): " in class_html and "&amp; &lt;b&gt;only&lt;/b&gt; its dtype" in class_html
    assert "`causal_mask` = 1 (override 1, by prof): " in (out / "class.md").read_text(encoding="utf-8")
    assert files(out)["ada/feedback.html"] == before["ada/feedback.html"]
    listed = invoke("override", "--list", "--out", str(out))
    assert listed.output.startswith("1 bea causal_mask = 1 (in force; prof "), listed.output
    assert listed.output.rstrip().endswith(REASON), listed.output
    result = invoke("override", "--undo", "1", "--out", str(out))
    assert result.exit_code == 0, result.output
    after = files(out)
    assert [name for name in before.keys() | after.keys() if before.get(name) != after.get(name)] == []


@pytest.mark.slow
def test_an_override_survives_a_forced_regrade_under_a_new_rubric_and_the_diff_shows_the_rubric(out, hand_ins,
                                                                                                tmp_path):
    """Overrides made, then a --force regrade under a new rubric: they still apply; the diff from the first
    grading lists, for every student, exactly the cells that changed between the two gradings' grades.csv."""
    shutil.copy(out / "grades.csv", tmp_path / "before.csv")
    assert invoke("override", "ada", "total", "30", "--reason", "late", "--out", str(out)).exit_code == 0
    assert invoke("override", "bea", "causal_mask", "1", "--reason", REASON, "--out", str(out)).exit_code == 0
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("[points]\ncausal_mask = 3\nsoftmax_weights = 4\n", encoding="utf-8")
    result = invoke("grade", *hand_ins, "--out", str(out), "--force", "--rubric", str(rubric))
    assert result.exit_code == 0, result.output
    assert "not regraded" not in " ".join(result.output.split())
    ada, bea = row(out, "ada"), row(out, "bea")
    assert (ada["total"], ada["status"]) == ("30.00", "adjusted: total")
    assert (bea["causal_mask"], bea["softmax_weights"], bea["status"]) == ("1.00", "4.00", "adjusted: causal_mask")
    result = invoke("diff", "--out", str(out))
    assert result.exit_code == 0, result.output
    with (out / "diff.csv").open(newline="", encoding="utf-8") as fh:
        changes = {(r["student"], r["exercise"]): r for r in csv.DictReader(fh)}
    old, new = (tmp_path / "before.csv", out / "grades.csv")
    expected = {
        (student, column): (row_in(old, student)[column], row_in(new, student)[column])
        for student in ("ada", "bea")
        for column in (*HOOK_NAMES, "total")
        if row_in(old, student)[column] != row_in(new, student)[column]
    }
    assert {key: (c["before"], c["after"]) for key, c in changes.items() if c["before"] != c["after"]} == expected
    for student in ("ada", "bea"):
        assert changes[student, "softmax_weights"]["why"] == "rubric: worth 4.00, was 2.00"
    assert changes["bea", "causal_mask"]["why"].startswith("rubric: worth 3.00, was 1.00; override 2 made")
    assert changes["ada", "total"]["why"] == "override 1 made"
    assert "the later grading&#39;s files showed 2 override(s)" in (out / "diff.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("zed", "causal_mask", "1", "--reason", "x"), "no student 'zed' in this class"),
        (("bob", "causal", "1", "--reason", "x"), "no exercise 'causal'"),
        (("bob", "causal_mask", "9", "--reason", "x"), "points must be between 0 and 1"),
        (("bob", "causal_mask", "nan", "--reason", "x"), "points must be between 0 and 1"),
        (("bob", "causal_mask", "1"), "needs a reason"),
        (("bob", "causal_mask"), "all three"),
        (("--undo", "5"), "no override 5 in force"),
        (("--list", "--undo", "1"), "one of them"),
    ],
    ids=["student", "exercise", "too-many", "nan", "no-reason", "no-points", "undo-unknown", "two-actions"],
)
def test_a_wrong_override_is_a_usage_error_that_changes_nothing(sample_out, args, said):
    before = files(sample_out)
    result = invoke("override", *args, "--out", str(sample_out))
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert files(sample_out) == before
    assert invoke("override", "--list", "--out", str(sample_out)).output == ""


def test_only_refuses_a_rubric_the_class_was_not_graded_under(sample_out, tmp_path):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("[points]\ncausal_mask = 3\n", encoding="utf-8")
    result = invoke("grade", "--out", str(sample_out), "--only", "bob", "--rubric", str(rubric))
    assert result.exit_code == 2 and "grade the whole class" in " ".join(result.output.split()), result.output


@pytest.mark.slow
def test_a_regrade_killed_midway_keeps_the_override_and_writes_nothing_half(out, hand_ins, tmp_path):
    """SIGKILL once the forced regrade has recorded one submission: every report is as it was (they are written
    when a run completes, each atomically), the override is still in force, and running the command again
    finishes the regrade with the override applied."""
    assert invoke("override", "bea", "causal_mask", "1", "--reason", REASON, "--out", str(out)).exit_code == 0
    before = files(out)
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("[points]\nsoftmax_weights = 4\n", encoding="utf-8")
    command = [sys.executable, "-m", "grader.cli", "grade", *hand_ins, "--out", str(out), "--force", "--rubric",
               str(rubric), "--jobs", "1"]  # fmt: skip
    db = out / "gradebook.sqlite"

    def recorded_in_new_run() -> int:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM submissions WHERE run_id > 1").fetchone()[0]
        finally:
            conn.close()

    kit = Path(__file__).resolve().parents[1]
    grading = subprocess.Popen(command, cwd=kit, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while recorded_in_new_run() < 1:
            assert grading.poll() is None and time.monotonic() < deadline, "the regrade ended or stalled"
            time.sleep(0.05)
        grading.send_signal(signal.SIGKILL)
        grading.wait(timeout=30)
    finally:
        if grading.poll() is None:
            grading.kill()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    assert conn.execute("SELECT count(*) FROM runs WHERE finished_at IS NULL").fetchone()[0] == 1, "not midway"
    conn.close()
    after = files(out)
    assert [name for name in before.keys() | after.keys() if before.get(name) != after.get(name)] == []
    assert "(in force;" in invoke("override", "--list", "--out", str(out)).output
    rerun = subprocess.run(command, cwd=kit, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    bea = row(out, "bea")
    assert (bea["causal_mask"], bea["softmax_weights"], bea["status"]) == ("1.00", "4.00", "adjusted: causal_mask")


def test_an_override_worth_more_than_a_later_rubric_gives_counts_as_the_most():
    from grader.instructor.rubric import TOTAL, Override, load_rubric, score, total

    rubric = load_rubric()
    rubric = dataclasses.replace(
        rubric,
        points={**rubric.points, "causal_mask": 0.5},
        overrides=(Override(1, "bea", "causal_mask", 1.0, "x"), Override(2, "ada", TOTAL, 99.0, "y")),
    )
    bea = score([], rubric, "bea")
    assert bea["causal_mask"] == (0.5, 0.5)
    assert total(score([], rubric, "ada"), rubric, "ada") == (rubric.max_total, rubric.max_total)
    assert [o.id for o in rubric.capped_overrides()] == [1, 2]


def test_an_out_folder_another_command_is_writing_is_refused_and_nothing_changes(sample_out):
    """Two commands never write one class at once: while one holds OUT, override and grade refuse (exit 1)."""
    from grader.instructor.out_folder import OutFolderBusy, holding

    before = files(sample_out)
    with holding(sample_out):  # as a running `attnkit grade` holds it
        fds = Path("/proc/self/fd")
        held = [int(fd.name) for fd in fds.iterdir() if os.path.realpath(fd) == str(sample_out.resolve())]
        assert held and not any(os.get_inheritable(fd) for fd in held)  # no learner's process inherits it
        for args in (("override", "bob", "causal_mask", "1", "--reason", "x"), ("grade", "--only", "bob")):
            result = invoke(*args, "--out", str(sample_out))
            assert result.exit_code == 1, result.output
            assert "is being written by another attnkit command" in " ".join(result.output.split())
        with pytest.raises(OutFolderBusy), holding(sample_out):
            pass
        assert invoke("override", "--list", "--out", str(sample_out)).exit_code == 0  # reading needs no hold
    assert files(sample_out) == before
    result = invoke("override", "bob", "causal_mask", "1", "--reason", "x", "--out", str(sample_out))
    assert result.exit_code == 0, result.output  # let go when the holder ends


def test_nothing_writes_the_reports_while_a_grading_is_unfinished(sample_out):
    """A stopped run's results are not the class's yet: override, undo and --only refuse until it is finished."""
    from grader.instructor.gradebook import Gradebook

    out = sample_out
    with Gradebook(out / "gradebook.sqlite") as book:
        settings = book.class_settings()
        assert settings is not None
        book.start_run(settings.seed, settings.suite_version, settings.devices, "kit", "none")
    before = files(out)
    for args in (("override", "bob", "causal_mask", "1", "--reason", "x"), ("grade", "--only", "bob")):
        result = invoke(*args, "--out", str(out))
        assert result.exit_code == 2 and "is unfinished (run 2" in " ".join(result.output.split()), result.output
    assert files(out) == before


@pytest.mark.slow
def test_only_writes_with_the_class_choices_and_diff_shows_an_override_made_between_gradings(out, hand_ins,
                                                                                             tmp_path):
    """The class was graded with --lms canvas: --only (no --lms) keeps canvas.csv.  An override made after run 1
    is part of what the next grading's files show, and the diff says so, as grades.csv changed."""
    shutil.copy(out / "grades.csv", tmp_path / "before.csv")
    assert invoke("override", "bea", "causal_mask", "1", "--reason", "x", "--out", str(out)).exit_code == 0
    canvas = (out / "canvas.csv").read_bytes()
    result = invoke("grade", "--out", str(out), "--only", "bea")
    assert result.exit_code == 0, result.output
    assert (out / "canvas.csv").read_bytes() == canvas
    result = invoke("diff", "--out", str(out), "--from", "1", "--to", "2")
    assert result.exit_code == 0, result.output
    with (out / "diff.csv").open(newline="", encoding="utf-8") as fh:
        changes = {(r["student"], r["exercise"]): r for r in csv.DictReader(fh)}
    before, after = row_in(tmp_path / "before.csv", "bea"), row(out, "bea")
    assert changes["bea", "causal_mask"]["before"] == before["causal_mask"] != after["causal_mask"] == "1.00"
    assert changes["bea", "causal_mask"]["why"] == "override 1 made"
    assert changes["bea", "total"]["after"] == after["total"] and set(changes) == {("bea", "causal_mask"),
                                                                                   ("bea", "total")}


def test_who_made_an_override_is_told_without_user_set(monkeypatch):
    """--by's default: the login name, from the password database where no variable names it (cron, a container)."""
    import pwd

    from grader.course_commands import _login_name

    try:
        entry = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        pytest.skip("this uid has no entry in the password database")
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    assert _login_name() == entry != ""
    monkeypatch.setenv("LOGNAME", "tutor")
    assert _login_name() == "tutor"
