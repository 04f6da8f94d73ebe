"""``attnkit grade``: the files it writes, what they say, reuse and --force, and resuming a killed run.

Submissions are Alice's correct solution, or it with one part replaced by a
snippet from ``tests/submissions/`` (see its README), in each format the
command takes: a ``.py`` file, a folder and a ``.zip``.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from learner_code import alice_with, other_groups_answers

from grader.cli import main
from grader.registry import HOOK_NAMES

KIT_ROOT = Path(__file__).resolve().parents[1]
SEED = "7"
HAS_CUDA = torch.cuda.is_available()
STUDENTS = ("ada", "bea", "cal")
MISTAKES = {"bea": "causal_mask", "cal": "softmax_weights"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; Linux only")





def flat(text: str) -> str:
    """Console output with rich's line wrapping undone."""
    return " ".join(text.split())


def read_csv(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def row_of(rows: list[list[str]], student: str) -> dict[str, float]:
    """A student's points by column (the text ``status`` column left out)."""
    header = rows[0]
    (row,) = [r for r in rows[1:] if r[0] == student]
    return {name: float(value) for name, value in zip(header[1:], row[1:]) if name != "status"}


def query(db: Path, sql: str, *params) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def run_seconds(db: Path, run_id: int, student: str) -> list[float]:
    return [s for (s,) in query(db, "SELECT seconds FROM results WHERE run_id = ? AND student = ? ORDER BY rowid",
                                run_id, student)]


# --- one graded class in three formats, shared by the module ------------------------------------------


@pytest.fixture(scope="module")
def three_formats(tmp_path_factory) -> list[str]:
    """ada.py (correct), bea/ (a folder; wrong causal_mask), cal.zip (softmax ignores dim)."""
    root = tmp_path_factory.mktemp("hand-ins")
    others = other_groups_answers()  # every group but the chapter's, so that full marks are every group's
    (root / "ada.py").write_text(alice_with(None) + others, encoding="utf-8")
    (root / "bea").mkdir()
    (root / "bea" / "answers.py").write_text(alice_with("wrong_causal_mask") + others, encoding="utf-8")
    with zipfile.ZipFile(root / "cal.zip", "w") as zf:
        zf.writestr("cal/answers.py", alice_with("softmax_ignores_dim") + others)
    return [str(root / "ada.py"), str(root / "bea"), str(root / "cal.zip")]


def invoke(args: list[str]):
    return CliRunner().invoke(main, ["grade", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, three_formats):
    """``attnkit grade ada.py bea/ cal.zip --out D --seed 7``, run once in this process."""
    out = tmp_path_factory.mktemp("graded") / "D"
    result = invoke([*three_formats, "--out", str(out), "--seed", SEED, "--timeout", "5"])
    assert result.exit_code == 0, result.output
    return out, result.output


@pytest.mark.slow
def test_grade_writes_the_class_files(graded):
    out, _ = graded
    for name in ("gradebook.sqlite", "grades.csv", "junit.xml"):
        assert (out / name).is_file(), f"{name} is missing"
    formats = dict(query(out / "gradebook.sqlite", "SELECT student, format FROM submissions"))
    assert formats == {"ada": "py", "bea": "folder", "cal": "zip"}
    junit = (out / "junit.xml").read_text(encoding="utf-8")
    assert junit.startswith("<?xml") and "<testsuite" in junit


@pytest.mark.parametrize("student", STUDENTS, ids=STUDENTS)
def test_grade_writes_each_students_feedback(graded, student):
    folder = graded[0] / student
    for name in ("results.json", "feedback.md", "feedback.html"):
        assert (folder / name).is_file(), f"{student}/{name} is missing"
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    assert {"score", "max_score", "tests"} <= set(results)
    assert results["tests"], "results.json lists no tests"
    for test in results["tests"]:
        assert {"name", "score", "max_score", "status", "output", "visibility"} <= set(test), test
    assert "<html" in (folder / "feedback.html").read_text(encoding="utf-8").lower()


def test_grades_csv_header_is_student_status_hooks_total_max(graded):
    rows = read_csv(graded[0] / "grades.csv")
    assert rows[0] == ["student", "status", *HOOK_NAMES, "total", "max"]
    assert sorted(r[0] for r in rows[1:]) == sorted(STUDENTS)


def test_correct_submission_gets_full_marks(graded, rubric):
    row = row_of(read_csv(graded[0] / "grades.csv"), "ada")
    assert {hook: row[hook] for hook in HOOK_NAMES} == {hook: rubric.points[hook] for hook in HOOK_NAMES}
    assert row["total"] == row["max"] == rubric.max_total


@pytest.mark.parametrize(("student", "hook"), MISTAKES.items(), ids=[f"{s}-{h}" for s, h in MISTAKES.items()])
def test_one_mistake_loses_points_only_in_its_column(graded, rubric, student, hook):
    row = row_of(read_csv(graded[0] / "grades.csv"), student)
    assert row[hook] < rubric.points[hook], f"{student} lost nothing in {hook}"
    assert {h: row[h] for h in HOOK_NAMES if h != hook} == {h: rubric.points[h] for h in HOOK_NAMES if h != hook}
    assert row["total"] == pytest.approx(rubric.max_total - (rubric.points[hook] - row[hook]))


@pytest.mark.slow
def test_a_package_with_one_broken_module_loses_only_that_modules_hooks(tmp_path, rubric):
    """dee/: Alice's answers in one module, merge_heads in another with a SyntaxError (the __init__ imports both);
    given alone, a package is one with ``--one`` (its ``__init__.py`` could be a learner's file in a class folder)."""
    package = tmp_path / "hand-ins" / "dee"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .answers import *\nfrom .heads import *\n", encoding="utf-8")
    answers = re.sub(r"\bmerge_heads\b", "_alice_merge_heads", alice_with(None))  # her modules keep her own
    (package / "answers.py").write_text(answers, encoding="utf-8")
    (package / "heads.py").write_text("import torch\n\n\ndef merge_heads(x)\n    return x\n", encoding="utf-8")
    out = tmp_path / "D"
    result = invoke([str(package), "--one", "--out", str(out), "--seed", SEED, "--timeout", "5"])
    assert result.exit_code == 0, result.output
    row = row_of(read_csv(out / "grades.csv"), "dee")
    assert row["merge_heads"] == 0
    assert {h: row[h] for h in HOOK_NAMES if h != "merge_heads"} == {
        h: rubric.points[h] for h in HOOK_NAMES if h != "merge_heads"
    }
    sql = "SELECT DISTINCT message FROM results WHERE hook = 'merge_heads' AND status = 'failed'"
    messages = {m for (m,) in query(out / "gradebook.sqlite", sql)}
    assert messages == {"exercise merge_heads: could not load dee/heads.py:4: SyntaxError: expected ':'"}, messages


@pytest.mark.skipif(HAS_CUDA, reason="a GPU is present here: cuda ran instead of being skipped")
@pytest.mark.parametrize("where", ["console", "class.md", "gradebook", "ada/feedback.md", "ada/results.json"])
def test_the_instructors_reports_say_cuda_not_available_and_a_learners_do_not(graded, where):
    out, output = graded
    if where == "console":
        text = flat(output)
    elif where == "gradebook":
        rows = query(out / "gradebook.sqlite", "SELECT DISTINCT status, message FROM results WHERE device = 'cuda'")
        assert rows == [("skipped", "cuda: not available")]
        return
    else:
        text = (out / where).read_text(encoding="utf-8")
    assert ("cuda: not available" in text) == (not where.startswith("ada/"))


@pytest.mark.skipif(HAS_CUDA, reason="a GPU is present here, so --require cuda is satisfied")
def test_require_cuda_without_a_gpu_is_an_error(three_formats, tmp_path):
    out = tmp_path / "D"
    result = invoke([three_formats[0], "--out", str(out), "--require", "cuda"])
    assert result.exit_code != 0
    assert "cuda: not available" in result.output and "--require" in result.output, result.output
    assert not (out / "grades.csv").exists()


@pytest.mark.slow  # a whole `attnkit grade` in a subprocess: 2 s idle, 6 to 8 s while the other worker grades
def test_second_run_reuses_the_gradebook(graded, tmp_path, three_formats):
    out = tmp_path / "D"
    shutil.copytree(graded[0], out)
    before = (out / "grades.csv").read_bytes()
    result = invoke([*three_formats, "--out", str(out), "--seed", SEED])
    assert result.exit_code == 0, result.output
    assert "(0 in this run, 3 already graded under the same conditions, not regraded (--force regrades));" in flat(
        result.output
    )  # and no "0 earlier" beside them
    assert (out / "grades.csv").read_bytes() == before
    (first,), (second,) = query(out / "gradebook.sqlite", "SELECT id FROM runs ORDER BY id")
    assert run_seconds(out / "gradebook.sqlite", second, "bea") == run_seconds(out / "gradebook.sqlite", first, "bea")


def _files_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and its modification time (untouched, not rewritten alike)."""
    files = (p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def _rows_of(db: Path, student: str) -> list[tuple]:
    """A student's every recorded result and hand-in, run by run (times left in: a regrade would change them)."""
    return query(db, "SELECT * FROM results WHERE student = ? ORDER BY rowid", student) + query(
        db, "SELECT * FROM submissions WHERE student = ? ORDER BY run_id", student
    )


@pytest.mark.slow
@pytest.mark.parametrize("from_paths", [False, True], ids=["from-the-gradebook", "from-paths"])
def test_only_regrades_one_student_and_leaves_every_other_byte_identical(graded, tmp_path, three_formats, from_paths):
    """Issue 28: ``--only bea`` regrades bea (a new run, new timings) from the hand-in the gradebook keeps, or from
    PATHS; ada's and cal's folders are not touched, their gradebook rows are byte-identical, and so is grades.csv
    (bea's regrade earns what her first grading did)."""
    out = tmp_path / "D"
    shutil.copytree(graded[0], out)
    db = out / "gradebook.sqlite"
    others = {s: (_files_of(out / s), _rows_of(db, s)) for s in ("ada", "cal")}
    before_csv = (out / "grades.csv").read_bytes()
    args = [*three_formats] if from_paths else []
    result = invoke([*args, "--out", str(out), "--only", "bea", "--timeout", "5"])
    assert result.exit_code == 0, result.output
    (first,), (second,) = query(db, "SELECT id FROM runs ORDER BY id")
    again = run_seconds(db, second, "bea")
    assert again and again != run_seconds(db, first, "bea"), "bea was not regraded"
    assert query(db, "SELECT DISTINCT student FROM submissions WHERE run_id = ?", second) == [("bea",)]
    assert {s: (_files_of(out / s), _rows_of(db, s)) for s in ("ada", "cal")} == others
    assert (out / "grades.csv").read_bytes() == before_csv


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--only", "zed"], "--only zed: no such student in"),
        (["--only", "bea", "--force"], "give one of them"),
    ],
    ids=["unknown-student", "with-force"],
)
def test_only_refuses_an_unknown_student_or_force(graded, tmp_path, args, said):
    out = tmp_path / "D"
    shutil.copytree(graded[0], out)
    db = out / "gradebook.sqlite"

    def state() -> dict[str, object]:  # the gradebook by its rows: opening it may touch its header
        files: dict[str, object] = {name: kept for name, kept in _files_of(out).items() if not name.startswith(db.name)}
        return {**files, "runs": query(db, "SELECT * FROM runs"), **{s: _rows_of(db, s) for s in STUDENTS}}

    before = state()
    result = invoke(["--out", str(out), *args])
    assert result.exit_code == 2 and said in flat(result.output), result.output
    after = state()
    assert [key for key in before.keys() | after.keys() if before.get(key) != after.get(key)] == []


