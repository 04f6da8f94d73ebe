"""``junit.xml``: one ``testsuite`` per student of the class, one ``testcase`` per exercise (its cases folded in).

An exercise with a case that could not be judged (the submission not graded, not loaded or not importable, the
learner's process timed out, crashed or broke the protocol: :func:`is_error`) is an ``<error>``; else one with a wrong
answer is a ``<failure>``; one whose every case was skipped is ``<skipped>``.  The element's text lists each such case
with its message; a missing student's single ``submission`` case is an error too.  Review findings are the suite's
``review`` properties.  Folded, the file is a few kB a student (a case each made it 140 kB: issue 26).
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from grader.instructor.inert import inert
from grader.instructor.out_folder import write_text
from grader.instructor.report_model import Graded, Person, by_student, clip, hook_order, one_line, xml_safe
from grader.instructor.verdict import PASSED, SKIPPED, CaseResult, case_label

__all__ = ["ERROR_STARTS", "is_error", "junit_class", "junit_xml", "write_junit"]


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
    """Whether a failed case is an error (the learner's code never gave an answer to judge) rather than a wrong
    answer (a verdict's message: a wrong value, shape or dtype, a missing hook)."""
    return result.status not in (PASSED, SKIPPED) and result.message.startswith(ERROR_STARTS)


def junit_class(student: str, hook: str | None = None) -> str:
    """A junit ``classname``: ``attnkit.<student>[.<hook>]``, the student's id with ``%`` and ``.`` escaped
    (``%25``, ``%2E``), so no id (``bob.causal_mask``) makes the class of another student's hook."""
    escaped = xml_safe(inert(student)).replace("%", "%25").replace(".", "%2E")
    return f"attnkit.{escaped}" + (f".{xml_safe(hook)}" if hook is not None else "")


def junit_tree(graded: Graded, missing: Iterable[Person] = ()) -> ET.ElementTree:
    """One ``testsuite`` per student, one ``testcase`` per exercise (named after its hook)."""
    root = ET.Element("testsuites", name="attnkit")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for person in sorted(missing, key=lambda p: p.id):
        attrib = {"name": xml_safe(inert(person.id)), "tests": "1", "failures": "0", "errors": "1", "skipped": "0"}
        suite = ET.SubElement(root, "testsuite", attrib, time="0.000")
        case = ET.SubElement(suite, "testcase", classname=junit_class(person.id), name="submission", time="0")
        ET.SubElement(case, "error", message="missing: no hand-in from this student of the roster", type="Missing")
        totals["tests"] += 1
        totals["errors"] += 1
    for sub, results in by_student(graded):
        results = hook_order(results)
        suite = ET.SubElement(root, "testsuite", name=xml_safe(sub.student))
        if sub.review:
            properties = ET.SubElement(suite, "properties")
            for finding in sub.review:
                ET.SubElement(properties, "property", name="review", value=xml_safe(inert(finding)))
        counts = {"tests": len({r.hook for r in results}), "failures": 0, "errors": 0, "skipped": 0}
        if sub.error:
            counts["tests"] += 1
            counts["errors"] += 1
            case = ET.SubElement(suite, "testcase", classname=junit_class(sub.student), name="submission", time="0")
            error_text = inert(sub.error)
            error = ET.SubElement(case, "error", message=xml_safe(one_line(error_text)), type="SubmissionError")
            error.text = xml_safe(error_text)
        suite_seconds = 0.0
        for hook, cases in _by_hook(results):
            spent = sum(r.seconds for r in cases)
            suite_seconds += spent
            _exercise_case(suite, sub.student, hook, cases, spent, counts)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{suite_seconds:.3f}")
        seconds += suite_seconds
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    root[:] = sorted(root, key=lambda suite: suite.get("name", ""))  # missing students among the others
    ET.indent(root)
    return ET.ElementTree(root)


def _by_hook(results: list[CaseResult]) -> list[tuple[str, list[CaseResult]]]:
    """The results grouped by exercise, in the order they come (:func:`hook_order`'s)."""
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        groups.setdefault(r.hook, []).append(r)
    return list(groups.items())


def _label(r: CaseResult) -> str:
    return case_label(r.case, r.device, r.dtype)


MAX_LISTED = 8
"""The most distinct messages an exercise's ``<failure>`` or ``<error>`` lists (the feedback has every case)."""


def _listed(cases: list[CaseResult], mistakes: bool = False) -> str:
    """One line per distinct message, after the cases that gave it (three named, the rest counted), at most
    :data:`MAX_LISTED`; then the known mistakes named, where ``mistakes``."""
    said: dict[str, list[str]] = {}
    for r in cases:
        said.setdefault(one_line(inert(r.message)) or r.status, []).append(_label(r))
    lines = [f"{', '.join(labels[:3])}{f' and {len(labels) - 3} more' if len(labels) > 3 else ''}: {message}"
             for message, labels in said.items()]  # fmt: skip
    if len(lines) > MAX_LISTED:
        lines[MAX_LISTED:] = [f"and {len(lines) - MAX_LISTED} more messages"]
    named = dict.fromkeys(r.mistake for r in cases if r.mistake) if mistakes else {}
    return clip("\n".join(lines + [f"known mistake: {m}" for m in named]))


def _exercise_case(
    suite: ET.Element, student: str, hook: str, cases: list[CaseResult], seconds: float, counts: dict[str, int]
) -> None:
    """The ``testcase`` of one exercise: an error where a case could not be judged, else a failure where one is
    wrong, skipped where every case was; its cases' notes, each once, as ``system-out``."""
    classname = junit_class(student, hook)
    case = ET.SubElement(suite, "testcase", classname=classname, name=xml_safe(hook), time=f"{seconds:.3f}")
    errors = [r for r in cases if is_error(r)]
    wrong = [r for r in cases if r.status not in (PASSED, SKIPPED) and not is_error(r)]
    if errors:
        counts["errors"] += 1
        first = f"{len(errors)} of {len(cases)} cases not judged; {_label(errors[0])}: {inert(errors[0].message)}"
        error = ET.SubElement(case, "error", message=xml_safe(one_line(first)), type="NotJudged")
        error.text = xml_safe(_listed(errors + wrong, mistakes=True))
    elif wrong:
        counts["failures"] += 1
        first = f"{len(wrong)} of {len(cases)} cases failed; {_label(wrong[0])}: {inert(wrong[0].message)}"
        failure = ET.SubElement(case, "failure", message=xml_safe(one_line(first)))
        failure.text = xml_safe(_listed(wrong, mistakes=True))
    elif all(r.status == SKIPPED for r in cases):
        counts["skipped"] += 1
        ET.SubElement(case, "skipped", message=xml_safe(one_line(inert(cases[0].message) or "skipped")))
    notes: dict[str, list[str]] = {}
    for r in cases:
        if r.note:
            notes.setdefault(inert(r.note), []).append(_label(r))
    if notes:  # after skipped/failure, as JUnit's schema orders a testcase's children
        text = "\n".join(f"note ({len(names)} cases: {', '.join(names)}): {note}" for note, names in notes.items())
        ET.SubElement(case, "system-out").text = xml_safe(clip(text))


def junit_xml(graded: Graded, missing: Iterable[Person] = ()) -> str:
    buffer = io.BytesIO()
    junit_tree(graded, missing).write(buffer, encoding="utf-8", xml_declaration=True)
    return buffer.getvalue().decode("utf-8") + "\n"


def write_junit(path: str | Path, graded: Graded, missing: Iterable[Person] = ()) -> None:
    write_text(Path(path), junit_xml(graded, missing))
