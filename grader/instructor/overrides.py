"""The instructor's overrides: a grade set by hand for one student on one exercise or the total, with why.

An override lives in the gradebook apart from every run (:meth:`~grader.instructor.gradebook.Gradebook.
add_override`), so every later ``attnkit grade`` (a late hand-in, ``--only``, ``--force`` under a new rubric) keeps
it; it replaces the computed points in every file through the rubric (:attr:`~grader.instructor.rubric.Rubric.
overrides`), and the student's feedback says it and why.  Adding or undoing one writes the reports again at once,
from the gradebook alone (:func:`write_reports_again`), under the last grading's rubric and the file choices it was
given (``--lang``, ``--lms``…): nothing is regraded.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from grader.handin import kit_version
from grader.instructor.class_grading import choose_devices, class_roll
from grader.instructor.gradebook import Gradebook
from grader.instructor.out_folder import GRADEBOOK, class_file
from grader.instructor.report_model import ReportOptions
from grader.instructor.reports import write_reports
from grader.instructor.rubric import TOTAL, Rubric, load_rubric, run_rubric
from grader.registry import HOOK_NAMES

__all__ = ["OverrideError", "add_override", "class_rubric", "refuse_unfinished", "undo_override", "write_reports_again"]


class OverrideError(ValueError):
    """An override that cannot be: no graded class, an unknown student or exercise, points out of range."""


def class_rubric(book: Gradebook) -> Rubric:
    """The rubric of the class's last grading (the packaged one where it recorded none), with every override in
    force."""
    runs = book.finished_runs()
    rubric = (run_rubric(runs[-1]) if runs else None) or load_rubric()
    return dataclasses.replace(rubric, overrides=tuple(o for o, _ in book.overrides()))


def _class_students(book: Gradebook) -> list[str]:
    settings = book.class_settings()
    return [] if settings is None else list(book.class_results(settings))


def refuse_unfinished(book: Gradebook, what: str) -> None:
    """:class:`OverrideError` where a grading into the out folder is unfinished: its results are not the class's yet
    (the reports are written when a run completes), so nothing may write the reports from them."""
    unfinished = book.latest_unfinished_run()
    if unfinished is not None:
        raise OverrideError(
            f"a grading into {book.path.parent} is unfinished (run {unfinished['id']}, stopped or killed): run the "
            f"same attnkit grade command again to finish it, then {what}"
        )


def add_override(book: Gradebook, student: str, exercise: str, points: float, reason: str, by: str) -> int:
    """Check and record an override; returns its id (:class:`OverrideError` names what is wrong)."""
    refuse_unfinished(book, "add the override")
    students = _class_students(book)
    if not students:
        raise OverrideError(f"{book.path} holds no graded class: grade it first")
    if student not in students:
        shown = ", ".join(students[:20]) + (" …" if len(students) > 20 else "")
        raise OverrideError(f"no student {student!r} in this class (its students: {shown})")
    if exercise not in (*HOOK_NAMES, TOTAL):
        raise OverrideError(f"no exercise {exercise!r}: give one of {', '.join(HOOK_NAMES)}, or {TOTAL}")
    rubric = class_rubric(book)
    most = rubric.max_total if exercise == TOTAL else rubric.points[exercise]
    if not math.isfinite(points) or not 0 <= points <= most:
        raise OverrideError(f"{exercise}: points must be between 0 and {most:g} (the rubric's), not {points:g}")
    if not reason.strip():
        raise OverrideError("an override needs a reason (--reason): the student's feedback says it")
    if not reason.strip().isprintable():
        raise OverrideError("the reason must be one line of printable text (no newline, tab or control character)")
    return book.add_override(student, exercise, points, reason.strip(), by)


def undo_override(book: Gradebook, override_id: int) -> str:
    """Undo an override in force; returns its student (:class:`OverrideError` where there is none of that id)."""
    refuse_unfinished(book, "undo the override")
    in_force = {o.id: o for o, _ in book.overrides()}
    if override_id not in in_force or not book.undo_override(override_id):
        known = ", ".join(str(i) for i in in_force) or "none"
        raise OverrideError(f"no override {override_id} in force (in force: {known})")
    return in_force[override_id].student


def write_reports_again(out: Path, students: list[str]) -> list[str]:
    """Write the class files and ``students``' own files again from the gradebook, as the last ``attnkit grade``
    into ``out`` would have with today's overrides; returns the problems (:func:`write_reports`)."""
    with Gradebook(class_file(out, GRADEBOOK)) as book:
        settings, runs = book.class_settings(), book.finished_runs()
        if settings is None or not runs:
            raise OverrideError(f"{book.path} holds no graded class: grade it first")
        ran, skipped = choose_devices(settings.devices)
        choices = book.report_choices()
        options = ReportOptions(
            lang=str(choices.get("lang", "en")), devices=tuple(ran), skipped_devices=skipped,
            suite_version=settings.suite_version, kit=kit_version(), isolation=str(runs[-1]["isolation"]),
            seed=int(settings.seed), show_output=bool(choices.get("show_output", False)),
            lms=tuple(choices.get("lms", ())), assignment=str(choices.get("assignment", "attnkit")),
        )  # fmt: skip
        roll = class_roll(book, settings, book.roster_rows() or [], out)
        latest = book.class_results(settings)
        graded = [(sub, results) for sub, results in roll.graded if sub.student in students]
        figures = {s: book.figures(latest[s][0], s) for s in students if s in latest}
        rubric = class_rubric(book)
    return write_reports(out, graded, rubric, options, figures, roll)
