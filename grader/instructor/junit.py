"""``junit.xml``: one ``testsuite`` per student of the class, one ``testcase`` per case.

A wrong answer is a ``<failure>``; a case that could not be judged (the submission not graded, not loaded or not
importable, the learner's process timed out, crashed or broke the protocol: :func:`is_error`) is an ``<error>``,
and so is a missing student's single ``submission`` case.  Review findings are the suite's ``review`` properties.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from grader.instructor.inert import inert
from grader.instructor.out_folder import write_text
from grader.instructor.report_model import Graded, Person, by_student, clip, hook_order, one_line, xml_safe
from grader.instructor.verdict import PASSED, SKIPPED, CaseResult

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
    """One ``testsuite`` per student, one ``testcase`` per case result (named ``CaseResult.test_name``)."""
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
            classname, name = junit_class(sub.student, r.hook), xml_safe(r.test_name)
            case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{r.seconds:.3f}")
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
    root[:] = sorted(root, key=lambda suite: suite.get("name", ""))  # missing students among the others
    ET.indent(root)
    return ET.ElementTree(root)


def junit_xml(graded: Graded, missing: Iterable[Person] = ()) -> str:
    buffer = io.BytesIO()
    junit_tree(graded, missing).write(buffer, encoding="utf-8", xml_declaration=True)
    return buffer.getvalue().decode("utf-8") + "\n"


def write_junit(path: str | Path, graded: Graded, missing: Iterable[Person] = ()) -> None:
    write_text(Path(path), junit_xml(graded, missing))

