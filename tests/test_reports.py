"""Rubric scoring and the files grading leaves behind: grades.csv, results.json, feedback, JUnit."""

from __future__ import annotations

import base64
import csv
import io
import itertools
import json
import re
import unicodedata
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
import torch
from rich.console import Console

from grader.hook_table import TABLE
from grader.instructor import console_summary, feedback, heatmaps, junit, report_model, reports
from grader.instructor import rubric as rubric_module
from grader.instructor.console_summary import summary_table
from grader.instructor.feedback import render_feedback_html, render_feedback_md
from grader.instructor.grades_csv import grades_csv, grades_rows
from grader.instructor.heatmaps import Figure
from grader.instructor.inert import inert
from grader.instructor.intake_model import Submission
from grader.instructor.junit import junit_xml
from grader.instructor.report_model import MAX_OUTPUT_LINES, ReportOptions, device_summary, student_report
from grader.instructor.reports import student_folder, write_reports
from grader.instructor.results_json import gradescope_results
from grader.instructor.rubric import DEFAULT_RUBRIC, load_rubric, parse_rubric, score
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, CaseResult
from grader.registry import HOOK_NAMES

OPTIONS = ReportOptions(
    devices=("cpu", "meta"),
    skipped_devices={"cuda": "not available"},
    suite_version="suite-1",
    kit="0.1.0",
    isolation="namespaces",
    seed=987654321,
)


def case(student, hook, status, name="c", device="cpu", dtype="float32", message="", mistake=""):
    return CaseResult(student, hook, name, device, dtype, status, message, 0.01, mistake)


def perfect(student: str) -> list[CaseResult]:
    out = []
    for hook in HOOK_NAMES:
        out += [case(student, hook, PASSED, f"c{i}") for i in range(2)]
        out.append(case(student, hook, SKIPPED, "c0", "cuda", message="cuda: not available"))
    return out


def one_wrong(student: str, hook: str = "softmax_weights", message: str = "wrong values") -> list[CaseResult]:
    return [r if not (r.hook == hook and r.case == "c1") else case(student, hook, FAILED, "c1", message=message)
            for r in perfect(student)]


def sub(student: str, error: str | None = None) -> Submission:
    return Submission(student, f"{student}.py", "py", {}, f"{student}.py", f"sha-{student}", error)


@pytest.fixture
def graded():
    return [
        (sub("carol"), one_wrong("carol")),
        (sub("alice"), perfect("alice")),
        (sub("bob", "refused zip: entry '../evil.py' points outside the archive"), []),
        (sub("dan"), one_wrong("dan", "make_multihead_attention", "<script>alert('x')</script> & more")),
    ]


# --- the rubric ---------------------------------------------------------------------------------


def test_packaged_rubric_covers_every_hook(rubric):
    assert set(rubric.points) == set(HOOK_NAMES)
    assert all(p > 0 for p in rubric.points.values())
    assert rubric.points["softmax_weights"] == 2 and rubric.points["make_multihead_attention"] == 3
    assert rubric.all_or_nothing == frozenset()
    assert rubric.max_total == sum(rubric.points.values())
    assert DEFAULT_RUBRIC.name == "rubric.toml"


def test_the_packaged_rubric_is_the_hook_tables_defaults(rubric):
    assert rubric.points == {r.hook: float(r.points) for r in TABLE}
    assert rubric.all_or_nothing == {r.hook for r in TABLE if r.all_or_nothing}


