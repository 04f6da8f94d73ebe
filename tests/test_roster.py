"""The class roster CSV: what it holds, every bad file refused naming its line, lookups, rows for the gradebook."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.instructor.roster import Roster, RosterEntry, RosterError, load

GOOD = (
    "id,name,email,pattern\n"
    "s1001,Jane Doe,jane.doe@uni.example,doejane_*\n"
    "s1002,Li Wei,li.wei@uni.example,\n"
    "s1003,Ana María,,\n"
)


def write(tmp_path: Path, text: str | bytes, name: str = "roster.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_a_roster_reads_its_students_in_order(tmp_path):
    roster = load(write(tmp_path, GOOD))
    assert roster.entries == (
        RosterEntry("s1001", "Jane Doe", "jane.doe@uni.example", "doejane_*"),
        RosterEntry("s1002", "Li Wei", "li.wei@uni.example", None),
        RosterEntry("s1003", "Ana María", "", None),
    )
    assert Roster.load(write(tmp_path, GOOD)) == roster


def test_the_header_is_read_loosely_and_extra_columns_are_ignored(tmp_path):
    text = "\ufeffSection , EMAIL,Name,ID\nA,x@y.example,X Y,x1\n\n,,,\n"  # Excel's BOM, blank rows
    roster = load(write(tmp_path, text))
    assert roster.entries == (RosterEntry("x1", "X Y", "x@y.example", None),)


BAD = [
    ("", 0, "empty file"),
    ("name,email\nA,a@x\n", 1, "the header has no id column"),
    ("id,name,email,id\nA,B,C,D\n", 1, "the header names id twice"),
    ("id,name,email\ns1,A,a@x\n\ns2,B\n", 4, "2 fields where the header has 3"),
    ("id,name,email\ns1,A,a@x\n,B,b@x\n", 3, "no id"),
    ("id,name,email\nAna María,A,a@x\n", 2, "id 'Ana María' is not a safe id"),
    ("id,name,email\n-rf,A,a@x\n", 2, "id '-rf' is not a safe id"),
    ("id,name,email\ns1,A,a@x\nS1,B,b@x\n", 3, "id 'S1' is already on line 2 (ids ignore case)"),
    ("id,name,email\ns1,A,a@x\ns2,B,A@X\n", 3, "email 'A@X' is already on line 2"),
    ("id,name,email\n", 0, "no students in it"),
    ('id,name,email\ns1,"A,a@x\n', 2, "not valid CSV"),
    (b"id,name,email\ns1,Jos\xe9,a@x\n", 2, "not valid UTF-8"),
    (b"id,name,email\ns1,A\x00,a@x\n", 2, "null byte"),
]


@pytest.mark.parametrize(("text", "line", "why"), BAD, ids=[why.split(" (")[0][:30] for _, _, why in BAD])
def test_a_bad_roster_names_its_line(tmp_path, text, line, why):
    path = write(tmp_path, text)
    with pytest.raises(RosterError) as caught:
        load(path)
    assert caught.value.line == line
    assert why in caught.value.why
    assert str(caught.value).startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_a_roster_that_is_not_a_file_is_refused(tmp_path):
    with pytest.raises(RosterError, match="cannot read it"):
        load(tmp_path / "nope.csv")
    with pytest.raises(RosterError, match="not a file"):
        load(tmp_path)


def test_patterns_are_globs_matched_against_the_file_name_ignoring_case(tmp_path):
    roster = load(write(tmp_path, GOOD + "s1004,Dot,,a.b[0-9].zip\n"))
    assert [e.id for e in roster.by_pattern("DoeJane_12345_6789_submission.zip")] == ["s1001"]
    assert roster.by_pattern("xdoejane_1.zip") == []  # the whole name, not a part of it
    assert [e.id for e in roster.by_pattern("a.b7.zip")] == ["s1004"]
    assert roster.by_pattern("aXb7.zip") == []  # a dot is a dot: globs need no escaping


def test_a_name_is_looked_up_by_id_then_email(tmp_path):
    roster = load(write(tmp_path, GOOD + "jane.doe,Other Jane,,\ns1005,Twin,li.wei@other.example,\n"))
    assert roster.by_name("S1002").id == "s1002"  # ids ignore case
    assert roster.by_name("jane.doe").id == "jane.doe"  # an id wins over another's email local part
    assert roster.by_name("jane.doe@uni.example").id == "s1001"  # a whole email (sanitised as an id would be)
    assert roster.by_name("jane.doe_uni.example").id == "s1001"
    assert roster.by_name("li.wei") is None  # two emails' local part: no one
    assert roster.by_name("nobody") is None


def test_rows_round_trip_and_are_checked(tmp_path):
    roster = load(write(tmp_path, GOOD))
    rows = roster.to_rows()
    assert rows[0] == {"id": "s1001", "name": "Jane Doe", "email": "jane.doe@uni.example", "pattern": "doejane_*"}
    assert rows[1]["pattern"] == ""
    assert Roster.from_rows(rows) == roster
    with pytest.raises(RosterError, match="the gradebook's roster:2: id 's1001' is already on line 1"):
        Roster.from_rows([rows[0], rows[0]])
