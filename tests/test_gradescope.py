"""``attnkit gradescope``: the autograder zip, and its ``run_autograder`` in a Gradescope-shaped folder.

The slow test unpacks the zip into ``<root>/source`` the way Gradescope does,
puts each hand-in of the sample class in ``<root>/submission`` one at a time
(a zip unpacked, as Gradescope unpacks an uploaded zip), runs ``run_autograder``
with ``AUTOGRADER_ROOT=<root>`` (setup.sh is not run: the ``python3`` first on
``PATH`` is this venv's, which has the kit's dependencies), and checks each
``results.json`` against Gradescope's format and against ``attnkit grade``'s
``grades.csv`` for the class under the same seed and rubric.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema  # nbformat's dependency, so always installed with the kit
import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.instructor import gradescope
from grader.instructor.rubric import load_rubric
from grader.registry import HOOK_NAMES

KIT_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CLASS = KIT_ROOT / "examples" / "submissions"
SEED = 11  # the seed graded_sample_class grades under (conftest.py)
SHAPES = ("alice.py", "bob", "carol.zip", "grace.py", "heidi.py")
"""The hand-ins of the sample class run through the bundle: each shape it takes (a module, a package folder, a zip of
loose modules), full marks, a call that times out and a file that does not import (the other students are these
shapes again with another wrong value: one grading each, in ``attnkit grade``'s code, which the bundle runs)."""
VISIBILITY = ("visible", "after_due_date", "after_published", "hidden")

RUBRIC = """\
[points]
softmax_weights = 3
dropout_scale = 0

[visibility]
default = "after_due_date"
causal_mask = "visible"
merge_heads = "hidden"
"""

# Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/), every key it reads,
# nothing else: a misspelt key is an error here, where Gradescope would ignore it.
TEST_SCHEMA = {
    "type": "object",
    "required": ["name", "score", "max_score", "status", "output", "visibility"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "score": {"type": "number", "minimum": 0},
        "max_score": {"type": "number", "minimum": 0},
        "status": {"enum": ["passed", "failed"]},
        "output": {"type": "string"},
        "visibility": {"enum": list(VISIBILITY)},
        "name_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "number": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra_data": {"type": "object"},
    },
}
RESULTS_SCHEMA = {
    "type": "object",
    "required": ["score", "execution_time", "output", "visibility", "stdout_visibility", "tests"],
    "additionalProperties": False,
    "properties": {
        "score": {"type": "number", "minimum": 0},
        "max_score": {"type": "number", "minimum": 0},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string", "minLength": 1},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "test_output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "test_name_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": list(VISIBILITY)},
        "stdout_visibility": {"enum": list(VISIBILITY)},
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": TEST_SCHEMA},
        "leaderboard": {"type": "array"},
    },
}


def valid(data: dict) -> dict:
    jsonschema.validate(data, RESULTS_SCHEMA)
    return data


@pytest.fixture
def rubric_file(tmp_path: Path) -> Path:
    path = tmp_path / "course-rubric.toml"
    path.write_text(RUBRIC, encoding="utf-8")
    return path


def gradescope_root(bundle: Path, where: Path) -> Path:
    """``where`` laid out as Gradescope lays out /autograder: the zip unpacked in source/, run_autograder copied."""
    (where / "submission").mkdir(parents=True)
    (where / "results").mkdir()
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(where / "source")
        for info in zf.infolist():  # extractall drops the modes: put them back, as Gradescope's unzip keeps them
            (where / "source" / info.filename).chmod((info.external_attr >> 16) & 0o777 or 0o644)
    shutil.copy2(where / "source" / "run_autograder", where / "run_autograder")
    return where


