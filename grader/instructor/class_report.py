"""The class report: ``class.html`` and ``class.md``, what an instructor reads before class.

From the whole class (:class:`~grader.instructor.report_model.ClassRoll`) and the rubric, rendered like the
feedback: per exercise, a histogram of points (bins by share of the points; SVG in the HTML, blocks in
Markdown) and the diagnosed mistakes with who made each; the most frequent mistakes; errors, review flags and
the roster's students with no hand-in; every student's status and points linked to their feedback (and
``output.txt``); student folders of no one in the class (never removed).  All a submission wrote is inert.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from grader.instructor.feedback import render
from grader.instructor.inert import inert, inert_line
from grader.instructor.out_folder import CLASS_HTML, CLASS_MD, class_file, write_text
from grader.instructor.report_model import (
    MISSING,
    ClassRoll,
    Graded,
    Person,
    ReportOptions,
    device_summary,
    mistake_hint,
    one_line,
    short_points,
    status,
)
from grader.instructor.rubric import Rubric, score, total
from grader.instructor.verdict import PASSED, SKIPPED, CaseResult
from grader.registry import HOOK_NAMES

__all__ = ["BIN_LABELS", "ClassReport", "class_report", "histogram", "render_html", "render_md", "write"]

BIN_LABELS = ("0", "≤25%", "≤50%", "≤75%", "<100%", "full")
"""The histogram's bins: a share of an exercise's points."""
TOP_MISTAKES = 10
BAR_CHARS = 20

# The inline SVG histogram's geometry (pixels).
SVG_WIDTH, SVG_HEIGHT, SVG_BAR, SVG_GAP, SVG_TOP, SVG_BOTTOM = 300, 120, 40, 8, 16, 20


def _bin(earned: float, possible: float) -> int:
    if possible <= 0 or earned <= 0:
        return 0
    if earned >= possible - 1e-9:
        return len(BIN_LABELS) - 1
    share = earned / possible
    return 1 + min(3, int(share * 4 - 1e-9))  # (0, .25] -> 1, (.25, .5] -> 2, (.5, .75] -> 3, (.75, 1) -> 4


@dataclass
class Bar:
    label: str
    count: int
    x: int = 0
    y: int = 0
    height: int = 0
    blocks: str = ""


def histogram(points: Iterable[tuple[float, float]]) -> list[Bar]:
    """One bar per bin of :data:`BIN_LABELS` for ``(earned, possible)`` pairs, with its SVG and text geometry."""
    counts = [0] * len(BIN_LABELS)
    for earned, possible in points:
        counts[_bin(earned, possible)] += 1
    most = max(counts) or 1
    room = SVG_HEIGHT - SVG_TOP - SVG_BOTTOM
    heights = [round(room * count / most) for count in counts]
    return [
        Bar(label, count, SVG_GAP + i * (SVG_BAR + SVG_GAP), SVG_TOP + room - height, height,
            "█" * round(BAR_CHARS * count / most))
        for i, (label, count, height) in enumerate(zip(BIN_LABELS, counts, heights))
    ]  # fmt: skip


@dataclass
class Mistake:
    """A diagnosed mistake, how many students made it and who."""

    mistake: str
    hook: str
    description: str = ""
    students: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.students)


@dataclass
class Exercise:
    hook: str
    possible: float
    bars: list[Bar]
    mean: float
    full: int
    graded: int
    mistakes: list[Mistake]
    unexplained: list[str]  # students who failed a case of it with no known mistake named


@dataclass
class Line:
    """One student in the class report."""

    student: str
    name: str
    status: str
    earned: str
    possible: str
    feedback: str  # relative link, "" for a missing student
    output: str = ""  # relative link to output.txt, "" where nothing was printed
    printed: str = ""  # the first line printed, inert
    printed_chars: int = 0
    printed_in: str = ""  # the exercises whose calls printed something, comma-separated

    @property
    def kind(self) -> str:
        return self.status.split(":", 1)[0]


@dataclass
class Adjusted:
    """One override in force (``attnkit override``), said with its reason."""

    id: int
    student: str
    exercise: str
    points: str
    reason: str
    by: str


@dataclass
class ClassReport:
    exercises: list[Exercise]
    top: list[Mistake]
    students: list[Line]
    stale: list[str]
    run: dict[str, str]
    max_total: float
    adjusted: list[Adjusted] = field(default_factory=list)
    id_notes: list[tuple[str, str]] = field(default_factory=list)  # (student, note): how an id was settled, whole

    def _of(self, kind: str) -> list[Line]:
        return [line for line in self.students if line.kind == kind]

    @property
    def errors(self) -> list[Line]:
        return self._of("error")

    @property
    def review(self) -> list[Line]:
        return self._of("review")

    @property
    def timed_out(self) -> list[Line]:
        """Students some of whose exercises ran out of time (grades.csv's ``timed out: …``, beside a review too)."""
        return [line for line in self.students if "timed out: " in line.status]

    @property
    def missing(self) -> list[Line]:
        return self._of(MISSING)

    @property
    def printed(self) -> list[Line]:
        return [line for line in self.students if line.output]

    @property
    def graded_count(self) -> int:
        return len(self.students) - len(self.missing)


def _link(student: str, name: str) -> str:
    return f"{quote(student)}/{name}"


def _mistakes_of(hook: str, graded: Graded, lang: str) -> list[Mistake]:
    found: dict[str, Mistake] = {}
    for sub, results in graded:
        for mistake in dict.fromkeys(r.mistake for r in results if r.hook == hook and r.mistake):
            entry = found.setdefault(mistake, Mistake(inert(mistake), hook, inert(mistake_hint(mistake, lang)[0])))
            entry.students.append(sub.student)
    return sorted(found.values(), key=lambda m: (-m.count, m.mistake))


def _failed(r: CaseResult) -> bool:
    return r.status not in (PASSED, SKIPPED)


def class_report(roll: ClassRoll, rubric: Rubric, options: ReportOptions | None = None) -> ClassReport:
    """Everything ``class.html`` and ``class.md`` say, computed once."""
    options = options or ReportOptions()
    lang = options.lang
    graded = sorted(roll.graded, key=lambda item: item[0].student)
    scored = [(sub, results, score(results, rubric, sub.student)) for sub, results in graded]
    judged = [(sub, results, scores) for sub, results, scores in scored if not status(sub, results).startswith("error")]
    exercises = []
    for hook in HOOK_NAMES:
        pairs = [scores[hook] for _, _, scores in judged]
        possible = rubric.points.get(hook, 0.0)
        mistakes = _mistakes_of(hook, [(sub, results) for sub, results, _ in judged], lang)
        named = {s for m in mistakes for s in m.students}
        unexplained = [
            sub.student
            for sub, results, _ in judged
            if sub.student not in named and any(r.hook == hook and _failed(r) for r in results)
        ]
        mean = sum(e for e, _ in pairs) / len(pairs) if pairs else 0.0
        full = sum(1 for e, p in pairs if p > 0 and e >= p - 1e-9)
        exercises.append(Exercise(hook, possible, histogram(pairs), mean, full, len(pairs), mistakes, unexplained))
    top = sorted((m for e in exercises for m in e.mistakes), key=lambda m: (-m.count, m.hook, m.mistake))
    lines = []
    for sub, results, scores in scored:
        earned, possible = total(scores, rubric, sub.student)
        person = roll.people.get(sub.student, Person(sub.student))
        printed = roll.outputs.get(sub.student, "")
        first = next((line for line in printed.splitlines() if line.strip()), "")
        printed_in = ", ".join(h for h in HOOK_NAMES if roll.printed.get(sub.student, {}).get(h))
        lines.append(
            Line(
                inert(sub.student), inert(person.name), inert(status(sub, results, rubric)), short_points(earned),
                short_points(possible), _link(sub.student, "feedback.html"),
                _link(sub.student, "output.txt") if printed else "", one_line(inert(first), 120), len(printed),
                printed_in,
            )
        )
    for person in roll.missing:
        lines.append(Line(inert(person.id), inert(person.name), MISSING, "", short_points(rubric.max_total), ""))
    lines.sort(key=lambda line: line.student)
    seed = "" if options.seed is None else str(options.seed)
    said = (("hidden suite", options.suite_version), ("seed", seed), ("kit", options.kit))
    run = {label: value for label, value in said if value}
    if options.devices:
        run["devices"] = ", ".join(options.devices)
    if skipped := device_summary((), options)[1]:  # said here, not on each learner's page
        run["not run"] = "; ".join(skipped)
    if options.isolation:
        run["isolation"] = options.isolation
    in_class = {sub.student for sub, _ in graded}
    adjusted = [
        Adjusted(o.id, inert(o.student), o.exercise, short_points(o.points), inert_line(o.reason), inert_line(o.by))
        for o in rubric.overrides
        if o.student in in_class
    ]
    id_notes = sorted((inert(sub.student), inert_line(note)) for sub, _ in roll.graded for note in sub.notes)
    return ClassReport(
        exercises, top[:TOP_MISTAKES], lines, [inert(s) for s in roll.stale], run, rubric.max_total, adjusted, id_notes
    )


def render_html(report: ClassReport) -> str:
    svg = {"width": SVG_WIDTH, "height": SVG_HEIGHT, "bar": SVG_BAR, "baseline": SVG_HEIGHT - SVG_BOTTOM}
    return render("class.html.j2", True, report=report, svg=svg)


def render_md(report: ClassReport) -> str:
    return render("class.md.j2", False, report=report)


def write(out: str | Path, roll: ClassRoll, rubric: Rubric, options: ReportOptions | None = None) -> ClassReport:
    """Write ``out/class.html`` and ``out/class.md``; returns the report."""
    report = class_report(roll, rubric, options)
    write_text(class_file(out, CLASS_HTML), render_html(report))
    write_text(class_file(out, CLASS_MD), render_md(report))
    return report
