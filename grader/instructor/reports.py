"""What grading leaves behind for people: grades, Gradescope JSON, feedback, JUnit, a summary.

Everything here is computed from :class:`~grader.instructor.verdict.CaseResult` rows and
the rubric; messages arrive already written (and already free of hidden inputs
unless the instructor asked to reveal them), so this module only arranges and
escapes them.  Given the same results, every file is byte-for-byte the same,
whatever order the submissions came in.

Files written by :func:`write_reports` into the output folder:

- ``grades.csv``: ``student``, ``status`` (``graded``, ``review: <constructs>``,
  ``error: <one line>`` or ``missing``), one column per hook (points earned,
  hookspec order), ``total``, ``max``; one row per student of the class (the
  :class:`ClassRoll`: every student ever graded into the out folder, latest
  grading of each, and the roster's students with no hand-in), error rows
  included.  A ``missing`` row's points are empty, not 0: an LMS import (Canvas,
  Moodle) leaves an empty cell ungraded, where a 0 would post a zero that looks
  like an honest one; its ``max`` is filled;
- ``<student>/results.json``: Gradescope's results format;
- ``<student>/feedback.md`` and ``<student>/feedback.html``;
- ``<student>/heatmap-<hook>.png``: expected against received weights of the
  hook's most informative failing case (drawn from the figures grading returns;
  ``feedback.html`` embeds them);
- ``<student>/output.txt``: what the learner's process printed (capped, inert),
  a section per exercise, where it printed anything.

A student's feedback puts what matters first: a submission-wide error (not
loaded, timed out, every case failing with one message) at the top, then the
devices not present here, said once, then the failing exercises (each known
mistake named once, with its hint), then the passing ones, compact.  Its fixed
words are in ``run_info["lang"]`` (:mod:`grader.instructor.messages`).
- ``junit.xml``: one ``testsuite`` per student of the class, one ``testcase``
  per case, the review findings as ``review`` properties.  A wrong answer is a
  ``<failure>``; a case that could not be judged (the submission not graded,
  not loaded or not importable, the learner's process timed out, crashed or
  broke the protocol: :func:`is_error`) is an ``<error>``, and so is a missing
  student's single ``submission`` case;
- ``class.html``, ``class.md`` (:mod:`grader.instructor.class_report`) and,
  asked for, an LMS export (:mod:`grader.instructor.lms`).

Everything a submission wrote (its messages, error lines, file names) is shown
only through :func:`inert`, which escapes control characters, on every path:
the console, Markdown, HTML, CSV, JUnit XML and JSON; CSV text cells are also
kept from starting a spreadsheet formula (:func:`spreadsheet_cell`).  Writing one
student's files can never stop another's, nor the class files: a failing writer
is logged and reported by :func:`write_reports`, and the others go on.

``run_info`` is a plain dict; the keys used are ``devices`` (the devices that
ran), ``skipped_devices`` (``{device: reason}``), ``suite_version``,
``kit_version``, ``isolation``, ``lang`` and ``show_output`` (what each exercise's
calls printed, in its section of the feedback; off by default, since prints can
reveal hidden inputs).  The seed is never written into learner
feedback.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import logging
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.handin import safe_name
from grader.instructor import heatmaps
from grader.instructor.heatmaps import Figure
from grader.instructor.inert import MAX_LINE_CHARS, inert, inert_line
from grader.instructor.intake import Submission
from grader.instructor.messages import texts
from grader.instructor.out_folder import GRADES_CSV, JUNIT_XML, class_file
from grader.instructor.rubric import HookCounts, Rubric, count_cases, score, total
from grader.instructor.said import message_in, results_in, run_info_in
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, CaseResult, case_label
from grader.registry import HOOK_NAMES, format_hook

__all__ = [
    "MISSING",
    "ClassRoll",
    "Graded",
    "Person",
    "is_error",
    "console_text",
    "print_line",
    "grades_csv",
    "gradescope_results",
    "id_notes",
    "inert",
    "junit_xml",
    "render_feedback_html",
    "render_feedback_md",
    "review_lines",
    "student_folder",
    "student_report",
    "summary_table",
    "write_feedback",
    "write_grades_csv",
    "write_junit",
    "write_reports",
    "write_results_json",
]

Graded = Sequence[tuple[Submission, Sequence[CaseResult]]]

MAX_OUTPUT_LINES = 10
"""At most this many lines of explanation per hook in ``results.json``."""
MAX_MESSAGE_CHARS = 4000
MAX_CASES_NAMED = 3

TEMPLATES = Path(__file__).with_name("templates")
MISSING = "missing"
"""The status of a roster student with no hand-in."""


@dataclass(frozen=True)
class Person:
    """A student of the roster: the id grading knows them by, and the name and email an LMS knows."""

    id: str
    name: str = ""
    email: str = ""


@dataclass
class ClassRoll:
    """The whole class of an out folder, as the gradebook holds it, for the class files."""

    graded: Graded = ()  # the latest grading of every student ever graded into the out folder
    missing: list[Person] = field(default_factory=list)  # roster students with no hand-in
    people: dict[str, Person] = field(default_factory=dict)  # the roster, by id
    outputs: dict[str, str] = field(default_factory=dict)  # what each student's learner process printed
    printed: dict[str, dict[str, str]] = field(default_factory=dict)  # student -> hook -> what its calls printed
    stale: list[str] = field(default_factory=list)  # student folders in the out folder of no one in the class

    @classmethod
    def of(cls, graded: Graded) -> ClassRoll:
        """A class of just ``graded`` (no roster)."""
        return cls(graded=list(graded))


log = logging.getLogger(__name__)


# --- numbers and text ----------------------------------------------------------------


def fmt_points(x: float) -> str:
    """Points as written into files: always two decimals (``1.50``), so files are stable."""
    return f"{x:.2f}"


def short_points(x: float) -> str:
    """Points for people: ``1``, ``0.5``, ``2.67``."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_safe(text: str) -> str:
    """Text without the characters XML 1.0 cannot hold (a learner's message may contain anything)."""
    return _XML_ILLEGAL.sub("\N{REPLACEMENT CHARACTER}", text)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(text: str) -> str:
    """A CSV text cell a spreadsheet will not run: one starting like a formula gets a leading ``'``.

    For text cells only (ids, statuses); numbers are written as they are.
    """
    text = inert(text)
    return "'" + text if text.startswith(_FORMULA_START) else text


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """A message on one line: its non-blank lines joined, cut to ``limit`` characters."""
    line = " · ".join(part.strip() for part in text.splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- one student's report (the model every file is written from) ----------------------------


MAX_PROBLEMS_SHOWN = 6
"""At most this many kinds of failure are shown per exercise in the feedback (the rest are counted)."""

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _kind_of(message: str) -> str:
    """A message with its numbers blanked: cases failing the same way (other values) are one kind of failure."""
    return _NUMBER.sub("#", message)


@dataclass
class Problem:
    """One kind of failure (or skip) and the cases it came from; ``message`` is its first case's."""

    message: str
    cases: list[str] = field(default_factory=list)
    mistake: str = ""  # the known mistakes these cases show: ids, comma-separated (CaseResult.mistake)
    description: str = ""  # a known mistake's one-line description (an entry of ExerciseReport.known_mistakes)
    hint: str = ""  # and its hint, in the report's language
    hints: dict[str, tuple[str, str]] = field(default_factory=dict)  # each id of ``mistake``: (description, hint)
    varied: bool = False  # its cases' messages differ in their values: ``message`` is the first case's

    @property
    def count(self) -> int:
        return len(self.cases)

    @property
    def where(self) -> str:
        named = ", ".join(self.cases[:MAX_CASES_NAMED])
        more = self.count - MAX_CASES_NAMED
        return named + (f" and {more} more" if more > 0 else "")

    def line(self, kind: str, t: Mapping[str, str] | None = None) -> str:
        t = t or texts("en")
        text = one_line(self.message or f"{kind} (no message)")
        cases = t["case_one"] if self.count == 1 else t["case_many"].format(count=self.count)
        return f"{kind.upper()} ({cases}: {self.where}): {text}"


@dataclass
class ExerciseReport:
    hook: str
    signature: str
    earned: float
    possible: float
    counts: HookCounts
    all_or_nothing: bool
    failures: list[Problem]
    skips: list[Problem]  # skips that matter (an inconclusive meta run); a device not present is said once, above
    notes: list[Problem] = field(default_factory=list)  # notes on cases (CaseResult.note): for no points
    figures: list[tuple[str, str, str]] = field(default_factory=list)  # (file name, base64 PNG, alt text)
    figure_notes: list[str] = field(default_factory=list)  # "heatmap not drawn: …" where a heatmap failed
    figure_captions: list[str] = field(default_factory=list)  # one per figure
    visibility: str = "visible"  # Gradescope's visibility of this exercise's test (the rubric's)
    printed: str = ""  # what the learner's code printed in this exercise's calls (shown with --show-output)
    t: Mapping[str, str] = field(default_factory=lambda: texts("en"))

    @property
    def status(self) -> str:
        """Gradescope's status: passed only if some case ran and none failed."""
        return PASSED if self.counts.ran > 0 and self.counts.failed == 0 else FAILED

    @property
    def status_text(self) -> str:
        return self.t[self.status]

    @property
    def skipped_shown(self) -> int:
        """Skipped cases worth saying (not those of a device that is not present)."""
        return sum(p.count for p in self.skips)

    @property
    def counts_text(self) -> str:
        c = self.counts
        if self.skipped_shown:
            return self.t["counts_skipped"].format(passed=c.passed, failed=c.failed, skipped=self.skipped_shown)
        return self.t["counts"].format(passed=c.passed, failed=c.failed)

    @property
    def shown_failures(self) -> list[Problem]:
        return self.failures[:MAX_PROBLEMS_SHOWN]

    @property
    def more_failures(self) -> str:
        rest = len(self.failures) - MAX_PROBLEMS_SHOWN
        return self.t["more_problems"].format(rest=rest) if rest > 0 else ""

    @property
    def note(self) -> str:
        """Why the points are what they are, when that is not obvious (a sentence, in the report's language)."""
        if self.counts.ran == 0:
            return self.t["note_nothing_ran_skipped"] if self.counts.skipped else self.t["note_nothing_ran"]
        if self.all_or_nothing and self.counts.failed:
            return self.t["note_all_or_nothing"]
        return ""

    def output_lines(self) -> list[str]:
        """``results.json``'s output for this exercise: what helps the student, no skipped-device noise."""
        t = self.t
        lines = [p.line(t["failed"], t) for p in self.failures]
        if self.status == FAILED:
            lines += [p.line(t["skipped"], t) for p in self.skips]
        lines[:0] = [  # each known mistake once per exercise, before the failures that show it
            t["looks_like"].format(mistake=k.mistake) + (f": {k.hint}" if k.hint else "") for k in self.known_mistakes
        ]
        if self.note:
            lines.insert(0, self.note)
        if not lines and self.counts.ran:
            passed = self.counts.passed
            lines.append(t["one_passed"] if passed == 1 else t["all_passed"].format(passed=passed))
        lines += [p.line("note", t) for p in self.notes]
        if len(lines) > MAX_OUTPUT_LINES:
            rest = len(lines) - (MAX_OUTPUT_LINES - 1)
            lines = lines[: MAX_OUTPUT_LINES - 1] + [t["more"].format(rest=rest)]
        return lines

    @property
    def known_mistakes(self) -> list[Problem]:
        """One entry per known mistake the failures look like (its id, description and hint), in order."""
        seen: dict[str, Problem] = {}
        for p in self.failures:
            for mistake, (description, hint) in p.hints.items():
                seen.setdefault(mistake, Problem("", [], mistake, description, hint)).cases.extend(p.cases)
        return list(seen.values())

    @property
    def earned_text(self) -> str:
        return short_points(self.earned)

    @property
    def possible_text(self) -> str:
        return short_points(self.possible)


@dataclass
class StudentReport:
    student: str
    source: str
    format: str
    error: str | None
    earned: float
    possible: float
    exercises: list[ExerciseReport]
    devices_ran: list[str]
    devices_skipped: list[str]
    run: dict[str, str]
    headline: str = ""  # what stopped the whole submission (its error, or the one message all its cases share)
    device_skipped_cases: int = 0  # cases of devices not present here (said once, at the top)
    lang: str = "en"
    show_output: bool = False
    visibility: str = "visible"  # results.json's top visibility: the rubric's default
    t: Mapping[str, str] = field(default_factory=lambda: texts("en"))

    @property
    def cases(self) -> HookCounts:
        return HookCounts(
            sum(e.counts.passed for e in self.exercises),
            sum(e.counts.failed for e in self.exercises),
            sum(e.counts.skipped for e in self.exercises),
        )

    @property
    def failing(self) -> list[ExerciseReport]:
        """The exercises to fix (hook order): shown first."""
        return [e for e in self.exercises if e.status == FAILED]

    @property
    def passing(self) -> list[ExerciseReport]:
        return [e for e in self.exercises if e.status != FAILED]

    @property
    def ordered(self) -> list[ExerciseReport]:
        return self.failing + self.passing

    @property
    def devices_skipped_text(self) -> str:
        """The one sentence about devices not present here, or ``""``."""
        if not self.devices_skipped:
            return ""
        return self.t["devices_skipped"].format(
            devices="; ".join(self.devices_skipped), count=self.device_skipped_cases
        )

    @property
    def summary(self) -> str:
        c = self.cases
        text = f"{self.student}: {fmt_points(self.earned)} / {fmt_points(self.possible)} points"
        if self.error:
            return f"{text}; the submission could not be graded: {one_line(self.error)}"
        if self.headline:
            return f"{text}; {one_line(self.headline)}"
        text += f"; {c.passed} of {c.ran} cases passed"
        devices = ", ".join(self.devices_ran) or "none"
        return text + f" (devices: {devices})"

    @property
    def earned_text(self) -> str:
        return short_points(self.earned)

    @property
    def possible_text(self) -> str:
        return short_points(self.possible)


def _hook_order(results: Iterable[CaseResult]) -> list[CaseResult]:
    index = {hook: i for i, hook in enumerate(HOOK_NAMES)}
    return sorted(results, key=lambda r: index.get(r.hook, len(index)))


def _problems(results: Iterable[CaseResult], status: str, lang: str = "en") -> list[Problem]:
    """The kinds of failure (or skip) of ``results``: one per known mistake and message, numbers aside."""
    found: dict[tuple[str, str], Problem] = {}
    for r in results:
        if r.status == status or (status == FAILED and r.status not in (PASSED, SKIPPED)):
            message = clip(inert(message_in(r.message, lang)).strip())
            key = (r.mistake, message if status == SKIPPED else _kind_of(message))
            problem = found.get(key)
            if problem is None:
                problem = found[key] = Problem(message, [], r.mistake)
            elif message != problem.message:
                problem.varied = True
            problem.cases.append(case_label(r.case, r.device, r.dtype))
    for problem in found.values():
        problem.hints = {m: _hint(m, lang) for m in problem.mistake.split(",") if m}
    return list(found.values())


def _notes(results: Iterable[CaseResult]) -> list[Problem]:
    """Each distinct note on a case (``CaseResult.note``) and the cases it came with, in order."""
    found: dict[str, Problem] = {}
    for r in results:
        if r.note and r.status != SKIPPED:
            note = clip(inert(r.note).strip())
            found.setdefault(note, Problem(note)).cases.append(case_label(r.case, r.device, r.dtype))
    return list(found.values())


def _hint(mistake: str, lang: str) -> tuple[str, str]:
    """The catalogued mistake's description and hint, or nothing where the catalogue is not installed."""
    try:
        from grader.instructor.diagnosis import hint

        return hint(mistake, lang)
    except (ImportError, KeyError):
        return "", ""


def device_summary(results: Iterable[CaseResult], run_info: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(devices that ran, ``"device: reason"`` for each device skipped).

    The run's own lists come first; devices seen in the results add to them
    (a device whose every case was skipped counts as skipped, with the first reason).
    """
    results = list(results)
    ran = [str(d) for d in (run_info.get("devices") or [])]
    skipped = {str(d): str(reason) for d, reason in (run_info.get("skipped_devices") or {}).items()}
    by_device: dict[str, list[CaseResult]] = {}
    for r in results:
        by_device.setdefault(r.device, []).append(r)
    for device, rs in by_device.items():
        if device in ran or device in skipped:
            continue
        if all(r.status == SKIPPED for r in rs):
            skipped[device] = inert(next((r.message for r in rs if r.message), "skipped"))
        else:
            ran.append(device)
    lines = []
    for device, reason in skipped.items():
        if device in ran:
            continue
        reason = one_line(reason, 200)
        lines.append(reason if reason.startswith(f"{device}:") else f"{device}: {reason}")
    return ran, lines


def student_report(
    submission: Submission,
    results: Sequence[CaseResult],
    rubric: Rubric,
    run_info: dict[str, Any] | None = None,
    printed: Mapping[str, str] | None = None,
) -> StudentReport:
    """Everything one student's feedback says, computed once for every file.

    ``printed`` is what the learner's code printed per exercise (``hook -> text``);
    it reaches the feedback only where ``run_info["show_output"]`` is set.
    """
    run_info = run_info or {}
    lang = str(run_info.get("lang") or "en")
    t = texts(lang)
    show_output = bool(run_info.get("show_output"))
    results = _hook_order(results)
    scores = score(results, rubric)
    counts = count_cases(results)
    ran, skipped = device_summary(results, run_info)

    def absent_device(r: CaseResult) -> bool:
        return r.status == SKIPPED and r.device not in ran

    exercises = []
    for hook in HOOK_NAMES:
        mine = [r for r in results if r.hook == hook]
        earned, possible = scores[hook]
        exercises.append(
            ExerciseReport(
                hook=hook,
                signature=format_hook(hook),
                earned=earned,
                possible=possible,
                counts=counts[hook],
                all_or_nothing=hook in rubric.all_or_nothing,
                failures=_problems(mine, FAILED, lang),
                skips=_problems([r for r in mine if not absent_device(r)], SKIPPED, lang),
                notes=_notes(results_in(mine, lang)),
                figures=[],
                visibility=rubric.visibility_of(hook),
                printed=inert((printed or {}).get(hook, "")) if show_output else "",
                t=t,
            )
        )
    earned, possible = total(scores)
    run = {
        label: str(run_info[key])
        for key, label in (("suite_version", "hidden suite"), ("kit_version", "kit"), ("isolation", "isolation"))
        if run_info.get(key) not in (None, "")
    }
    headline = submission_error(submission, results)
    return StudentReport(
        student=submission.student,
        source=inert_line(submission.source),
        format=submission.format,
        error=inert(submission.error) if submission.error else submission.error,
        earned=earned,
        possible=possible,
        exercises=exercises,
        devices_ran=ran,
        devices_skipped=device_summary(results_in(results, lang), run_info_in(run_info, lang))[1],
        run=run,
        headline=inert(message_in(headline, lang)) if headline else "",
        device_skipped_cases=sum(1 for r in results if absent_device(r)),
        lang=lang,
        show_output=show_output,
        visibility=rubric.default_visibility,
        t=t,
    )


# --- grades.csv ------------------------------------------------------------------------


def _sorted(graded: Graded) -> list[tuple[Submission, Sequence[CaseResult]]]:
    return sorted(graded, key=lambda item: item[0].student)


def submission_error(sub: Submission, results: Sequence[CaseResult]) -> str:
    """Why a submission could not be graded at all, or "".

    Its own error (a refused input), or the one message every case that ran
    shares when none passed (``the submission does not import: …``).
    """
    if sub.error:
        return sub.error
    messages = {r.message for r in results if r.status != SKIPPED}
    if len(messages) == 1 and not any(r.status == PASSED for r in results):
        return next(iter(messages))
    return ""


MAX_STATUS_CHARS = 160


def review_constructs(findings: Iterable[str]) -> list[str]:
    """The distinct constructs of ``file:line: construct`` findings, in order.

    A finding's file holds no ``": "`` (:class:`~grader.instructor.review_flags.Finding` escapes its colons), so
    the construct is everything after the first one, whatever ``": "`` the construct itself quotes.
    """
    return list(dict.fromkeys(str(f).split(": ", 1)[-1] for f in findings))


_GROUPED = ("assignment of ", "deletion of ")


def review_summary(findings: Iterable[str]) -> str:
    """The constructs, short: ``assignment of torch.allclose, torch.equal; sys.modules``."""
    groups: dict[str, list[str]] = {}  # "assignment of " -> the names, or a construct -> []
    for construct in review_constructs(findings):
        prefix = next((p for p in _GROUPED if construct.startswith(p)), None)
        if prefix is None:
            groups.setdefault(construct, [])
        else:
            groups.setdefault(prefix, []).append(construct[len(prefix) :])
    return "; ".join(key + ", ".join(names) if names else key for key, names in groups.items())


def status(sub: Submission, results: Sequence[CaseResult]) -> str:
    """``graded``, ``review: <constructs>`` (points unchanged) or ``error: <one line>``, for grades.csv."""
    error = submission_error(sub, results)
    if error:
        return "error: " + one_line(inert(error), MAX_STATUS_CHARS)
    if sub.review:
        return "review: " + one_line(inert(review_summary(sub.review)), MAX_STATUS_CHARS)
    return "graded"


def grades_rows(graded: Graded, rubric: Rubric, missing: Iterable[Person] = ()) -> list[list[str]]:
    """The rows of ``grades.csv``, header first, students sorted; ``missing`` students' points left empty."""
    rows = [["student", "status", *HOOK_NAMES, "total", "max"]]
    absent = [
        [spreadsheet_cell(p.id), MISSING, *("" for _ in HOOK_NAMES), "", fmt_points(rubric.max_total)] for p in missing
    ]
    for sub, results in _sorted(graded):
        scores = score(results, rubric)
        earned, possible = total(scores)
        rows.append(
            [
                spreadsheet_cell(sub.student),
                spreadsheet_cell(status(sub, results)),
                *(fmt_points(scores[h][0]) for h in HOOK_NAMES),
                fmt_points(earned),
                fmt_points(possible),
            ]
        )
    return rows[:1] + sorted(rows[1:] + absent, key=lambda row: row[0])


def grades_csv(graded: Graded, rubric: Rubric, missing: Iterable[Person] = ()) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(grades_rows(graded, rubric, missing))
    return buffer.getvalue()


def write_grades_csv(path: str | Path, graded: Graded, rubric: Rubric, missing: Iterable[Person] = ()) -> None:
    _write_text(Path(path), grades_csv(graded, rubric, missing))


# --- results.json (Gradescope) ------------------------------------------------------------


def gradescope_results(report: StudentReport) -> dict[str, Any]:
    """Gradescope's ``results.json``: score, max_score, output, and one test per exercise.

    Each test's ``output`` says only what helps the student (failures, known
    mistakes and their hints; ``All 12 cases passed.``), never the cases of a
    device not present; the devices are said once, in the top ``output``.  Each
    test's ``visibility`` is the rubric's (``visible``, ``after_due_date``,
    ``hidden``); the top ``visibility`` is the rubric's default.
    """
    output = report.summary
    if report.devices_skipped:
        output += "; " + report.devices_skipped_text
    return {
        "score": round(report.earned, 2),
        "max_score": round(report.possible, 2),
        "output": output,
        "visibility": report.visibility,
        "stdout_visibility": "hidden",
        "tests": [
            {
                "name": ex.hook,
                "score": round(ex.earned, 2),
                "max_score": round(ex.possible, 2),
                "status": ex.status,
                "output": "\n".join(ex.output_lines()),
                "visibility": ex.visibility,
            }
            for ex in report.exercises
        ],
    }


def write_results_json(path: str | Path, report: StudentReport) -> None:
    _write_text(Path(path), json.dumps(gradescope_results(report), indent=2, ensure_ascii=False) + "\n")


# --- feedback.md / feedback.html --------------------------------------------------------------


def _fenced(text: str, lang: str = "text") -> str:
    """A Markdown code block that ``text`` cannot break out of, whatever backticks it holds."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _md_inline(text: str) -> str:
    """Text for a Markdown line: on one line, every character Markdown or HTML would act on escaped."""
    return _MD_SPECIAL.sub(r"\\\1", one_line(str(text), MAX_MESSAGE_CHARS))


def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fenced"] = _fenced
    env.filters["md"] = _md_inline
    env.filters["points"] = short_points
    return env


_ENVIRONMENTS: dict[bool, jinja2.Environment] = {}


def render(template: str, autoescape: bool, **context: Any) -> str:
    """``templates/<template>`` rendered with ``context`` (HTML: ``autoescape``), with this module's filters."""
    env = _ENVIRONMENTS.get(autoescape)
    if env is None:
        env = _ENVIRONMENTS[autoescape] = _environment(autoescape)
    return env.get_template(template).render(FAILED=FAILED, PASSED=PASSED, **context)


def _render(template: str, autoescape: bool, report: StudentReport) -> str:
    return render(template, autoescape, report=report)


def render_feedback_md(report: StudentReport) -> str:
    return _render("feedback.md.j2", False, report)


def render_feedback_html(report: StudentReport) -> str:
    return _render("feedback.html.j2", True, report)


def _write_md(folder: Path, report: StudentReport) -> None:
    _write_text(folder / "feedback.md", render_feedback_md(report))


def _write_html(folder: Path, report: StudentReport) -> None:
    _write_text(folder / "feedback.html", render_feedback_html(report))


def write_feedback(folder: str | Path, report: StudentReport) -> None:
    folder = Path(folder)
    _write_md(folder, report)
    _write_html(folder, report)


# --- junit.xml -------------------------------------------------------------------------------


ERROR_STARTS = (
    "not graded:",  # the submission was refused, or grading it stopped
    "not run:",  # an earlier case of the exercise took the learner's process down
    "could not load the submission",
    "the submission does not import",
    "timed out after",
    "the submission used up its",
    "the process ended during this call",
    "the process is gone",
    "the process sent something unreadable",
    "sent a malformed reply",
    "sent back unreadable data",
    "answered out of order",
    "stopped after",  # too many restarts of the learner's process
    "the grader could not judge",
)
"""How the message of a case that could not be judged starts (grading's own words, never a verdict's)."""


def is_error(result: CaseResult) -> bool:
    """Whether a failed case is an error (it could not be judged) rather than a wrong answer.

    Errors are what grading says when the learner's code never gave an
    answer to judge: the submission not graded, not loaded or not importable,
    its process timed out, crashed, or broke the protocol.  A verdict's
    message (a wrong value, shape or dtype, a missing hook) is a failure.
    """
    return result.status not in (PASSED, SKIPPED) and result.message.startswith(ERROR_STARTS)


def junit_class(student: str, hook: str | None = None) -> str:
    """A junit ``classname``: ``attnkit.<student>[.<hook>]``, the student's id with ``%`` and ``.`` escaped
    (``%25``, ``%2E``), so no id (``bob.causal_mask``) makes the class of another student's hook."""
    escaped = xml_safe(inert(student)).replace("%", "%25").replace(".", "%2E")
    return f"attnkit.{escaped}" + (f".{xml_safe(hook)}" if hook is not None else "")


def junit_tree(graded: Graded, missing: Iterable[Person] = ()) -> ET.ElementTree:
    """One ``testsuite`` per student, one ``testcase`` per case result (named ``CaseResult.test_name``).

    A failed case is a ``<failure>``, or an ``<error>`` where :func:`is_error`;
    a missing student's suite holds one ``submission`` case with an ``<error>``.
    """
    root = ET.Element("testsuites", name="attnkit")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for person in sorted(missing, key=lambda p: p.id):
        suite = ET.SubElement(root, "testsuite", name=xml_safe(inert(person.id)), tests="1", failures="0")
        suite.set("errors", "1")
        suite.set("skipped", "0")
        suite.set("time", "0.000")
        case = ET.SubElement(suite, "testcase", classname=junit_class(person.id), name="submission")
        case.set("time", "0")
        ET.SubElement(case, "error", message="missing: no hand-in from this student of the roster", type="Missing")
        totals["tests"] += 1
        totals["errors"] += 1
    for sub, results in _sorted(graded):
        results = _hook_order(results)
        suite = ET.SubElement(root, "testsuite", name=xml_safe(sub.student))
        if sub.review:
            properties = ET.SubElement(suite, "properties")
            for finding in sub.review:
                ET.SubElement(properties, "property", name="review", value=xml_safe(inert(finding)))
        counts = {"tests": len(results), "failures": 0, "errors": 0, "skipped": 0}
        if sub.error:
            counts["tests"] += 1
            counts["errors"] += 1
            case = ET.SubElement(suite, "testcase", classname=junit_class(sub.student), name="submission", time="0")
            error_text = inert(sub.error)
            error = ET.SubElement(case, "error", message=xml_safe(one_line(error_text)), type="SubmissionError")
            error.text = xml_safe(error_text)
        suite_seconds = 0.0
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=junit_class(sub.student, r.hook),
                name=xml_safe(r.test_name),
                time=f"{r.seconds:.3f}",
            )
            suite_seconds += r.seconds
            message = inert(r.message)
            if r.status == SKIPPED:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=xml_safe(one_line(message or "skipped")))
            elif is_error(r):
                counts["errors"] += 1
                error = ET.SubElement(case, "error", message=xml_safe(one_line(message)), type="NotJudged")
                error.text = xml_safe(clip(message))
            elif r.status != PASSED:
                counts["failures"] += 1
                failure = ET.SubElement(case, "failure", message=xml_safe(one_line(message or "failed")))
                failure.text = xml_safe(clip(message + (f"\nknown mistake: {r.mistake}" if r.mistake else "")))
            if r.note:  # after skipped/failure, as JUnit's schema orders a testcase's children
                ET.SubElement(case, "system-out").text = xml_safe(clip("note: " + inert(r.note)))
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{suite_seconds:.3f}")
        seconds += suite_seconds
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    children = sorted(root, key=lambda suite: suite.get("name", ""))  # missing students among the others
    for child in children:
        root.remove(child)
    root.extend(children)
    ET.indent(root)
    return ET.ElementTree(root)


