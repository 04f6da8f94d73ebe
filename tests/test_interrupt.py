"""Ctrl-C and SIGTERM stop ``attnkit grade`` cleanly; progress shows in a log.

The end-to-end tests run ``attnkit grade`` as real subprocesses on a class of
six hand-ins (Alice, some slowed down by ``tests/submissions/sleepy.py``, some
with one mistake) with ``--jobs 2`` or ``--jobs 1``, signal it once a few
submissions are recorded and others are in flight, and check what a user
relies on: exit 130 within seconds, the printed command resumes to the same
``grades.csv`` as an uninterrupted run, nothing partial is recorded, no
learner process is left.  The unit tests hold the pieces: the executor's
stop, ``Template.stop`` waking a thread blocked on a child, ``grade_class``'s
stop event from Python, the progress lines.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from learner_code import alice_with
from processes import alive, processes_under
from rich.console import Console

from grader.instructor.class_grading import GradeOptions, GradingStopped, LocalExecutor, grade_class
from grader.instructor.progress import grading_progress, log_step
from grader.instructor.sandbox import ChildGone, Limits, Template
from grader.instructor.stopping import resume_command

KIT_ROOT = Path(__file__).resolve().parents[1]
SEED = "7"
SNIPPETS = (None, "sleepy", "wrong_causal_mask", "sleepy", "softmax_ignores_dim")
CLASS_SIZE = 6
EXIT_BUDGET_S = 3.0  # the aim is 2 s; one more for a loaded CI machine
ATTNKIT = Path(sys.executable).with_name("attnkit")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; Linux only")


def query(db: Path, sql: str, *params) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def recorded(db: Path) -> list[str]:
    try:
        return [s for (s,) in query(db, "SELECT student FROM submissions ORDER BY student")]
    except sqlite3.Error:  # not created yet
        return []


def results_of(db: Path, student: str) -> list[tuple]:
    """Every result of ``student`` in the gradebook (all runs: each test's gradebook holds one), timing left out."""
    sql = (
        "SELECT hook, case_name, device, dtype, status, message, mistake FROM results WHERE student = ? "
        "ORDER BY hook, case_name, device, dtype"
    )
    return query(db, sql, student)


def environment(sandbox_tmp: Path) -> dict[str, str]:
    sandbox_tmp.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(sandbox_tmp), "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}


def grade_command(program: list[str], class_dir: Path, out: Path, jobs: int) -> list[str]:
    return [*program, "grade", str(class_dir), "--out", str(out), "--seed", SEED, "--jobs", str(jobs)]


def wait_until_gone(folder: Path, seconds: float = 2.0) -> dict[int, str]:
    """The processes still under ``folder`` after up to ``seconds`` (a killed process takes a moment to go)."""
    deadline = time.monotonic() + seconds
    while (left := processes_under(folder)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def kill_left(folder: Path) -> None:
    for pid in processes_under(folder):  # what a failed test left behind, by pid
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def klass(tmp_path_factory) -> dict:
    """The class folder and an uninterrupted run of it (--jobs 2): its grades.csv, output and results."""
    root = tmp_path_factory.mktemp("interrupt")
    class_dir = root / "class"
    class_dir.mkdir()
    for i in range(CLASS_SIZE):
        (class_dir / f"s{i:02d}.py").write_text(alice_with(SNIPPETS[i % len(SNIPPETS)]), encoding="utf-8")
    out, tmp = root / "clean", root / "tmp-clean"
    try:
        done = subprocess.run(grade_command([sys.executable, "-m", "grader.cli"], class_dir, out, 2), cwd=KIT_ROOT,
                              env=environment(tmp), capture_output=True, text=True, timeout=600)
    finally:
        kill_left(tmp)
    assert done.returncode == 0, done.stdout + done.stderr
    db = out / "gradebook.sqlite"
    return {
        "root": root,
        "class": class_dir,
        "grades": (out / "grades.csv").read_bytes(),
        "output": done.stdout,
        "results": {student: results_of(db, student) for student in recorded(db)},
    }


def interrupt(klass: dict, name: str, jobs: int, signals: tuple[int, ...], *, group: bool = False,
              program: list[str] | None = None) -> dict:
    """Grade the class, send ``signals`` once two submissions are recorded and more are in flight.

    Each signal after the first goes as soon as the grader says it is stopping
    (its handler ran), so it lands during the first stop's clean-up.
    ``group``: to the whole process group, as a terminal's Ctrl-C does; else to the grader alone.
    """
    program = program or [sys.executable, "-m", "grader.cli"]
    out, tmp = klass["root"] / name, klass["root"] / f"tmp-{name}"
    db = out / "gradebook.sqlite"
    proc = subprocess.Popen(grade_command(program, klass["class"], out, jobs), cwd=KIT_ROOT, env=environment(tmp),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    facts: dict = {"out": out, "tmp": tmp, "db": db}
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while True:
            facts["in_flight"] = [p for p in processes_under(tmp).values() if "attnkit-child-" in p]
            if len(recorded(db)) >= 2 and facts["in_flight"]:
                break
            assert proc.poll() is None, "the run ended before it could be interrupted:\n" + "".join(lines)
            assert time.monotonic() < deadline, "nothing to interrupt within 300 s"
            time.sleep(0.05)
        signalled = time.monotonic()
        for i, sig in enumerate(signals):
            while i and not any("attnkit: stopping" in line for line in lines) and proc.poll() is None:
                time.sleep(0.001)
            os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
        try:
            proc.wait(timeout=60)
        finally:
            facts["exit_seconds"] = time.monotonic() - signalled
        facts["code"] = proc.returncode
        reader.join(timeout=10)
        facts["output"] = "".join(lines)
        facts["left"] = wait_until_gone(tmp)
        facts["recorded"] = recorded(db)
        facts["results"] = {student: results_of(db, student) for student in facts["recorded"]}
        print(f"{name}: exit {facts['code']} {facts['exit_seconds']:.2f} s after the signal; "
              f"{len(facts['recorded'])} of {CLASS_SIZE} recorded")
        return facts
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_left(tmp)


def resume(klass: dict, facts: dict) -> subprocess.CompletedProcess:
    """Run the command the stopped run printed, in the folder it ran in."""
    lines = facts["output"].splitlines()
    (at,) = [i for i, line in enumerate(lines) if "To resume, run" in line]
    command = shlex.split(lines[at + 1])
    try:
        return subprocess.run(command, cwd=KIT_ROOT, env=environment(facts["tmp"]), capture_output=True, text=True,
                              timeout=600)
    finally:
        kill_left(facts["tmp"])


SCENARIOS = {  # name: (jobs, signals, to the whole group, the program run)
    "sigint-jobs2": (2, (signal.SIGINT,), False, None),
    "sigint-group-jobs2": (2, (signal.SIGINT,), True, None),
    "sigterm-jobs2": (2, (signal.SIGTERM,), False, None),
    "sigint-jobs1-attnkit-script": (1, (signal.SIGINT,), False, [str(ATTNKIT)]),
}


RESUMED = ("sigint-jobs2", "sigint-jobs1-attnkit-script")
"""The stops whose printed command is run to the end (each resume grades the rest of the class again)."""


@pytest.fixture(scope="module", params=list(SCENARIOS), ids=list(SCENARIOS))
def stopped(request, klass) -> dict:
    jobs, signals, group, program = SCENARIOS[request.param]
    if program and not Path(program[0]).exists():
        pytest.skip(f"no attnkit script beside {sys.executable} (the kit is not installed in this environment)")
    facts = interrupt(klass, request.param, jobs, signals, group=group, program=program)
    facts["rerun"] = resume(klass, facts) if request.param in RESUMED else None
    facts["jobs"], facts["program"] = jobs, program
    return facts


# --- the end-to-end behaviour -------------------------------------------------------------------------


@pytest.mark.slow
def test_first_signal_exits_130_within_seconds(request, stopped, klass):
    """Exit 130 within seconds; a stop over time is tried twice more, as a CI machine's load stalls one at random.

    (One CI run, 7 s a hand-in, took 5.9 s where this machine takes 0.3: a grader that waited for the
    hand-ins in flight, or for the class, would be over time in every try.)
    """
    assert stopped["code"] == 130, stopped["output"]
    name = request.node.callspec.params["stopped"]
    jobs, signals, group, program = SCENARIOS[name]
    seconds = [stopped["exit_seconds"]]
    for attempt in range(2):
        if min(seconds) <= EXIT_BUDGET_S:
            break
        again = interrupt(klass, f"{name}-again-{attempt}", jobs, signals, group=group, program=program)
        assert again["code"] == 130, again["output"]
        seconds.append(again["exit_seconds"])
    assert min(seconds) <= EXIT_BUDGET_S, f"{[round(s, 2) for s in seconds]} s:\n{stopped['output']}"


@pytest.mark.slow
def test_the_stop_landed_mid_run(stopped):
    assert stopped["in_flight"], "no learner process was running when the signal was sent"
    assert 2 <= len(stopped["recorded"]) < CLASS_SIZE, stopped["recorded"]


@pytest.mark.slow
def test_says_how_many_are_done_and_how_to_resume(stopped, klass):
    said = " ".join(stopped["output"].split())
    assert f"Stopped: {len(stopped['recorded'])} of {CLASS_SIZE} submission(s) graded" in said, said[-800:]
    lines = stopped["output"].splitlines()
    (at,) = [i for i, line in enumerate(lines) if "To resume, run" in line]
    program = stopped["program"] or [sys.executable, "-m", "grader.cli"]
    assert shlex.split(lines[at + 1]) == grade_command(program, klass["class"], stopped["out"], stopped["jobs"])


@pytest.mark.slow
def test_no_learner_process_is_left(stopped):
    assert stopped["left"] == {}, stopped["left"]


@pytest.mark.slow
def test_only_whole_submissions_are_recorded(stopped, klass):
    """What the stopped run recorded is, student by student, what the uninterrupted run recorded."""
    for student in stopped["recorded"]:
        assert stopped["results"][student] == klass["results"][student], student


@pytest.mark.slow
def test_resuming_gives_the_grades_of_an_uninterrupted_run(stopped, klass):
    rerun = stopped["rerun"]
    if rerun is None:
        pytest.skip(f"resuming is run after the {' and '.join(RESUMED)} stops; this one's command is checked above")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert (stopped["out"] / "grades.csv").read_bytes() == klass["grades"]
    runs = query(stopped["db"], "SELECT id, finished_at FROM runs")
    assert len(runs) == 1 and runs[0][1] is not None, f"the rerun did not resume the stopped run: {runs}"


@pytest.mark.slow
def test_a_second_sigint_exits_at_once(klass):
    for attempt in range(3):  # the first stop's clean-up takes a fraction of a second: the second must land in it
        facts = interrupt(klass, f"twice-{attempt}", 2, (signal.SIGINT, signal.SIGINT))
        if "To resume" not in facts["output"]:
            break
    assert facts["code"] == 130, facts["output"]
    assert facts["exit_seconds"] <= 1.5, f"{facts['exit_seconds']:.2f} s"
    assert "interrupted again: quitting at once" in facts["output"]
    assert "To resume" not in facts["output"], "the first stop's clean-up ran to its end"
    assert facts["left"] == {}, facts["left"]
    for student in facts["recorded"]:
        assert facts["results"][student] == klass["results"][student], student


@pytest.mark.slow
def test_progress_lines_in_a_log(klass):
    """stdout is a pipe: a line per submission for a class of six, the last one 6 of 6."""
    counts = [int(n) for n in re.findall(rf"^graded (\d+) of {CLASS_SIZE} \(", klass["output"], re.M)]
    assert counts == list(range(1, CLASS_SIZE + 1)), klass["output"]


# --- the pieces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "step"), [(0, 1), (1, 1), (9, 1), (10, 1), (11, 2), (45, 5), (100, 10), (5000, 10)],
    ids=["none", "one", "nine", "ten", "eleven", "45", "100", "5000"],
)
def test_log_step(total, step):
    assert log_step(total) == step


def test_progress_prints_a_line_per_step_and_at_the_end():
    text = io.StringIO()
    with grading_progress(Console(file=text, force_terminal=False, width=200)) as progress:
        progress.start(23)
        for i in range(23):
            progress.graded(f"s{i:02d}")
    lines = text.getvalue().splitlines()
    assert lines[0] == "grading 23 submission(s)"
    assert [int(re.match(r"graded (\d+) of 23 ", line).group(1)) for line in lines[1:]] == [3, 6, 9, 12, 15, 18,
                                                                                          21, 23]
    assert lines[-1].endswith("last: s22")


def test_progress_on_a_terminal_is_the_live_bar_not_lines():
    text = io.StringIO()
    with grading_progress(Console(file=text, force_terminal=True, width=120)) as progress:
        progress.start(3)
        for name in ("a", "b", "c"):
            progress.graded(name)
    assert "graded 1 of 3" not in text.getvalue()
    assert "3/3" in text.getvalue()  # the bar's count, drawn before it is taken away


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["grade", "class", "--jobs", "2"], "attnkit grade class --jobs 2"),
        (["grade", "my class", "--out", "it's"], "attnkit grade 'my class' --out 'it'\"'\"'s'"),
        (["grade", "$(rm -rf x)"], "attnkit grade '$(rm -rf x)'"),
    ],
    ids=["plain", "spaces-and-quote", "shell-syntax"],
)
def test_resume_command_is_shell_quoted(args, line):
    assert resume_command(["attnkit"], args) == line
    assert shlex.split(line) == ["attnkit", *args]