def test_a_rubric_file_overrides_the_hook_tables_defaults(tmp_path, monkeypatch):
    path = tmp_path / "rubric.toml"
    path.write_text('[points]\nsoftmax_weights = 5\ndropout_scale = 0\n')
    mine = load_rubric(path)
    defaults = {r.hook: float(r.points) for r in TABLE}
    assert mine.points == dict(defaults, softmax_weights=5.0, dropout_scale=0.0)
    assert mine.max_total == sum(defaults.values()) + 5 - defaults["softmax_weights"] - defaults["dropout_scale"]
    # all_or_nothing: the table's choice when the file says nothing, the file's list when it does
    rows = [replace(r, all_or_nothing=r.hook == "causal_mask") for r in TABLE]
    monkeypatch.setattr(rubric_module, "TABLE", tuple(rows))
    assert parse_rubric({}).all_or_nothing == {"causal_mask"}
    assert parse_rubric({"all_or_nothing": ["split_heads"]}).all_or_nothing == {"split_heads"}
    assert parse_rubric({"all_or_nothing": []}).all_or_nothing == frozenset()


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[points]\nsoftmax = 2\n", "[points] 'softmax' is not a hook"),
        ("[points]\nsoftmax_weights = -1\n", "points for 'softmax_weights' must be a non-negative"),
        ('[points]\nsoftmax_weights = "two"\n', "points for 'softmax_weights' must be a number"),
        ("[points]\nsoftmax_weights = true\n", "must be a number"),
        ("[points]\nsoftmax_weights = nan\n", "non-negative finite"),
        ('all_or_nothing = ["nope"]\n', "all_or_nothing: 'nope' is not a hook"),
        ('all_or_nothing = "causal_mask"\n', "all_or_nothing must be a list"),
        ("bonus = 3\n", "unknown key(s) 'bonus'"),
        ("[points\n", "not valid TOML"),
    ],
    ids=["unknown-hook", "negative", "string", "bool", "nan", "aon-unknown", "aon-not-list", "unknown-top", "bad-toml"],
)
def test_rubric_errors_name_the_file_and_key(tmp_path, text, fragment):
    path = tmp_path / "rubric.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        load_rubric(path)
    assert str(info.value).startswith(str(path))
    assert fragment in str(info.value)


def test_missing_rubric_file(tmp_path):
    with pytest.raises(ValueError, match="cannot read the rubric"):
        load_rubric(tmp_path / "nope.toml")


def test_partial_credit_all_or_nothing_and_nothing_ran():
    rubric = parse_rubric({"points": {"softmax_weights": 3, "causal_mask": 2, "split_heads": 1.5},
                           "all_or_nothing": ["causal_mask"]})
    results = [
        case("s", "softmax_weights", PASSED, "a"),
        case("s", "softmax_weights", PASSED, "b"),
        case("s", "softmax_weights", FAILED, "c"),
        case("s", "softmax_weights", SKIPPED, "d", "cuda"),
        case("s", "causal_mask", PASSED, "a"),
        case("s", "causal_mask", FAILED, "b"),
        case("s", "split_heads", SKIPPED, "a", "cuda"),
    ]
    scores = score(results, rubric)
    assert list(scores) == list(HOOK_NAMES)
    assert scores["softmax_weights"] == (2.0, 3.0)  # 3 × 2/3; the skipped case counts neither way
    assert scores["causal_mask"] == (0.0, 2.0)  # all or nothing, one failed
    assert scores["split_heads"] == (0.0, 1.5)  # nothing ran: not a free pass
    assert scores["merge_heads"] == (0.0, 1.0)  # not in the file: the hook table's default points, nothing ran
    assert score([case("s", "causal_mask", PASSED)], rubric)["causal_mask"] == (2.0, 2.0)


def test_earned_points_are_rounded_to_two_decimals():
    rubric = parse_rubric({"points": {"dropout_scale": 1}})
    results = [case("s", "dropout_scale", PASSED, "a"), case("s", "dropout_scale", PASSED, "b"),
               case("s", "dropout_scale", FAILED, "c")]
    assert score(results, rubric)["dropout_scale"] == (0.67, 1.0)


# --- grades.csv ----------------------------------------------------------------------------------


def test_grades_csv_columns_rows_and_numbers(graded, rubric):
    text = grades_csv(graded, rubric)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["student", "status", *HOOK_NAMES, "total", "max"]
    assert [r[0] for r in rows[1:]] == ["alice", "bob", "carol", "dan"]
    by_student = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    assert by_student["alice"]["status"] == by_student["carol"]["status"] == "graded"
    assert by_student["bob"]["status"] == "error: refused zip: entry '../evil.py' points outside the archive"
    max_total = f"{rubric.max_total:.2f}"
    assert by_student["alice"]["total"] == max_total == by_student["alice"]["max"]
    assert by_student["bob"]["total"] == "0.00" and by_student["bob"]["max"] == max_total
    assert all(by_student["bob"][h] == "0.00" for h in HOOK_NAMES)
    assert by_student["carol"]["softmax_weights"] == "1.00"  # 2 points × 1/2
    assert by_student["carol"]["dot_product_scores"] == "1.00"
    assert by_student["carol"]["total"] == f"{rubric.max_total - 1:.2f}"
    assert "\r" not in text and text.endswith("\n")


