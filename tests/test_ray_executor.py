"""``attnkit grade --executor ray``: the sample class on a local Ray of 2 CPUs grades as the local pool does.

One Ray for the module (a fixture started in this process with a short
``TMPDIR``, which its workers, and so their templates and learner processes,
inherit); the command-line runs join it with ``--ray-address``.  Against one
``--executor local`` run of the sample class: ``grades.csv`` byte for byte;
the same after killing an actor mid-submission; a driver SIGKILLed mid-run
leaves whole submissions only, no learner process, and the printed-out
command run again resumes the run to the same ``grades.csv``.  The wire (what
crosses between driver and worker) and the one-line error without Ray need no
Ray.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from processes import processes_under
from test_interrupt import query, recorded, results_of

from grader.cli import main
from grader.instructor.class_grading import SAMPLE_CLASS, GradeOptions, WorkSpec, grade_class
from grader.instructor.heatmaps import Figure
from grader.instructor.intake_model import Submission
from grader.instructor.ray_executor import (
    INSTALL_HINT,
    RayExecutor,
    _common_isolation,
    outcome_from_wire,
    outcome_to_wire,
    submission_from_wire,
    submission_to_wire,
)
from grader.instructor.reports import write_reports
from grader.instructor.rubric import load_rubric
from grader.instructor.sandbox import Limits
from grader.instructor.submission_grading import Outcome, Stats
from grader.instructor.verdict import FAILED, PASSED, CaseResult

try:
    import ray
except ImportError:  # the tests that need no Ray still run
    ray = None

KIT_ROOT = Path(__file__).resolve().parents[1]
SEED = "11"  # the seed graded_sample_class grades under (conftest.py), so local_run's
needs_ray = pytest.mark.skipif(ray is None, reason="Ray is not installed (pip install 'attnkit[ray]')")


# --- no Ray needed ------------------------------------------------------------------------------------------


def test_without_ray_the_executor_is_a_one_line_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["grade", str(SAMPLE_CLASS / "alice.py"), "--executor", "ray", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert result.output.strip() == f"Error: {INSTALL_HINT}"
    assert not out.exists()  # nothing read, nothing written


def test_ray_address_without_the_ray_executor_is_a_usage_error(tmp_path):
    args = ["grade", str(SAMPLE_CLASS / "alice.py"), "--ray-address", "auto", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "--ray-address is for --executor ray" in result.output, result.output


def plain(value) -> bool:
    """Whether ``value`` is built of JSON-able builtins and bytes only (nothing a pickle could run)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool, bytes)


def test_an_outcome_crosses_as_plain_data_and_comes_back_whole():
    sub = Submission("alice", "alice.py", "py", {"alice.py": "def f():\n    return 1\n"}, "alice.py", sha256="ab")
    expected = torch.rand(4, 4, dtype=torch.float64)
    figure = Figure("tiny (cpu, float32)", expected, expected.flip(0).float())
    mask = Figure("mask (cpu, bool)", torch.ones(3, 3).triu(1).bool(), torch.ones(3, 3).bool())
    results = [
        CaseResult("alice", "softmax_weights", "tiny", "cpu", "float32", FAILED, "wrong", 0.25, "m1", "a note"),
        CaseResult("alice", "causal_mask", "tiny", "meta", "float32", PASSED),
    ]
    stats = Stats(peak_rss_kib=1234, restarts=1, output="hi\n", printed={"softmax_weights": "x\n"})
    outcome = Outcome(sub, results, {"softmax_weights": figure, "causal_mask": mask}, stats)

    wire = outcome_to_wire(outcome)
    assert plain(wire)
    back = outcome_from_wire(sub, wire)
    assert back.submission is sub and back.results == results and back.stats == stats
    assert set(back.figures) == {"softmax_weights", "causal_mask"}
    for hook, sent in outcome.figures.items():
        got = back.figures[hook]
        assert got.label == sent.label
        for a, b in ((got.expected, sent.expected), (got.received, sent.received)):
            assert a.dtype == b.dtype and torch.equal(a, b)

    errored = outcome_from_wire(sub, dict(wire, error="its Ray worker died"))
    assert errored.submission.error == "its Ray worker died" and errored.submission.sha256 == "ab"