def test_only_from_a_hand_in_named_by_attnkit_submit_says_how_to_name_it(graded, three_formats, tmp_path):
    """bea's new zip as `attnkit submit` names it claims an id the class holds: not hers (a learner's name never takes
    a held id), so --only bea finds no bea in PATHS and says how to name the hand-in; nothing changes."""
    out = tmp_path / "D"
    shutil.copytree(graded[0], out)
    submitted = tmp_path / "submission-bea-2026-12-07-2.zip"
    with zipfile.ZipFile(submitted, "w") as zf:
        zf.write(Path(three_formats[1]) / "answers.py", "exercises/answers.py")
    before = ((out / "grades.csv").read_bytes(), query(out / "gradebook.sqlite", "SELECT * FROM runs"))
    result = invoke([str(submitted), "--out", str(out), "--only", "bea"])
    assert result.exit_code == 2, result.output
    assert "--only bea: no such student in PATHS" in flat(result.output)
    assert "keeps a student's id when collected under the file name of the hand-in graded (bea's as 'bea')" in flat(
        result.output
    )
    assert ((out / "grades.csv").read_bytes(), query(out / "gradebook.sqlite", "SELECT * FROM runs")) == before


def test_only_without_paths_needs_a_gradebook(tmp_path):
    result = invoke(["--out", str(tmp_path / "none"), "--only", "bea"])
    assert result.exit_code == 2 and "there is none" in flat(result.output), result.output
    assert not (tmp_path / "none").exists()


