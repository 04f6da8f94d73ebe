"""Intake of a class: nothing dropped, nothing invented; ids from manifests and a roster, whatever the order.

What a folder is (a class, one submission, or ambiguous), usage errors that write
nothing, what is skipped and why, and how a hand-in finds its student: a roster's
file pattern, its manifest's id, its name.  Nothing here grades; the CLI cases stop
right after intake (``grade_class`` is replaced) or fail before it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.instructor import class_grading
from grader.instructor.class_folder import HIDDEN_HAND_IN, NOT_A_HAND_IN, RESULTS_FOLDER, TEST_FILE
from grader.instructor.handin_reading import read_submission
from grader.instructor.identify import identify
from grader.instructor.intake import collect, folder_reading
from grader.instructor.intake_model import IntakeError, Skipped
from grader.instructor.roster import Roster
from grader.submit import Validation, submit

SCORES = "def dot_product_scores(queries, keys):\n    return queries @ keys.transpose(-2, -1)\n"
MASK = "def causal_mask(num_tokens, device=None):\n    return None\n"
NOTEBOOK = json.dumps(
    {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": SCORES}],  # fmt: skip
    }
)


def write(path: Path, text: str | bytes = SCORES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def hand_in(path: Path, student: str | None, created: str = "2026-03-01T10:00:00+00:00", **manifest) -> Path:
    """A zip as ``attnkit submit`` writes it: one .py and a manifest claiming ``student`` (None: no id)."""
    fields = {"kit": "attnkit", "created": created, "student": student, "student_from": student and "--student"}
    fields.update(manifest)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("answers.py", SCORES)
        zf.writestr("manifest.json", json.dumps(fields))
    return path


def roster_file(tmp_path: Path, rows: list[str]) -> Roster:
    path = write(tmp_path / "roster.csv", "id,name,email,pattern\n" + "\n".join(rows) + "\n")
    return Roster.load(path)


def ids(intake) -> dict[str, str]:
    """``{file name: student id}``."""
    return {Path(s.source).name: s.student for s in intake.submissions}


def _hash8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


# --- what a folder is ---------------------------------------------------------------------------


def test_a_py_file_beside_notebooks_is_a_class_of_three(tmp_path):
    """The folder of the issue: alice.py, bob.ipynb, carol.ipynb were graded as one student 'class3'."""
    klass = tmp_path / "class3"
    write(klass / "alice.py")
    write(klass / "bob.ipynb", NOTEBOOK)
    write(klass / "carol.ipynb", NOTEBOOK)
    assert folder_reading(klass) == "class"
    intake = collect([str(klass)])
    assert [(s.student, s.format, s.error) for s in intake.submissions] == [
        ("alice", "py", None), ("bob", "ipynb", None), ("carol", "ipynb", None)
    ]  # fmt: skip
    assert intake.formats == {"py": 1, "ipynb": 2}
    assert intake.found_line() == "3 submissions found: 1 py, 2 ipynb"


def test_modules_beside_a_notebook_are_a_class_unless_one_says(tmp_path):
    """Once refused as ambiguous by reading the code (no exercise defined twice: one learner's modules?); a hand-in's
    code is the learner's to write, so the folder's shape decides: a class, and ``--one`` reads it as one."""
    klass = tmp_path / "hw"
    write(klass / "scores.py")
    write(klass / "masking.py", MASK)
    write(klass / "carol.ipynb", NOTEBOOK)
    assert sorted(ids(collect([str(klass)])).values()) == ["carol", "masking", "scores"]
    as_class = collect([str(klass)], reading="class")
    assert sorted(ids(as_class).values()) == ["carol", "masking", "scores"]
    as_one = collect([str(klass)], reading="one")
    assert [(s.student, sorted(s.files)) for s in as_one.submissions] == [("hw", ["hw/masking.py", "hw/scores.py"])]
    assert [(Path(s.path).name, "not graded" in s.reason) for s in as_one.skipped] == [("carol.ipynb", True)]


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ({"scores.py": SCORES, "masking.py": MASK}, "class"),  # two .py files: --one says they are one learner's
        ({"scores.py": SCORES, "extra/more.py": "X = 1\n"}, "class"),  # a .py and a folder: the same
        ({"answers.py": SCORES}, "one"),  # a learner's folder holding their one file
        ({"scores.py": SCORES, "bob/answers.py": SCORES}, "class"),  # a sub-folder defining the same exercise
        ({"scores.py": SCORES, "bob/work.ipynb": NOTEBOOK}, "class"),  # a sub-folder holding a notebook
        ({"scores.py": SCORES, "bob.zip": b"PK"}, "class"),  # one .py beside a zip
        ({"alice.py": SCORES, "bob.py": SCORES}, "class"),  # two files defining the same exercise
        ({"work.ipynb": NOTEBOOK}, "one"),  # a learner's folder holding their notebook
        ({"a.ipynb": NOTEBOOK, "b.ipynb": NOTEBOOK}, "class"),
        ({"alice/answers.py": SCORES}, "class"),  # the first hand-in of a class
        ({"__init__.py": "", "scores.py": SCORES, "b.ipynb": NOTEBOOK}, "class"),  # an __init__.py: --one says
        ({"__init__.py": SCORES}, "one"),  # a package of its __init__.py alone
        ({"__init__.py": "", "scores.py": SCORES}, "one"),  # a package of one module
        ({"exercises/__init__.py": "", "notebooks/a.ipynb": NOTEBOOK}, "one"),  # a learner's kit
        ({"exercises/__init__.py": "", "alice.py": SCORES}, "class"),  # an exercises/ beside a hand-in
        ({"exercises/__init__.py": "", "bob/answers.py": SCORES}, "class"),  # beside a learner's folder
    ],
    ids=["modules", "sub-module", "lone-py", "sub-hand-in", "sub-notebook", "py-and-zip", "same-hook", "lone-notebook",
         "notebooks", "one-folder", "package", "lone-init", "package-of-one", "kit", "kit-beside-py",
         "kit-beside-folder"],  # fmt: skip
)
def test_what_a_folder_is(tmp_path, layout, expected):
    for rel, text in layout.items():
        write(tmp_path / "f" / rel, text)
    assert folder_reading(tmp_path / "f") == expected


# --- nothing invented: usage errors ---------------------------------------------------------------


def test_a_missing_path_is_an_error_naming_it(tmp_path):
    write(tmp_path / "alice.py")
    with pytest.raises(IntakeError, match="nope.zip: no such file or folder"):
        collect([str(tmp_path / "alice.py"), str(tmp_path / "nope.zip")])


@pytest.mark.parametrize(
    "strays",
    [[], ["README.md", ".DS_Store", "Thumbs.db", "desktop.ini", ".gitignore", "__MACOSX/x.py", "readme.txt"]],
    ids=["empty", "strays-only"],
)
def test_a_folder_with_no_hand_in_is_an_error(tmp_path, strays):
    klass = tmp_path / "class"
    klass.mkdir()
    for rel in strays:
        write(klass / rel, "x")
    why = r"\(only hidden files, READMEs or OS debris\)" if strays else r"\(it is empty\)"
    with pytest.raises(IntakeError, match=r"class: no submissions in it " + why):
        collect([str(klass)])


def test_a_folder_of_skipped_files_is_an_error_listing_them(tmp_path):
    write(tmp_path / "class" / "essay.docx", "x")
    with pytest.raises(IntakeError, match=r"no submissions in it \(1 skipped, listed\): essay.docx: not a hand-in"):
        collect([str(tmp_path / "class")])


def test_explicit_files_that_are_no_hand_in_are_skipped_and_alone_are_an_error(tmp_path):
    essay, readme = write(tmp_path / "essay.docx", "x"), write(tmp_path / "README.md", "x")
    intake = collect([str(write(tmp_path / "alice.py")), str(essay), str(readme)])  # as a shell glob gives them
    assert ids(intake) == {"alice.py": "alice"}
    assert intake.skipped == [Skipped(str(essay), NOT_A_HAND_IN)]  # the README silently
    with pytest.raises(IntakeError, match="nothing to grade in .*essay.docx: not a hand-in"):
        collect([str(essay), str(readme)])


def test_everything_skipped_in_a_class_is_listed_with_why_and_strays_are_not(tmp_path):
    klass = tmp_path / "class"
    write(klass / "alice.py")
    write(klass / "bob" / "answers.py")
    write(klass / "essay.docx", "x")
    write(klass / "grades.csv", "x")
    write(klass / "test_alice.py", "def test_x():\n    pass\n")
    write(klass / "attnkit-results" / "gradebook.sqlite", b"")
    for stray in ("README.md", ".DS_Store", "Thumbs.db", "desktop.ini", ".gitignore", "__MACOSX/._alice.py"):
        write(klass / stray, "x")
    intake = collect([str(klass)])
    assert ids(intake) == {"alice.py": "alice", "bob": "bob"}
    assert [(Path(s.path).name, s.reason) for s in intake.skipped] == [
        ("attnkit-results", RESULTS_FOLDER), ("essay.docx", NOT_A_HAND_IN), ("grades.csv", NOT_A_HAND_IN),
        ("test_alice.py", TEST_FILE),
    ]  # fmt: skip


def test_a_hidden_hand_in_is_listed_in_a_class_and_graded_when_named(tmp_path):
    """Nothing is dropped in silence: ``.late.py`` in a class folder is listed; named on the command line, graded."""
    klass = tmp_path / "class"
    write(klass / "alice.py")
    write(klass / "bob.py")
    write(klass / ".late.py")
    intake = collect([str(klass)])
    assert ids(intake) == {"alice.py": "alice", "bob.py": "bob"}
    assert [(Path(s.path).name, s.reason) for s in intake.skipped] == [(".late.py", HIDDEN_HAND_IN)]
    named = collect([str(klass / ".late.py"), str(klass / "alice.py")])
    assert sorted(s.source for s in named.submissions) == sorted([str(klass / ".late.py"), str(klass / "alice.py")])
    assert named.skipped == []


# --- ids: a manifest's id is a claim that only confirms the name's ------------------------------------------


def collected_at(path: Path, when: str) -> Path:
    """Give ``path`` the time it was collected on the instructor's disk (its mtime)."""
    stamp = datetime.fromisoformat(when).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def test_a_manifest_id_only_confirms_the_id_the_file_name_gives(tmp_path):
    klass = tmp_path / "class"
    hand_in(klass / "submission-s1001-2026-03-01.zip", "s1001")  # as attnkit submit names it: confirmed
    hand_in(klass / "submission-jovyan-2026-03-01.zip", "s1002")  # packed as the login, claims s1002
    hand_in(klass / "old.zip", "jovyan", student_from=None)  # a manifest from before ids: the login, no claim
    intake = collect([str(klass)])
    assert ids(intake) == {
        "submission-s1001-2026-03-01.zip": "s1001", "submission-jovyan-2026-03-01.zip": "jovyan", "old.zip": "old"
    }  # fmt: skip
    assert intake.notes == [
        "'submission-jovyan-2026-03-01.zip': its manifest claims the id 's1002'; graded as 'jovyan', the id its "
        "file name gives (a manifest's id only confirms it)"
    ]


def test_a_zip_packed_by_submit_with_an_id_is_graded_under_it(tmp_path):
    write(tmp_path / "mine.py")
    parse_only = Validation(public_checks=False, trial_import=False)
    packed = submit([tmp_path / "mine.py"], student="s1001", cwd=tmp_path, validation=parse_only)
    intake = collect([str(packed.out)])
    (sub,) = intake.submissions
    assert (sub.student, sub.error, sub.claimed, intake.notes) == ("s1001", None, "s1001", [])
    assert sub.handed_in is not None and sub.handed_in.isoformat() == packed.manifest["created"]


def test_an_unreadable_manifest_is_a_note_not_an_error(tmp_path):
    path = tmp_path / "ann.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("answers.py", SCORES)
        zf.writestr("manifest.json", "{not json")
    (sub,) = collect([str(path)]).submissions
    assert (sub.student, sub.error) == ("ann", None)
    assert sub.notes == ["ann.zip: manifest.json is not JSON (JSONDecodeError); its id is taken from its name"]


def test_a_manifest_claiming_another_hand_ins_id_takes_nothing_from_it(tmp_path):
    """The red team's zip: ``student: alice`` beside the real alice.py took the row alice (0/30) and renamed her."""
    klass = tmp_path / "class"
    hand_in(klass / "mallory.zip", "alice")
    write(klass / "alice.py")
    intake = collect([str(klass)])
    assert ids(intake) == {"mallory.zip": "mallory", "alice.py": "alice"}
    assert intake.notes == [
        "'mallory.zip': its manifest claims the id 'alice'; graded as 'mallory', the id its file name gives "
        "(a manifest's id only confirms it)"
    ]


@pytest.mark.parametrize(
    "claim",
    ["alice", "ALICE", "../alice", "grades.csv", "class.html", "alice\nbob", "\uff41lice", "s1001", "ali\u202ece"],
)
def test_no_manifest_claim_moves_another_hand_in_or_stops_the_class(tmp_path, claim):
    """Whatever the claim (another id, its case, a path, a reserved name, a newline, a confusable, a roster id),
    with a roster or without: alice keeps alice, the claimant is graded under its own name with a note."""
    roster = roster_file(tmp_path, ["s1001,Jane Doe,jane@uni.example,", "alice,Alice,alice@uni.example,"])
    klass = tmp_path / "class"
    write(klass / "alice.py")
    write(klass / "s1001.py")
    hand_in(klass / "mallory.zip", claim)
    hand_in(klass / "trudy.zip", claim)  # two zips claiming the same id
    for given in (None, roster):
        intake = collect([str(klass)], roster=given, latest=True)
        assert ids(intake) == {"alice.py": "alice", "s1001.py": "s1001", "mallory.zip": "mallory", "trudy.zip": "trudy"}
        assert intake.skipped == []
        claimed = [n for n in intake.notes if "its manifest claims" in n]
        assert [n.split(":")[0] for n in claimed] == ["'mallory.zip'", "'trudy.zip'"]
        assert all("\n" not in n and "\u202e" not in n for n in intake.notes)


def test_with_a_roster_a_manifest_claiming_a_classmate_does_not_refuse_the_class(tmp_path, monkeypatch):
    """The red team's zip made ``attnkit grade --roster`` exit 2 with nothing graded."""
    seen = []
    monkeypatch.setattr(class_grading, "grade_class", lambda intake, out, options: seen.append(intake) or 1 / 0)
    klass = tmp_path / "class"
    write(klass / "alice.py")
    hand_in(klass / "mallory.zip", "alice")
    roster = write(tmp_path / "roster.csv", "id,name,email\nalice,A,\nmallory,M,\n")
    with pytest.raises(ZeroDivisionError):
        grade([str(klass), "--roster", str(roster), "--out", str(tmp_path / "out")])
    assert ids(seen.pop()) == {"alice.py": "alice", "mallory.zip": "mallory"}


def test_a_refused_zip_keeps_the_id_its_name_gives(tmp_path):
    path = tmp_path / "submission-x-2026-03-01.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("notes.txt", "no code")
        zf.writestr("manifest.json", json.dumps({"student": "s1001", "student_from": "ATTNKIT_STUDENT"}))
    intake = collect([str(path)])
    (sub,) = intake.submissions
    assert (sub.student, sub.error, sub.claimed) == ("x", "submission-x-2026-03-01.zip: no .py files to grade", "s1001")
    assert "its manifest claims the id 's1001'" in intake.notes[0]


# --- ids: a roster -----------------------------------------------------------------------------------


def test_a_roster_maps_hand_ins_and_lists_the_missing_and_the_unknown(tmp_path):
    roster = roster_file(
        tmp_path,
        ["s1001,Jane Doe,jane.doe@uni.example,doejane_*", "s1002,Li Wei,li.wei@uni.example,",
         "s1003,Ana Lopez,ana@uni.example,", "s1004,Bo Berg,bo@uni.example,"],
    )  # fmt: skip
    klass = tmp_path / "class"
    write(klass / "doejane_12345_6789_submission.py")  # by pattern (a Canvas download's name)
    write(klass / "li.wei" / "answers.py")  # by the email's local part
    hand_in(klass / "submission-ana-2026-03-01.zip", None)  # no id in its manifest; the <id> its name claims
    write(klass / "carol.py")  # on no roster
    intake = collect([str(klass)], roster=roster)
    assert ids(intake) == {
        "doejane_12345_6789_submission.py": "s1001", "li.wei": "s1002", "submission-ana-2026-03-01.zip": "s1003",
        "carol.py": "carol",
    }  # fmt: skip
    assert [e.id for e in intake.missing] == ["s1004"]
    assert intake.unmatched == ["carol"]
    assert intake.notes == [
        "'carol.py' matches no one on the roster: graded as 'carol'",
        "'submission-ana-2026-03-01.zip': graded as 's1003', whom its name claims (attnkit submit's name, from the "
        "learner's own --student); no roster pattern confirms it",
    ]
    assert intake.roster is roster


def test_the_rosters_pattern_wins_over_a_manifest_claiming_another_id_and_says_so(tmp_path):
    roster = roster_file(tmp_path, ["s1001,Jane Doe,jane@uni.example,doejane_*", "s1002,Li Wei,li@uni.example,"])
    path = hand_in(tmp_path / "doejane_12345_submission.zip", "s1002")
    intake = collect([str(path)], roster=roster)
    assert ids(intake) == {"doejane_12345_submission.zip": "s1001"}
    assert intake.notes == [
        "'doejane_12345_submission.zip': its manifest claims the id 's1002'; graded as 's1001', the id its file "
        "name gives (a manifest's id only confirms it)"
    ]
    assert [e.id for e in intake.missing] == ["s1002"]


def test_a_manifest_id_confirms_the_roster_student_by_id_or_email_and_names_no_one_else(tmp_path):
    roster = roster_file(tmp_path, ["s1001,Jane Doe,jane@uni.example,", "s1002,Li Wei,li@uni.example,"])
    klass = tmp_path / "class"
    hand_in(klass / "S1001.zip", "s1001")  # its name names s1001 (ignoring case); the claim confirms it
    hand_in(klass / "li.zip", "li@uni.example")  # by the email's local part; the claim (the e-mail) confirms it
    hand_in(klass / "a.zip", "s1002")  # its name names no one: the claim does not make it s1002's
    intake = collect([str(klass)], roster=roster)
    assert ids(intake) == {"S1001.zip": "s1001", "li.zip": "s1002", "a.zip": "a"}
    assert intake.unmatched == ["a"]
    assert intake.notes == [
        "'a.zip': its manifest claims the id 's1002' (s1002 on the roster: if it is theirs, give the roster a file "
        "pattern for it); graded as 'a', the id its file name gives (a manifest's id only confirms it)",
        "'a.zip' matches no one on the roster: graded as 'a'",
    ]


def test_a_confusable_of_a_roster_id_names_no_one(tmp_path):
    roster = roster_file(tmp_path, ["alice,Alice,alice@uni.example,"])
    klass = tmp_path / "class"
    write(klass / "alice.py")
    write(klass / "\uff41lice.py")  # fullwidth a: sanitised to "alice", but it is not alice's name
    write(klass / "alice .py")
    intake = collect([str(klass)], roster=roster)
    got = ids(intake)
    assert got["alice.py"] == "alice" and intake.skipped == []
    assert got["\uff41lice.py"].startswith("alice-") and got["alice .py"].startswith("alice_")
    assert sorted(intake.unmatched) == sorted([got["\uff41lice.py"], got["alice .py"]])


def test_a_name_two_patterns_match_is_an_error_row_not_a_refusal(tmp_path):
    roster = roster_file(tmp_path, ["s1,A,,doe*", "s2,B,,*jane*"])
    intake = collect([str(write(tmp_path / "doejane.py")), str(write(tmp_path / "s2.py"))], roster=roster)
    subs = {Path(s.source).name: s for s in intake.submissions}
    assert (subs["s2.py"].student, subs["s2.py"].error) == ("s2", None)
    assert subs["doejane.py"].student == "doejane"
    assert subs["doejane.py"].error == (
        "'doejane.py' matches the file patterns of s1, s2: not graded until the roster's patterns tell them apart"
    )


def test_a_reserved_roster_id_is_refused(tmp_path):
    roster = roster_file(tmp_path, ["grades.csv,A,,"])
    with pytest.raises(IntakeError, match="'grades.csv' is the name of a file attnkit grade writes"):
        collect([str(write(tmp_path / "a.py"))], roster=roster)


# --- two hand-ins for one student: the one collected last ------------------------------------------------


@pytest.fixture
def twice(tmp_path) -> tuple[Path, Roster]:
    """s1001's two hand-ins by name (its id, its email's local part); the one collected first claims 2099."""
    roster = roster_file(tmp_path, ["s1001,Jane Doe,jane@uni.example,", "s1002,Li Wei,li@uni.example,"])
    klass = tmp_path / "class"
    collected_at(hand_in(klass / "s1001.zip", "s1001", created="2099-01-01T00:00:00Z"), "2026-03-01T10:00:00+00:00")
    collected_at(hand_in(klass / "jane.zip", "s1001", created="2026-03-01T08:00:00Z"), "2026-03-02T08:00:00+00:00")
    hand_in(klass / "li.zip", "s1002")
    return klass, roster


def test_two_hand_ins_for_one_student_make_an_error_row_and_the_class_is_graded(twice):
    klass, roster = twice
    intake = collect([str(klass)], roster=roster)
    assert ids(intake) == {"jane.zip": "s1001", "li.zip": "s1002"}
    row, other = (next(s for s in intake.submissions if s.student == sid) for sid in ("s1001", "s1002"))
    assert row.error is not None and other.error is None
    assert "two or more hand-ins for s1001 ('jane.zip', 's1001.zip')" in row.error and "--latest" in row.error
    assert [(Path(s.path).name, s.reason) for s in intake.skipped] == [
        ("s1001.zip", "one of s1001's 2 hand-ins: see that row")
    ]
    assert len(collect([str(klass)]).submissions) == 3  # without a roster, the names are three ids


def test_latest_grades_the_one_collected_last_whatever_its_manifest_says(twice):
    """The red team's manifest dated 2099 marked the student's own later hand-in superseded."""
    klass, roster = twice
    intake = collect([str(klass)], roster=roster, latest=True)
    assert ids(intake) == {"jane.zip": "s1001", "li.zip": "s1002"}
    (skipped,) = intake.skipped
    assert skipped.path == str(klass / "s1001.zip")
    assert skipped.reason == (
        "superseded by 'jane.zip' (s1001's latest hand-in, collected 2026-03-02T08:00:00+00:00; "
        "this one 2026-03-01T10:00:00+00:00)"
    )


def test_latest_takes_an_lms_attempt_time_in_the_name_over_the_files_time(tmp_path):
    roster = roster_file(tmp_path, ["jdoe,Jane Doe,jane@uni.example,hw1_jdoe_attempt_*"])
    klass = tmp_path / "class"
    late = "hw1_jdoe_attempt_2026-03-02-09-00-00_mine.py"
    collected_at(write(klass / "hw1_jdoe_attempt_2026-03-01-09-00-00_x_attempt_2099-01-01-00-00-00.py"),
                 "2026-03-05T00:00:00+00:00")  # fmt: skip
    collected_at(write(klass / late), "2026-03-04T00:00:00+00:00")
    intake = collect([str(klass)], roster=roster, latest=True)
    assert ids(intake) == {late: "jdoe"}


@pytest.mark.parametrize("case", ["untimed", "same-time"], ids=["untimed", "same-time"])
def test_latest_makes_an_error_row_when_it_cannot_tell_which_is_last(twice, case):
    klass, roster = twice
    if case == "untimed":
        subs = [read_submission(klass / "s1001.zip"), read_submission(klass / "jane.zip")]
        subs[0].collected = None  # a time that could not be read
        (row,) = identify(subs, roster=roster, latest=True).submissions
        assert row.error is not None and "--latest cannot choose: 's1001.zip': no time known" in row.error
        return
    write(klass / "jane" / "answers.py", SCORES)
    collected_at(klass / "jane", "2026-03-02T09:00:00+01:00")  # jane.zip's time, in UTC; a folder: a container too
    intake = collect([str(klass)], roster=roster, latest=True)
    (row,) = [s for s in intake.submissions if s.student == "s1001"]
    assert row.error is not None and "'jane', 'jane.zip' were collected at the same time" in row.error
    assert [s.error for s in intake.submissions if s.student == "s1002"] == [None]


# --- ids never depend on the order ------------------------------------------------------------------------


def test_shuffled_inputs_give_the_same_ids(tmp_path):
    roster = roster_file(tmp_path, ["s1001,Jane Doe,jane@uni.example,doejane_*", "s1002,Li Wei,li@uni.example,",
                                    "alice,Alice,alice@uni.example,"])  # fmt: skip
    d = tmp_path / "in"
    paths = [
        hand_in(d / "doejane_1_submission.zip", "s1002"),  # pattern beats the manifest
        collected_at(hand_in(d / "li.zip", "s1002"), "2026-03-01T11:00:00+00:00"),  # the latest of s1002
        collected_at(hand_in(d / "s1002.zip", "s1002", created="2099-01-01T00:00:00"), "2026-03-01T09:00:00+00:00"),
        write(d / "alice.py"),  # by its name
        write(d / "zed.py"),  # on no roster, and two of the same name: told apart by their paths
        write(d / "z" / "zed.py"),
    ]
    expect = None
    for order in itertools.islice(itertools.permutations(paths), 0, None, 7):  # 103 of 720 orders
        intake = collect([str(p) for p in order], roster=roster, latest=True)
        got = (
            sorted((s.source, s.student, tuple(s.notes)) for s in intake.submissions),
            sorted((s.path, s.reason) for s in intake.skipped),
            [e.id for e in intake.missing],
        )
        expect = expect or got
        assert got == expect, order
    by_name = {Path(src).name if "/z/" not in src else "z/zed.py": sid for src, sid, _ in expect[0]}
    assert by_name == {
        "doejane_1_submission.zip": "s1001", "li.zip": "s1002", "alice.py": "alice",
        "zed.py": f"zed-{_hash8(str(d / 'zed.py'))}", "z/zed.py": f"zed-{_hash8(str(d / 'z' / 'zed.py'))}",
    }  # fmt: skip


# --- the command line -----------------------------------------------------------------------------------


def grade(args: list[str]):
    return CliRunner().invoke(main, ["grade", *args], catch_exceptions=False)


@pytest.mark.parametrize(
    "case", ["missing-file", "empty-folder", "strays-only", "both-flags", "bad-roster", "no-roster"],
    ids=["missing-file", "empty-folder", "strays-only", "both-flags", "bad-roster", "no-roster"],
)
def test_grade_usage_errors_exit_2_and_write_nothing(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    args, expected = {
        "missing-file": (["nope.zip"], "nope.zip: no such file or folder"),
        "empty-folder": (["empty"], "empty: no submissions in it"),
        "strays-only": (["strays"], "strays: no submissions in it"),
        "both-flags": (["hw", "--class", "--one"], "--class and --one contradict each other"),
        "bad-roster": (["hw", "--class", "--roster", "bad.csv"], "bad.csv:3: 2 fields where the header has 3"),
        "no-roster": (["hw", "--roster", "none.csv"], "'none.csv' does not exist"),
    }[case]
    (tmp_path / "empty").mkdir()
    write(tmp_path / "strays" / "README.md", "x")
    write(tmp_path / "strays" / ".DS_Store", "x")
    write(tmp_path / "hw" / "scores.py")
    write(tmp_path / "hw" / "masking.py", MASK)
    write(tmp_path / "hw" / "bob.ipynb", NOTEBOOK)
    write(tmp_path / "bad.csv", "id,name,email\ns1,A,a@x\ns2,B\n")
    result = grade([*args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert expected in " ".join(result.output.split())
    assert not out.exists()
    assert not list(tmp_path.rglob("gradebook.sqlite")) and not list(tmp_path.rglob("grades.csv"))


def test_grade_says_what_it_found_and_skipped_before_grading(tmp_path, monkeypatch):
    """grade_class is replaced by a stop: what is printed before it is intake's alone."""
    seen = {}

    def stop(intake, out, options):
        seen.update(intake=intake, roster=options.roster, out_files=list(out.iterdir()))
        raise RuntimeError("stopped here by the test")

    monkeypatch.setattr(class_grading, "grade_class", stop)
    klass = tmp_path / "class"
    write(klass / "alice.py")
    write(klass / "bob.ipynb", NOTEBOOK)
    hand_in(klass / "x.zip", "carol")
    write(klass / "essay.docx", "x")
    write(klass / "README.md", "x")
    roster = write(tmp_path / "roster.csv", "id,name,email\nalice,A,\nbob,B,\ndan,D,\n")
    args = ["grade", str(klass), "--roster", str(roster), "--out", str(tmp_path / "new" / "out")]
    result = CliRunner().invoke(main, args, env={"COLUMNS": "300"}, catch_exceptions=False)  # lines are cut, never
    # wrapped, at the console's width where they carry a learner's text
    assert result.exit_code == 1 and "stopped here by the test" in result.output
    text = " ".join(result.output.split())
    assert "3 submissions found: 1 py, 1 zip, 1 ipynb; roster of 3: 1 with no hand-in, 1 not on it" in text
    assert f"skipped: {klass / 'essay.docx'}: {NOT_A_HAND_IN}" in text
    assert "README" not in text
    assert "id: 'x.zip': its manifest claims the id 'carol'; graded as 'x'" in text
    assert "id: 'x.zip' matches no one on the roster: graded as 'x'" in text
    assert "missing: dan (no hand-in; a 'missing' row each)" in text
    assert text.index("submissions found") < text.index("stopped here")
    assert ids(seen["intake"]) == {"alice.py": "alice", "bob.ipynb": "bob", "x.zip": "x"}
    assert seen["roster"] is None  # grade_class takes the intake's roster itself (the slow test at the end)
    assert seen["out_files"] == []  # intake wrote nothing (the command holds the new, empty out folder)
    assert not (tmp_path / "new").exists()  # a grading that stopped before writing leaves no folder it made behind


def test_only_with_a_roster_says_no_one_is_missing(tmp_path, monkeypatch):
    """--only grades some students and keeps every other's row: the roster's others are not missing."""

    def stop(intake, out, options):
        raise RuntimeError(f"stopped here by the test; missing={len(intake.missing)}")

    monkeypatch.setattr(class_grading, "grade_class", stop)
    write(tmp_path / "late" / "alice.py")
    roster = write(tmp_path / "roster.csv", "id,name,email\nalice,A,\nbob,B,\ndan,D,\n")
    args = ["grade", str(tmp_path / "late"), "--class", "--roster", str(roster), "--only", "alice", "--out",
            str(tmp_path / "o")]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    text = " ".join(result.output.split())
    assert result.exit_code == 1 and "stopped here by the test; missing=0" in text, result.output
    assert "1 submission found" in text and "missing" not in text.replace("missing=0", "")
    assert "with no hand-in" not in text


def test_grade_class_one_and_latest_reach_intake(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(class_grading, "grade_class", lambda intake, out, options: seen.append(intake) or 1 / 0)
    write(tmp_path / "hw" / "scores.py")
    write(tmp_path / "hw" / "masking.py", MASK)
    write(tmp_path / "hw" / "bob.ipynb", NOTEBOOK)
    for flag, expected in (("--class", ["bob", "masking", "scores"]), ("--one", ["hw"])):
        with pytest.raises(ZeroDivisionError):
            grade([str(tmp_path / "hw"), flag, "--out", str(tmp_path / "out")])
        assert sorted(s.student for s in seen.pop().submissions) == expected
    collected_at(hand_in(tmp_path / "two" / "s1.zip", "s1", created="2099-01-01T10:00:00"), "2026-03-01T10:00:00")
    collected_at(hand_in(tmp_path / "two" / "a.zip", "s1"), "2026-03-01T11:00:00")
    roster = write(tmp_path / "roster.csv", "id,name,email\ns1,A,a@uni.example\n")
    with pytest.raises(ZeroDivisionError):
        grade([str(tmp_path / "two"), "--latest", "--roster", str(roster), "--out", str(tmp_path / "out")])
    assert ids(seen.pop()) == {"a.zip": "s1"}


def test_a_later_run_without_roster_matches_against_the_roster_its_out_folder_keeps(tmp_path, monkeypatch):
    from grader.instructor.gradebook import Gradebook

    seen = []
    monkeypatch.setattr(class_grading, "grade_class", lambda intake, out, options: seen.append(intake) or 1 / 0)
    out = tmp_path / "out"
    rows = [{"id": "s1001", "name": "Jane", "email": "", "pattern": "doejane_*"}, {"id": "s1002", "name": "Li"}]
    with Gradebook(out / "gradebook.sqlite") as book:
        book.set_roster_rows(rows)
    late = write(tmp_path / "late" / "doejane_999_late.py")
    with pytest.raises(ZeroDivisionError):
        grade([str(late), "--out", str(out)])
    intake = seen.pop()
    assert ids(intake) == {"doejane_999_late.py": "s1001"}
    assert intake.roster is not None and intake.roster.ids == ["s1001", "s1002"]
    assert [e.id for e in intake.missing] == ["s1002"]


@pytest.mark.slow
def test_a_roster_run_grades_the_hand_ins_and_gives_the_missing_a_row(tmp_path):
    """End to end: the roster reaches the gradebook through the intake; grades.csv has every student."""
    import csv
    import sys

    from learner_code import alice_with

    if not sys.platform.startswith("linux"):
        pytest.skip("the sandbox is tested on Linux")
    klass = tmp_path / "class"
    write(klass / "doejane_123_submission.py", alice_with(None))
    write(klass / "zed.py", alice_with("wrong_causal_mask"))
    roster = write(tmp_path / "roster.csv", "id,name,email,pattern\ns1001,Jane,,doejane_*\ns1002,Li,,\n")
    out = tmp_path / "out"
    result = grade([str(klass), "--roster", str(roster), "--out", str(out), "--devices", "cpu", "--timeout", "5"])
    assert result.exit_code == 0, result.output
    with (out / "grades.csv").open(newline="", encoding="utf-8") as fh:
        rows = {row["student"]: row for row in csv.DictReader(fh)}
    assert sorted(rows) == ["s1001", "s1002", "zed"]
    assert rows["s1001"]["status"] == "graded" and rows["s1001"]["total"] == rows["s1001"]["max"]
    assert rows["s1002"]["status"] == "missing" and rows["s1002"]["total"] == ""
    assert rows["zed"]["status"] == "graded" and float(rows["zed"]["total"]) < float(rows["zed"]["max"])


@pytest.mark.parametrize(
    "name",
    [
        "mallorym_123_456_hw_attempt_2099-01-01-00-00-00.py",  # Canvas: the learner's own name after the prefix
        "hw1_jdoe_mine_attempt_2099-01-01-00-00-00.py",  # not the third field: the learner's
    ],
)
def test_an_attempt_time_the_learner_wrote_is_no_time(tmp_path, name):
    """A red team forged ``_attempt_<time>`` in the part of a Canvas name the learner writes (two equal times
    stopped the class; one 2099 chose which hand-in counted): only the file's time as collected stands."""
    import os
    from datetime import datetime, timezone

    from grader.instructor.handin_reading import collected_time

    path = tmp_path / name
    path.write_text("x = 1\n", encoding="utf-8")
    os.utime(path, (1_700_000_000, 1_700_000_000))
    assert collected_time(path) == datetime.fromtimestamp(1_700_000_000, tz=timezone.utc)


@pytest.mark.parametrize(("name", "student"), [("ｂｏｂ.py", "bob"), ("=SUM(1).py", "_SUM_1_"), ("аlice.py", "_lice")])
def test_an_id_a_name_gives_only_once_made_safe_is_said(tmp_path, name, student):
    """Round 6's I2: a fold or a replaced character changed the id in silence (README: each change is said)."""
    write(tmp_path / name, "x = 1\n")
    (sub,) = collect([str(tmp_path / name)]).submissions
    assert sub.student == student
    assert [n for n in sub.notes if "made safe" in n and repr(student) in n], sub.notes
