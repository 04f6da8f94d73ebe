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

from grader.instructor.suite import build_suite
from grader.instructor.verdict import PASSED, SKIPPED, judge_in_process, trial_id

SEED = int(os.environ.get("ATTNKIT_HIDDEN_SEED", "0"))
SUITE = build_suite(SEED, ("cpu", "meta"))


@pytest.mark.parametrize("trial", SUITE.trials, ids=[trial_id(t) for t in SUITE.trials])
def test_hidden_case(trial, solution):
    verdict = judge_in_process(solution, trial)
    if verdict.status == SKIPPED:
        pytest.skip(verdict.message)
    assert verdict.status == PASSED, f"{trial.case.what}: {verdict.message}"