@pytest.mark.slow
def test_force_regrades(graded, tmp_path, three_formats):
    out = tmp_path / "D"
    shutil.copytree(graded[0], out)
    result = invoke([*three_formats, "--out", str(out), "--seed", SEED, "--force"])
    assert result.exit_code == 0, result.output
    assert "not regraded" not in flat(result.output)
    (first,), (second,) = query(out / "gradebook.sqlite", "SELECT id FROM runs ORDER BY id")
    again = run_seconds(out / "gradebook.sqlite", second, "bea")
    assert again and again != run_seconds(out / "gradebook.sqlite", first, "bea"), "the results were copied"
    assert (out / "grades.csv").read_bytes() == (graded[0] / "grades.csv").read_bytes()


@pytest.mark.slow
def test_a_fixed_reference_is_refused_in_the_same_out_and_regrades_with_force(graded, tmp_path, three_formats,
                                                                             monkeypatch):
    """One line of solutions/reference.py changed: a new suite version.  Issue 11 regraded into the same --out;
    since issue 13 an out folder is one class, so this is refused (naming both versions) and --force regrades
    the whole class under the new suite: stale grades never survive silently."""
    import solutions

    out = tmp_path / "D"
    shutil.copytree(graded[0], out)
    source = (KIT_ROOT / "solutions" / "reference.py").read_text(encoding="utf-8")
    assert source.count("d_k = keys.shape[-1]") == 1
    fixed = tmp_path / "fixed" / "reference.py"
    fixed.parent.mkdir()
    fixed.write_text(source.replace("d_k = keys.shape[-1]", "d_k = keys.size(-1)"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("solutions.reference", fixed)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "solutions.reference", module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(solutions, "reference", module)

    before = (out / "grades.csv").read_bytes()
    refused = invoke([*three_formats, "--out", str(out), "--seed", SEED])
    assert refused.exit_code == 1, refused.output
    ((v1,),) = query(out / "gradebook.sqlite", "SELECT suite_version FROM runs")
    assert v1 in flat(refused.output) and "--force" in refused.output and "Nothing was graded" in refused.output
    assert (out / "grades.csv").read_bytes() == before
    result = invoke([*three_formats, "--out", str(out), "--seed", SEED, "--force"])
    assert result.exit_code == 0, result.output
    assert "not regraded" not in flat(result.output)
    (first, v1), (second, v2) = query(out / "gradebook.sqlite", "SELECT id, suite_version FROM runs ORDER BY id")
    assert v2 in flat(refused.output)  # the refusal named the new version too
    assert v1 != v2
    again = run_seconds(out / "gradebook.sqlite", second, "bea")
    assert again and again != run_seconds(out / "gradebook.sqlite", first, "bea"), "the results were copied"
    assert (out / "grades.csv").read_bytes() == (graded[0] / "grades.csv").read_bytes()  # the same values


# --- resume after SIGKILL ------------------------------------------------------------------------------

CLASS = {  # graded in this order with --jobs 1
    "a_ada": None,
    "b_spin": "spins_and_spawns",  # in flight when the grader is killed: spinning, with a `sleep 300` beside it
    "c_sleepy": "sleepy",
    "d_bea": "wrong_causal_mask",
    "e_cal": "softmax_ignores_dim",
    "f_exit": "exit_at_import",
}


def learner_processes(sandbox_tmp: Path) -> dict[int, str]:
    """Live processes whose working directory is under ``sandbox_tmp`` (template, children, their helpers)."""
    found = {}
    prefix = str(sandbox_tmp)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:60].decode(errors="replace")
        except (OSError, IndexError):
            continue
        if cwd.startswith(prefix) and state not in "ZX":
            found[int(entry.name)] = f"{cmd.strip()} (cwd {cwd})"
    return found


def grade_command(class_dir: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "grader.cli", "grade", str(class_dir), "--out", str(out), "--seed", SEED,
            "--jobs", "1", "--timeout", "5"]  # the long chunked case takes ~1 s, two runs side by side


def environment(sandbox_tmp: Path) -> dict[str, str]:
    sandbox_tmp.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "TMPDIR": str(sandbox_tmp), "COLUMNS": "200"}


