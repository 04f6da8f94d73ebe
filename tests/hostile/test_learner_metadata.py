"""What a learner writes is a claim (issue 21, section 3): manifests, names, strings in code, printed text.

- **Ids**: the instructor's id (the file or folder name as collected, a roster's pattern) wins; a manifest's id only
  confirms it, and a mismatch is a note on that row.  A zip claiming ``alice`` beside the real ``alice.py`` took her
  row, and with a roster stopped the whole class; a manifest dated 2099 superseded her own later hand-in.
- **Reserved ids** are the files the report writers declare (``out_folder.CLASS_FILES``): every file any writer
  produces for a class is one, and a hand-in named like any of them (``class.html.py``) gets its own feedback.
- **One inert line**: every learner-derived text (ids, file names, zip entry names, manifest fields, attribute names
  and strings in review findings, what the learner printed or raised) is one line with no control, bidi or escape
  character where it is made; a constant attribute name with newlines printed a forged review line
  (``alice: alice.py:1: copied from mallory (plagiarism…)``) and set mallory's status text.

The end-to-end test runs ``attnkit grade --roster --latest`` once on a class holding every attack together.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import unicodedata
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from learner_code import alice_with
from rich.cells import cell_len
from rich.console import Console

from grader.cli import main
from grader.instructor import class_grading, lms, out_folder
from grader.instructor.console_summary import console_text, print_line, review_lines
from grader.instructor.gradebook import Gradebook
from grader.instructor.handin_reading import read_submission
from grader.instructor.identify import RESERVED_IDS
from grader.instructor.inert import inert_line
from grader.instructor.intake import collect
from grader.instructor.intake_model import Skipped, Submission
from grader.instructor.report_model import ClassRoll, Person, ReportOptions, review_constructs, status
from grader.instructor.reports import write_reports
from grader.instructor.review_flags import scan_files
from grader.instructor.rubric import load_rubric
from grader.instructor.verdict import FAILED, PASSED, CaseResult
from grader.registry import HOOK_NAMES

KIT_ROOT = Path(__file__).resolve().parents[2]
FORGED = "alice: alice.py:1: copied from mallory (plagiarism, see class.html)"
BREAKS = ["\n", "\r", "\r\n", "\x1b[2K\r", "\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\u202e", "\u2066"]
"""Every way a text can start a new line or look like one on a terminal: newline, CR, an ANSI erase-line and CR,
NEL, the Unicode line and paragraph separators, VT, FF, a file separator, a bidi override and isolate."""
SCORES = "def dot_product_scores(queries, keys):\n    return queries @ keys.transpose(-2, -1)\n"


def dangerous(ch: str) -> bool:
    """From Unicode's own categories: any control character (tab and newline too), a separator, a bidi control."""
    return unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or unicodedata.bidirectional(ch) in (
        "LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI") or ch in "\u061c\u200e\u200f\ufffe\uffff"


def one_inert_line(text: str) -> bool:
    return len(text.splitlines()) <= 1 and not any(dangerous(c) for c in text)