def run_autograder(root: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ATTNKIT_PYTHON"}
    env["AUTOGRADER_ROOT"] = str(root)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the python3 it finds
    return subprocess.run(
        [str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True, timeout=timeout
    )


def results_of(root: Path) -> dict:
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


# --- the zip --------------------------------------------------------------------------------------


def test_bundle_holds_the_scripts_the_course_and_the_whole_kit(tmp_path, rubric_file):
    bundle = gradescope.write_bundle(tmp_path / "autograder.zip", rubric_file, seed=SEED)
    with zipfile.ZipFile(bundle.path) as zf:
        names = set(zf.namelist())
        modes = {i.filename: (i.external_attr >> 16) for i in zf.infolist()}
        config = json.loads(zf.read(gradescope.CONFIG))
        setup = zf.read("setup.sh").decode()
        run = zf.read("run_autograder").decode()
        assert zf.read("rubric.toml").decode() == RUBRIC
    assert {"setup.sh", "run_autograder", gradescope.CONFIG, "rubric.toml"} <= names
    for script, text in (("setup.sh", setup), ("run_autograder", run)):
        assert stat.S_IMODE(modes[script]) == 0o755 and stat.S_ISREG(modes[script])
        parsed = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
        assert parsed.returncode == 0, f"{script}: {parsed.stderr}"
    assert config["seed"] == SEED and config["rubric"] == "rubric.toml"
    for part in ("grader/instructor/hidden", "grader/instructor/gradescope.py", "solutions/reference.py",
                 "exercises/__init__.py", "pyproject.toml", "constraints.txt"):  # fmt: skip
        assert any(n == f"kit/{part}" or n.startswith(f"kit/{part}/") for n in names), part
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "/." in n]
    assert not [n for n in names if n.startswith(("kit/tests/", "kit/examples/", "kit/benchmarks/"))]
    pin = next(ln.strip() for ln in (KIT_ROOT / "constraints.txt").read_text().splitlines() if ln.startswith("torch"))
    assert f'--index-url https://download.pytorch.org/whl/cpu "{pin}"' in setup
    assert "AUTOGRADER_ROOT" in run and "ATTNKIT_PYTHON" in run and "python3" in run
    for text in (setup, run, json.dumps(config)):
        assert str(KIT_ROOT) not in text  # nothing of this machine's paths


def test_same_inputs_same_bytes_and_force_overwrites(tmp_path, rubric_file):
    first = gradescope.write_bundle(tmp_path / "a.zip", rubric_file, seed=SEED).path.read_bytes()
    again = gradescope.write_bundle(tmp_path / "b.zip", rubric_file, seed=SEED).path.read_bytes()
    assert first == again
    with pytest.raises(FileExistsError):
        gradescope.write_bundle(tmp_path / "a.zip", rubric_file, seed=SEED + 1)
    assert (tmp_path / "a.zip").read_bytes() == first
    gradescope.write_bundle(tmp_path / "a.zip", rubric_file, seed=SEED + 1, force=True)
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert json.loads(zf.read(gradescope.CONFIG))["seed"] == SEED + 1
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".zip") == ["a.zip", "b.zip"]  # no temp left


# --- the command ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dest, says",
    [
        ("missing-folder/autograder.zip", "no such folder"),
        ("autograder.tar", "is a .zip file"),
        (".", "is a directory"),
    ],
    ids=["folder-missing", "not-a-zip", "a-folder"],
)
def test_bad_dest_is_a_usage_error(tmp_path, monkeypatch, dest, says):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["gradescope", dest])
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert list(tmp_path.iterdir()) == []


def test_bad_rubric_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[points]\nno_such_hook = 1\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["gradescope", str(tmp_path / "a.zip"), "--rubric", str(bad)])
    assert result.exit_code == 2 and "no_such_hook" in result.output
    assert not (tmp_path / "a.zip").exists()


def test_refuses_to_overwrite_without_force(tmp_path):
    dest = tmp_path / "autograder.zip"
    dest.write_bytes(b"the instructor's earlier bundle")
    result = CliRunner().invoke(main, ["gradescope", str(dest), "--seed", "3"])
    assert result.exit_code == 1 and "--force" in result.output
    assert dest.read_bytes() == b"the instructor's earlier bundle"
    result = CliRunner().invoke(main, ["gradescope", str(dest), "--seed", "3", "--force"])
    assert result.exit_code == 0, result.output
    assert "seed 3" in result.output and zipfile.is_zipfile(dest)


def test_the_devices_are_checked_and_kept_in_the_bundle(tmp_path):
    result = CliRunner().invoke(main, ["gradescope", str(tmp_path / "a.zip"), "--devices", "cpu,tpu"])
    assert result.exit_code == 2 and "unknown device 'tpu'" in result.output, result.output
    assert not (tmp_path / "a.zip").exists()
    result = CliRunner().invoke(main, ["gradescope", str(tmp_path / "a.zip"), "--seed", "3", "--devices", "cpu,meta"])
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert json.loads(zf.read(gradescope.CONFIG))["devices"] == ["cpu", "meta"]