def junit_xml(graded: Graded, missing: Iterable[Person] = ()) -> str:
    buffer = io.BytesIO()
    junit_tree(graded, missing).write(buffer, encoding="utf-8", xml_declaration=True)
    return buffer.getvalue().decode("utf-8") + "\n"


def write_junit(path: str | Path, graded: Graded, missing: Iterable[Person] = ()) -> None:
    _write_text(Path(path), junit_xml(graded, missing))


# --- everything -------------------------------------------------------------------------------


def write_text(path: Path, text: str) -> None:
    """Write atomically (a reader never sees half a file), UTF-8, ``\\n`` line endings."""
    _write_text(path, text)


def _write_text(path: Path, text: str) -> None:
    """Write atomically (a reader never sees half a file), UTF-8, ``\\n`` line endings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.replace(tmp, path)


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


def _attach_figures(report: StudentReport, drawn: list[heatmaps.Drawn]) -> None:
    """Embed each drawn heatmap under its exercise, with its alt text and caption, or say why it is not drawn."""
    by_hook = {heatmap.hook: heatmap for heatmap in drawn}
    t = report.t
    for exercise in report.exercises:
        heatmap = by_hook.get(exercise.hook)
        if heatmap is not None and heatmap.png is not None:
            label = inert(heatmap.label)
            alt = t["figure_alt_mask" if heatmap.mask else "figure_alt_weights"].format(label=label)
            exercise.figures = [(heatmap.file_name, base64.b64encode(heatmap.png).decode("ascii"), alt)]
            exercise.figure_captions = [t["figure_caption"].format(label=label)]
        elif heatmap is not None:
            exercise.figure_notes = [one_line(inert(heatmap.note), MAX_LINE_CHARS) or "heatmap not drawn"]


def output_text(printed: str, by_hook: Mapping[str, str] | None = None) -> str:
    """``output.txt``'s text: what each exercise's calls printed (a section each, hook order), then everything
    the learner's process printed, in order (its import included); inert."""
    by_hook = by_hook or {}
    sections = [f"== {hook} ==\n{by_hook[hook].rstrip()}\n" for hook in HOOK_NAMES if by_hook.get(hook)]
    if printed and sections:
        sections.append(f"== everything the process printed, in order ==\n{printed.rstrip()}\n")
    elif printed:
        sections.append(printed)
    return inert("\n".join(sections))


