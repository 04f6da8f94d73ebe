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
from rich.console import Console

from grader.cli import main
from grader.instructor import class_grading, lms, out_folder
from grader.instructor.gradebook import Gradebook
from grader.instructor.inert import inert_line
from grader.instructor.intake import RESERVED_IDS, Skipped, Submission, collect, read_submission
from grader.instructor.reports import (
    ClassRoll,
    Person,
    console_text,
    review_constructs,
    review_lines,
    status,
    write_reports,
)
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
    (folder / "Alice.py").write_text(SCORES, encoding="utf-8")
    collected_at(folder / "Alice.py", "2026-03-03T00:00:00")
    intake = collect([str(folder)], roster=roster, latest=True)
    assert [Path(s.source).name for s in intake.submissions] == ["Alice.py"]
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
        problems = write_reports(out, graded, load_rubric(), {"lms": tuple(lms.EXPORTS)}, roll=roll)
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
    problems = write_reports(out, graded, load_rubric(), {"lms": tuple(lms.EXPORTS)})
    assert problems == []
    for sub in intake.submissions:
        assert (out / sub.student / "feedback.html").is_file()
    assert all((out / name).is_file() for name in out_folder.CLASS_FILES if "sqlite" not in name)


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