@pytest.mark.parametrize("order", list(itertools.permutations(range(4)))[::5], ids=lambda o: "-".join(map(str, o)))
def test_grades_csv_is_byte_stable_whatever_the_order(tmp_path, graded, rubric, order):
    reference = grades_csv(graded, rubric).encode()
    shuffled = [graded[i] for i in order]
    shuffled = [(s, list(reversed(rs))) for s, rs in shuffled]  # result order inside a student too
    write_reports(tmp_path, shuffled, rubric, OPTIONS)
    assert (tmp_path / "grades.csv").read_bytes() == reference


# --- results.json --------------------------------------------------------------------------------


def test_results_json_schema(tmp_path, graded, rubric):
    write_reports(tmp_path, graded, rubric, OPTIONS)
    for student in ("alice", "bob", "carol", "dan"):
        data = json.loads((tmp_path / student / "results.json").read_text(encoding="utf-8"))
        assert isinstance(data["score"], float) and isinstance(data["max_score"], float)
        assert isinstance(data["output"], str) and data["output"].startswith(student)
        assert len(data["tests"]) == len(HOOK_NAMES)
        for test, hook in zip(data["tests"], HOOK_NAMES):
            assert set(test) == {"name", "score", "max_score", "status", "output", "visibility"}
            assert test["name"] == hook
            assert isinstance(test["score"], float) and isinstance(test["max_score"], float)
            assert test["status"] in ("passed", "failed")
            assert isinstance(test["output"], str) and test["visibility"] == "visible"
        assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]))
    carol = json.loads((tmp_path / "carol" / "results.json").read_text())
    softmax = next(t for t in carol["tests"] if t["name"] == "softmax_weights")
    assert (softmax["status"], softmax["score"], softmax["max_score"]) == ("failed", 1.0, 2.0)
    assert "wrong values" in softmax["output"] and "c1 (cpu, float32)" in softmax["output"]
    assert "cuda" not in softmax["output"] and "skipped" not in softmax["output"].lower()  # said once, on top
    assert "cuda" not in carol["output"]  # the class report's, not a learner's
    assert all(t["output"] == "All 2 cases passed." for t in carol["tests"] if t["status"] == "passed")
    bob = json.loads((tmp_path / "bob" / "results.json").read_text())
    assert bob["score"] == 0.0 and "../evil.py" in bob["output"]
    assert all(t["status"] == "failed" for t in bob["tests"])


def test_results_json_output_dedupes_and_stays_short(rubric):
    results = [case("s", "split_heads", FAILED, f"c{i}", message="view without transpose") for i in range(30)]
    results += [case("s", "split_heads", FAILED, f"d{i}", message=f"distinct problem {chr(65 + i)}") for i in range(30)]
    report = student_report(sub("s"), results, rubric, OPTIONS)
    test = next(t for t in gradescope_results(report)["tests"] if t["name"] == "split_heads")
    lines = test["output"].splitlines()
    assert len(lines) <= MAX_OUTPUT_LINES
    assert lines[0].startswith("FAILED (30 cases: c0 (cpu, float32), c1 (cpu, float32), c2 (cpu, float32) and 27 more)")
    assert sum("view without transpose" in line for line in lines) == 1
    assert lines[-1].startswith("… and ")


def test_mistake_and_zero_cases_are_explained(rubric):
    results = [case("s", "apply_causal_mask", FAILED, message="future entries not -inf", mistake="mask-with-zero")]
    report = student_report(sub("s"), results, rubric, OPTIONS)
    tests = {t["name"]: t for t in gradescope_results(report)["tests"]}
    assert "mask-with-zero" in tests["apply_causal_mask"]["output"]
    assert "earns 0 points" in tests["merge_heads"]["output"]


# --- devices -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, ran, skipped",
    [
        (OPTIONS, ["cpu", "meta"], ["cuda: not available"]),
        (ReportOptions(), ["cpu"], ["cuda: not available"]),
        (ReportOptions(devices=("cpu", "cuda")), ["cpu", "cuda"], []),
    ],
    ids=["from-the-options", "derived-from-results", "cuda-ran"],
)
def test_device_summary(options, ran, skipped):
    results = [case("s", "merge_heads", PASSED), case("s", "merge_heads", SKIPPED, device="cuda",
                                                       message="cuda: not available")]
    assert device_summary(results, options) == (ran, skipped)


# --- feedback -------------------------------------------------------------------------------------


