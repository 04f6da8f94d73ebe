"""The hidden cases as pytest cases, run in-process against one trusted solution.

Instructor-only: ``attnkit grade`` runs the same cases (from :mod:`grader.instructor.cases`)
through the sandbox; this module is for trusted solutions (the reference, the
catalogue of known mistakes) and for comparisons:

    pytest grader/instructor/hidden --solution reference
    ATTNKIT_HIDDEN_SEED=7 pytest grader/instructor/hidden --solution path/to/trusted.py

Never point it at an untrusted submission: here the code runs in this process.
"""

from __future__ import annotations

import os

import pytest

from grader.child_runtime import run_call
from grader.instructor.suite import build_suite
from grader.instructor.verdict import PASSED, SKIPPED, judge

SEED = int(os.environ.get("ATTNKIT_HIDDEN_SEED", "0"))
SUITE = build_suite(SEED, ("cpu", "meta"))


@pytest.mark.parametrize("run", SUITE.runs, ids=[f"{r.hook}-{r.case.name}-{r.device}-{r.dtype}" for r in SUITE.runs])
def test_hidden_case(run, solution):
    reply, outputs = run_call(solution.functions, dict(run.call, id=0), run.tensors)
    status, message = judge(run, reply, outputs)
    if status == SKIPPED:
        pytest.skip(message)
    assert status == PASSED, f"{run.case.what}: {message}"
