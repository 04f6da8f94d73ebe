"""Fixtures the kit's test modules share.

- ``kit``: a learner's kit made by ``attnkit release`` into a temporary folder, one per
  test module (tests run the learner's tools in it, which leave caches behind);
- ``rubric``: the kit's default rubric;
- ``graded_corpus``: the learners' corpus graded once for the whole session;
- ``template``: a warm sandbox template for the test module (``learner_code.graded_snippet`` grades with it).

Plain helpers live in modules beside this file: :mod:`learner_code` (the one library
that builds learner code: the reference as a learner pastes it, Alice with a snippet) and
:mod:`processes` (what ``/proc`` says about a process).  This folder is on ``sys.path``
because this file is here, so ``tests/hostile/`` imports them too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.instructor.release import release
from grader.instructor.rubric import Rubric, load_rubric


@pytest.fixture(scope="session")
def graded_corpus(tmp_path_factory: pytest.TempPathFactory):
    """The learners' corpus (``tests/learners/``) through ``grade_class`` once for the session: seed 1, cpu and
    meta, two jobs.  The points tests and the diagnosis tests read the same run (it takes about a minute)."""
    from grader.instructor.class_grading import GradeOptions, LocalExecutor, grade_class

    options = GradeOptions(seed=1, devices=["cpu", "meta"], executor=LocalExecutor(jobs=2))
    corpus = Path(__file__).resolve().parent / "learners"
    return grade_class([str(corpus)], tmp_path_factory.mktemp("corpus"), options)


@pytest.fixture(scope="module")
def template():
    """One warm sandbox template (``grader.instructor.sandbox.Template``) for the test module."""
    from grader.instructor.sandbox import Template

    with Template() as tpl:
        yield tpl


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh learner's kit (``attnkit release``), for this test module."""
    dest = tmp_path_factory.mktemp("release") / "kit"
    release(dest)
    return dest


@pytest.fixture(scope="session")
def rubric() -> Rubric:
    return load_rubric()