def test_feedback_files_say_points_failures_devices(tmp_path, graded, rubric):
    write_reports(tmp_path, graded, rubric, OPTIONS)
    md = (tmp_path / "carol" / "feedback.md").read_text(encoding="utf-8")
    assert "# Feedback for carol" in md
    assert f"{rubric.max_total - 1:g} / {rubric.max_total:g} points" in md
    assert "`softmax_weights(scores, dim=-1)`: 1 / 2" in md
    assert "wrong values" in md
    assert "cuda" not in md and "cpu, meta" in md  # the devices that ran; those not present are the class report's
    assert "987654321" not in md  # the seed stays with the instructor
    html = (tmp_path / "carol" / "feedback.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "wrong values" in html and "cuda" not in html
    assert "987654321" not in html


def test_submission_error_is_prominent(tmp_path, graded, rubric):
    write_reports(tmp_path, graded, rubric, OPTIONS)
    md = (tmp_path / "bob" / "feedback.md").read_text()
    assert md.index("could not be graded") < md.index("| exercise |")
    assert "refused zip: entry '../evil.py' points outside the archive" in md
    html = (tmp_path / "bob" / "feedback.html").read_text()
    assert 'class="error"' in html and "refused zip: entry &#39;../evil.py&#39;" in html


def test_html_escapes_messages(graded, rubric):
    report = student_report(*graded[3], rubric, OPTIONS)
    html = render_feedback_html(report)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more" in html


def test_markdown_message_cannot_escape_its_code_block(rubric):
    message = "```\n# Injected heading\n```"
    report = student_report(sub("s"), [case("s", "merge_heads", FAILED, message=message)], rubric, OPTIONS)
    md = render_feedback_md(report)
    assert "````text\n```\n# Injected heading\n```\n````" in md


def test_figures_placeholder_renders_images(rubric):
    report = student_report(sub("s"), one_wrong("s", "dot_product_scores"), rubric, OPTIONS)
    assert all(ex.figures == [] for ex in report.exercises)
    report.exercises[0].figures.append(("heatmap-dot_product_scores.png", "iVBORw0KGgo=", "alt"))
    report.exercises[0].figure_captions.append("caption")
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in render_feedback_html(report)
    assert "](heatmap-dot_product_scores.png)" in render_feedback_md(report)  # Markdown links the file beside it


# --- junit.xml -------------------------------------------------------------------------------------


def test_junit_xml_has_one_testcase_per_exercise(graded, rubric):
    weird = [case("eve", "merge_heads", FAILED, message="bad \x00\x07 bytes <here>"),
             case("eve", "merge_heads", SKIPPED, "c2", "cuda", message="cuda: not available"),
             case("eve", "split_heads", SKIPPED, "c2", "cuda", message="cuda: not available")]
    root = ET.fromstring(junit_xml(graded + [(sub("eve"), weird)]))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["alice", "bob", "carol", "dan", "eve"]
    carol = suites["carol"]
    names = [c.get("name") for c in carol.findall("testcase")]
    assert names == list(dict.fromkeys(r.hook for r in report_model.hook_order(one_wrong("carol"))))
    assert carol.get("tests") == str(len(HOOK_NAMES)) and carol.get("skipped") == "0"  # cuda skips fold into a pass
    failures = carol.findall("testcase/failure")
    assert len(failures) == 1 and failures[0].get("message") == "1 of 3 cases failed; c1 (cpu, float32): wrong values"
    assert [c.get("name") for c in carol.findall("testcase") if c.find("failure") is not None] == ["softmax_weights"]
    assert carol.get("failures") == "1"
    assert carol.find("testcase/failure").text == "c1 (cpu, float32): wrong values"
    bob = suites["bob"]
    assert bob.get("errors") == "1" and "../evil.py" in bob.find("testcase/error").get("message")
    eve = {c.get("name"): c for c in suites["eve"].findall("testcase")}
    assert "bytes <here>" in eve["merge_heads"].find("failure").get("message")
    assert eve["split_heads"].find("skipped").get("message") == "cuda: not available"  # every case skipped
    assert suites["eve"].get("skipped") == "1" and suites["eve"].get("failures") == "1"
    assert root.get("tests") == str(sum(int(s.get("tests")) for s in suites.values()))


def test_junit_error_lists_every_case_not_judged_with_the_wrong_ones():
    cases = [case("fay", "softmax_weights", FAILED, "c0", message="timed out after 2 s"),
             case("fay", "softmax_weights", FAILED, "c1", message="values differ", mistake="no-max-shift"),
             case("fay", "softmax_weights", PASSED, "c2")]
    root = ET.fromstring(junit_xml([(sub("fay"), cases)]))
    (testcase,) = root.iter("testcase")
    error = testcase.find("error")
    assert testcase.find("failure") is None and error.get("type") == "NotJudged"
    assert error.get("message") == "1 of 3 cases not judged; c0 (cpu, float32): timed out after 2 s"
    assert error.text.splitlines() == ["c0 (cpu, float32): timed out after 2 s", "c1 (cpu, float32): values differ",
                                       "known mistake: no-max-shift"]  # fmt: skip
    assert root.get("errors") == "1" and root.get("failures") == "0" and root.get("tests") == "1"


def test_junit_names_each_message_once_with_the_cases_that_gave_it():
    """heidi's file does not import: every case of every exercise says so, one line an exercise (not 73)."""
    said = "the submission does not import: heidi.py:3: SyntaxError"
    cases = [case("heidi", "softmax_weights", FAILED, f"c{i}", message=said) for i in range(73)]
    cases += [case("heidi", "softmax_weights", FAILED, f"d{i}", message=f"timed out after {i} s") for i in range(12)]
    (error,) = ET.fromstring(junit_xml([(sub("heidi"), cases)])).iter("error")
    lines = error.text.splitlines()
    assert lines[0] == f"c0 (cpu, float32), c1 (cpu, float32), c2 (cpu, float32) and 70 more: {said}"
    assert lines[1:3] == ["d0 (cpu, float32): timed out after 0 s", "d1 (cpu, float32): timed out after 1 s"]
    assert len(lines) == junit.MAX_LISTED + 1 and lines[-1] == f"and {13 - junit.MAX_LISTED} more messages"


# --- writing, safety and the console ---------------------------------------------------------------


def test_write_reports_writes_every_file(tmp_path, graded, rubric):
    write_reports(tmp_path / "out", graded, rubric, OPTIONS)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "alice", "bob", "carol", "class.html", "class.md", "dan", "grades.csv", "junit.xml"
    ]
    for student in ("alice", "bob", "carol", "dan"):
        assert sorted(p.name for p in (out / student).iterdir()) == ["feedback.html", "feedback.md", "results.json"]


