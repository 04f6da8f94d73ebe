"""What ``attnkit grade`` prints after grading: the grades table, the review findings, the id notes.

Every console line that carries a submission's text (an id, a message, a finding) is one inert line
(:func:`console_text`), never wrapped (:func:`print_line`): nothing a hand-in wrote can print a line of its own.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.instructor.inert import inert, inert_line
from grader.instructor.report_model import (
    MAX_MESSAGE_CHARS,
    Graded,
    by_student,
    one_line,
    review_summary,
    short_points,
    submission_error,
)
from grader.instructor.rubric import Rubric, score, total
from grader.registry import HOOK_NAMES

__all__ = ["console_text", "print_line", "review_lines", "summary_table"]


def console_text(text: object) -> str:
    """Text a submission wrote, for the rich console: one inert line (:func:`inert_line`: a newline is escaped,
    each such text being one item, an id, a note, a finding, a path), markup escaped."""
    from rich.markup import escape

    return escape(inert_line(text, MAX_MESSAGE_CHARS))


def print_line(console: Console, markup: str) -> None:
    """Print one console line that carries learner-derived text (its learner parts through :func:`console_text`):
    never wrapped, cut with "…" at the console's width.

    A line wrapped at the width (by rich, or by the terminal) lets a learner's text start the next line: padding
    of spaces, blank fillers or visible dots up to the width made a finding's tail show as a review line of its
    own (``alice: alice.py:1: copied from mallory``).  The whole text is in the reports.  Emoji codes stay text (a
    name ``:white_check_mark:.py`` printed a ✅).
    """
    console.print(markup, no_wrap=True, overflow="ellipsis", soft_wrap=False, emoji=False)


def summary_table(graded: Graded, rubric: Rubric) -> Table:
    """The table printed after grading: student, total/max, where points were lost, error or review."""
    table = Table(title="attnkit grades", show_lines=False, header_style="bold")
    table.add_column("student", no_wrap=True)
    table.add_column("total", justify="right", no_wrap=True)
    table.add_column("points lost in", overflow="fold")
    table.add_column("error / review", max_width=64)
    for sub, results in by_student(graded):
        scores = score(results, rubric, sub.student)
        earned, possible = total(scores, rubric, sub.student)
        lost = [
            f"[{'red' if got == 0 else 'yellow'}]{hook} {short_points(got)}/{short_points(worth)}[/]"
            for hook, (got, worth) in scores.items()
            if got < worth
        ]
        error = one_line(inert(submission_error(sub, results)), 120)
        style = "green" if earned >= possible else "yellow" if earned > 0 else "red"
        shown = ", ".join(lost) if sub.error is None and len(lost) < len(HOOK_NAMES) else "[red]everything[/]"
        review = f"[yellow]review: {console_text(one_line(review_summary(sub.review), 120))}[/]" if sub.review else ""
        note = f"[red]{console_text(error)}[/]" if error else review
        table.add_row(
            console_text(sub.student),
            f"[{style}]{short_points(earned)}/{short_points(possible)}[/]",
            shown if lost else "",
            _unwrapped(note),
        )
    return table


def _unwrapped(markup: str) -> Text:
    """A table cell holding a learner's text: cut with "…" at the column's width, never wrapped (:func:`print_line`)."""
    cell = Text.from_markup(markup, overflow="ellipsis")
    cell.no_wrap = True
    return cell


def review_lines(graded: Graded) -> list[str]:
    """``student: file:line: construct`` for every review finding, students sorted (plain text, inert)."""
    return [inert_line(f"{sub.student}: {finding}") for sub, _ in by_student(graded) for finding in sub.review]