def slow_square(x: int) -> int:
    time.sleep(0.3)
    return x * x


def test_local_executor_stops_handing_out_work():
    stop = threading.Event()
    started: list[int] = []

    def work(x: int) -> int:
        started.append(x)
        return slow_square(x)

    got = []
    began = time.monotonic()
    for item, result in LocalExecutor(2).map_unordered(work, range(20), stop):
        got.append((item, result))
        stop.set()
    assert time.monotonic() - began < 2.0  # 20 items would take 3 s on two threads
    assert len(got) == 1 and got[0][1] == got[0][0] ** 2
    assert len(started) <= 4, f"{len(started)} items were started after the stop: {started}"


def test_local_executor_without_stop_yields_everything():
    got = dict(LocalExecutor(3).map_unordered(slow_square, range(7), threading.Event()))
    assert got == {x: x * x for x in range(7)}


def test_keyboard_interrupt_in_the_executor_sets_stop():
    stop = threading.Event()
    timer = threading.Timer(0.2, signal.raise_signal, (signal.SIGINT,))  # the default handler: KeyboardInterrupt
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            for _ in LocalExecutor(1).map_unordered(slow_square, range(50), stop):
                pass
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert stop.is_set()


@pytest.mark.slow
def test_template_stop_wakes_a_thread_blocked_on_a_child():
    with Template(warm_meta=False) as template:
        child = template.spawn(Limits())
        woke: dict = {}

        def read() -> None:
            began = time.monotonic()
            try:
                child.receive(60.0)  # the child waits for a request: this blocks until the stop
            except ChildGone as exc:
                woke["reason"] = exc.reason
            woke["seconds"] = time.monotonic() - began

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.3)
        template.stop()
        reader.join(timeout=5)
        assert not reader.is_alive() and woke["seconds"] < 2.0, woke
        assert "ended" in woke["reason"]
        deadline = time.monotonic() + 2
        while alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(child.pid), "the child is still running"
        with pytest.raises(RuntimeError, match="stopped"):
            template.spawn(Limits())
        child.close()


def stop_after(n: int, stop: threading.Event):
    """An ``on_graded`` that sets ``stop`` once ``n`` outcomes are recorded."""
    seen: list[str] = []

    def on_graded(outcome) -> None:
        seen.append(outcome.submission.student)
        if len(seen) == n:
            stop.set()

    return on_graded


@pytest.mark.slow
def test_grade_class_from_python_stops_on_its_event_and_resumes(klass, tmp_path):
    stop = threading.Event()
    options = GradeOptions(seed=int(SEED), executor=LocalExecutor(2), stop=stop, on_graded=stop_after(2, stop))
    out = tmp_path / "out"
    with pytest.raises(GradingStopped) as stopped:
        grade_class([str(klass["class"])], out, options)
    db = out / "gradebook.sqlite"
    assert stopped.value.done == len(recorded(db)) == 2 and stopped.value.total == CLASS_SIZE
    assert query(db, "SELECT finished_at FROM runs") == [(None,)]
    run = grade_class([str(klass["class"])], out, GradeOptions(seed=int(SEED), executor=LocalExecutor(2)))
    assert len(run.reused) == 2 and len(run.outcomes) == CLASS_SIZE
    for student in recorded(db):
        assert results_of(db, student) == klass["results"][student], student
