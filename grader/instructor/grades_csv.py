"""``grades.csv``: one row per student of the class (error rows included), one column of points per hook.

Columns ``student``, ``status`` (:func:`~grader.instructor.report_model.status`, or ``missing``), one per hook
(hookspec order), ``total``, ``max``.  A ``missing`` row's points are empty, not 0: an LMS import leaves an empty
cell ungraded, where a 0 would post a zero that looks like an honest one; its ``max`` is filled.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from grader.instructor.out_folder import write_text
from grader.instructor.report_model import MISSING, Graded, Person, by_student, fmt_points, spreadsheet_cell, status
from grader.instructor.rubric import Rubric, score, total
from grader.registry import HOOK_NAMES

__all__ = ["grades_csv", "grades_rows", "write_grades_csv"]


def grades_rows(graded: Graded, rubric: Rubric, missing: Iterable[Person] = ()) -> list[list[str]]:
    """The rows of ``grades.csv``, header first, students sorted; ``missing`` students' points left empty."""
    rows = [["student", "status", *HOOK_NAMES, "total", "max"]]
    absent = [
        [spreadsheet_cell(p.id), MISSING, *("" for _ in HOOK_NAMES), "", fmt_points(rubric.max_total)] for p in missing
    ]
    for sub, results in by_student(graded):
        scores = score(results, rubric, sub.student)
        cells = [spreadsheet_cell(sub.student), spreadsheet_cell(status(sub, results, rubric))]
        earned = (*(scores[h][0] for h in HOOK_NAMES), *total(scores, rubric, sub.student))
        rows.append(cells + [fmt_points(x) for x in earned])
    return rows[:1] + sorted(rows[1:] + absent, key=lambda row: row[0])


def grades_csv(graded: Graded, rubric: Rubric, missing: Iterable[Person] = ()) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(grades_rows(graded, rubric, missing))
    return buffer.getvalue()


def write_grades_csv(path: str | Path, graded: Graded, rubric: Rubric, missing: Iterable[Person] = ()) -> None:
    write_text(Path(path), grades_csv(graded, rubric, missing))