def write_output(folder: Path, printed: str, by_hook: Mapping[str, str] | None = None) -> None:
    """``folder/output.txt``: what the learner's process printed (:func:`output_text`); removed if nothing."""
    path = folder / "output.txt"
    text = output_text(printed, by_hook)
    if text:
        _write_text(path, text)
    elif path.exists():
        path.unlink()


def write_reports(
    out_dir: str | Path,
    graded: Graded,
    rubric: Rubric,
    run_info: dict[str, Any],
    figures: Mapping[str, Mapping[str, Figure]] | None = None,
    roll: ClassRoll | None = None,
) -> list[str]:
    """Write the class files from ``roll`` and each of ``graded``'s results.json, feedback and heatmaps.

    ``roll`` is the whole class (default: just ``graded``): ``grades.csv``,
    ``junit.xml``, ``class.html``, ``class.md`` and each LMS export named in
    ``run_info["lms"]`` (``canvas``, ``moodle``; its assignment column
    ``run_info["assignment"]``, default ``attnkit``) list all of it.  The
    students' own files are written for ``graded`` (this run's); every other
    student's are on disk from the run that graded them.  What each learner's
    process printed (the roll's ``outputs``, and per exercise its ``printed``) is
    written as ``<student>/output.txt``; with ``run_info["show_output"]`` each
    exercise's part also appears in that exercise's section of the feedback.
    ``figures`` holds each student's heatmap data (``student -> hook -> Figure``,
    as grading returns it); they are drawn here, written beside the feedback
    as ``heatmap-<hook>.png`` (replacing an earlier grading's) and embedded in
    ``feedback.html``.  Every file is written on its own: one that fails (a
    student's feedback, a heatmap) is logged and listed in the returned
    problems, one line each, and every other file is still written.
    """
    from grader.instructor import class_report
    from grader.instructor import lms as lms_exports

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    graded = _sorted(graded)
    roll = roll if roll is not None and (roll.graded or roll.missing) else ClassRoll.of(graded)
    printed = roll.outputs
    assignment = str(run_info.get("assignment") or "attnkit")
    whole = _sorted(roll.graded)
    problems: list[str] = []
    grades, junit = class_file(out, GRADES_CSV), class_file(out, JUNIT_XML)
    _guarded(problems, GRADES_CSV, write_grades_csv, grades, whole, rubric, roll.missing)
    _guarded(problems, JUNIT_XML, write_junit, junit, whole, roll.missing)
    _guarded(problems, "class.html / class.md", class_report.write, out, roll, rubric, run_info)
    for name in run_info.get("lms") or ():
        _guarded(problems, f"{name} export", lms_exports.write, out, name, roll, rubric, assignment)
    for sub, results in graded:
        try:
            folder = student_folder(out, sub.student)
            report = student_report(sub, results, rubric, run_info, roll.printed.get(sub.student))
        except Exception as exc:
            _note_problem(problems, f"{sub.student}: feedback", exc)
            continue
        drawn = heatmaps.draw((figures or {}).get(sub.student, {}), sub.student)
        _attach_figures(report, drawn)
        _guarded(problems, f"{sub.student}: heatmaps", heatmaps.write, folder, drawn)
        _guarded(problems, f"{sub.student}/results.json", write_results_json, folder / "results.json", report)
        _guarded(problems, f"{sub.student}/feedback.md", _write_md, folder, report)
        _guarded(problems, f"{sub.student}/feedback.html", _write_html, folder, report)
        by_hook = roll.printed.get(sub.student, {})
        _guarded(problems, f"{sub.student}/output.txt", write_output, folder, printed.get(sub.student, ""), by_hook)
    return problems