def recorded(db: Path) -> int:
    try:
        return query(db, "SELECT count(*) FROM submissions")[0][0]
    except sqlite3.Error:  # not created yet
        return 0


@pytest.fixture(scope="module")
def resume(tmp_path_factory):
    """Grade the class three times: killed (SIGKILL) once one submission is recorded, rerun, and uninterrupted."""
    root = tmp_path_factory.mktemp("resume")
    class_dir = root / "class"
    class_dir.mkdir()
    for student, snippet in CLASS.items():
        (class_dir / f"{student}.py").write_text(alice_with(snippet), encoding="utf-8")
    killed_tmp, clean_tmp = root / "tmp-killed", root / "tmp-clean"
    d1, d2 = root / "D1", root / "D2"
    facts: dict = {"d1": d1, "d2": d2}
    # the uninterrupted run goes alongside, in its own TMPDIR
    clean = subprocess.Popen(grade_command(class_dir, d2), cwd=KIT_ROOT, env=environment(clean_tmp),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = subprocess.Popen(grade_command(class_dir, d1), cwd=KIT_ROOT, env=environment(killed_tmp),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while recorded(d1 / "gradebook.sqlite") < 1:
            assert first.poll() is None, "the first run ended before anything could be killed"
            assert time.monotonic() < deadline, "nothing was recorded within 120 s"
            time.sleep(0.05)
        while not any("sleep" in cmd for cmd in learner_processes(killed_tmp).values()):
            # b_spin starts `sleep 300`, then spins in its first call until --timeout 5 stops it
            if time.monotonic() > deadline or recorded(d1 / "gradebook.sqlite") > 1:
                break
            time.sleep(0.02)
        facts["running_at_kill"] = learner_processes(killed_tmp)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        facts["recorded_at_kill"] = recorded(d1 / "gradebook.sqlite")
        rerun = subprocess.run(grade_command(class_dir, d1), cwd=KIT_ROOT, env=environment(killed_tmp),
                               capture_output=True, text=True, timeout=300)
        facts["rerun"] = rerun
        facts["left_after_rerun"] = learner_processes(killed_tmp)
        output, _ = clean.communicate(timeout=300)
        facts["clean"] = (clean.returncode, output)
        yield facts
    finally:
        for proc in (first, clean):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for pid in set(learner_processes(killed_tmp)) | set(learner_processes(clean_tmp)):
            try:  # processes our own grader runs left behind, by pid
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_resumed_run_writes_the_same_grades_as_an_uninterrupted_run(resume):
    assert resume["recorded_at_kill"] < len(CLASS), "the run finished before it was killed"
    assert resume["rerun"].returncode == 0, resume["rerun"].stdout + resume["rerun"].stderr
    code, output = resume["clean"]
    assert code == 0, output
    resumed = (resume["d1"] / "grades.csv").read_bytes()
    assert resumed == (resume["d2"] / "grades.csv").read_bytes()
    assert len(resumed.splitlines()) == 1 + len(CLASS)


@pytest.mark.slow
def test_resumed_run_continues_the_killed_run(resume):
    assert any("sleep" in cmd for cmd in resume["running_at_kill"].values()), (
        f"the kill did not land while b_spin was running: {resume['running_at_kill']}"
    )
    db = resume["d1"] / "gradebook.sqlite"
    assert resume["recorded_at_kill"] >= 1
    said = flat(resume["rerun"].stdout)
    assert f"{resume['recorded_at_kill']} already graded under the same conditions" in said, said[-600:]
    runs = query(db, "SELECT id, finished_at FROM runs")
    assert len(runs) == 1 and runs[0][1] is not None, f"the rerun did not resume the killed run: {runs}"
    assert query(db, "SELECT count(*) FROM submissions")[0][0] == len(CLASS)


@pytest.mark.slow
def test_killed_run_leaves_no_learner_process(resume):
    assert resume["left_after_rerun"] == {}, "processes of the killed grader are still running"
