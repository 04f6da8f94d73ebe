"""Write everything grading leaves behind for people (:func:`write_reports`), each file by its own module.

Every file is written from :mod:`~grader.instructor.report_model`.  Given the same results, every file is
byte-for-byte the same, whatever order the submissions came in; everything a submission wrote is shown only
through :func:`~grader.instructor.inert.inert`.  Writing one student's files can never stop another's, nor the
class files: a failing writer is logged and reported by :func:`write_reports`, and the others go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from grader.handin import safe_name
from grader.instructor import class_report, feedback, heatmaps, lms
from grader.instructor.grades_csv import write_grades_csv
from grader.instructor.heatmaps import Figure
from grader.instructor.inert import inert
from grader.instructor.junit import write_junit
from grader.instructor.out_folder import GRADES_CSV, JUNIT_XML, LMS_NAMES, class_file, lms_file
from grader.instructor.output_txt import write_output
from grader.instructor.report_model import ClassRoll, Graded, ReportOptions, by_student, one_line, student_report
from grader.instructor.results_json import write_results_json
from grader.instructor.rubric import Rubric

__all__ = ["student_folder", "write_reports"]

log = logging.getLogger(__name__)


def student_folder(out_dir: str | Path, student: str) -> Path:
    """``out_dir/<student>``; refuses an id that is not already safe (ids come from :func:`grader.handin.safe_name`)."""
    if safe_name(student) != student:
        raise ValueError(f"unsafe student id {student!r}")
    out = Path(out_dir).resolve()
    folder = (out / student).resolve()
    if folder.parent != out:
        raise ValueError(f"student id {student!r} would write outside {out}")
    return folder


def _note_problem(problems: list[str], what: str, exc: Exception) -> None:
    line = f"{what} not written: {type(exc).__name__}: {one_line(inert(exc), 200)}"
    log.error("%s", line)
    problems.append(line)


def _guarded(problems: list[str], what: str, write: Callable[..., object], *args: Any) -> None:
    """Run ``write(*args)``; a failure is logged and noted in ``problems`` instead of stopping the others."""
    try:
        write(*args)
    except Exception as exc:
        _note_problem(problems, what, exc)


def write_reports(
    out_dir: str | Path,
    graded: Graded,
    rubric: Rubric,
    options: ReportOptions,
    figures: Mapping[str, Mapping[str, Figure]] | None = None,
    roll: ClassRoll | None = None,
) -> list[str]:
    """Write the class files from ``roll`` and, for each of ``graded``, its own files; returns the problems.

    ``roll`` is the whole class (default: just ``graded``) the class files list; every other student's own files
    are on disk from the run that graded them.  ``figures`` (``student -> hook -> Figure``) are drawn here,
    written as ``heatmap-<hook>.png`` (replacing an earlier grading's) and embedded in ``feedback.html``.  A file
    that fails is logged and listed in the returned problems, one line each; every other file is still written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    graded = by_student(graded)
    roll = roll if roll is not None and (roll.graded or roll.missing) else ClassRoll.of(graded)
    assignment = options.assignment or "attnkit"
    whole = by_student(roll.graded)
    problems: list[str] = []
    _guarded(problems, GRADES_CSV, write_grades_csv, class_file(out, GRADES_CSV), whole, rubric, roll.missing)
    _guarded(problems, JUNIT_XML, write_junit, class_file(out, JUNIT_XML), whole, roll.missing)
    _guarded(problems, "class.html / class.md", class_report.write, out, roll, rubric, options)
    for name in options.lms:
        _guarded(problems, f"{name} export", lms.write, out, name, roll, rubric, assignment)
    for name in sorted(set(LMS_NAMES) - set(options.lms)):  # an earlier grading's export: stale points, removed
        _guarded(problems, f"{name} export", class_file(out, lms_file(name)).unlink, True)
    for sub, results in graded:
        try:
            folder = student_folder(out, sub.student)
            report = student_report(sub, results, rubric, options, roll.printed.get(sub.student))
        except Exception as exc:
            _note_problem(problems, f"{sub.student}: feedback", exc)
            continue
        drawn = heatmaps.draw((figures or {}).get(sub.student, {}), sub.student)
        feedback.attach_figures(report, drawn)
        _guarded(problems, f"{sub.student}: heatmaps", heatmaps.write, folder, drawn)
        _guarded(problems, f"{sub.student}/results.json", write_results_json, folder / "results.json", report)
        _guarded(problems, f"{sub.student}/feedback.md", feedback.write_md, folder, report)
        _guarded(problems, f"{sub.student}/feedback.html", feedback.write_html, folder, report)
        printed, by_hook = roll.outputs.get(sub.student, ""), roll.printed.get(sub.student, {})
        _guarded(problems, f"{sub.student}/output.txt", write_output, folder, printed, by_hook)
    return problems