# --- the console ------------------------------------------------------------------------------


def console_text(text: object) -> str:
    """Text a submission wrote, for the rich console: one inert line (:func:`inert_line`), markup escaped.

    Every console line that carries learner-derived text is one item (an id, a note, a finding, a path), so a
    newline in it is always escaped: nothing a hand-in wrote can print a line of its own.
    """
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
    for sub, results in _sorted(graded):
        scores = score(results, rubric)
        earned, possible = total(scores)
        lost = [
            f"[{'red' if got == 0 else 'yellow'}]{hook} {short_points(got)}/{short_points(worth)}[/]"
            for hook, (got, worth) in scores.items()
            if got < worth
        ]
        error = one_line(inert(submission_error(sub, results)), 120)
        style = "green" if earned >= possible else "yellow" if earned > 0 else "red"
        shown = ", ".join(lost) if sub.error is None and len(lost) < len(HOOK_NAMES) else "[red]everything[/]"
        if error:
            note = f"[red]{console_text(error)}[/]"
        elif sub.review:
            note = f"[yellow]review: {console_text(one_line(review_summary(sub.review), 120))}[/]"
        else:
            note = ""
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
    return [inert_line(f"{sub.student}: {finding}") for sub, _ in _sorted(graded) for finding in sub.review]


def id_notes(graded: Graded) -> list[str]:
    """The one-line note of every student id that was changed to keep ids apart (plain text, inert)."""
    return [inert_line(note) for sub, _ in _sorted(graded) for note in sub.notes]
