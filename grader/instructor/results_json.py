"""``<student>/results.json``: a student's report in Gradescope's results format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.instructor.out_folder import write_text
from grader.instructor.report_model import StudentReport

__all__ = ["gradescope_results", "write_results_json"]


def gradescope_results(report: StudentReport) -> dict[str, Any]:
    """Gradescope's ``results.json``: score, max_score, output, and one test per exercise.

    Each test's ``output`` says only what helps the student (failures, known mistakes and their hints), never the
    cases of a device not present here (the instructor's class report says which); its ``visibility`` is the
    rubric's.
    """
    output = report.summary
    tests = [
        {"name": ex.hook, "score": round(ex.earned, 2), "max_score": round(ex.possible, 2), "status": ex.status,
         "output": "\n".join(ex.output_lines()), "visibility": ex.visibility}
        for ex in report.exercises
    ]  # fmt: skip
    top = {"score": round(report.earned, 2), "max_score": round(report.possible, 2), "output": output}
    return {**top, "visibility": report.visibility, "stdout_visibility": "hidden", "tests": tests}


def write_results_json(path: str | Path, report: StudentReport) -> None:
    write_text(Path(path), json.dumps(gradescope_results(report), indent=2, ensure_ascii=False) + "\n")