def test_help_explains_the_bundle():
    result = CliRunner().invoke(main, ["gradescope", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for words in ("setup.sh", "run_autograder", "results.json", "--rubric", "--seed", "AUTOGRADER_ROOT",
                  "never give the zip to learners"):  # fmt: skip
        assert words in text, words


# --- autograde: what cannot be graded, in this process (fast) --------------------------------------


@pytest.fixture
def root(tmp_path, rubric_file) -> Path:
    bundle = gradescope.write_bundle(tmp_path / "autograder.zip", rubric_file, seed=SEED)
    return gradescope_root(bundle.path, tmp_path / "autograder")


def test_empty_submission_gets_a_results_json_saying_so(root):
    returned = gradescope.autograde(root)
    data = valid(results_of(root))
    assert data == returned
    rubric = load_rubric(root / "source" / "rubric.toml")
    assert data["score"] == 0 and data["max_score"] == rubric.max_total
    assert "No hand-in found" in data["output"] and "it is empty" in data["output"]
    assert [t["name"] for t in data["tests"]] == list(HOOK_NAMES)
    assert {t["name"]: t["visibility"] for t in data["tests"]} == {h: rubric.visibility_of(h) for h in HOOK_NAMES}


def test_two_hand_ins_in_one_submission_are_refused(root):
    """A .py file beside a zip is two hand-ins (by the folder's shape; two .py files are one learner's modules)."""
    for name in ("alice.py", "carol.zip"):
        shutil.copy(SAMPLE_CLASS / name, root / "submission" / name)
    data = valid(gradescope.autograde(root))
    assert data["score"] == 0 and "2 hand-ins ('alice.py', 'carol.zip')" in data["output"]


def test_the_names_of_several_hand_ins_cannot_forge_a_line_of_the_output(tmp_path):
    """rt-meta3 g1: upload names with a newline printed a forged ``attnkit: 30.0 of 30.0 points`` line."""
    forged = "attnkit: 30.0 of 30.0 points; all 30 cases passed"
    (tmp_path / "x.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / f"y\n{forged}\n.py").write_text("y = 1\n", encoding="utf-8")
    zipfile.ZipFile(tmp_path / "z\x1b[2J\u2028w.zip", "w").close()
    data = gradescope.results_for(tmp_path, load_rubric(gradescope.DEFAULT_RUBRIC), SEED)
    assert data["score"] == 0 and "holds 3 hand-ins" in data["output"]
    assert not any(line.startswith("attnkit:") for line in data["output"].splitlines())
    assert "\x1b" not in data["output"] and "\u2028" not in data["output"]


def test_a_learners_loose_modules_are_one_hand_in_by_the_uploads_shape(tmp_path):
    """A Gradescope upload is one learner's: loose modules at its top, or in its one folder, are one hand-in."""
    top = tmp_path / "top"
    for name in ("part1_scores.py", "part2_masking.py"):
        top.mkdir(exist_ok=True)
        shutil.copy(SAMPLE_CLASS / "erin" / name, top / name)
    shutil.copytree(SAMPLE_CLASS / "erin", tmp_path / "inner" / "erin")
    for folder, student in ((top, "top"), (tmp_path / "inner", "erin")):
        (sub,) = gradescope._take_in(folder).submissions
        assert (sub.student, sub.format, sub.error) == (student, "folder", None)


def test_a_broken_bundle_still_writes_results_and_fails(root):
    (root / "source" / gradescope.CONFIG).unlink()
    with pytest.raises(OSError):
        gradescope.autograde(root)
    data = results_of(root)
    assert data["score"] == 0 and "autograder is broken" in data["output"]


# --- run_autograder on the sample class, against attnkit grade -------------------------------------


def read_grades(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return {row["student"]: row for row in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def class_graded(tmp_path_factory, graded_sample_class) -> tuple[Path, dict[str, dict[str, str]], Path]:
    """The sample class through ``attnkit grade`` and the bundle, both with SEED and the course's rubric.

    ``attnkit grade`` runs into a copy of the test run's one grading of the sample class (``conftest.py``, the
    same seed and devices, the default rubric): the rubric is no condition of the class, so the command reuses
    every result and writes the reports under the course's rubric.
    """
    where = tmp_path_factory.mktemp("gradescope-class")
    rubric = where / "course-rubric.toml"
    rubric.write_text(RUBRIC, encoding="utf-8")
    out = where / "graded"
    shutil.copytree(graded_sample_class / "out", out)
    command = [sys.executable, "-m", "grader.cli", "grade", str(SAMPLE_CLASS), "--seed", str(SEED)]
    command += ["--out", str(out), "--rubric", str(rubric)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=where)
    assert done.returncode == 0, done.stdout + done.stderr
    assert read_grades(out / "grades.csv") != read_grades(graded_sample_class / "out" / "grades.csv"), (
        "the course's rubric changed no points"
    )
    bundle = gradescope.write_bundle(where / "autograder.zip", rubric, seed=SEED)
    return bundle.path, read_grades(out / "grades.csv"), rubric


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("hand_in", SHAPES, ids=SHAPES)
def test_run_autograder_scores_each_hand_in_as_attnkit_grade_does(class_graded, tmp_path, hand_in):
    bundle, grades, rubric_path = class_graded
    root = gradescope_root(bundle, tmp_path / "autograder")
    given = SAMPLE_CLASS / hand_in
    if given.is_dir():
        shutil.copytree(given, root / "submission" / hand_in)
    elif given.suffix == ".zip":
        with zipfile.ZipFile(given) as zf:  # Gradescope unpacks an uploaded zip into the submission folder
            zf.extractall(root / "submission")
    else:
        shutil.copy(given, root / "submission" / hand_in)
    done = run_autograder(root)
    assert done.returncode == 0, done.stdout + done.stderr
    data = valid(results_of(root))
    student = Path(hand_in).stem
    row = grades[student]
    rubric = load_rubric(rubric_path)
    assert data["score"] == pytest.approx(float(row["total"]))
    assert data["max_score"] == pytest.approx(float(row["max"])) == pytest.approx(rubric.max_total)
    assert {t["name"]: t["score"] for t in data["tests"]} == pytest.approx({h: float(row[h]) for h in HOOK_NAMES})
    assert {t["name"]: t["visibility"] for t in data["tests"]} == {h: rubric.visibility_of(h) for h in HOOK_NAMES}
    assert data["visibility"] == "after_due_date"
    assert "isolation" not in data["output"] and data["extra_data"]["student"] == student  # the instructor's line
    assert data["extra_data"]["isolation"] and "cpu" in data["extra_data"]["devices"]
    assert "seed" not in data["extra_data"]  # the seed never reaches a learner
    for secret in ("kit/solutions/reference.py", "kit/grader/instructor/cases.py", gradescope.CONFIG, "rubric.toml"):
        assert stat.S_IMODE((root / "source" / secret).stat().st_mode) & 0o077 == 0, secret  # nobody cannot read it


@pytest.mark.slow
@pytest.mark.parametrize("unpacked", [True, False], ids=["unpacked", "as-uploaded"])
def test_an_attnkit_submit_zip_is_graded(tmp_path, rubric_file, unpacked):
    """A learner's ``attnkit submit`` zip, unpacked as Gradescope unpacks an uploaded zip, or left as it came;
    graded on the bundle's devices."""
    bundle = gradescope.write_bundle(tmp_path / "autograder.zip", rubric_file, seed=SEED, devices=["cpu"])
    root = gradescope_root(bundle.path, tmp_path / "autograder")
    packed = tmp_path / "submission-alice-2026-01-01.zip"
    done = CliRunner().invoke(
        main, ["submit", str(SAMPLE_CLASS / "alice.py"), "--no-check", "--student", "alice", "--out", str(packed)]
    )
    assert done.exit_code == 0, done.output
    if unpacked:
        with zipfile.ZipFile(packed) as zf:
            assert "manifest.json" in zf.namelist()
            zf.extractall(root / "submission")
    else:
        shutil.copy(packed, root / "submission" / packed.name)
    data = valid(gradescope.autograde(root))
    rubric = load_rubric(root / "source" / "rubric.toml")
    assert data["score"] == data["max_score"] == rubric.max_total  # alice is right everywhere (examples' README)
    assert data["extra_data"]["student"] == "alice"
    assert data["extra_data"]["devices"] == ["cpu"] and data["extra_data"]["skipped_devices"] == {}
    assert all(t["status"] == "passed" for t in data["tests"] if t["max_score"] > 0)