def zip_of(path: Path, files: dict[str, str], manifest: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        if manifest is not None:
            zf.writestr("manifest.json", json.dumps(manifest))
    return path


def claiming(student: str, created: str = "2099-01-01T00:00:00+00:00") -> dict:
    return {"kit": "attnkit", "created": created, "student": student, "student_from": "--student"}


def collected_at(path: Path, when: str) -> Path:
    stamp = datetime.fromisoformat(when).timestamp()
    os.utime(path, (stamp, stamp))
    return path


# --- one inert line ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_inert_line_is_one_line_of_all_unicode():
    everything = "".join(map(chr, range(0x110000)))
    line = inert_line(everything, len(everything) * 6)
    assert one_inert_line(line)
    assert "é" in line and "学" in line and "\\x0a" in line and "\\u2028" in line and "\\u202e" in line
    assert inert_line(line, len(line)) == line  # idempotent: what is inert stays as it is
    assert inert_line("x" * 50, 10) == "x" * 9 + "…"


@pytest.mark.parametrize("brk", BREAKS, ids=[repr(b) for b in BREAKS])
def test_a_constant_attribute_name_cannot_forge_a_review_line_or_a_status(brk):
    """The red team's dead code: ``setattr(torch, "x<newline>alice: alice.py:1: copied from mallory …", 1)``."""
    name = f"x{brk}{FORGED}"
    source = (
        "import torch\n\n"
        "def never_called():\n"
        f"    setattr(torch, {name!r}, 1)\n"
        f"    torch.__dict__[{name!r}] = 1\n"
        f"    t = getattr(torch, {name!r})\n"
        "    t.y = 2\n"
        f"    exec({('torch.allclose = ' + repr(name))!r})\n"
    )
    findings = scan_files({"mallory.py": source})
    assert any("assignment of torch.x" in f for f in findings)
    assert all(one_inert_line(f) for f in findings), findings
    assert all(f.startswith("mallory.py:") for f in findings)
    mallory = Submission("mallory", "mallory.py", "py", {"mallory.py": source}, "mallory.py", "sha", review=findings)
    for construct in review_constructs(findings):
        assert not construct.startswith(("alice", "copied")), construct  # the construct whole, not a forged tail
    text = status(mallory, [])
    assert text.startswith("review: ") and one_inert_line(text)
    assert "review: copied" not in text and not text.startswith("review: alice")
    lines = review_lines([(mallory, [])])
    assert len(lines) == len(findings) and all(line.startswith("mallory: mallory.py:") for line in lines)
    printed = io.StringIO()
    console = Console(file=printed, width=10_000, color_system=None)
    for line in lines:
        console.print(f"  {console_text(line)}")
    shown = printed.getvalue().splitlines()
    assert len(shown) == len(lines) and all(s.startswith("  mallory: ") for s in shown)


@pytest.mark.parametrize("brk", BREAKS, ids=[repr(b) for b in BREAKS])
def test_a_file_name_inside_a_zip_cannot_forge_a_line(tmp_path, brk):
    entry = f"pkg/a{brk}{FORGED}.py"
    path = zip_of(tmp_path / "mallory.zip", {"pkg/__init__.py": "", entry: "import sys\nsys.modules\n"})
    sub = read_submission(path)
    assert sub.error is None and sub.review
    assert all(one_inert_line(f) for f in sub.review), sub.review
    assert all(not c.startswith(("alice", "copied")) for c in review_constructs(sub.review))
    bad = zip_of(tmp_path / "bad.zip", {f"a{brk}{FORGED}.py": "\x00"})  # refused, naming the entry
    refused = read_submission(bad)
    assert refused.error is not None and one_inert_line(refused.error)


@pytest.mark.parametrize("brk", BREAKS, ids=[repr(b) for b in BREAKS])
def test_manifest_fields_and_file_names_make_one_inert_line_each(tmp_path, brk, monkeypatch):
    """A manifest's id and date, a hand-in's file name, a skipped file's name: every note, reason and console line."""
    klass = tmp_path / "class"
    zip_of(klass / "mallory.zip", {"a.py": SCORES}, claiming(f"bob{brk}{FORGED}", created=f"2099{brk}{FORGED}"))
    (klass / f"eve{brk}{FORGED}.py").write_text(SCORES, encoding="utf-8")
    (klass / f"essay{brk}{FORGED}.docx").write_text("x", encoding="utf-8")
    (klass / "alice.py").write_text(SCORES, encoding="utf-8")
    intake = collect([str(klass)])
    assert sorted(s.student for s in intake.submissions)[0] == "alice"
    texts = [*intake.notes, *(s.reason for s in intake.skipped), *(s.error or "" for s in intake.submissions)]
    assert all(one_inert_line(t) for t in texts), texts
    assert all(s.student.isascii() and one_inert_line(s.student) for s in intake.submissions)
    seen = []
    monkeypatch.setattr(class_grading, "grade_class", lambda intake, out, options: seen.append(intake) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        CliRunner().invoke(main, ["grade", str(klass), "--out", str(tmp_path / "out")], catch_exceptions=False)
    assert seen


def test_what_a_learner_printed_or_raised_is_one_line_in_its_status():
    raised = f"boom{''.join(BREAKS)}{FORGED}"
    results = [CaseResult("mallory", hook, "c", "cpu", "float32", FAILED, raised, 0.0) for hook in HOOK_NAMES]
    text = status(Submission("mallory", "mallory.py", "py"), results)
    assert text.startswith("error: boom") and one_inert_line(text)
    assert one_inert_line(status(Submission("mallory", "mallory.py", "py", error=raised), []))


def test_every_intake_record_is_inert_where_it_is_made():
    """The constructors themselves: a Submission's error, a Skipped reason (whoever builds them)."""
    assert one_inert_line(Submission("a", "a.py", "py", error=f"x\n{FORGED}").error or "")
    assert one_inert_line(Skipped("a", f"x\r{FORGED}").reason)


# --- ids: the instructor's id wins -------------------------------------------------------------------------------


@pytest.fixture
def klass(tmp_path) -> Path:
    """alice.py (hers, collected last); mallory.zip claiming alice, packed 2099; two zips claiming bob."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "alice.py").write_text(SCORES, encoding="utf-8")
    collected_at(folder / "alice.py", "2026-03-02T10:00:00+00:00")
    collected_at(zip_of(folder / "mallory.zip", {"a.py": SCORES}, claiming("alice")), "2026-03-01T10:00:00+00:00")
    zip_of(folder / "x.zip", {"a.py": SCORES}, claiming("bob"))
    zip_of(folder / "y.zip", {"a.py": SCORES}, claiming("bob"))
    zip_of(folder / "z.zip", {"a.py": SCORES}, claiming("../bob"))
    return folder


def roster_at(tmp_path: Path) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text("id,name,email,pattern\nalice,Alice,alice@uni.example,\nmallory,M,m@uni.example,\n"
                    "bob,Bob,bob@uni.example,\n", encoding="utf-8")  # fmt: skip
    return path


def test_a_manifest_takes_no_id_and_no_row_with_or_without_a_roster(klass, tmp_path):
    from grader.instructor.roster import Roster

    roster = Roster.load(roster_at(tmp_path))
    for given, latest in ((None, False), (roster, False), (roster, True)):
        intake = collect([str(klass)], roster=given, latest=latest)
        got = {Path(s.source).name: s.student for s in intake.submissions}
        assert got == {"alice.py": "alice", "mallory.zip": "mallory", "x.zip": "x", "y.zip": "y", "z.zip": "z"}
        assert intake.skipped == []  # alice's own hand-in is never superseded by a claim of 2099
        claims = [n for n in intake.notes if "its manifest claims" in n]
        assert [n.split(":")[0] for n in claims] == ["'mallory.zip'", "'x.zip'", "'y.zip'", "'z.zip'"]
        if given is not None:
            assert [e.id for e in intake.missing] == ["bob"]  # three zips claiming bob do not hand in for him


def test_grade_with_a_roster_and_latest_stops_at_no_claim(klass, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(class_grading, "grade_class", lambda intake, out, options: seen.append(intake) or 1 / 0)
    args = ["grade", str(klass), "--roster", str(roster_at(tmp_path)), "--latest", "--out", str(tmp_path / "out")]
    with pytest.raises(ZeroDivisionError):
        CliRunner().invoke(main, args, catch_exceptions=False)
    (intake,) = seen
    assert {s.student for s in intake.submissions} == {"alice", "mallory", "x", "y", "z"}


def test_latest_orders_by_the_time_collected_never_the_manifest(tmp_path):
    from grader.instructor.roster import Roster

    roster = Roster.load(roster_at(tmp_path))
    folder = tmp_path / "two"
    early = collected_at(zip_of(folder / "alice.zip", {"a.py": SCORES}, claiming("alice")), "2026-03-01T00:00:00")
    (folder / "alice").mkdir()
    (folder / "alice" / "a.py").write_text(SCORES, encoding="utf-8")
    collected_at(folder / "alice", "2026-03-03T00:00:00")  # a folder and a zip: two containers, equally good
    intake = collect([str(folder)], roster=roster, latest=True)
    assert [Path(s.source).name for s in intake.submissions] == ["alice"]
    assert [s.path for s in intake.skipped] == [str(early)]


# --- reserved ids: every file a writer produces -----------------------------------------------------------------


def _perfect(student: str) -> list[CaseResult]:
    return [CaseResult(student, hook, "c", "cpu", "float32", PASSED, "", 0.01) for hook in HOOK_NAMES]


def test_every_file_a_writer_produces_for_a_class_is_reserved(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    graded = [(Submission("ada", "ada.py", "py", {"ada.py": "x"}, "ada.py", "sha"), _perfect("ada"))]
    roll = ClassRoll(graded=graded, missing=[Person("bea", "Bea", "bea@uni.example")],
                     people={"bea": Person("bea", "Bea", "bea@uni.example")}, outputs={"ada": "hi"})  # fmt: skip
    with Gradebook(out_folder.class_file(out, out_folder.GRADEBOOK)) as book:
        book.set_roster_rows([{"id": "bea", "name": "Bea", "email": "", "pattern": ""}])
        problems = write_reports(out, graded, load_rubric(), ReportOptions(lms=tuple(lms.EXPORTS)), roll=roll)
        written = {p.name for p in out.iterdir() if not p.is_dir()}
    assert problems == []
    assert {p.name for p in out.iterdir() if p.is_dir()} == {"ada"}
    assert written >= {"grades.csv", "junit.xml", "class.html", "class.md", "canvas.csv", "moodle.csv",
                       "gradebook.sqlite"}  # fmt: skip
    assert {name.lower() for name in written} <= RESERVED_IDS, written - RESERVED_IDS
    assert set(lms.EXPORTS) == set(out_folder.LMS_NAMES)
    with pytest.raises(ValueError, match="not one of the out folder's declared files"):
        out_folder.class_file(out, "summary.json")  # a new output must be declared, so it is reserved


def test_a_hand_in_named_like_any_class_file_gets_its_own_feedback(tmp_path):
    klass = tmp_path / "class"
    for name in sorted(out_folder.CLASS_FILES):
        (klass / f"{name}.py").parent.mkdir(parents=True, exist_ok=True)
        (klass / f"{name}.py").write_text(SCORES, encoding="utf-8")
    (klass / "CLASS.HTML.py").write_text(SCORES, encoding="utf-8")
    intake = collect([str(klass)])
    assert len(intake.submissions) == len(out_folder.CLASS_FILES) + 1
    assert not {s.student.lower() for s in intake.submissions} & RESERVED_IDS
    assert all("is the name of a file attnkit grade writes" in s.notes[0] for s in intake.submissions)
    graded = [(s, _perfect(s.student)) for s in intake.submissions]
    out = tmp_path / "out"
    problems = write_reports(out, graded, load_rubric(), ReportOptions(lms=tuple(lms.EXPORTS)))
    assert problems == []
    for sub in intake.submissions:
        assert (out / sub.student / "feedback.html").is_file()
    written = out_folder.CLASS_FILES - {out_folder.DIFF_CSV, out_folder.DIFF_HTML}  # diff's: attnkit diff writes them
    assert all((out / name).is_file() for name in written if "sqlite" not in name)


# --- end to end ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_attnkit_grade_with_every_metadata_attack_grades_everyone_under_their_own_id(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("the sandbox is tested on Linux")
    alice = alice_with(None)
    dead = f"\n\ndef _never_called():\n    import torch\n    setattr(torch, {('x' + chr(10) + FORGED)!r}, 1)\n"
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.py").write_text(alice, encoding="utf-8")
    collected_at(klass / "alice.py", "2026-03-02T10:00:00+00:00")
    collected_at(zip_of(klass / "mallory.zip", {"a.py": dead}, claiming("alice")), "2026-03-01T10:00:00+00:00")
    (klass / "class.html.py").write_text(alice, encoding="utf-8")
    (klass / "canvas.csv.py").write_text(alice + dead, encoding="utf-8")
    out = tmp_path / "OUT"
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"}
    env.pop("FORCE_COLOR", None)
    command = [sys.executable, "-m", "grader.cli", "grade", str(klass), "--roster", str(roster_at(tmp_path)),
               "--latest", "--lms", "canvas", "--out", str(out), "--seed", "3", "--devices", "cpu", "--timeout", "5"]
    done = subprocess.run(command, cwd=KIT_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=600)  # fmt: skip
    console = done.stdout.decode("utf-8")
    assert done.returncode == 0, console[-3000:] + done.stderr.decode()[-3000:]
    with (out / "grades.csv").open(newline="", encoding="utf-8") as fh:
        rows = {r[0]: r for r in csv.reader(fh)}
    rubric = load_rubric()
    assert rows["alice"][1] == "graded" and float(rows["alice"][-2]) == rubric.max_total
    assert rows["mallory"][1].startswith("review: assignment of torch.x\\x0aalice")
    assert rows["bob"][1] == "missing"
    html_id = next(s for s in rows if s.startswith("class.html-"))
    csv_id = next(s for s in rows if s.startswith("canvas.csv-"))
    assert rows[html_id][1] == "graded" and rows[csv_id][1].startswith("review: ")
    for student in (html_id, csv_id, "alice", "mallory"):
        assert (out / student / "feedback.html").is_file()
    assert (out / "class.html").is_file() and (out / "canvas.csv").is_file()
    assert {p.name.lower() for p in out.iterdir() if not p.is_dir()} <= RESERVED_IDS
    assert not [line for line in console.splitlines() if line.lstrip().startswith(("alice: alice.py", "copied"))]
    assert "'mallory.zip': its manifest claims the id 'alice'" in " ".join(console.split())
    assert not [hex(ord(c)) for c in console if dangerous(c) and c != "\n"]


# --- what a folder is: never decided by a hand-in's code (rt-meta A01/A04) ---------------------------------------

NOTEBOOK = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [], "source": SCORES}]})
MALLORY_CODE = {
    "hooks-under-if": "if True:\n" + "".join(f"    def {hook}(*args):\n        return None\n" for hook in HOOK_NAMES),
    "every-hook-a-decoy": " = ".join(HOOK_NAMES) + " = None\n",
    "no-hook": "x = 1\n",
    "not-python": "def (:\n",
}


@pytest.mark.parametrize("code", list(MALLORY_CODE.values()), ids=list(MALLORY_CODE))
def test_a_hand_ins_code_never_decides_whether_a_folder_is_a_class(tmp_path, code):
    """The red team's mallory.py with its hooks under ``if True:`` made a class of folders one 0/30 submission
    named after the class folder, and made a class of mixed hand-ins refused as ambiguous; decoys of every hook
    name could do the opposite.  What a folder is rests on its shape: each member is one row, whatever the code."""
    folders = tmp_path / "folders"
    for name in ("alice", "bob"):
        (folders / name).mkdir(parents=True)
        (folders / name / "answers.py").write_text(SCORES, encoding="utf-8")
    (folders / "mallory.py").write_text(code, encoding="utf-8")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "alice.py").write_text(SCORES, encoding="utf-8")
    (mixed / "mallory.py").write_text(code, encoding="utf-8")
    zip_of(mixed / "bob.zip", {"bob.py": SCORES})
    (mixed / "carol.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    for klass, expected in ((folders, ["alice", "bob", "mallory"]), (mixed, ["alice", "bob", "carol", "mallory"])):
        intake = collect([str(klass)])
        assert sorted(s.student for s in intake.submissions) == expected
        assert intake.skipped == []


# --- the console: a learner's text never starts a line (rt-meta A05) ---------------------------------------------

BLANKS = "\u115f\u1160\u2800\u3164\uffa0"
"""Characters that are no control and no space but show as blank: the Hangul fillers and the braille blank."""


def invisible(ch: str) -> bool:
    """From Unicode's own categories: a format character (zero width joiners, soft hyphen, tags …), a space other
    than the plain one, or a filler that shows as blank."""
    return unicodedata.category(ch) == "Cf" or (unicodedata.category(ch) == "Zs" and ch != " ") or ch in BLANKS


@pytest.mark.slow  # every code point: about 5 s
def test_inert_line_folds_every_run_of_spaces_and_shows_every_invisible_character():
    everything = "".join(map(chr, range(0x110000)))
    line = inert_line(everything, len(everything) * 6)
    assert not [hex(ord(c)) for c in line if invisible(c)]
    assert "  " not in line
    assert "\\u2800" in line and "\\u3164" in line and "\\u200b" in line and "\\xad" in line
    assert inert_line("a \u00a0\u3000 \u2003b") == "a b"
    assert inert_line(f"x{chr(0x2800) * 3}y") == "x\\u2800\\u2800\\u2800y"
    assert inert_line(line, len(line)) == line  # idempotent


@pytest.mark.slow
def test_characters_of_no_agreed_width_are_escaped_in_a_line():
    """rich counts a skin-tone modifier as 0 cells, a terminal as 2: 31 of them pushed a forged note onto a line
    of its own (red team meta4 d1).  From Unicode's own data: no unassigned or private-use code point stays."""
    line = inert_line("".join(map(chr, range(0x110000))), 0x110000 * 11)
    assert not [hex(ord(c)) for c in line if unicodedata.category(c) in ("Cn", "Co")]
    forged = inert_line("\U0001f3fb" * 31 + "id: 'alice.py' was given the id 'alice-7f3a'")
    assert "\U0001f3fb" not in forged and forged.startswith("\\U0001f3fb")
    escapes = {"\U0001f1e6": "\\U0001f1e6", "\ufe0f": "\\ufe0f", "\ue000": "\\ue000", "\U000e0100": "\\U000e0100"}
    for ch, escape in escapes.items():
        assert inert_line(f"a{ch}b") == f"a{escape}b"
    assert inert_line("Zoë 張偉 😀") == "Zoë 張偉 😀"  # names and emoji of an agreed width stay as written


PADDINGS = {
    "spaces": " " * 100,
    "braille-blanks": "\u2800" * 100,
    "hangul-fillers": "\u3164\u115f\u1160\uffa0" * 25,
    "leader-dots": "\u2024" * 100,
    "no-break-spaces": "\u00a0\u3000" * 50,
}
"""Padding up to a console's width, inside the 200 characters a finding shows of a construct."""
LOOK_ALIKE = FORGED.replace(".", "\u2024")  # alice\u2024py: dots that are no dots


@pytest.mark.parametrize("padding", list(PADDINGS.values()), ids=list(PADDINGS))
def test_a_padded_finding_or_file_name_cannot_print_a_console_line_of_its_own(tmp_path, padding):
    """The red team's finding ``torch.x<300 blanks>alice: alice.py:1: copied from mallory`` (braille blanks, one dot
    leaders, long runs of spaces: no control among them) was wrapped by rich so that its tail printed as a review
    line of its own.  At a narrow and a wide console, every line the learner's text is on starts with what the
    grader wrote, and no blank-looking character reaches the terminal."""
    from grader.grade_command import Reading, _print_flagged, _take_in
    from grader.instructor.console_summary import summary_table

    forged = f"x{padding}{FORGED}{padding}{LOOK_ALIKE}"
    source = f"import torch\n\ndef never_called():\n    setattr(torch, {forged!r}, 1)\n"
    klass = tmp_path / "class"
    (klass / "alice.py").parent.mkdir()
    (klass / "alice.py").write_text(SCORES, encoding="utf-8")
    (klass / f"eve{padding[:50]}{FORGED}.py").write_text(SCORES, encoding="utf-8")  # a name holds 255 bytes
    (klass / f"essay{padding[:50]}{FORGED}.docx").write_text("x", encoding="utf-8")
    zip_of(klass / "mallory.zip", {"a.py": source}, claiming(f"bob{padding}{FORGED}"))
    mallory = Submission("mallory", "mallory.py", "py", {"mallory.py": source}, "mallory.py", "sha",
                         review=scan_files({"mallory.py": source}))  # fmt: skip
    raised = [CaseResult("mallory", hook, "c", "cpu", "float32", FAILED, forged, 0.0) for hook in HOOK_NAMES]
    graded = [(mallory, raised), (Submission("alice", "alice.py", "py"), _perfect("alice"))]
    assert any("assignment of torch.x" in f for f in mallory.review)
    for width in (40, 80, 123, 200, 1000):
        printed = io.StringIO()
        console = Console(file=printed, width=width, color_system=None)
        _take_in(console, [str(klass)], Reading("auto", False, tmp_path / "out"))
        console.print(summary_table(graded, load_rubric()))
        _print_flagged(console, graded)
        shown = printed.getvalue().splitlines()
        starts = [line.strip(" │┃┡━╇┩┏┓┗┛┳┻╋─┼╭╮╰╯|") for line in shown]
        assert not [s for s in starts if s.startswith(("alice: alice", "copied", "(plagiarism", "mallory (p"))], shown
        assert not [s for s in starts if "copied from" in s and not s.startswith(("id: ", "skipped: ", "mallory"))]
        assert not [hex(ord(c)) for c in printed.getvalue() if invisible(c)]
        assert len(shown) <= 30, shown  # one line an item: nothing wrapped onto a line of its own
        assert all(cell_len(line) <= width for line in shown), shown  # nor left for the terminal to wrap


# --- ids: the name attnkit submit gives is the learner's claim (rt-meta A07) -------------------------------------


def test_a_submit_name_claiming_another_hand_ins_id_takes_neither_its_id_nor_its_row(tmp_path):
    """``submission-<id>-<date>.zip`` is the name ``attnkit submit`` writes from the learner's own ``--student``.
    The red team's ``submission-alice-2026-01-01.zip`` from mallory beside alice's own ``alice.py`` was given alice's
    roster row: the class was refused (two hand-ins for alice), and with ``--latest``, collected later, it displaced
    hers.  It is graded under its own file name, with a note on its row."""
    from grader.instructor.roster import Roster

    roster = Roster.load(roster_at(tmp_path))
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.py").write_text(SCORES, encoding="utf-8")
    collected_at(klass / "alice.py", "2026-03-01T10:00:00+00:00")
    forged = zip_of(klass / "submission-alice-2026-01-01.zip", {"a.py": SCORES}, claiming("alice"))
    collected_at(forged, "2026-03-02T10:00:00+00:00")
    for given, latest in ((None, False), (None, True), (roster, False), (roster, True)):
        intake = collect([str(klass)], roster=given, latest=latest)
        got = {Path(s.source).name: s.student for s in intake.submissions}
        assert got == {"alice.py": "alice", forged.name: "submission-alice-2026-01-01"}
        assert intake.skipped == []
        (note,) = [n for n in intake.notes if n.startswith(f"{forged.name!r}")]
        assert "its name claims the id 'alice'" in note and "'alice.py'" in note
        if given is not None:
            assert intake.unmatched == ["submission-alice-2026-01-01"]
            assert [e.id for e in intake.missing] == ["mallory", "bob"]  # a claim hands in for no one


def test_submit_names_claiming_one_id_take_it_from_no_one_and_never_stop_the_class(tmp_path):
    """Two hand-ins whose names claim bob (his own and a classmate's, or two of his: no one can tell which) are
    both graded under their own names, bob is missing, and neither supersedes the other."""
    from grader.instructor.roster import Roster

    roster = Roster.load(roster_at(tmp_path))
    klass = tmp_path / "class"
    early = collected_at(zip_of(klass / "submission-bob-2026-01-01.zip", {"a.py": SCORES}), "2026-03-01T10:00:00")
    late = collected_at(zip_of(klass / "submission-bob-2026-01-02.zip", {"a.py": SCORES}), "2026-03-02T10:00:00")
    for given in (None, roster):
        intake = collect([str(klass)], roster=given, latest=True)
        got = {Path(s.source).name: s.student for s in intake.submissions}
        assert got == {early.name: early.name.removesuffix(".zip"), late.name: late.name.removesuffix(".zip")}
        assert intake.skipped == []
        assert sum("its name claims the id 'bob'" in n for n in intake.notes) == 2
        if given is not None:
            assert "bob" in [e.id for e in intake.missing]


def test_with_a_roster_a_submit_names_id_is_a_claim_noted_on_its_row(tmp_path):
    """Unopposed, the id a submit name claims is graded (the usual hand-in), and its row says that no roster pattern
    confirms it; a roster pattern (the LMS's name) confirms an id and needs no note."""
    from grader.instructor.roster import Roster

    klass = tmp_path / "class"
    own = zip_of(klass / "submission-alice-2026-01-01.zip", {"a.py": SCORES}, claiming("alice"))
    lms_named = zip_of(klass / "bobby_42_7_submission-bob-2026-01-01.zip", {"a.py": SCORES}, claiming("bob"))
    rows = "id,name,email,pattern\nalice,Alice,alice@uni.example,\nbob,Bob,bob@uni.example,bobby_42_*\n"
    (tmp_path / "r.csv").write_text(rows, encoding="utf-8")
    intake = collect([str(klass)], roster=Roster.load(tmp_path / "r.csv"))
    assert {Path(s.source).name: s.student for s in intake.submissions} == {own.name: "alice", lms_named.name: "bob"}
    assert intake.missing == [] and intake.unmatched == []
    (note,) = intake.notes
    assert note.startswith(f"{own.name!r}: graded as 'alice', whom its name claims") and "no roster pattern" in note
    alone = collect([str(own)])
    assert [s.student for s in alone.submissions] == ["alice"] and alone.notes == []  # no roster: no one to confirm


# --- names that name a roster student less than exactly (rt-meta3 c02, c03, c06, c12, p2) -------------------------


@pytest.mark.parametrize("variant", ["Alice.py", "ALICE.py", "alicé.py", "alice .py", "ａｌｉｃｅ.py"])
def test_a_variant_of_an_exact_name_never_takes_its_id_nor_stops_the_class(tmp_path, variant):
    """c02/c03/p2: ``Alice.py`` beside alice's ``alice.py`` refused the whole class with a roster, and with --latest,
    collected later, superseded hers: mallory's code was graded as alice.  A variant takes no roster id."""
    from grader.instructor.roster import Roster

    roster = Roster.load(roster_at(tmp_path))
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.py").write_text(SCORES, encoding="utf-8")
    collected_at(klass / "alice.py", "2026-03-01T10:00:00+00:00")
    (klass / variant).write_text(SCORES, encoding="utf-8")
    collected_at(klass / variant, "2026-03-02T10:00:00+00:00")  # the variant is newer
    (klass / "bob.py").write_text(SCORES, encoding="utf-8")
    for latest in (False, True):
        intake = collect([str(klass)], roster=roster, latest=latest)
        got = {Path(s.source).name: s.student for s in intake.submissions}
        assert got["alice.py"] == "alice" and got["bob.py"] == "bob" and len(got) == 3
        assert got[variant].lower() not in {"alice", "bob", "mallory"}
        assert intake.skipped == [] and all(s.error is None for s in intake.submissions)
        assert got[variant] in intake.unmatched
        assert any(n.startswith(repr(variant)) for n in intake.notes)


def test_two_exact_names_for_one_student_make_that_row_an_error(tmp_path):
    """Two files of code naming alice exactly (``alice.py``, ``alice.ipynb``): without --latest her row is an error
    naming both; bob is graded."""
    from grader.instructor.roster import Roster

    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    (klass / "alice.py").write_text(SCORES, encoding="utf-8")
    (klass / "bob.py").write_text(SCORES, encoding="utf-8")
    intake = collect([str(klass)], roster=Roster.load(roster_at(tmp_path)))
    rows = {s.student: s for s in intake.submissions}
    assert sorted(rows) == ["alice", "bob"] and rows["bob"].error is None
    assert "'alice.ipynb', 'alice.py'" in (rows["alice"].error or "") and "--latest" in (rows["alice"].error or "")


def test_a_sanitised_name_never_takes_the_id_of_a_student_who_handed_nothing_in(tmp_path):
    """c06: ``ａｌｉｃｅ.py`` (fullwidth) with alice absent was graded as ``alice`` and posted to her LMS row."""
    from grader.instructor.roster import Roster

    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ａｌｉｃｅ.py").write_text(SCORES, encoding="utf-8")
    (klass / "bob.py").write_text(SCORES, encoding="utf-8")
    intake = collect([str(klass)], roster=Roster.load(roster_at(tmp_path)))
    got = {Path(s.source).name: s.student for s in intake.submissions}
    assert got["bob.py"] == "bob" and got["ａｌｉｃｅ.py"].lower() not in {"alice", "bob", "mallory"}
    assert "alice" in [e.id for e in intake.missing] and intake.unmatched == [got["ａｌｉｃｅ.py"]]
    assert any("roster student's id" in n for n in intake.notes if n.startswith("'ａｌｉｃｅ.py'"))


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses file names that are not UTF-8")
def test_a_name_that_is_not_utf8_is_an_error_row_and_the_class_is_graded(tmp_path):
    """c12: ``b'mall\\xffory.py'`` (and a folder so named) crashed attnkit grade in files_sha256: nothing graded."""
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "alice.py").write_text(SCORES, encoding="utf-8")
    bad = os.fsencode(klass) + b"/mall\xffory.py"
    with open(bad, "wb") as f:
        f.write(SCORES.encode())
    os.mkdir(os.fsencode(klass) + b"/eve\xfe")
    with open(os.fsencode(klass) + b"/eve\xfe/a.py", "wb") as f:
        f.write(SCORES.encode())
    intake = collect([str(klass)])
    rows = {s.student: s for s in intake.submissions}
    assert rows["alice"].error is None and len(rows) == 3
    errors = sorted(s.error or "" for s in intake.submissions if s.student != "alice")
    assert errors == [
        f"{n}: its name is not valid UTF-8: not graded (rename it)" for n in ("eve\\xfe", "mall\\xffory.py")
    ]
    for sub in intake.submissions:
        sub.source.encode("utf-8"), sub.student.encode("ascii"), [n.encode("utf-8") for n in sub.notes]


def test_an_emoji_code_in_a_name_prints_as_text_on_the_console():
    """c11: ``:white_check_mark:.py`` printed a ✅ beside a skipped file's name."""
    out = io.StringIO()
    print_line(Console(file=out, width=200), f"skipped {console_text(':white_check_mark: :cross_mark:.py')}")
    assert out.getvalue() == "skipped :white_check_mark: :cross_mark:.py\n"


# --- a container named like a hand-in, a marker dropped into the class folder (rt-meta3 c04, c05, c07, c08) ---------


def _own(klass: Path, name: str, when: str) -> Path:
    path = klass / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(NOTEBOOK if name.endswith(".ipynb") else SCORES, encoding="utf-8")
    return collected_at(path, when)


@pytest.mark.parametrize("hers", ["alice.py", "alice.ipynb"])
def test_an_archive_named_like_a_hand_in_takes_neither_its_id_nor_its_row(tmp_path, hers):
    """c04/c05: mallory's ``alice.zip`` (holding ``mallory.py``) beside alice's ``alice.py``: without a roster both
    were pushed aside (``alice-394af743``, ``alice-62dca8ff``), no row ``alice``; with ``--roster --latest``, collected
    later, it took row ``alice`` and hers was skipped as superseded.  One file named as the id outranks a zip so
    named: the zip gets its own id and a note, alice keeps her row, and nothing is superseded or refused."""
    from grader.instructor.roster import Roster

    roster = Roster.load(roster_at(tmp_path))
    klass = tmp_path / "class"
    _own(klass, hers, "2026-03-01T10:00:00+00:00")
    _own(klass, "bob.py", "2026-03-01T10:00:00+00:00")
    forged = collected_at(zip_of(klass / "alice.zip", {"mallory.py": SCORES}, claiming("alice", "2027-01-01T00:00:00")),
                          "2026-03-02T10:00:00+00:00")  # fmt: skip
    for given, latest in ((None, False), (None, True), (roster, False), (roster, True)):
        intake = collect([str(klass)], roster=given, latest=latest)
        got = {Path(s.source).name: s.student for s in intake.submissions}
        assert got[hers] == "alice" and got["bob.py"] == "bob" and len(got) == 3
        assert got[forged.name].startswith("alice-") and got[forged.name] != "alice"
        assert intake.skipped == [] and all(s.error is None for s in intake.submissions)
        mine = [n for n in intake.notes if n.startswith(repr(forged.name))]
        assert mine and any(repr(hers) in n for n in mine) and not any(n.startswith(repr(hers)) for n in intake.notes)
        if given is not None:
            assert intake.unmatched == [got[forged.name]] and [e.id for e in intake.missing] == ["mallory"]


def test_two_containers_named_as_one_id_are_still_two_hand_ins_and_stop_no_one(tmp_path):
    """A zip and a folder both named ``alice`` are equally good claims: with a roster her row is an error naming both
    (no --latest), bob is graded; without one, neither takes ``alice``."""
    from grader.instructor.roster import Roster

    klass = tmp_path / "class"
    zip_of(klass / "alice.zip", {"a.py": SCORES})
    _own(klass, "alice/a.py", "2026-03-01T10:00:00+00:00")
    _own(klass, "bob.py", "2026-03-01T10:00:00+00:00")
    rows = {s.student: s for s in collect([str(klass)], roster=Roster.load(roster_at(tmp_path))).submissions}
    assert sorted(rows) == ["alice", "bob"] and rows["bob"].error is None
    assert "two or more hand-ins for alice ('alice', 'alice.zip')" in (rows["alice"].error or "")
    alone = sorted(s.student for s in collect([str(klass)]).submissions)
    assert alone[2] == "bob" and all(sid.startswith("alice-") for sid in alone[:2])


@pytest.mark.parametrize("layout", ["files", "folders"])
def test_an_init_file_in_a_class_folder_is_a_skipped_file_and_the_class_stays_a_class(tmp_path, layout):
    """c07: mallory's ``__init__.py`` at the top of a class folder made it one package named after the folder:
    alice and bob were its modules, with no rows.  It is skipped with a reason; named beside another hand-in (the
    instructor's word that it is one learner's), the same folder is one package."""
    klass = tmp_path / "class"
    for name in ("alice", "bob"):
        _own(klass, f"{name}.py" if layout == "files" else f"{name}/answers.py", "2026-03-01T10:00:00+00:00")
    (klass / "__init__.py").write_text(SCORES, encoding="utf-8")
    intake = collect([str(klass)])
    assert sorted(s.student for s in intake.submissions) == ["alice", "bob"]
    assert all(s.error is None for s in intake.submissions)
    (skip,) = intake.skipped
    assert Path(skip.path).name == "__init__.py" and "no one's hand-in" in skip.reason and "--one" in skip.reason
    other = _own(tmp_path / "other", "carol.py", "2026-03-01T10:00:00+00:00")
    listed = {s.student: s for s in collect([str(klass), str(other)]).submissions}
    assert sorted(listed) == ["carol", "class"] and "class/__init__.py" in listed["class"].files


def test_a_kit_folder_in_a_class_folder_is_one_more_hand_in_and_nothing_is_dropped(tmp_path):
    """c08: mallory's ``exercises/__init__.py`` at the top of a class folder made it one learner's kit: one row
    ``class`` 0/30, alice.py and bob.py silently not graded.  Beside other hand-ins ``exercises/`` is one member with
    a note; with a roster it matches no one.  A kit (``exercises/`` with the kit's own folders) is still one."""
    from grader.instructor.roster import Roster

    klass = tmp_path / "class"
    for name in ("alice.py", "bob.py", "exercises/__init__.py"):
        _own(klass, name, "2026-03-01T10:00:00+00:00")
    for given in (None, Roster.load(roster_at(tmp_path))):
        intake = collect([str(klass)], roster=given)
        got = {Path(s.source).name: s.student for s in intake.submissions}
        assert got == {"alice.py": "alice", "bob.py": "bob", "exercises": "exercises"} and intake.skipped == []
        assert any(n.startswith("'exercises': a kit's package beside other hand-ins") for n in intake.notes)
        if given is not None:
            assert intake.unmatched == ["exercises"] and [e.id for e in intake.missing] == ["mallory"]
    kit = tmp_path / "kit"
    _own(kit, "exercises/__init__.py", "2026-03-01T10:00:00+00:00")
    _own(kit, "notebooks/scores.ipynb", "2026-03-01T10:00:00+00:00")
    (kit / "README.md").write_text("the kit\n", encoding="utf-8")
    (sub,) = collect([str(kit)]).submissions
    assert (sub.student, sub.entry, sorted(sub.files)) == ("kit", "exercises", ["exercises/__init__.py"])
