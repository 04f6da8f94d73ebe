"""What changed between two gradings of a class: who gained or lost points, on which exercise, and why.

A grading is a finished run of ``attnkit grade`` into an out folder (:meth:`~grader.instructor.gradebook.Gradebook.
finished_runs`).  The class *as of* a run is every student's latest grading under that run's conditions up to it
(a run that regraded one student, ``--only``, leaves the rest as they stood); its points are those of the rubric
the run's reports were written under (``runs.rubric``; the packaged one where a run recorded none).  For each
student and exercise whose points or case verdicts differ, :func:`diff_gradings` says why: the hand-in changed,
the rubric's points or all-or-nothing rule changed, and which cases now pass or now fail.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.instructor.feedback import render
from grader.instructor.gradebook import ClassSettings, Gradebook
from grader.instructor.out_folder import DIFF_CSV, DIFF_HTML, class_file, write_text
from grader.instructor.report_model import fmt_points, spreadsheet_cell
from grader.instructor.rubric import TOTAL, Rubric, load_rubric, run_rubric, score, total
from grader.instructor.verdict import CaseResult
from grader.registry import HOOK_NAMES

__all__ = ["Change", "GradingDiff", "diff_gradings", "write_diff"]

CASES_NAMED = 3
"""Cases named per direction in a change's reason; the rest are counted."""


@dataclass(frozen=True)
class Change:
    """One student's points on one exercise (``hook``), or in all (``hook == "total"``), before and after."""

    student: str
    hook: str
    before: float | None  # None: not in the class then
    after: float | None
    why: str

    @property
    def delta(self) -> float:
        return round((self.after or 0.0) - (self.before or 0.0), 2)


@dataclass
class GradingDiff:
    """Two gradings (their runs' rows) and every change between them, students sorted, exercises in hook order."""

    before: dict[str, Any]
    after: dict[str, Any]
    changes: list[Change] = field(default_factory=list)
    rubric_changes: list[str] = field(default_factory=list)  # one line per exercise whose rubric entry changed
    students: int = 0  # students in either grading
    notes: list[str] = field(default_factory=list)

    @property
    def changed_students(self) -> list[str]:
        return sorted({c.student for c in self.changes})


def _rubric_of(run: dict[str, Any]) -> tuple[Rubric, str | None]:
    """The run's rubric, and a note where it recorded none (the packaged one stands in)."""
    if rubric := run_rubric(run):
        return rubric, None
    return load_rubric(), f"run {run['id']} recorded no rubric (graded before attnkit kept one): the packaged rubric"


def _class_as_of(book: Gradebook, run: dict[str, Any]) -> dict[str, tuple[str, list[CaseResult]]]:
    """``student -> (hand-in sha256, results)``: the class as it stood after ``run``."""
    settings = ClassSettings(run["seed"], run["suite_version"], run["devices"])
    return {s: (sub.sha256, results) for s, (_, sub, results) in book.class_results(settings, up_to=run["id"]).items()}


def _verdicts(results: Iterable[CaseResult], hook: str) -> dict[str, str]:
    return {f"{r.case} ({r.device}, {r.dtype})": r.status for r in results if r.hook == hook}


def _named(cases: list[str]) -> str:
    more = len(cases) - CASES_NAMED
    return ", ".join(cases[:CASES_NAMED]) + (f" and {more} more" if more > 0 else "")