def test_a_submission_crosses_as_its_text():
    sub = Submission("bob", "/somewhere/bob", "folder", {"bob/a.py": "x = 1\n"}, "bob", sha256="cd", review=["r"])
    wire = submission_to_wire(sub)
    assert plain(wire) and set(wire) == {"student", "files", "entry", "error"}
    back = submission_from_wire(wire)
    assert (back.student, back.files, back.entry, back.error) == ("bob", sub.files, "bob", None)


@pytest.mark.parametrize(
    "isolations, common",
    [
        (["user-ns+pid-ns+landlock"], "user-ns+pid-ns+landlock"),
        (["user-ns+pid-ns+landlock", "pid-ns+landlock+seccomp"], "pid-ns+landlock"),
        (["pid-ns", "none"], "none"),
        (["user-ns", "seccomp"], "none"),
    ],
    ids=["one-worker", "the-layers-all-have", "one-worker-has-none", "nothing-in-common"],
)
def test_the_isolation_reported_is_what_every_worker_gives(isolations, common):
    assert _common_isolation([{"isolation": i} for i in isolations]) == common


# --- a local Ray of 2 CPUs ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox_tmp():
    """A short TMPDIR for Ray (its socket paths must fit in 107 bytes) and everything its workers start."""
    folder = Path(tempfile.mkdtemp(prefix="ak-ray-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_address(sandbox_tmp):
    """One local Ray of 2 CPUs for the module; its address for the command-line runs to join."""
    if ray is None:
        pytest.skip("Ray is not installed (pip install 'attnkit[ray]')")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(sandbox_tmp)  # inherited by the raylet, so by every worker and its template
    try:
        context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        if before is None:
            os.environ.pop("TMPDIR")
        else:
            os.environ["TMPDIR"] = before
    yield context.address_info["gcs_address"]
    ray.shutdown()


def environment(sandbox_tmp: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(sandbox_tmp), "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}


def grade_command(out: Path, *executor: str) -> list[str]:
    return [sys.executable, "-m", "grader.cli", "grade", str(SAMPLE_CLASS), "--out", str(out), "--seed", SEED,
            *executor]


def learner_processes(sandbox_tmp: Path) -> dict[int, str]:
    """Templates and learner processes the workers started (their folders are ``attnkit-...``)."""
    return {pid: p for pid, p in processes_under(sandbox_tmp).items() if "attnkit-" in p}


def in_flight(sandbox_tmp: Path) -> bool:
    return any("attnkit-child-" in p for p in learner_processes(sandbox_tmp).values())


@pytest.fixture(scope="module")
def local_run(graded_sample_class) -> dict:
    """The sample class with ``--executor local --jobs 2`` (the test run's one grading of it, ``conftest.py``):
    its grades.csv, output and results."""
    out = graded_sample_class / "out"
    db = out / "gradebook.sqlite"
    assert query(db, "SELECT value FROM class_settings WHERE key = 'seed'") == [(SEED,)]
    return {
        "grades": (out / "grades.csv").read_bytes(),
        "output": " ".join((graded_sample_class / "stdout.txt").read_text(encoding="utf-8").split()),
        "results": {student: results_of(db, student) for student in recorded(db)},
    }


@needs_ray
@pytest.mark.slow
def test_an_actor_killed_mid_submission_is_replaced_and_the_class_completes(ray_address, local_run, tmp_path):
    executor = RayExecutor()  # the module's Ray, already initialised
    killed: list[str] = []

    def kill_a_busy_actor(outcome) -> None:
        busy = dict(executor.pool.busy) if executor.pool else {}
        if not killed and busy:
            student, actor = next(iter(busy.items()))
            ray.kill(actor, no_restart=True)
            killed.append(student)

    options = GradeOptions(seed=int(SEED), executor=executor, on_graded=kill_a_busy_actor)
    out = tmp_path / "out"
    run = grade_class([str(SAMPLE_CLASS)], out, options)
    assert killed, "no actor was busy when a submission came back"
    assert executor.pool.retried >= 1, f"killing the actor grading {killed[0]} sent nothing again"
    assert not any(o.submission.error and "Ray worker" in o.submission.error for o in run.outcomes)
    write_reports(out, run.graded, load_rubric(), run.report_options, run.figures, run.roll)
    assert (out / "grades.csv").read_bytes() == local_run["grades"]
    db = out / "gradebook.sqlite"
    assert {student: results_of(db, student) for student in recorded(db)} == local_run["results"]


@needs_ray
@pytest.mark.slow
def test_a_worker_with_another_suite_version_refuses(ray_address):
    spec = WorkSpec(int(SEED), ("cpu",), {}, "000000000000", Limits(), False)
    with pytest.raises(RuntimeError, match=r"hidden suite version \w+, where the driver grades under 000000000000"):
        with RayExecutor(workers=1).prepare(spec, threading.Event()):
            pass


@needs_ray
@pytest.mark.slow
def test_a_sigkilled_driver_leaves_whole_submissions_and_the_run_resumes(ray_address, local_run, sandbox_tmp,
                                                                         tmp_path):
    """And the class graded on Ray, half before the kill and half after, has the local run's grades.csv."""
    out = tmp_path / "out"
    db = out / "gradebook.sqlite"
    command = grade_command(out, "--executor", "ray", "--ray-address", ray_address)
    proc = subprocess.Popen(command, cwd=KIT_ROOT, env=environment(sandbox_tmp), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (len(recorded(db)) >= 2 and in_flight(sandbox_tmp)):
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "nothing to kill within 300 s"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    kept = recorded(db)
    assert 2 <= len(kept) < 9, kept
    for student in kept:  # whole submissions only, each as the local run graded it
        assert results_of(db, student) == local_run["results"][student], student
    deadline = time.monotonic() + 60  # Ray ends a dead driver's actors; their templates and children go with them
    while (left := learner_processes(sandbox_tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == {}, left

    again = subprocess.run(command, cwd=KIT_ROOT, env=environment(sandbox_tmp), capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (out / "grades.csv").read_bytes() == local_run["grades"]
    runs = query(db, "SELECT id, finished_at FROM runs")
    assert len(runs) == 1 and runs[0][1] is not None, f"the rerun did not resume the killed run: {runs}"
    said = " ".join(again.stdout.split())
    assert f"grading {9 - len(kept)} submission(s)" in said, again.stdout
    assert "executor: ray, 2 CPU workers on 1 node" in said, said[-800:]
    assert "executor: local, 2 jobs" in local_run["output"], local_run["output"][-800:]
    assert len(local_run["results"]) == 9


@needs_ray
@pytest.mark.slow
def test_sigterm_stops_a_ray_run_cleanly(ray_address, local_run, sandbox_tmp, tmp_path):
    """ray.init replaces the SIGTERM handler with one that exits at once: the grader's must be back."""
    out = tmp_path / "out"
    db = out / "gradebook.sqlite"
    command = grade_command(out, "--executor", "ray", "--ray-address", ray_address)
    proc = subprocess.Popen(command, cwd=KIT_ROOT, env=environment(sandbox_tmp), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (len(recorded(db)) >= 2 and in_flight(sandbox_tmp)):
            assert proc.poll() is None, "the run ended before it could be stopped"
            assert time.monotonic() < deadline, "nothing to stop within 300 s"
            time.sleep(0.05)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        seconds = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, output
    assert seconds <= 5.0, f"{seconds:.2f} s"
    kept = recorded(db)
    assert f"Stopped: {len(kept)} of 9 submission(s) graded" in " ".join(output.split()), output[-800:]
    for student in kept:
        assert results_of(db, student) == local_run["results"][student], student
    deadline = time.monotonic() + 60
    while (left := learner_processes(sandbox_tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == {}, left


@needs_ray
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here: the GPU workers (num_gpus=1) need one")
def test_cuda_cases_go_to_gpu_workers(ray_address, tmp_path):
    if ray.cluster_resources().get("GPU", 0) < 1:
        pytest.skip("this module's local Ray has no GPU (ray.init num_cpus=2 only)")
    executor = RayExecutor(workers=1)
    options = GradeOptions(seed=int(SEED), devices=["cpu", "cuda"], require=["cuda"], executor=executor)
    run = grade_class([str(SAMPLE_CLASS / "alice.py")], tmp_path / "out", options)
    assert run.executor.startswith("ray, 1 GPU worker")
    cuda = [r for r in run.outcomes[0].results if r.device == "cuda"]
    assert cuda and all(r.status == PASSED for r in cuda), cuda
    assert run.cuda_overhead_seconds is not None
