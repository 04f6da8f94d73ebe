"""Fixtures the kit's test modules share.

- ``kit``: a learner's kit, a copy per test module (tests run the learner's tools in it, which
  leave caches behind) of the one ``attnkit release`` writes per test run (``released_kit``, shared
  by the pytest-xdist workers);
- ``rubric``: the kit's default rubric;
- ``graded_corpus``: the learners' corpus graded once for the whole session;
- ``template``: a warm sandbox template for the test module (``learner_code.graded_snippet`` grades with it);
- ``graded_sample_class``: the sample class (``examples/submissions``) through ``attnkit grade`` once per test
  run (shared by the pytest-xdist workers like ``released_kit``): its out folder and what the command printed.

The fast tier (``make test``) is every test not marked ``slow``; ``make test-all`` runs them all.
In the fast tier, a test not marked ``slow`` whose call takes over :data:`FAST_SECONDS` (more on a loaded
machine: :func:`fast_limit`) fails, naming the mark it needs; ``make test-all`` (CI) never fails a test for its time.

Plain helpers live in modules beside this file: :mod:`learner_code` (the one library
that builds learner code: the reference as a learner pastes it, Alice with a snippet) and
:mod:`processes` (what ``/proc`` says about a process).  This folder is on ``sys.path``
because this file is here, so ``tests/hostile/`` imports them too.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.instructor.release import RECORD, release
from grader.instructor.rubric import Rubric, load_rubric

FAST_SECONDS = 5.0
"""The most a test's call may take outside ``@pytest.mark.slow`` (its fixtures' set-up not counted)."""


def load_ratio() -> float:
    """The machine's load (the last minute's) per core, at least 1."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def fast_limit() -> float:
    """:data:`FAST_SECONDS`, stretched by the load beyond the machine's cores (the rule times the test, not what else
    runs: on a 2-core machine at a load of 5 a test takes some 2.5 times as long)."""
    return FAST_SECONDS * load_ratio()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    fast_tier = "not slow" in (item.config.getoption("markexpr") or "")  # test-all (CI) times nothing
    too_long = call.when == "call" and call.duration > fast_limit()
    if fast_tier and too_long and report.passed and not item.get_closest_marker("slow"):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {call.duration:.1f} s, over the fast tier's {fast_limit():.3g} s: "
            "mark it @pytest.mark.slow (then only `make test-all` runs it) or make it faster"
        )


HEAVY_FIRST = (
    "test_ray_executor.py",
    "test_mistakes.py",
    "test_gradescope.py",
    "test_audit.py",
    "test_interrupt.py",
    "test_release.py",
    "test_cli_grade.py",
    "test_out_folder.py",
    "test_learner_grading.py",
    "test_throughput.py",
    "test_diagnosis.py",
    "test_notebooks.py",
    "test_module_grading.py",
    "test_submission_grading.py",
    "test_memory_rule.py",
)
"""The test files that take longest (minutes each in ``make test-all``), roughly longest first: they start first.

``--dist loadfile`` hands each worker a whole file; pytest-xdist's own order is by the number of tests in a file,
which puts files of a few long tests (the throughput test's two take minutes) last, where one worker runs them
alone while the other has nothing left.  Longest first, then the rest in that order, leaves the many short files
for the end, where they even out the two workers.  The order of the tests inside a file is left as it is."""


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False  # keep the order pytest_collection_modifyitems gives (below)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of :data:`HEAVY_FIRST` first, in its order; then every other file, most tests first (what
    pytest-xdist's loadfile would do).  Stable: the tests of a file keep their order."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.nodeid.split("::", 1)[0]] = counts.get(item.nodeid.split("::", 1)[0], 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        name = path.rsplit("/", 1)[-1]
        if name in HEAVY_FIRST and path.startswith("tests/"):
            return (HEAVY_FIRST.index(name), 0)
        return (len(HEAVY_FIRST), -counts[path])

    items.sort(key=rank)


@pytest.fixture(scope="session")
def graded_corpus(tmp_path_factory: pytest.TempPathFactory):
    """The learners' corpus (``tests/learners/``) through ``grade_class`` once per test run: seed 1, cpu and
    meta, two jobs.  The points tests and the diagnosis tests read the same run (it takes a minute or more).

    Shared by the pytest-xdist workers like ``released_kit``: the first grades and keeps the ``GradeRun`` (plain
    data, the heatmaps' tensors included) in a pickle; the others wait, then read it.  Read it, never change it.
    """
    from grader.instructor.class_grading import GradeOptions, LocalExecutor, grade_class

    dest = shared_path(tmp_path_factory, "graded-corpus")
    with open(dest.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (dest / "run.pickle").is_file():  # written last
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            options = GradeOptions(seed=1, devices=["cpu", "meta"], executor=LocalExecutor(jobs=2))
            corpus = Path(__file__).resolve().parent / "learners"
            run = grade_class([str(corpus)], dest / "out", options)
            (dest / "run.pickle.part").write_bytes(pickle.dumps(run))
            (dest / "run.pickle.part").rename(dest / "run.pickle")
    return pickle.loads((dest / "run.pickle").read_bytes())


@pytest.fixture(scope="module")
def template():
    """One warm sandbox template (``grader.instructor.sandbox.Template``) for the test module."""
    from grader.instructor.sandbox import Template

    with Template() as tpl:
        yield tpl


def shared_path(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A path every pytest-xdist worker of this run sees alike (this process's own where there are no workers)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


@pytest.fixture(scope="session")
def released_kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The learner's kit ``attnkit release`` writes, once per test run: read it, never write into it."""
    dest = shared_path(tmp_path_factory, "released-kit")
    with open(dest.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker releases; the others wait, then read
        if not (dest / RECORD).is_file():  # the release's record is written last
            release(dest)
    return dest


SAMPLE_CLASS_SEED = 11
"""The seed ``graded_sample_class`` grades under (the modules that read it grade their own runs with it too)."""


@pytest.fixture(scope="session")
def graded_sample_class(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``attnkit grade examples/submissions --seed 11 --executor local --jobs 2`` once per test run, every device
    present: a folder with ``out/`` (the out folder) and ``stdout.txt`` (what the command printed, 200 columns).

    Read it or copy it, never write into it (a module that needs another rubric or late hand-ins grades into its
    own copy: the class's results are reused).  Grading the sample class takes a minute or more (grace loops
    until her timeout on every device), so the modules that grade it with the same options read this one.
    """
    kit_root = Path(__file__).resolve().parents[1]
    dest = shared_path(tmp_path_factory, "graded-sample-class")
    with open(dest.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the first worker grades; the others wait, then read
        if not (dest / "stdout.txt").is_file():  # written last
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            command = [sys.executable, "-m", "grader.cli", "grade", str(kit_root / "examples" / "submissions"),
                       "--out", str(dest / "out"), "--seed", str(SAMPLE_CLASS_SEED), "--executor", "local",
                       "--jobs", "2"]  # fmt: skip
            env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
            done = subprocess.run(command, cwd=kit_root, env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stdout + done.stderr
            (dest / "stdout.txt").write_text(done.stdout, encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def kit(released_kit: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A learner's kit as ``attnkit release`` writes it, this test module's own copy."""
    dest = tmp_path_factory.mktemp("release") / "kit"
    shutil.copytree(released_kit, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def rubric() -> Rubric:
    return load_rubric()