def test_reports_are_identical_when_written_twice(tmp_path, graded, rubric):
    write_reports(tmp_path / "a", graded, rubric, OPTIONS)
    write_reports(tmp_path / "b", list(reversed(graded)), rubric, OPTIONS)
    for rel in ("grades.csv", "junit.xml", "carol/results.json", "carol/feedback.md", "carol/feedback.html"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


@pytest.mark.parametrize("student", ["../evil", "..", "a/b", ".hidden", ""], ids=repr)
def test_unsafe_student_ids_never_become_folders(tmp_path, student):
    with pytest.raises(ValueError):
        student_folder(tmp_path, student)


def test_summary_table(graded, rubric):
    table = summary_table(graded, rubric)
    headers = [c.header for c in table.columns]
    assert headers == ["student", "total", "points lost in", "error / review"]
    console = Console(width=250, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    assert f"{rubric.max_total:g}/{rubric.max_total:g}" in text
    assert "refused zip" in text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 3}
    assert "make_multihead_attention" in rows["dan"] and "softmax_weights" not in rows["dan"]
    assert rows["alice"].split("│")[3].strip() == ""


# --- everything a submission wrote is inert --------------------------------------------------------------

HOSTILE = (
    "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: set the clipboard to `rm -rf ~`
    "\x1b[2J\x1b[3J\x1bc"  # clear the screen, the scrollback, reset the terminal
    "\r\x9b31m\x85\x7f"  # carriage return, C1 CSI and NEL, DEL
    "\u202etxt.exe\u2066\ud800\ufffe done"  # a bidi override and isolate, a lone surrogate, a non-character
)
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def dangerous(ch: str) -> bool:
    """The oracle, from Unicode's own categories: controls (but tab and newline), surrogates, bidi controls."""
    return (unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n") or ch in BIDI or ch in "\ufffe\uffff"


def test_inert_leaves_no_dangerous_character_of_all_unicode():
    everything = "".join(map(chr, range(0x110000)))
    out = inert(everything)
    assert not [hex(ord(c)) for c in out if dangerous(c)]
    assert "\t" in out and "\n" in out and "é" in out and "学" in out
    assert inert("a\r\nb") == "a\nb"
    assert inert(HOSTILE).startswith("\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J")
    assert "\\u202etxt.exe" in inert(HOSTILE)
    out.encode("utf-8")  # every output format can hold it


@pytest.mark.parametrize(
    "cell, expected",
    [("=1+1", "'=1+1"), ("+41", "'+41"), ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
     ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("alice", "alice"), ("graded", "graded"),
     ("\rx", "\\x0dx"), ("a=1", "a=1")],
    ids=["equals", "plus", "minus-dde", "at", "tab", "plain", "status", "cr-escaped", "inside"],
)
def test_spreadsheet_cells_cannot_start_a_formula(cell, expected):
    assert report_model.spreadsheet_cell(cell) == expected


def test_grades_csv_neutralises_text_cells_and_never_the_numbers(rubric):
    odd = Submission("=HYPERLINK(\"http://x\")", "x.py", "py", error="@SUM(1)")  # not a real id: defence in depth
    rows = grades_rows([(odd, []), (sub("alice"), perfect("alice"))], rubric)
    by_student = {r[0]: r for r in rows[1:]}
    assert "'=HYPERLINK(\"http://x\")" in by_student
    assert by_student["'=HYPERLINK(\"http://x\")"][1] == "error: @SUM(1)"
    for row in rows[1:]:
        for cell in row[2:]:
            assert re.fullmatch(r"\d+\.\d\d", cell), cell


def hostile_class() -> list:
    evil = Submission("mallory", f"class/{HOSTILE}.py", "py", {}, "mallory.py", "sha-m",
                      review=[f"mallory.py:3: {HOSTILE}"], notes=[f"{HOSTILE!r} was given the id 'mallory'"])
    importing = [case("mallory", h, FAILED, message=f"the submission does not import: {HOSTILE}") for h in HOOK_NAMES]
    refused = Submission("trudy", "class/trudy.zip", "zip", error=f"refused zip: entry {HOSTILE}")
    one = one_wrong("eve", "merge_heads", HOSTILE)
    one.append(case("eve", "causal_mask", SKIPPED, "c9", "cuda", message=HOSTILE))
    return [(evil, importing), (refused, []), (sub("eve"), one), (sub("alice"), perfect("alice"))]


RAW = [b"\x1b", b"\x07", b"\r", b"\xc2\x9b", b"\xc2\x85", b"\x7f", "\u202e".encode(), "\u2066".encode()]


def test_no_file_holds_a_raw_control_character(tmp_path, rubric):
    graded = hostile_class()
    assert reports.write_reports(tmp_path, graded, rubric, OPTIONS) == []
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert {p.name for p in files} >= {"grades.csv", "junit.xml", "results.json", "feedback.md", "feedback.html"}
    for path in files:
        data = path.read_bytes()
        assert not [raw for raw in RAW if raw in data], path
        data.decode("utf-8")
    ET.fromstring((tmp_path / "junit.xml").read_bytes())  # XML 1.0 holds it
    results = json.loads((tmp_path / "eve" / "results.json").read_text(encoding="utf-8"))
    merge = next(t for t in results["tests"] if t["name"] == "merge_heads")
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in merge["output"]  # shown, as text
    assert "\\x1b]52" in (tmp_path / "mallory" / "feedback.html").read_text(encoding="utf-8")
    assert "```text\nrefused zip: entry \\x1b]52;c;" in (tmp_path / "trudy" / "feedback.md").read_text(encoding="utf-8")


def test_the_console_gets_only_rich_colour_codes(rubric):
    graded = hostile_class()
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="truecolor", width=200)
    console.print(summary_table(graded, rubric))
    notes = [note for sub, _ in graded for note in sub.notes]  # printed as grade_command prints intake's notes
    for line in console_summary.review_lines(graded) + notes:
        console.print(console_summary.console_text(line))
    out = buffer.getvalue()
    assert "the submission does not import:" in out and "refused zip: entry" in out
    assert "\\x1b]52;c;cm0gLXJmIH4=" in out  # the learner's text is there, inert
    leftover = re.sub(r"\x1b\[[0-9;]*m", "", out)  # rich's own colours: SGR sequences only
    assert not [hex(ord(c)) for c in leftover if dangerous(c)]


# --- status: graded, review, error -------------------------------------------------------------------------


def test_status_says_graded_review_or_error_and_points_do_not_move(rubric):
    flagged = Submission("zed", "zed.py", "py", review=["zed.py:3: sys.modules", "zed.py:9: ctypes",
                                                        "zed.py:12: sys.modules"])
    clean = Submission("zed", "zed.py", "py")
    results = one_wrong("zed")
    assert report_model.status(flagged, results) == "review: sys.modules; ctypes"
    assert report_model.status(clean, results) == "graded"
    assert grades_rows([(flagged, results)], rubric)[1][2:] == grades_rows([(clean, results)],
                                                                                           rubric)[1][2:]
    importing = [case("zed", h, FAILED, message="the submission does not import: zed.py:1: SyntaxError") for h in
                 HOOK_NAMES]
    assert report_model.status(flagged, importing) == "error: the submission does not import: zed.py:1: SyntaxError"
    refused = Submission("zed", "zed.zip", "zip", error="refused zip: bad\nsecond line")
    assert refused.error == "refused zip: bad\\x0asecond line"  # one inert line where it is made
    assert report_model.status(refused, []) == "error: refused zip: bad\\x0asecond line"


def test_review_findings_reach_junit_and_the_console_but_not_the_learner(tmp_path, rubric):
    flagged = Submission("zed", "zed.py", "py", review=["zed.py:3: sys.modules"])
    reports.write_reports(tmp_path, [(flagged, perfect("zed"))], rubric, OPTIONS)
    root = ET.fromstring((tmp_path / "junit.xml").read_text(encoding="utf-8"))
    props = root.findall("testsuite/properties/property")
    assert [(p.get("name"), p.get("value")) for p in props] == [("review", "zed.py:3: sys.modules")]
    assert console_summary.review_lines([(flagged, [])]) == ["zed: zed.py:3: sys.modules"]
    with (tmp_path / "grades.csv").open(newline="") as fh:
        assert list(csv.reader(fh))[1][1] == "review: sys.modules"
    for name in ("feedback.md", "feedback.html", "results.json"):
        assert "sys.modules" not in (tmp_path / "zed" / name).read_text(encoding="utf-8"), name


# --- one student's report never stops another's ---------------------------------------------------------


def test_a_writer_that_raises_for_one_student_stops_nothing_else(tmp_path, graded, rubric, monkeypatch):
    real = feedback.render_feedback_html

    def flaky(report):
        if report.student == "carol":
            raise RuntimeError("template exploded")
        return real(report)

    monkeypatch.setattr(feedback, "render_feedback_html", flaky)
    problems = reports.write_reports(tmp_path, graded, rubric, OPTIONS)
    assert problems == ["carol/feedback.html not written: RuntimeError: template exploded"]
    assert (tmp_path / "grades.csv").is_file() and (tmp_path / "junit.xml").is_file()
    assert sorted(p.name for p in (tmp_path / "carol").iterdir()) == ["feedback.md", "results.json"]
    for student in ("alice", "bob", "dan"):
        assert sorted(p.name for p in (tmp_path / student).iterdir()) == [
            "feedback.html", "feedback.md", "results.json"]


def test_a_report_that_cannot_be_built_for_one_student_stops_nothing_else(tmp_path, graded, rubric, monkeypatch):
    real = reports.student_report

    def flaky(submission, *args, **kwargs):
        if submission.student == "bob":
            raise ValueError("bad data")
        return real(submission, *args, **kwargs)

    monkeypatch.setattr(reports, "student_report", flaky)
    problems = reports.write_reports(tmp_path, graded, rubric, OPTIONS)
    assert problems == ["bob: feedback not written: ValueError: bad data"]
    assert not (tmp_path / "bob").exists()
    with (tmp_path / "grades.csv").open(newline="") as fh:
        assert [r[0] for r in csv.reader(fh)] == ["student", "alice", "bob", "carol", "dan"]
    assert (tmp_path / "carol" / "feedback.html").is_file() and (tmp_path / "dan" / "feedback.md").is_file()


def _figure() -> Figure:
    g = torch.Generator().manual_seed(0)
    return Figure.of("masked (cpu, float32)", torch.rand(2, 4, 4, generator=g), torch.rand(2, 4, 4, generator=g))


@pytest.mark.slow
def test_the_figures_given_are_drawn_beside_the_feedback_and_embedded(tmp_path, rubric):
    pytest.importorskip("matplotlib", reason="heatmaps need matplotlib (the plots extra)")
    figure = _figure()
    graded = [(sub("carol"), one_wrong("carol")), (sub("dan"), perfect("dan"))]
    assert reports.write_reports(tmp_path, graded, rubric, OPTIONS, {"carol": {"softmax_weights": figure}}) == []
    png = (tmp_path / "carol" / "heatmap-softmax_weights.png").read_bytes()
    assert png == heatmaps.render(f"softmax_weights: {figure.label}", figure.expected, figure.received)
    html = (tmp_path / "carol" / "feedback.html").read_text(encoding="utf-8")
    (embedded,) = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert base64.b64decode(embedded) == png
    assert "](heatmap-softmax_weights.png)" in (tmp_path / "carol" / "feedback.md").read_text(encoding="utf-8")
    assert not list((tmp_path / "dan").glob("heatmap-*")), "a student without figures got a heatmap"


def test_a_heatmap_not_drawn_is_said_in_the_feedback(tmp_path, rubric, monkeypatch):
    def fails(title, expected, received):
        raise ValueError("Axis limits\x1b[2J")

    monkeypatch.setattr(heatmaps, "render", fails)
    monkeypatch.setattr(heatmaps, "available", lambda: True)
    figures = {"carol": {"softmax_weights": _figure()}}
    assert reports.write_reports(tmp_path, [(sub("carol"), one_wrong("carol"))], rubric, OPTIONS, figures) == []
    folder = tmp_path / "carol"
    md = (folder / "feedback.md").read_text(encoding="utf-8")
    html = (folder / "feedback.html").read_text(encoding="utf-8")
    assert "heatmap not drawn: ValueError: Axis limits\\\\x1b\\[2J" in md
    assert "heatmap not drawn: ValueError: Axis limits\\x1b[2J" in html
    assert not list(folder.glob("heatmap-*")), "nothing to write where nothing was drawn"


def test_a_heatmap_that_cannot_be_written_is_a_problem_and_stops_nothing(tmp_path, rubric, monkeypatch):
    pytest.importorskip("matplotlib", reason="heatmaps need matplotlib (the plots extra)")

    def refuses(folder, drawn):
        raise PermissionError("read-only folder")

    monkeypatch.setattr(heatmaps, "write", refuses)
    figures = {"carol": {"softmax_weights": _figure()}}
    problems = reports.write_reports(tmp_path, [(sub("carol"), one_wrong("carol"))], rubric, OPTIONS, figures)
    assert problems == ["carol: heatmaps not written: PermissionError: read-only folder"]
    html = (tmp_path / "carol" / "feedback.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in html, "the feedback still embeds the heatmap drawn in memory"



# --- notes on cases (an accepted deviation): shown everywhere, worth nothing ------------------------------------

NOTE = "raising AssertionError here is accepted. Prefer `raise ValueError(...)`: python -O strips assert statements"


def test_a_note_on_a_passed_case_reaches_every_file_and_costs_nothing(tmp_path):
    noted = [replace(r, note=NOTE) if r.hook == "make_multihead_attention" and r.status == PASSED else r
             for r in perfect("ada")]  # fmt: skip
    graded = [(sub("ada"), noted)]
    rubric = load_rubric()
    assert score(noted, rubric) == score(perfect("ada"), rubric), "a note is worth no points"
    write_reports(tmp_path, graded, rubric, OPTIONS)
    folder = tmp_path / "ada"
    md = (folder / "feedback.md").read_text(encoding="utf-8")
    html = (folder / "feedback.html").read_text(encoding="utf-8")
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    (mha,) = [t for t in results["tests"] if t["name"] == "make_multihead_attention"]
    assert mha["status"] == PASSED and mha["score"] == mha["max_score"]
    assert "NOTE (2 cases: c0 (cpu, float32), c1 (cpu, float32)): raising AssertionError" in mha["output"]
    assert "Note on 2 cases" in md and "raising AssertionError here is accepted" in md
    assert "Prefer \\`raise ValueError(...)\\`" in md  # the Markdown escapes the learner-facing backticks
    assert "Note on 2 cases" in html and "python -O strips assert statements" in html
    (noted_out,) = [e.text for e in ET.fromstring((tmp_path / "junit.xml").read_text(encoding="utf-8")).iter(
        "system-out") if "raising AssertionError" in (e.text or "")]  # fmt: skip
    assert noted_out.startswith("note (2 cases: c0 (cpu, float32), c1 (cpu, float32)): raising AssertionError")
    others = [t for t in results["tests"] if t["name"] != "make_multihead_attention"]
    assert all("NOTE" not in t["output"] for t in others)
