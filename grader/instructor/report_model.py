"""What every report file is written from: the class, one student's report, and the rules for text in files.

One student's report (:func:`student_report`) is computed once for every file, its fixed words in
``ReportOptions.lang`` (:mod:`grader.instructor.messages`).  Messages arrive already written (free of hidden
inputs unless the instructor asked to reveal them); everything a submission wrote goes through
:func:`~grader.instructor.inert.inert`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from grader.instructor.inert import MAX_LINE_CHARS, inert, inert_line
from grader.instructor.intake_model import Submission
from grader.instructor.messages import texts
from grader.instructor.rubric import TOTAL, HookCounts, Rubric, count_cases, score, total
from grader.instructor.said import Message, message_in
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, CaseResult, case_label
from grader.registry import HOOK_NAMES, format_hook

__all__ = ["MISSING", "ClassRoll", "ExerciseReport", "Graded", "Person", "Problem", "ReportOptions", "StudentReport",
           "by_student", "clip", "device_summary", "fmt_points", "hook_order", "mistake_hint", "one_line",
           "review_constructs", "review_summary", "short_points", "spreadsheet_cell", "status", "student_report",
           "submission_error", "xml_safe"]  # fmt: skip

Graded = Sequence[tuple[Submission, Sequence[CaseResult]]]

MAX_OUTPUT_LINES = 10
"""At most this many lines of explanation per hook in ``results.json``."""
MAX_MESSAGE_CHARS = 4000
MAX_CASES_NAMED = 3

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


@dataclass(frozen=True)
class ReportOptions:
    """The run's conditions and ``attnkit grade``'s choices, as the files say them (never a verdict's input)."""

    lang: str = "en"  # the language of the files' fixed words
    devices: tuple[str, ...] = ()  # the devices that ran
    skipped_devices: Mapping[str, str] = field(default_factory=dict)  # device -> why it did not run
    suite_version: str = ""
    kit: str = ""  # the kit's version
    isolation: str = ""
    seed: int | None = None  # in the class report only, never in a learner's feedback
    show_output: bool = False  # each exercise's prints in its section of the feedback (they can reveal inputs)
    lms: tuple[str, ...] = ()  # the LMS exports to write (grader.instructor.lms.EXPORTS)
    assignment: str = "attnkit"  # their assignment column


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
    """A CSV text cell (ids, statuses; never numbers) a spreadsheet will not run: a formula start gets a ``'``."""
    text = inert(text)
    return "'" + text if text.startswith(_FORMULA_START) else text


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """A message on one line: its non-blank lines joined, cut to ``limit`` characters."""
    return clip(" · ".join(part.strip() for part in text.splitlines() if part.strip()), limit)


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- one student's report (the model every file is written from) ----------------------------


MAX_PROBLEMS_SHOWN = 6
"""Kinds of failure shown per exercise in the feedback: every kind that names its cause, then bare value differences
up to this many in all (at least one; the rest are counted)."""

_WRAPPED = {
    "case": "message", "output": "problem", "at": "message", "image_array": "problem", "image_arrays": "problem",
}  # fmt: skip
"""Messages that wrap another (its parameter): what the inner one says is what the failure says."""
_BARE = frozenset({"values_differ", "values_shown", "wrong_entries", "nan", "shape"})
"""Messages that say only that the values (or the shape) differ, not why."""
_CONTRACT = frozenset({"should_raise.raised", "should_raise.returned"})
"""Messages that say an expected error did not come: a secondary mistake beside wrong values."""


def _inner(message: str) -> str:
    """What ``message`` says, inside the messages that wrap it (a case's description, the line it came from)."""
    while isinstance(message, Message) and message.id in _WRAPPED:
        message = message.params.get(_WRAPPED[message.id], "")  # type: ignore[assignment]
    return message


def _said_id(message: str) -> str:
    """The id of what ``message`` says, inside the messages that wrap it ("" for text not said by id)."""
    inner = _inner(message)
    return inner.id if isinstance(inner, Message) else ""

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
    lang: str = "en"  # the language of the report it is in
    said_id: str = ""  # the id of what its message says (_said_id): how much it says

    @property
    def bare(self) -> bool:
        """Whether it says only that values (or a shape) differ, naming no cause."""
        return self.said_id in _BARE

    @property
    def count(self) -> int:
        return len(self.cases)

    @property
    def where(self) -> str:
        named = ", ".join(self.cases[:MAX_CASES_NAMED])
        more = self.count - MAX_CASES_NAMED
        return named + (texts(self.lang)["and_more"].format(more=more) if more > 0 else "")

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
    adjusted: str = ""  # the instructor's override of these points, said (t["adjusted"])

    @property
    def status(self) -> str:
        """Gradescope's status: passed only if some case ran and none failed."""
        return PASSED if self.counts.ran > 0 and self.counts.failed == 0 else FAILED

    @property
    def status_text(self) -> str:
        return self.t[self.status]

    @property
    def counts_text(self) -> str:
        c, skipped = self.counts, sum(p.count for p in self.skips)  # skips worth saying: not an absent device's
        if skipped:
            return self.t["counts_skipped"].format(passed=c.passed, failed=c.failed, skipped=skipped)
        return self.t["counts"].format(passed=c.passed, failed=c.failed)

    @property
    def ordered_failures(self) -> list[Problem]:
        """The kinds of failure by how much they say: those that name a cause, then bare value differences."""
        return sorted(self.failures, key=lambda p: p.bare)

    @property
    def shown_failures(self) -> list[Problem]:
        """Every kind that names its cause, never hidden; bare value differences fill the rest of the six."""
        causes = sum(1 for p in self.failures if not p.bare)
        return self.ordered_failures[: max(MAX_PROBLEMS_SHOWN, causes + 1)]

    @property
    def more_failures(self) -> str:
        rest = len(self.failures) - len(self.shown_failures)
        return self.t["more_problems"].format(rest=rest) if rest > 0 else ""

    @property
    def note(self) -> str:
        """Why the points are what they are, when that is not obvious (a sentence, in the report's language)."""
        if self.adjusted:
            return self.adjusted
        if self.counts.ran == 0:
            return self.t["note_nothing_ran_skipped"] if self.counts.skipped else self.t["note_nothing_ran"]
        if self.all_or_nothing and self.counts.failed:
            return self.t["note_all_or_nothing"]
        return ""

    def output_lines(self) -> list[str]:
        """``results.json``'s output for this exercise: what helps the student, no skipped-device noise."""
        t = self.t
        lines = [p.line(t["failed"], t) for p in self.ordered_failures]
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
        """One entry per known mistake the failures look like (its id, description and hint), the main one first:
        a mistake seen beyond a missing error before one seen only there (a wrong value before a missing
        ``ValueError``), then the one that explains the most failing cases (ties: in case order)."""
        seen: dict[str, Problem] = {}
        secondary: dict[str, bool] = {}
        for p in self.failures:
            for mistake, (description, hint) in p.hints.items():
                seen.setdefault(mistake, Problem("", [], mistake, description, hint, lang=p.lang)).cases.extend(p.cases)
                secondary[mistake] = secondary.get(mistake, True) and p.said_id in _CONTRACT
        return sorted(seen.values(), key=lambda k: (secondary[k.mistake], -k.count))


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
    headline: str = ""  # what stopped the whole submission (its error, or the one message all its cases share)
    lang: str = "en"
    show_output: bool = False
    visibility: str = "visible"  # results.json's top visibility: the rubric's default
    t: Mapping[str, str] = field(default_factory=lambda: texts("en"))
    adjusted: str = ""  # the instructor's override of the total, said (t["adjusted"])

    @property
    def cases(self) -> HookCounts:
        return HookCounts(*(sum(getattr(e.counts, k) for e in self.exercises) for k in ("passed", "failed", "skipped")))

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
    def summary(self) -> str:
        c = self.cases
        text = f"{self.student}: {fmt_points(self.earned)} / {fmt_points(self.possible)} points"
        if self.adjusted:
            text += f" ({self.adjusted})"
        if self.error:
            return f"{text}; the submission could not be graded: {one_line(self.error)}"
        if self.headline:
            return f"{text}; {one_line(self.headline)}"
        return text + f"; {c.passed} of {c.ran} cases passed (devices: {', '.join(self.devices_ran) or 'none'})"


def hook_order(results: Iterable[CaseResult]) -> list[CaseResult]:
    """``results`` in hookspec order (stable: each hook's cases keep theirs)."""
    index = {hook: i for i, hook in enumerate(HOOK_NAMES)}
    return sorted(results, key=lambda r: index.get(r.hook, len(index)))


def _problems(results: Iterable[CaseResult], status: str, lang: str = "en") -> list[Problem]:
    """The kinds of failure (or skip) of ``results``: one per known mistake and message, numbers aside."""
    found: dict[tuple[str, str], Problem] = {}
    for r in results:
        if r.status == status or (status == FAILED and r.status not in (PASSED, SKIPPED)):
            if _said_id(r.message) == "not_implemented":  # an exercise not attempted: said once, not once per case
                message = clip(inert(message_in(_inner(r.message), lang)).strip())
                key = (r.mistake, "not_implemented")
            else:
                message = clip(inert(message_in(r.message, lang)).strip())
                key = (r.mistake, message if status == SKIPPED else _kind_of(message))
            problem = found.setdefault(key, Problem(message, [], r.mistake, lang=lang, said_id=_said_id(r.message)))
            problem.varied = problem.varied or message != problem.message
            problem.cases.append(case_label(r.case, r.device, r.dtype))
    for problem in found.values():
        problem.hints = {m: mistake_hint(m, lang) for m in problem.mistake.split(",") if m}
    return list(found.values())


def _notes(results: Iterable[CaseResult], lang: str = "en") -> list[Problem]:
    """Each distinct note on a case (``CaseResult.note``) and the cases it came with, in order."""
    found: dict[str, Problem] = {}
    for r in results:
        if r.note and r.status != SKIPPED:
            note = clip(inert(r.note).strip())
            found.setdefault(note, Problem(note, lang=lang)).cases.append(case_label(r.case, r.device, r.dtype))
    return list(found.values())


def mistake_hint(mistake: str, lang: str) -> tuple[str, str]:
    """The catalogued mistake's description and hint, or nothing where the catalogue is not installed."""
    try:
        from grader.instructor.diagnosis import hint

        return hint(mistake, lang)
    except (ImportError, KeyError):
        return "", ""


def results_in(results: Iterable[CaseResult], lang: str | None) -> list[CaseResult]:
    """Case results with their messages and notes rendered in ``lang``, for what reads them as text."""
    if lang in (None, "", "en"):
        return list(results)
    return [replace(r, message=message_in(r.message, lang), note=message_in(r.note, lang)) for r in results]


def device_summary(
    results: Iterable[CaseResult], options: ReportOptions, lang: str = "en"
) -> tuple[list[str], list[str]]:
    """(devices that ran, ``"device: reason"`` in ``lang`` for each device skipped): the run's own lists, then
    devices seen in the results (one whose every case was skipped counts as skipped, with the first reason)."""
    ran, skipped = list(options.devices), dict(options.skipped_devices)
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
    for device, reason in ((d, r) for d, r in skipped.items() if d not in ran):
        reason = one_line(message_in(reason, lang), 200)
        said = reason.startswith(f"{device}:")  # a reason that names its device already
        lines.append(reason if said else texts(lang)["device_why"].format(device=device, reason=reason))
    return ran, lines


def student_report(
    submission: Submission,
    results: Sequence[CaseResult],
    rubric: Rubric,
    options: ReportOptions | None = None,
    printed: Mapping[str, str] | None = None,
) -> StudentReport:
    """Everything one student's feedback says, computed once for every file; ``printed`` (``hook -> text``, what
    the learner's code printed) reaches the feedback only where ``options.show_output`` is set."""
    options = options or ReportOptions()
    lang, show_output, t = options.lang, options.show_output, texts(options.lang)
    results = hook_order(results)
    student = submission.student
    computed, scores, counts = score(results, rubric), score(results, rubric, student), count_cases(results)
    overrides = rubric.overrides_of(student)
    ran = device_summary(results, options)[0]

    def adjusted(name: str, was: float, now: float) -> str:
        """The override of ``name``'s points said, or ``""``."""
        if name not in overrides:
            return ""
        change = f"{now - was:+.2f}"
        return t["adjusted"].format(change=change, was=short_points(was), now=short_points(now),
                                    reason=inert_line(overrides[name].reason))  # fmt: skip

    def absent_device(r: CaseResult) -> bool:
        return r.status == SKIPPED and r.device not in ran

    exercises = []
    for hook in HOOK_NAMES:
        mine = [r for r in results if r.hook == hook]
        exercises.append(
            ExerciseReport(
                hook, format_hook(hook), *scores[hook], counts[hook], hook in rubric.all_or_nothing,
                failures=_problems(mine, FAILED, lang),
                skips=_problems([r for r in mine if not absent_device(r)], SKIPPED, lang),
                notes=_notes(results_in(mine, lang), lang),
                visibility=rubric.visibility_of(hook),
                printed=inert((printed or {}).get(hook, "")) if show_output else "",
                t=t,
                adjusted=adjusted(hook, computed[hook][0], scores[hook][0]),
            )
        )
    headline = submission_error(submission, results)
    return StudentReport(
        submission.student, inert_line(submission.source), submission.format,
        inert(submission.error) if submission.error else submission.error,
        *total(scores, rubric, student), exercises, ran,
        headline=inert(message_in(headline, lang)) if headline else "",
        lang=lang, show_output=show_output, visibility=rubric.default_visibility, t=t,
        adjusted=adjusted(TOTAL, total(scores)[0], total(scores, rubric, student)[0]),
    )


# --- a student's status in the class files -------------------------------------------------------


def by_student(graded: Graded) -> list[tuple[Submission, Sequence[CaseResult]]]:
    """``graded`` sorted by student id: every file lists the class in that order, whatever order it came in."""
    return sorted(graded, key=lambda item: item[0].student)


def submission_error(sub: Submission, results: Sequence[CaseResult]) -> str:
    """Why a submission could not be graded at all, or "": its own error (a refused input), or the one message
    every case that ran shares when none passed (``the submission does not import: …``)."""
    if sub.error:
        return sub.error
    messages = {r.message for r in results if r.status != SKIPPED}
    if len(messages) == 1 and not any(r.status == PASSED for r in results):
        return next(iter(messages))
    return ""


MAX_STATUS_CHARS = 160


def review_constructs(findings: Iterable[str]) -> list[str]:
    """The distinct constructs of ``file:line: construct`` findings, in order: a finding's file holds no ``": "``
    (:class:`~grader.instructor.review_flags.Finding` escapes its colons), so the construct is all after the first."""
    return list(dict.fromkeys(str(f).split(": ", 1)[-1] for f in findings))


_GROUPED = ("assignment of ", "deletion of ")


def review_summary(findings: Iterable[str]) -> str:
    """The constructs, short: ``assignment of torch.allclose, torch.equal; sys.modules``."""
    groups: dict[str, list[str]] = {}  # "assignment of " -> the names, or a construct -> []
    for construct in review_constructs(findings):
        prefix = next((p for p in _GROUPED if construct.startswith(p)), None)
        groups.setdefault(prefix or construct, []).extend([construct[len(prefix) :]] if prefix else [])
    return "; ".join(key + ", ".join(names) if names else key for key, names in groups.items())


OUT_OF_TIME = frozenset({"timed_out", "time_limit", "restarts"})
"""The ids of the messages that say a learner's process ran out of time (or of restarts)."""


def _out_of_time(message: Any) -> bool:
    """Whether ``message`` (or a message it quotes: ``not run: … failed with: <reason>``) says time ran out."""
    return getattr(message, "id", None) in OUT_OF_TIME or any(
        isinstance(p, Message) and _out_of_time(p) for p in getattr(message, "params", {}).values()
    )


def timed_out_hooks(results: Iterable[CaseResult]) -> list[str]:
    """The exercises some of whose cases ended because time (or restarts) ran out, in the order of the results."""
    return list(dict.fromkeys(r.hook for r in results if r.status == FAILED and _out_of_time(r.message)))


def status(sub: Submission, results: Sequence[CaseResult], rubric: Rubric | None = None) -> str:
    """``graded``, ``review: <constructs>`` (points unchanged), ``timed out: <exercises>`` (beside a review: the
    exercises whose cases ran out of time) or ``error: <one line>``, for grades.csv and the class report; then
    ``adjusted: <exercises>`` where the rubric holds the instructor's overrides of the student's points."""
    adjusted = list(rubric.overrides_of(sub.student)) if rubric is not None else []
    tail = [f"adjusted: {', '.join(adjusted)}"] if adjusted else []
    error = submission_error(sub, results)
    if error:
        return "; ".join(["error: " + one_line(inert(error), MAX_STATUS_CHARS), *tail])
    said = ["review: " + one_line(inert(review_summary(sub.review)), MAX_STATUS_CHARS)] if sub.review else []
    if timed := timed_out_hooks(results):
        said.append("timed out: " + ", ".join(timed))
    return "; ".join(said + tail) or "graded"


