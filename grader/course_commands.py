"""The instructor's second pass over a graded class: ``attnkit diff`` (what changed between two gradings) and
``attnkit override`` (a grade set by hand).  Declared here, run by :mod:`grader.instructor`'s modules, imported
only when called: a learner's kit holds the declarations and says the commands are for instructors."""

from __future__ import annotations

import getpass
from pathlib import Path

import click
from rich.console import Console

from grader.cli_options import out_option
from grader.instructor_command import InstructorCommand, hold_out_folder

__all__ = ["diff", "override"]


def _gradebook_path(out: str) -> Path:
    """OUT's gradebook; a usage error where there is none."""
    from grader.instructor.out_folder import GRADEBOOK, class_file  # an instructor's command: absent from a kit

    book_path = class_file(out, GRADEBOOK)
    if not book_path.is_file():
        raise click.UsageError(f"no gradebook at {book_path}: grade into --out first")
    return book_path


def _login_name() -> str:
    """Who runs the command ($LOGNAME, $USER, … or the password database), or '' where none can be told."""
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no name, no entry, no pwd module (Windows before 3.13)
        return ""


@click.command(cls=InstructorCommand)
@out_option("The out folder whose gradings to compare (its gradebook.sqlite).")
@click.option("--from", "from_run", type=int, metavar="RUN", help="The earlier grading (default: the one before --to).")
@click.option("--to", "to_run", type=int, metavar="RUN", help="The later grading (default: the latest).")
@click.option("--list", "list_runs", is_flag=True, help="List the out folder's gradings and compare none.")
def diff(out: str, from_run: int | None, to_run: int | None, list_runs: bool) -> None:
    """Say what changed between two gradings of a class, before publishing: who gained or lost points, on which
    exercise, and why (a new hand-in, the rubric's points, the cases whose verdict changed).

    A grading is one finished `attnkit grade` run into --out (--list shows them); the class as of a grading is every
    student's latest result up to it, under the rubric that run's reports were written with. Writes OUT/diff.csv and
    OUT/diff.html (replacing the last ones) and prints the changes.
    """
    from grader.instructor.console_summary import console_text, print_line
    from grader.instructor.gradebook import Gradebook
    from grader.instructor.grading_diff import diff_gradings, run_label, write_diff

    book_path = _gradebook_path(out)
    console = Console(emoji=False)
    with Gradebook(book_path) as book:
        runs = [run["id"] for run in book.finished_runs()]
        if list_runs:
            for run in book.finished_runs():
                console.print(console_text(run_label(run)))
            return
        to_id = to_run if to_run is not None else (runs[-1] if runs else None)
        from_id = from_run if from_run is not None else max((r for r in runs if to_id and r < to_id), default=None)
        if to_id is None or from_id is None:
            raise click.UsageError(f"{book_path} holds {len(runs)} finished grading(s): two are needed to compare")
        if from_id > to_id:
            raise click.UsageError(f"--from {from_id} is later than --to {to_id}: give the earlier grading as --from")
        try:
            changes = diff_gradings(book, from_id, to_id)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    written = write_diff(out, changes)
    console.print(console_text(f"from {run_label(changes.before)}"))
    console.print(console_text(f"  to {run_label(changes.after)}"))
    for line in changes.notes + [f"rubric: {line}" for line in changes.rubric_changes]:
        console.print(f"[yellow]{console_text(line)}[/]")  # ours, wrapped: read whole, never cut
    for c in changes.changes:
        was, now = ("-" if x is None else f"{x:g}" for x in (c.before, c.after))
        print_line(console, console_text(f"{c.student}  {c.hook}: {was} -> {now}" + (f"  ({c.why})" if c.why else "")))
    console.print(
        f"{len(changes.changed_students)} of {changes.students} student(s) changed; written: "
        + ", ".join(console_text(str(p)) for p in written)
    )


@click.command(cls=InstructorCommand)
@click.argument("student", required=False)
@click.argument("exercise", required=False)
@click.argument("points", type=float, required=False)
@click.option("--reason", help="Why (required to add): the student's feedback says it.")
@click.option("--by", default=_login_name, help="Who made it (default: your login name).")
@out_option("The graded class's out folder.")
@click.option("--list", "list_them", is_flag=True, help="List the overrides (undone ones too) and change nothing.")
@click.option("--undo", type=int, metavar="ID", help="Undo the override of this id (see --list).")
def override(
    student: str | None, exercise: str | None, points: float | None, reason: str | None, by: str, out: str,
    list_them: bool, undo: int | None,
) -> None:  # fmt: skip
    """Set a student's points on one EXERCISE (or on the total: EXERCISE 'total') by hand, with a reason.

    attnkit override carol causal_mask 0.5 --reason "regrade request: only the diagonal was wrong"

    The override replaces the computed points in grades.csv (status 'adjusted: ...'), the LMS exports, results.json,
    the class report and the student's feedback (which says it and why), and survives every later attnkit grade into
    OUT (a late hand-in, --only, --force under a new rubric) until undone with --undo ID.  Adding or undoing one
    writes the reports again from the gradebook at once, with the last grading's rubric and choices; nothing is
    regraded.
    """
    from grader.instructor.console_summary import console_text, print_line
    from grader.instructor.gradebook import Gradebook
    from grader.instructor.overrides import OverrideError, add_override, undo_override, write_reports_again

    adding = (student, exercise, points) != (None, None, None)
    if sum((adding, list_them, undo is not None)) != 1:
        raise click.UsageError("give STUDENT EXERCISE POINTS --reason WHY, or --list, or --undo ID (one of them)")
    if adding and (exercise is None or points is None):
        raise click.UsageError("an override is STUDENT EXERCISE POINTS (all three) --reason WHY")
    book_path = _gradebook_path(out)
    if not list_them:
        hold_out_folder(out)  # until the command ends: no grading writes the class while the reports are rewritten
    console = Console(emoji=False)
    try:
        with Gradebook(book_path) as book:
            if list_them:
                for o, undone in book.overrides(undone=True):
                    state = f"undone {undone[:16]}" if undone else "in force"
                    line = f"{o.id} {o.student} {o.exercise} = {o.points:g} ({state}; {o.by} {o.at[:16]})"
                    console.print(console_text(f"{line}: {o.reason}"), soft_wrap=True)
                return
            if undo is not None:
                who = undo_override(book, undo)
                said = f"override {undo} undone"
            else:
                assert student is not None and exercise is not None and points is not None
                made = add_override(book, student, exercise, points, reason or "", by)
                who, said = student, f"override {made}: {student} {exercise} = {points:g}"
    except OverrideError as exc:
        raise click.UsageError(str(exc)) from None
    problems = write_reports_again(Path(out), [who])
    console.print(console_text(f"{said}; the class files and {who}'s feedback are written again"))
    for line in problems:
        print_line(console, f"[red]report:[/] {console_text(line)}")
