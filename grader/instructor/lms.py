"""Grades in the shape an LMS imports: Canvas's and Moodle's gradebook CSV, one row per student of the class.

- ``canvas.csv``: ``Student, ID, SIS User ID, SIS Login ID, Section, <assignment>``, then a ``Points
  Possible`` row (as Canvas's own export has it); ``SIS User ID`` is the roster's id, ``SIS Login ID`` its
  email, ``ID`` and the section empty (Canvas matches a row on any of its ids).  An assignment named
  ``Name (123)`` updates Canvas's assignment 123; a bare name makes a new one.
- ``moodle.csv``: ``Email address, ID number, Full name, <assignment>`` (mapped to the user on import).

The points are the class's total under the rubric, only for a ``graded`` or ``review`` student: a ``missing``
or ``error`` cell is empty, which both LMSs leave ungraded, so nothing ungraded is posted as a zero.  Text
cells are kept from starting a spreadsheet formula.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from grader.instructor.out_folder import class_file, lms_file, write_text
from grader.instructor.report_model import ClassRoll, Person, fmt_points, spreadsheet_cell, status
from grader.instructor.rubric import Rubric, score, total

__all__ = ["EXPORTS", "canvas_rows", "export_csv", "moodle_rows", "student_points", "write"]

CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_COLUMNS = ["Email address", "ID number", "Full name"]


def student_points(roll: ClassRoll, rubric: Rubric) -> list[tuple[Person, str]]:
    """``(person, points)`` for every student of the class, sorted by id; points ``""`` where not graded."""
    rows: dict[str, tuple[Person, str]] = {}
    for sub, results in roll.graded:
        person = roll.people.get(sub.student, Person(sub.student))
        graded = not status(sub, results).startswith("error") or bool(rubric.overrides_of(sub.student))
        earned = total(score(results, rubric, sub.student), rubric, sub.student)[0]
        rows[sub.student] = (person, fmt_points(earned) if graded else "")
    for person in roll.missing:
        rows.setdefault(person.id, (person, ""))
    return [rows[student] for student in sorted(rows)]


def canvas_rows(roll: ClassRoll, rubric: Rubric, assignment: str = "attnkit") -> list[list[str]]:
    possible = ["Points Possible", "", "", "", "", fmt_points(rubric.max_total)]
    rows = [CANVAS_COLUMNS + [spreadsheet_cell(assignment)], possible]
    for person, points in student_points(roll, rubric):
        cells = [spreadsheet_cell(text) for text in (person.name or person.id, person.id, person.email)]
        rows.append([cells[0], "", cells[1], cells[2], "", points])
    return rows


def moodle_rows(roll: ClassRoll, rubric: Rubric, assignment: str = "attnkit") -> list[list[str]]:
    rows = [MOODLE_COLUMNS + [spreadsheet_cell(assignment)]]
    for person, points in student_points(roll, rubric):
        rows.append([*(spreadsheet_cell(text) for text in (person.email, person.id, person.name)), points])
    return rows


EXPORTS = {"canvas": canvas_rows, "moodle": moodle_rows}
"""Each LMS export by the name ``--lms`` takes; it is written to ``<name>.csv`` (declared in
:data:`grader.instructor.out_folder.LMS_NAMES`, or :func:`write` refuses it)."""


def export_csv(name: str, roll: ClassRoll, rubric: Rubric, assignment: str = "attnkit") -> str:
    if name not in EXPORTS:
        raise ValueError(f"unknown LMS {name!r}; attnkit writes {', '.join(EXPORTS)}")
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(EXPORTS[name](roll, rubric, assignment))
    return buffer.getvalue()


def write(out: str | Path, name: str, roll: ClassRoll, rubric: Rubric, assignment: str = "attnkit") -> Path:
    """Write ``out/<name>.csv`` and return its path."""
    write_text(path := class_file(out, lms_file(name)), export_csv(name, roll, rubric, assignment))
    return path