def _case_reasons(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """``3 cases now pass (a, b, c)``, ``1 now fails (d)``, ``2 new cases``, ``1 case gone``."""
    now_pass = sorted(k for k in old.keys() & new.keys() if old[k] != "passed" and new[k] == "passed")
    now_fail = sorted(k for k in old.keys() & new.keys() if old[k] != "failed" and new[k] == "failed")
    reasons = [
        f"{len(keys)} case{'s' if len(keys) != 1 else ''} now {verb} ({_named(keys)})"
        for keys, verb in ((now_pass, "pass"), (now_fail, "fail"))
        if keys
    ]
    if added := len(new.keys() - old.keys()):
        reasons.append(f"{added} new case{'s' if added != 1 else ''}")
    if gone := len(old.keys() - new.keys()):
        reasons.append(f"{gone} case{'s' if gone != 1 else ''} gone")
    return reasons


def _rubric_reasons(old: Rubric, new: Rubric) -> dict[str, str]:
    """``hook -> why`` for every exercise whose points or all-or-nothing rule differ between the two rubrics."""
    why = {}
    for hook in HOOK_NAMES:
        parts = []
        if old.points.get(hook, 0.0) != new.points.get(hook, 0.0):
            parts.append(f"worth {fmt_points(new.points.get(hook, 0.0))}, was {fmt_points(old.points.get(hook, 0.0))}")
        if (hook in old.all_or_nothing) != (hook in new.all_or_nothing):
            parts.append("now all or nothing" if hook in new.all_or_nothing else "no longer all or nothing")
        if parts:
            why[hook] = "rubric: " + ", ".join(parts)
    return why


def _override_change(old: Rubric, new: Rubric, student: str, exercise: str) -> str | None:
    """``override 3 made``, ``override 3 undone`` or ``override 3 -> 4``, where the instructor's word changed."""
    was, now = old.overrides_of(student).get(exercise), new.overrides_of(student).get(exercise)
    if was == now:
        return None
    if was is None or now is None:
        return f"override {(now or was).id} {'made' if was is None else 'undone'}"  # type: ignore[union-attr]
    return f"override {was.id} -> {now.id}"


def diff_gradings(book: Gradebook, before_id: int, after_id: int) -> GradingDiff:
    """Every change between the class as of run ``before_id`` and as of run ``after_id`` (ValueError for a run that
    is not a finished grading of this gradebook)."""
    runs = {run["id"]: run for run in book.finished_runs()}
    for run_id in (before_id, after_id):
        if run_id not in runs:
            known = ", ".join(str(i) for i in runs) or "none"
            raise ValueError(f"run {run_id} is not a finished grading in {book.path} (its gradings: {known})")
    before, after = runs[before_id], runs[after_id]
    (old_rubric, old_note), (new_rubric, new_note) = _rubric_of(before), _rubric_of(after)
    # each grading with the overrides in force when it wrote its reports
    old_rubric = dataclasses.replace(old_rubric, overrides=book.run_overrides(before))
    new_rubric = dataclasses.replace(new_rubric, overrides=book.run_overrides(after))
    diff = GradingDiff(before, after, notes=[n for n in (old_note, new_note) if n])
    for side, rubric in (("earlier", old_rubric), ("later", new_rubric)):
        if rubric.overrides:
            diff.notes.append(f"the {side} grading's files showed {len(rubric.overrides)} override(s)")
    in_force = tuple(o for o, _ in book.overrides())
    if in_force != new_rubric.overrides:
        diff.notes.append(
            f"overrides were made or undone since run {after_id} (attnkit override --list): the files show them, "
            "this comparison does not"
        )
    by_rubric = _rubric_reasons(old_rubric, new_rubric)
    diff.rubric_changes = [f"{hook}: {why.removeprefix('rubric: ')}" for hook, why in by_rubric.items()]
    old_class, new_class = _class_as_of(book, before), _class_as_of(book, after)
    diff.students = len(old_class.keys() | new_class.keys())
    for student in sorted(old_class.keys() | new_class.keys()):
        old, new = old_class.get(student), new_class.get(student)
        old_scores = score(old[1], old_rubric, student) if old else None
        new_scores = score(new[1], new_rubric, student) if new else None
        handed_in = "new hand-in" if old and new and old[0] != new[0] else None
        for hook in HOOK_NAMES:
            was = old_scores[hook][0] if old_scores else None
            now = new_scores[hook][0] if new_scores else None
            cases = _case_reasons(_verdicts(old[1], hook), _verdicts(new[1], hook)) if old and new else []
            if was == now and not cases:
                continue
            if old is None or new is None:
                reasons = ["first graded" if old is None else "not in the later grading"]
            else:
                reasons = [r for r in (handed_in, by_rubric.get(hook), _override_change(old_rubric, new_rubric,
                                                                                         student, hook)) if r] + cases
            diff.changes.append(Change(student, hook, was, now, "; ".join(reasons) or "same cases, same rubric"))
        was_total = total(old_scores, old_rubric, student)[0] if old_scores else None
        now_total = total(new_scores, new_rubric, student)[0] if new_scores else None
        if was_total != now_total:
            why = _override_change(old_rubric, new_rubric, student, TOTAL) or "the sum of the exercises"
            diff.changes.append(Change(student, TOTAL, was_total, now_total, why))
    return diff


def _points(value: float | None) -> str:
    return "" if value is None else fmt_points(value)


def diff_rows(diff: GradingDiff) -> list[list[str]]:
    """``diff.csv``'s rows, header first: one per change (exercises, then the student's total)."""
    rows = [["student", "exercise", "before", "after", "change", "why"]]
    for c in diff.changes:
        change = "" if c.before is None or c.after is None else f"{c.delta:+.2f}"
        rows.append([spreadsheet_cell(c.student), c.hook, _points(c.before), _points(c.after), change, c.why])
    return rows


def run_label(run: dict[str, Any]) -> str:
    """``run 3 (2026-12-07 12:40, seed 7, suite 1a2b3c4d, results of 3 students)``: the results it recorded, graded
    in it or reused unchanged from an earlier run."""
    when = str(run.get("finished_at") or run.get("started_at") or "")[:16].replace("T", " ")
    return (
        f"run {run['id']} ({when}, seed {run['seed']}, suite {run['suite_version']}, "
        f"results of {run.get('students', 0)} student{'s' if run.get('students', 0) != 1 else ''})"
    )


def write_diff(out: str | Path, diff: GradingDiff) -> list[Path]:
    """``out/diff.csv`` and ``out/diff.html`` (each replacing the last diff written); returns their paths."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(diff_rows(diff))
    paths = [class_file(out, DIFF_CSV), class_file(out, DIFF_HTML)]
    write_text(paths[0], buffer.getvalue())
    page = render("diff.html.j2", True, diff=diff, before=run_label(diff.before), after=run_label(diff.after))
    write_text(paths[1], page)
    return paths
