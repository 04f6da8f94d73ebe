"""One ``--out`` is one class: its seed, suite and devices, its roster, and the files that list the whole class.

A first batch (ada: correct and printing; bea: a wrong causal mask; eve: exits
at import; fay: loops forever in softmax_weights) is graded once into an out
folder with no ``--seed``; each test works on a copy of it.  Late hand-ins
(cal: softmax ignores dim) go into the copy.  ``class.html`` is checked in
headless Chromium.
"""

from __future__ import annotations

import csv
import re
import shutil
import sqlite3
import sys
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from browser import dump_dom, screenshot
from click.testing import CliRunner
from learner_code import alice_with, other_groups_answers

from grader.cli import main
from grader.instructor import class_grading, class_report, lms
from grader.instructor.class_grading import GradeOptions, OutFolderConflict, grade_class
from grader.instructor.gradebook import ClassSettings, Gradebook
from grader.instructor.grades_csv import grades_rows
from grader.instructor.intake_model import Submission
from grader.instructor.junit import is_error
from grader.instructor.report_model import ClassRoll, Person, ReportOptions
from grader.instructor.reports import write_reports
from grader.instructor.roster import Roster
from grader.instructor.rubric import load_rubric
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, CaseResult
from grader.registry import HOOK_NAMES

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux only")

TIMEOUT = "2"
FIRST = ("ada", "bea", "eve", "fay")


def flat(text: str) -> str:
    return " ".join(text.split())


def read_csv(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def rows_by_student(path: Path) -> dict[str, list[str]]:
    return {row[0]: row for row in read_csv(path)[1:]}


def query(db: Path, sql: str, *params) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def invoke(args: list[str]):
    return CliRunner().invoke(main, ["grade", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def hand_ins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hand-ins")
    (root / "ada.py").write_text(
        alice_with(None) + '\nprint("hello from ada")\nprint("\\x1b[2J cleared?")\n', encoding="utf-8"
    )
    (root / "bea").mkdir()
    others = other_groups_answers()  # bea and fay finished every group: only their own mistakes are judged wrong
    (root / "bea" / "answers.py").write_text(alice_with("wrong_causal_mask") + others, encoding="utf-8")
    (root / "eve.py").write_text(alice_with("exit_at_import"), encoding="utf-8")
    (root / "fay.py").write_text(alice_with("infinite_loop") + others, encoding="utf-8")
    with zipfile.ZipFile(root / "cal.zip", "w") as zf:
        zf.writestr("cal/answers.py", alice_with("softmax_ignores_dim"))
    return root


def first_paths(root: Path) -> list[str]:
    return [str(root / "ada.py"), str(root / "bea"), str(root / "eve.py"), str(root / "fay.py")]


@pytest.fixture(scope="module")
def first(tmp_path_factory, hand_ins) -> tuple[Path, str]:
    """The first batch graded into a new out folder, with no --seed: the folder draws its own."""
    out = tmp_path_factory.mktemp("first") / "D"
    result = invoke([*first_paths(hand_ins), "--out", str(out), "--timeout", TIMEOUT, "--lms", "canvas"])
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.fixture
def copy(first, tmp_path) -> Path:
    out = tmp_path / "D"
    shutil.copytree(first[0], out)
    return out


def folder_seed(out: Path) -> str:
    ((seed,),) = query(out / "gradebook.sqlite", "SELECT value FROM class_settings WHERE key = 'seed'")
    return seed


# --- the status column, junit errors, what learners printed --------------------------------------------------


@pytest.mark.slow
def test_grades_csv_status_tells_an_error_from_a_zero(first):
    rows = rows_by_student(first[0] / "grades.csv")
    assert sorted(rows) == sorted(FIRST)
    status = {student: row[1] for student, row in rows.items()}
    assert status["ada"] == status["bea"] == "graded"
    assert status["fay"] == "timed out: softmax_weights"  # its loop ends its own cases only, and says so
    assert status["eve"].startswith("error: ") and "import" in status["eve"], status["eve"]
    assert float(rows["eve"][-2]) == 0.0  # an error earns nothing, and says why


def junit_cases(out: Path, student: str) -> list[ET.Element]:
    root = ET.parse(out / "junit.xml").getroot()
    (suite,) = [s for s in root.iter("testsuite") if s.get("name") == student]
    return list(suite.iter("testcase"))


def test_junit_marks_what_could_not_be_judged_as_error_and_a_wrong_answer_as_failure(first):
    out = first[0]
    bea = junit_cases(out, "bea")
    assert any(c.find("failure") is not None for c in bea) and all(c.find("error") is None for c in bea)
    eve = junit_cases(out, "eve")  # exits at import: nothing of it could be judged
    assert all(c.find("failure") is None for c in eve)
    assert all(c.find("error") is not None for c in eve if c.find("skipped") is None)
    fay = junit_cases(out, "fay")  # softmax_weights loops for ever: its cases time out, the rest are judged
    errors = [c for c in fay if c.find("error") is not None]
    assert errors and {c.get("classname") for c in errors} == {"attnkit.fay.softmax_weights"}
    assert any("timed out" in (c.find("error").get("message") or "") for c in errors)
    wrong = [f'{c.get("name")}: {c.find("failure").get("message")}' for c in fay if c.find("failure") is not None]
    assert wrong == []  # fay's other exercises are the reference's, right whatever the folder's seed
    root = ET.parse(out / "junit.xml").getroot()
    assert int(root.get("errors")) == sum(1 for s in ("ada", "bea", "eve", "fay") for c in junit_cases(out, s)
                                         if c.find("error") is not None)


def test_what_a_learner_printed_is_kept_inert_and_linked_from_the_class_report(first):
    out = first[0]
    printed = (out / "ada" / "output.txt").read_text(encoding="utf-8")
    assert "hello from ada" in printed and "\\x1b[2J" in printed and "\x1b" not in printed
    assert not (out / "bea" / "output.txt").exists()  # bea printed nothing
    assert 'href="ada/output.txt"' in (out / "class.html").read_text(encoding="utf-8")
    assert "(ada/output.txt)" in (out / "class.md").read_text(encoding="utf-8")


def test_a_grading_that_reuses_a_result_keeps_what_the_learner_printed(copy, hand_ins):
    """Graded again unchanged (its result reused), ada's output.txt and the class report's link to it stay."""
    result = invoke([str(hand_ins / "ada.py"), "--out", str(copy), "--timeout", TIMEOUT])
    assert result.exit_code == 0, result.output
    assert "1 already graded" in flat(result.output)  # reused, not regraded
    assert "hello from ada" in (copy / "ada" / "output.txt").read_text(encoding="utf-8")
    assert "(ada/output.txt)" in (copy / "class.md").read_text(encoding="utf-8")


def test_the_run_facts_are_in_the_class_report_and_on_no_learners_page(first):
    """The isolation, the devices not present here, the versions: the instructor's, said once in the class report."""
    out = first[0]
    assert "isolation: `" in (out / "class.md").read_text(encoding="utf-8")
    assert "\n1 point · " in (out / "class.md").read_text(encoding="utf-8")  # not "1 points"
    for student in ("ada", "bea"):
        page = (out / student / "feedback.md").read_text(encoding="utf-8")
        assert "isolation" not in page and "not available" not in page and "hidden suite" not in page
    options = ReportOptions(devices=("cpu", "meta"), skipped_devices={"cuda": "not available"}, isolation="none")
    run = class_report.class_report(points_of({"a": 4}, load_rubric()), load_rubric(), options).run
    assert (run["devices"], run["not run"], run["isolation"]) == ("cpu, meta", "cuda: not available", "none")


# --- one --out is one class ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_late_hand_in_joins_the_class_with_the_same_seed(copy, first, hand_ins, tmp_path):
    before = rows_by_student(first[0] / "grades.csv")
    result = invoke([str(hand_ins / "cal.zip"), "--out", str(copy), "--timeout", TIMEOUT])
    assert result.exit_code == 0, result.output
    seeds = {s for (s,) in query(copy / "gradebook.sqlite", "SELECT seed FROM runs")}
    assert seeds == {folder_seed(copy)}, "the late run drew another seed"
    after = rows_by_student(copy / "grades.csv")
    assert sorted(after) == sorted([*FIRST, "cal"])  # the whole class, not only the late batch
    assert {s: after[s] for s in FIRST} == before  # the first batch's rows are kept as they were
    assert {s.get("name") for s in ET.parse(copy / "junit.xml").getroot().iter("testsuite")} == set(after)
    assert "1 in this run, 4 not in this run, kept as graded earlier" in flat(result.output)
    # independently: cal graded alone under the folder's seed gets the same row
    alone = tmp_path / "alone"
    again = invoke([str(hand_ins / "cal.zip"), "--out", str(alone), "--seed", folder_seed(copy), "--timeout", TIMEOUT])
    assert again.exit_code == 0, again.output
    assert rows_by_student(alone / "grades.csv")["cal"] == after["cal"]


def test_a_different_seed_is_refused_and_nothing_is_written(copy, hand_ins):
    seed = folder_seed(copy)
    runs = query(copy / "gradebook.sqlite", "SELECT count(*) FROM runs")
    before = (copy / "grades.csv").read_bytes()
    other = str(int(seed) + 1)
    result = invoke([str(hand_ins / "cal.zip"), "--out", str(copy), "--seed", other])
    assert result.exit_code == 1, result.output
    text = flat(result.output)
    assert f"--seed {other}" in text and f"seed is {seed}" in text and "--force" in text, text
    assert query(copy / "gradebook.sqlite", "SELECT count(*) FROM runs") == runs
    assert (copy / "grades.csv").read_bytes() == before and not (copy / "cal").exists()


def test_a_different_suite_version_is_refused_naming_both(copy, hand_ins, monkeypatch):
    ((version,),) = query(copy / "gradebook.sqlite", "SELECT value FROM class_settings WHERE key = 'suite_version'")
    monkeypatch.setattr(class_grading, "suite_version", lambda: "a-newer-suite")
    result = invoke([str(hand_ins / "cal.zip"), "--out", str(copy)])
    assert result.exit_code == 1, result.output
    text = flat(result.output)
    assert version in text and "a-newer-suite" in text and "--force" in text and "regrade the whole class" in text


def test_a_different_device_set_is_refused(copy, hand_ins):
    result = invoke([str(hand_ins / "cal.zip"), "--out", str(copy), "--devices", "cpu"])
    assert result.exit_code == 1, result.output
    assert "devices are cpu, where this out folder's class was graded on" in flat(result.output)


@pytest.mark.slow
def test_force_under_a_new_suite_regrades_the_whole_class(copy, first, hand_ins, monkeypatch):
    monkeypatch.setattr(class_grading, "suite_version", lambda: "a-newer-suite")
    result = invoke([str(hand_ins / "cal.zip"), "--out", str(copy), "--force", "--timeout", TIMEOUT])
    assert result.exit_code == 0, result.output
    last = max(r for (r,) in query(copy / "gradebook.sqlite", "SELECT id FROM runs"))
    in_last = query(copy / "gradebook.sqlite", "SELECT student FROM submissions WHERE run_id = ?", last)
    regraded = {s for (s,) in in_last}
    assert regraded == {*FIRST, "cal"}  # every student of the class, from the hand-ins the gradebook keeps
    after = rows_by_student(copy / "grades.csv")
    assert {s: after[s] for s in FIRST} == rows_by_student(first[0] / "grades.csv")  # same code, same seed
    assert "Regraded 4 student(s) of the class" in flat(result.output)


def test_a_folder_of_no_student_of_the_class_is_reported_and_kept(copy, hand_ins):
    (copy / "zed").mkdir()
    (copy / "zed" / "feedback.md").write_text("an old feedback\n", encoding="utf-8")
    (copy / "notes").mkdir()  # not a student's folder: no feedback in it
    result = invoke([*first_paths(hand_ins), "--out", str(copy), "--timeout", TIMEOUT])
    assert result.exit_code == 0, result.output
    text = flat(result.output)
    assert "1 folder(s) in" in text and "belong to no student of its class" in text and "zed" in text, text
    assert (copy / "zed" / "feedback.md").is_file()
    assert "<code>zed</code>" in (copy / "class.html").read_text(encoding="utf-8")
    assert "notes" not in text.split("belong to no student")[1].split("Wrote")[0]


# --- the roster of the class -----------------------------------------------------------------------------------

ROSTER = [
    {"id": "ada", "name": "Ada Lovelace", "email": "ada@uni.example", "pattern": ""},
    {"id": "bea", "name": "Bea Smith", "email": "bea@uni.example", "pattern": ""},
    {"id": "dan", "name": "Dan Brown", "email": "dan@uni.example", "pattern": ""},
]


def grade_with_roster(out: Path, paths: list[str], rows: list[dict] | None, force: bool = False):
    roster = Roster.from_rows(rows) if rows is not None else None
    options = GradeOptions(roster=roster, force=force, executor=class_grading.LocalExecutor(2))
    run = grade_class(paths, out, options)
    options = replace(run.report_options, lms=("canvas", "moodle"))
    write_reports(out, run.graded, load_rubric(), options, run.figures, run.roll)
    return run


def test_a_roster_gives_missing_rows_and_the_lms_columns(copy, hand_ins):
    run = grade_with_roster(copy, [str(hand_ins / "ada.py")], ROSTER)  # ada reused: nothing is graded
    assert [p.id for p in run.roll.missing] == ["dan"]
    rows = rows_by_student(copy / "grades.csv")
    assert sorted(rows) == sorted([*FIRST, "dan"])
    assert rows["dan"][1] == "missing" and rows["dan"][2:-1] == [""] * (len(HOOK_NAMES) + 1)
    assert float(rows["dan"][-1]) == load_rubric().max_total
    canvas = read_csv(copy / "canvas.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "attnkit"]
    assert canvas[1][0] == "Points Possible" and float(canvas[1][-1]) == load_rubric().max_total
    by_id = {row[2]: row for row in canvas[2:]}
    assert by_id["ada"][:4] == ["Ada Lovelace", "", "ada", "ada@uni.example"]
    assert by_id["ada"][-1] == rows["ada"][-2]  # the total of grades.csv
    assert by_id["dan"][-1] == "" and by_id["eve"][-1] == ""  # missing and error: not posted as a zero
    assert by_id["eve"][0] == "eve"  # a student graded but not on the roster keeps their row
    moodle = read_csv(copy / "moodle.csv")
    assert moodle[0] == ["Email address", "ID number", "Full name", "attnkit"]
    assert ["bea@uni.example", "bea", "Bea Smith", rows["bea"][-2]] in moodle
    missing = [s for s in ET.parse(copy / "junit.xml").getroot().iter("testsuite") if s.get("name") == "dan"]
    assert missing and missing[0].find("testcase/error").get("type") == "Missing"


def test_a_grading_without_an_lms_export_removes_the_earlier_one(copy, hand_ins):
    """An export left from an earlier grading holds stale points (an old rubric): each grading rewrites or removes."""
    run = grade_with_roster(copy, [str(hand_ins / "ada.py")], ROSTER)
    assert (copy / "canvas.csv").is_file() and (copy / "moodle.csv").is_file()
    options = replace(run.report_options, lms=("moodle",))
    assert write_reports(copy, run.graded, load_rubric(), options, run.figures, run.roll) == []
    assert not (copy / "canvas.csv").exists() and (copy / "moodle.csv").is_file()
    assert write_reports(copy, run.graded, load_rubric(), replace(options, lms=()), run.figures, run.roll) == []
    assert not (copy / "moodle.csv").exists()


@pytest.mark.slow
def test_the_stored_roster_is_used_grown_and_never_silently_replaced(copy, hand_ins):
    ada = [str(hand_ins / "ada.py")]
    grade_with_roster(copy, ada, ROSTER)
    assert [p.id for p in grade_with_roster(copy, ada, None).roll.missing] == ["dan"]  # kept by the out folder
    grown = [*ROSTER, {"id": "gus", "name": "Gus", "email": "gus@uni.example", "pattern": ""}]
    run = grade_with_roster(copy, ada, grown)
    assert [p.id for p in run.roll.missing] == ["dan", "gus"] and "gus" in " ".join(run.notes)
    with pytest.raises(OutFolderConflict, match="drops dan, gus"):
        grade_with_roster(copy, ada, ROSTER[:2])
    replaced = grade_with_roster(copy, ada, ROSTER[:2], force=True)
    assert replaced.roll.missing == [] and "roster replaced" in " ".join(replaced.notes)


# --- the class report in a real browser --------------------------------------------------------------------------

BAR_BLUE = (0x09, 0x69, 0xDA)


@pytest.mark.slow
def test_class_html_renders_a_histogram_per_exercise_and_the_top_mistakes_in_chromium(first, tmp_path):
    page = first[0] / "class.html"
    dom = dump_dom(page, tmp_path / "dom")
    histograms = re.findall(r'<svg class="histogram"', dom)
    assert len(histograms) == len(HOOK_NAMES)
    top = dom.split('<table class="top-mistakes">', 1)[1].split("</table>", 1)[0]
    assert "causal_mask" in top and 'href="bea/feedback.html"' in top, top
    for link in set(re.findall(r'href="([^"#]+)"', dom)):  # every relative link leads to a file written
        assert (first[0] / link).is_file(), link
    image = pytest.importorskip("PIL.Image", reason="pillow comes with matplotlib (the plots extra)")
    pixels = np.asarray(image.open(screenshot(page, tmp_path / "shot")).convert("RGB"), dtype=np.int16)
    blue = int((np.abs(pixels - np.array(BAR_BLUE)).max(axis=-1) <= 8).sum())
    assert blue > 40 * 10 * len(HOOK_NAMES), f"only {blue} pixels of the histograms' bars"


# --- the rules on their own (no grading) -------------------------------------------------------------------------

VERDICTS = {  # what a verdict says of a wrong answer: a failure
    "wrong values": "the values differ from the reference in 3 of 16 positions",
    "wrong shape": "returned shape (2, 3), expected (2, 4)",
    "missing hook": "no function softmax_weights; the hook is softmax_weights(scores, dim=-1)",
}
NOT_JUDGED = {  # what grading says where no answer came back to judge: an error
    "refused": "not graded: the zip holds no Python file",
    "not loaded": "could not load the submission: the process is gone (Broken pipe)",
    "no import": "the submission does not import: ZeroDivisionError: division by zero",
    "timeout": "timed out after 2 s (an infinite loop, or far too slow)",
    "deadline": "the submission used up its 60 s time limit",
    "crash": "the process ended during this call (sys.exit, os._exit, a crash, or a resource limit)",
    "after a crash": "not run: an earlier case of softmax_weights (c1) failed with: timed out after 2 s",
    "malformed": "sent a malformed reply: 'id' is missing",
    "restarts": "stopped after 2 restarts of the learner's process",
}


def case(status: str, message: str = "", hook: str = "softmax_weights", mistake: str = "") -> CaseResult:
    return CaseResult("s", hook, "c1", "cpu", "float32", status, message, 0.0, mistake)


@pytest.mark.parametrize("message", VERDICTS.values(), ids=VERDICTS.keys())
def test_a_wrong_answer_is_a_failure(message):
    assert not is_error(case(FAILED, message))


@pytest.mark.parametrize("message", NOT_JUDGED.values(), ids=NOT_JUDGED.keys())
def test_what_could_not_be_judged_is_an_error(message):
    assert is_error(case(FAILED, message))
    assert not is_error(case(SKIPPED, message)) and not is_error(case(PASSED, message))


def points_of(earned_by_student: dict[str, float], rubric) -> ClassRoll:
    """A class where each student passes ``earned`` of 4 softmax cases and every case of the other hooks."""
    graded = []
    for student, passed in earned_by_student.items():
        results = [case(PASSED, hook=h) for h in HOOK_NAMES if h != "softmax_weights"]
        results += [case(PASSED) for _ in range(int(passed))] + [case(FAILED, "wrong values", mistake="m1")
                                                                for _ in range(4 - int(passed))]
        graded.append((Submission(student, f"{student}.py", "py"), results))
    return ClassRoll(graded=graded)


def test_the_histogram_counts_students_by_share_of_the_points():
    rubric = load_rubric()
    passed = {"a": 4, "b": 4, "c": 3, "d": 2, "e": 1, "f": 0}  # of 4 cases: full, full, 75%, 50%, 25%, 0
    report = class_report.class_report(points_of(passed, rubric), rubric)
    (softmax,) = [e for e in report.exercises if e.hook == "softmax_weights"]
    counts = dict((bar.label, bar.count) for bar in softmax.bars)
    shares = [p / 4 for p in passed.values()]  # the bins, counted independently of the code under test
    expected = {
        "0": sum(s == 0 for s in shares),
        "≤25%": sum(0 < s <= 0.25 for s in shares),
        "≤50%": sum(0.25 < s <= 0.5 for s in shares),
        "≤75%": sum(0.5 < s <= 0.75 for s in shares),
        "<100%": sum(0.75 < s < 1 for s in shares),
        "full": sum(s == 1 for s in shares),
    }
    assert counts == expected
    assert [(m.mistake, m.students) for m in softmax.mistakes] == [("m1", ["c", "d", "e", "f"])]
    assert report.top[0].count == 4
    assert softmax.mean == pytest.approx(sum(shares) / len(shares) * rubric.points["softmax_weights"])


def test_grades_rows_put_a_missing_student_in_order_with_empty_points():
    rubric = load_rubric()
    roll = points_of({"amy": 4, "zoe": 2}, rubric)
    rows = grades_rows(roll.graded, rubric, [Person("max", "Max", "m@x")])
    assert [r[0] for r in rows[1:]] == ["amy", "max", "zoe"]
    assert rows[2][1:] == ["missing", *[""] * (len(HOOK_NAMES) + 1), f"{rubric.max_total:.2f}"]


def test_lms_text_cells_cannot_start_a_formula():
    rubric = load_rubric()
    roll = points_of({"amy": 4}, rubric)
    roll.people = {"amy": Person("amy", "=HYPERLINK(\"x\")", "+a@x")}
    (row,) = lms.canvas_rows(roll, rubric)[2:]
    assert row[0].startswith("'=") and row[3].startswith("'+")


def test_class_settings_refuse_a_change_unless_forced(tmp_path):
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        drawn, _ = class_grading.class_settings(book, ClassSettings("", "v1", ["cpu", "meta"]), force=False)
        assert isinstance(drawn.seed, int)  # a new folder draws its seed
        same, notes = class_grading.class_settings(book, ClassSettings("", "v1", ["meta", "cpu"]), force=False)
        assert same == drawn and notes == []  # no --seed: the folder's
        for wanted in (ClassSettings(int(drawn.seed) + 1, "v1", ["cpu", "meta"]),
                       ClassSettings("", "v2", ["cpu", "meta"]), ClassSettings("", "v1", ["cpu"])):
            with pytest.raises(OutFolderConflict, match="--force"):
                class_grading.class_settings(book, wanted, force=False)
        assert book.class_settings() == drawn  # a refusal changes nothing
        forced, notes = class_grading.class_settings(book, ClassSettings("", "v2", ["cpu"]), force=True)
        assert forced == ClassSettings(drawn.seed, "v2", ["cpu"]) == book.class_settings() and notes


def test_the_class_report_counts_who_timed_out(first):
    out = first[0]
    for page in ("class.md", "class.html"):
        text = (out / page).read_text(encoding="utf-8")
        assert "1 timed out" in text and "timed out: softmax" in text.replace("\\_", "_"), page


def test_the_class_report_holds_each_id_note_whole_and_inert():
    """The console cuts an id note at its width; the class report keeps it whole, a learner's name made inert."""
    rubric = load_rubric()
    roll = points_of({"amy": 4, "zoe": 2}, rubric)
    long_note = "'submission-zoe-2026-12-07-2.zip': its name claims the id 'zoe' (attnkit submit's name)" + " x" * 60
    roll.graded[1][0].notes.append(long_note)
    roll.graded[0][0].notes.append("'<b>amy</b>.zip' graded as 'amy'")
    report = class_report.class_report(roll, rubric)
    assert report.id_notes == [("amy", "'<b>amy</b>.zip' graded as 'amy'"), ("zoe", long_note)]
    md, html = class_report.render_md(report), class_report.render_html(report)
    assert "## Student ids" in md and long_note.replace("_", "\\_") in md
    from markupsafe import escape

    assert "&lt;b&gt;amy&lt;/b&gt;.zip" in html and "<b>amy</b>" not in html and str(escape(long_note)) in html
    assert "No hand-in's id needed a note." in class_report.render_md(class_report.class_report(points_of(
        {"amy": 4}, rubric), rubric))
