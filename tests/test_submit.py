"""`attnkit submit`: one zip to hand in, with a manifest, that `attnkit grade` reads like any other.

The main zip is made the way a learner makes it: `python -m grader.cli submit` in a
released kit whose stubs hold the reference (see tests/test_release.py for why the
subprocess gets a ``sitecustomize`` shim).  The other cases call
:func:`grader.submit.submit` in this process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from learner_code import answers_of, reference_source

from grader.check import NOT_STARTED, PASSING
from grader.cli import main
from grader.handin import kit_version, safe_name
from grader.hook_table import GROUPS
from grader.instructor.handin_reading import read_submission
from grader.registry import HOOK_NAMES
from grader.submit import MANIFEST, SubmitError, Validation, submit

NO_CHECKS = Validation(public_checks=False)
"""submit without running the public cases (the tests that are not about them)."""
NO_IMPORT = Validation(trial_import=False)
"""submit without its trial import in a child Python (about 3 s each)."""
PARSE_ONLY = Validation(public_checks=False, trial_import=False)


KIT = Path(__file__).resolve().parent.parent
STUB_MODULES = GROUPS  # one stub module per exercise group
SCORES_HOOKS = ("dot_product_scores", "scaled_dot_product_scores", "softmax_weights", "context_vectors")
MANIFEST_KEYS = {"kit", "kit_version", "created", "student", "student_from", "login", "kind", "files", "checked",
                 "check_note", "checks", "passing", "exercises", "python", "torch"}  # fmt: skip
SEED = 20261129

SITECUSTOMIZE = '''"""Test shim: forget the editable install of our checkout (see tests/test_release.py)."""
import sys

def _ours(obj):
    return "__editable__" in (getattr(obj, "__module__", "") or "")

sys.meta_path[:] = [f for f in sys.meta_path if not _ours(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not _ours(h)]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.path_importer_cache.clear()
'''


def fill_notebook(path: Path, only: tuple[str, ...] = ()) -> None:
    """Append a cell tagged attnkit-solution holding the reference, as a learner who finished might."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    group = nb.metadata.get("attnkit", {}).get("group")
    answers = answers_of(group) if group and not only else reference_source(only)  # a group's own reference, if any
    nb.cells.append(nbformat.v4.new_code_cell(answers, metadata={"tags": ["attnkit-solution"]}))
    nbformat.write(nb, path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_zip(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def assert_manifest_matches(entries: dict[str, bytes]) -> dict:
    manifest = json.loads(entries[MANIFEST])
    assert set(manifest) >= MANIFEST_KEYS, set(manifest) ^ MANIFEST_KEYS
    assert set(manifest["files"]) == set(entries) - {MANIFEST}
    for name, digest in manifest["files"].items():
        assert digest == sha256(entries[name]), name
    created = datetime.fromisoformat(manifest["created"])
    assert created.utcoffset() == timedelta(0)
    assert abs(datetime.now(timezone.utc) - created) < timedelta(minutes=10)
    assert manifest["kit_version"] == kit_version()
    return manifest


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def solved(kit, tmp_path_factory) -> Path:
    """The released kit, the reference pasted below every stub, plus what must never be handed in."""
    dest = tmp_path_factory.mktemp("solved") / "kit"
    shutil.copytree(kit, dest)
    package = dest / "exercises"
    for stub in STUB_MODULES:
        path = package / f"{stub}.py"
        path.write_text(path.read_text() + "\n\n# --- my answers ---\n" + answers_of(stub))
    (package / "helpers").mkdir()
    (package / "helpers" / "__init__.py").write_text("SCALE = 1.0\n")  # the learner's own subpackage: packed
    (package / "test_mine.py").write_text("def test_mine():\n    pass\n")  # the learner's own test: not packed
    (package / "conftest.py").write_text("")
    (package / "__pycache__").mkdir(exist_ok=True)
    (package / "__pycache__" / "scores.cpython-311.pyc").write_bytes(b"\x00junk")
    (package / ".ipynb_checkpoints").mkdir()
    (package / ".ipynb_checkpoints" / "scores-checkpoint.py").write_text("x = 1\n")
    (package / ".secret.py").write_text("TOKEN = 'nope'\n")
    (package / "notes.md").write_text("my notes\n")
    return dest


@pytest.fixture(scope="module")
def handed_in(solved) -> tuple[Path, subprocess.CompletedProcess]:
    """`attnkit submit --student "Zoë Learner"` run by the learner in the solved kit."""
    shim = solved.parent / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNKIT_", "PYTEST_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(solved), str(shim)]), PYTHONDONTWRITEBYTECODE="1", COLUMNS="200")
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "submit", "--student", "Zoë Learner"],
        cwd=solved,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    zips = sorted(solved.glob("submission-*.zip"))
    assert len(zips) == 1, zips
    return zips[0], done


@pytest.fixture(scope="module")
def grading():
    """``grade(path) -> results`` on the cpu suite, as `attnkit grade` would grade that file."""
    from grader.instructor.sandbox import Limits, Template
    from grader.instructor.submission_grading import grade_submission
    from grader.instructor.suite import build_suite

    suite = build_suite(SEED, ("cpu",))
    template = Template()

    def grade(path: Path):
        submission = read_submission(path)
        assert submission.error is None, submission.error
        limits = Limits(call_seconds=5, submission_seconds=60)
        return submission, grade_submission(submission, suite, template, limits).results

    try:
        yield grade
    finally:
        template.close()


# --- the learner's exercises package ---------------------------------------------------------------------


@pytest.mark.slow
def test_submit_packs_the_package_with_a_manifest_and_says_where(handed_in):
    path, done = handed_in
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    assert path.name in (f"submission-Zoe_Learner-{today}.zip", f"submission-Zoe_Learner-{today}-2.zip")
    assert str(path.resolve()) in " ".join(done.stdout.split())  # where it is
    assert "exercises/scores.py" in done.stdout and "manifest.json" in done.stdout  # what it holds
    assert f"{len(HOOK_NAMES)} of {len(HOOK_NAMES)} exercises passing" in done.stdout, done.stdout
    entries = read_zip(path)
    expected = {f"exercises/{m}.py" for m in STUB_MODULES} | {
        "exercises/__init__.py",
        "exercises/_expect.py",
        "exercises/helpers/__init__.py",
    }
    assert set(entries) == expected | {MANIFEST}
    manifest = assert_manifest_matches(entries)
    assert manifest["kind"] == "exercises"
    assert (manifest["student"], manifest["student_from"]) == ("Zoe_Learner", "--student")
    assert "student id 'Zoë Learner' (--student) is written as 'Zoe_Learner'" in " ".join(done.stdout.split())
    assert manifest["checked"] is True
    assert list(manifest["checks"]) == list(HOOK_NAMES)
    for hook, result in manifest["checks"].items():
        assert result["status"] == PASSING and result["passed"] == result["total"] > 0, hook
    assert (manifest["passing"], manifest["exercises"]) == (len(HOOK_NAMES), len(HOOK_NAMES))


@pytest.mark.slow
def test_grade_reads_the_zip_as_the_exercises_package(handed_in):
    path, _ = handed_in
    submission = read_submission(path)
    assert submission.error is None, submission.error
    assert (submission.format, submission.entry) == ("zip", "exercises")
    assert all(rel.startswith("exercises/") for rel in submission.files)
    assert "exercises/scores.py" in submission.files and "exercises/__init__.py" in submission.files


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is tested on Linux")
def test_the_handed_in_zip_grades_with_full_marks(handed_in, grading):
    from grader.instructor.rubric import load_rubric, score
    from grader.instructor.verdict import PASSED

    _, results = grading(handed_in[0])
    assert {r.hook for r in results} == set(HOOK_NAMES)
    assert [f"{r.test_name}: {r.message}" for r in results if r.status != PASSED] == []
    scores = score(results, load_rubric())
    assert all(earned == possible for earned, possible in scores.values()), scores


def test_the_stubs_are_packed_with_not_started_checks(kit, tmp_path):
    packed = submit([kit / "exercises"], tmp_path / "mine.zip", student="ann", cwd=tmp_path, validation=NO_IMPORT)
    assert packed.out == tmp_path / "mine.zip" and packed.kind == "exercises"
    manifest = assert_manifest_matches(read_zip(packed.out))
    assert manifest["checked"] is True and manifest["passing"] == 0
    assert {c["status"] for c in manifest["checks"].values()} == {NOT_STARTED}
    assert all(c["passed"] == 0 < c["total"] for c in manifest["checks"].values())


def test_the_default_name_never_overwrites_an_earlier_hand_in(kit, tmp_path):
    first = submit([kit], student="bo", cwd=tmp_path, validation=PARSE_ONLY)  # the kit folder: its exercises/ package
    second = submit([kit], student="bo", cwd=tmp_path, validation=PARSE_ONLY)
    assert first.out.parent == second.out.parent == tmp_path
    assert first.out.name.startswith("submission-bo-") and second.out.name == first.out.stem + "-2.zip"
    manifest = json.loads(read_zip(second.out)[MANIFEST])
    assert manifest["checked"] is False and manifest["checks"] == {} and "not checked" in manifest["check_note"]


def test_a_py_file_is_packed_and_read_back_as_that_file(tmp_path):
    mine = tmp_path / "mine.py"
    mine.write_text(reference_source(only=SCORES_HOOKS))
    packed = submit([mine], tmp_path / "out" / "hand-in.zip", student="ed", cwd=tmp_path, validation=PARSE_ONLY)
    entries = read_zip(packed.out)
    assert set(entries) == {"mine.py", MANIFEST} and entries["mine.py"] == mine.read_bytes()
    assert assert_manifest_matches(entries)["kind"] == "py"
    submission = read_submission(packed.out)
    assert (submission.error, submission.format, submission.entry) == (None, "zip", "mine.py")


def test_nothing_to_hand_in_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    with pytest.raises(SubmitError, match="no exercises/ folder"):
        submit([], cwd=tmp_path)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["submit"])
    assert result.exit_code == 1
    assert "no exercises/ folder" in result.output and "Traceback" not in result.output
    (tmp_path / "notes.txt").write_text("hi")
    result = runner.invoke(main, ["submit", "notes.txt"])
    assert result.exit_code == 1 and "a notebook (.ipynb) or a .py file" in result.output
    assert not list(tmp_path.glob("*.zip"))


# --- notebooks ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_notebook_is_packed_as_it_is_with_its_checks(kit, tmp_path):
    notebook = tmp_path / "scores.ipynb"
    shutil.copy(kit / "notebooks" / "scores.ipynb", notebook)
    fill_notebook(notebook, only=SCORES_HOOKS)
    packed = submit([notebook], cwd=tmp_path, student="cy", validation=NO_IMPORT)
    entries = read_zip(packed.out)
    assert set(entries) == {"scores.ipynb", MANIFEST}
    assert entries["scores.ipynb"] == notebook.read_bytes()
    manifest = assert_manifest_matches(entries)
    assert manifest["kind"] == "notebook"
    statuses = {hook: c["status"] for hook, c in manifest["checks"].items()}
    assert statuses == {h: PASSING if h in SCORES_HOOKS else NOT_STARTED for h in HOOK_NAMES}
    submission = read_submission(packed.out)
    assert (submission.format, submission.error) == ("ipynb", None)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is tested on Linux")
def test_a_folder_of_notebooks_is_merged_into_one_that_grades_with_full_marks(kit, tmp_path, grading):
    folder = tmp_path / "notebooks"
    shutil.copytree(kit / "notebooks", folder)
    (folder / ".ipynb_checkpoints").mkdir()
    (folder / ".ipynb_checkpoints" / "scores-checkpoint.ipynb").write_text("{}")
    for path in folder.glob("*.ipynb"):
        fill_notebook(path)
    packed = submit([folder], cwd=tmp_path, student="di")
    entries = read_zip(packed.out)
    assert set(entries) == {"notebooks.ipynb", MANIFEST}
    manifest = assert_manifest_matches(entries)
    assert manifest["kind"] == "notebooks"
    assert manifest["merged_from"] == {p.name: sha256(p.read_bytes()) for p in sorted(folder.glob("*.ipynb"))}
    assert manifest["passing"] == len(HOOK_NAMES)
    from grader.instructor.verdict import PASSED

    submission, results = grading(packed.out)
    assert submission.format == "ipynb"
    assert [f"{r.test_name}: {r.message}" for r in results if r.status != PASSED] == []


# --- the student id ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("student", "environ", "expected", "source"),
    [
        ("s1001", {}, "s1001", "--student"),
        (None, {"ATTNKIT_STUDENT": "s1002"}, "s1002", "ATTNKIT_STUDENT"),
        ("s1001", {"ATTNKIT_STUDENT": "s1002"}, "s1001", "--student"),  # the option wins
        (None, {"ATTNKIT_STUDENT": "ana@uni.example"}, "ana_uni.example", "ATTNKIT_STUDENT"),  # an e-mail login
        ("  ", {"ATTNKIT_STUDENT": ""}, None, None),  # blank is none
    ],
    ids=["option", "environment", "option-wins", "sanitised", "blank"],
)
def test_the_student_id_goes_into_the_manifest_and_the_file_name(
    tmp_path, monkeypatch, student, environ, expected, source
):
    mine = tmp_path / "mine.py"
    mine.write_text(reference_source(only=SCORES_HOOKS))
    monkeypatch.delenv("ATTNKIT_STUDENT", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    packed = submit([mine], student=student, cwd=tmp_path, validation=PARSE_ONLY)
    manifest = json.loads(read_zip(packed.out)[MANIFEST])
    assert (manifest["student"], manifest["student_from"]) == (expected, source)
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    stem = expected or safe_name(manifest["login"] or "", "") or safe_name(tmp_path.name)
    assert packed.out.name == f"submission-{stem}-{today}.zip"
    if expected is None:
        assert packed.warnings == [
            "this hand-in carries no student id: pass --student YOUR_ID (or ask for ATTNKIT_STUDENT to be set)"
        ]
    elif expected != (student or environ["ATTNKIT_STUDENT"]):
        assert packed.warnings == [f"student id 'ana@uni.example' (ATTNKIT_STUDENT) is written as '{expected}'"]
    else:
        assert packed.warnings == []
    assert read_submission(packed.out).claimed == expected  # the claim attnkit grade checks its name's id against


def test_an_id_with_nothing_usable_is_refused(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("X = 1\n")
    monkeypatch.delenv("ATTNKIT_STUDENT", raising=False)
    with pytest.raises(SubmitError, match=r"--student '\.\.\.': not an id"):
        submit([tmp_path / "mine.py"], student="...", cwd=tmp_path, validation=NO_CHECKS)


@pytest.mark.slow
def test_submit_on_the_command_line_takes_the_environment_and_warns_without_an_id(tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(reference_source(only=SCORES_HOOKS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNKIT_STUDENT", "s1002")
    result = CliRunner().invoke(main, ["submit", "mine.py", "--no-check", "--out", "a.zip"])
    assert result.exit_code == 0, result.output
    assert json.loads(read_zip(tmp_path / "a.zip")[MANIFEST])["student"] == "s1002"
    assert "warning" not in result.output
    result = CliRunner().invoke(main, ["submit", "mine.py", "--no-check", "--out", "b.zip", "--student", "s1"])
    assert json.loads(read_zip(tmp_path / "b.zip")[MANIFEST])["student"] == "s1"
    monkeypatch.delenv("ATTNKIT_STUDENT")
    result = CliRunner().invoke(main, ["submit", "mine.py", "--no-check", "--out", "c.zip"])
    assert result.exit_code == 0, result.output
    assert "warning: this hand-in carries no student id: pass --student YOUR_ID" in " ".join(result.output.split())
    assert json.loads(read_zip(tmp_path / "c.zip")[MANIFEST])["student"] is None


# --- what would grade as an error is refused ------------------------------------------------------


def add_cell(path: Path, source: str) -> None:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": ["attnkit-solution"]}))
    nbformat.write(nb, path)


def test_a_package_with_a_syntax_error_is_refused_with_file_and_line(kit, tmp_path):
    package = tmp_path / "exercises"
    shutil.copytree(kit / "exercises", package)
    (package / "masking.py").write_text("import torch\n\ndef causal_mask(num_tokens, device=None)\n    return None\n")
    with pytest.raises(SubmitError, match=r"^exercises/masking\.py:3: SyntaxError: .*--force$"):
        submit([package], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    assert not (tmp_path / "out.zip").exists()
    result = CliRunner().invoke(main, ["submit", str(package), "--out", str(tmp_path / "out.zip"), "--no-check"])
    assert result.exit_code == 1 and "masking.py:3: SyntaxError" in result.output
    assert result.output.strip().count("\n") == 0 and "Traceback" not in result.output
    forced = submit([package], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS, force=True)
    assert forced.out.is_file() and any("--force" in w and "masking.py:3" in w for w in forced.warnings)


def test_a_notebook_with_a_broken_tagged_cell_is_refused(kit, tmp_path):
    notebook = tmp_path / "scores.ipynb"
    shutil.copy(kit / "notebooks" / "scores.ipynb", notebook)
    add_cell(notebook, "def softmax_weights(scores, dim=-1):\n    return (scores\n")
    with pytest.raises(SubmitError, match=r"cell \d+: SyntaxError"):
        submit([notebook], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)


def test_a_notebook_using_helpers_from_exercises_is_refused_saying_what_to_paste(kit, tmp_path):
    notebook = tmp_path / "modules.ipynb"
    shutil.copy(kit / "notebooks" / "modules.ipynb", notebook)
    add_cell(notebook, "from exercises.masking import causal_mask\n\nclass CausalAttention(torch.nn.Module):\n"
             "    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):\n"
             "        super().__init__()\n"
             "        self.register_buffer('mask', causal_mask(context_length))\n")  # fmt: skip
    with pytest.raises(SubmitError, match=r"modules\.ipynb: uses causal_mask, .*paste your causal_mask"):
        submit([notebook], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)


def test_undefined_names_are_read_from_every_scope_and_stars_or_builtins_are_fine():
    from grader.submit import undefined_names

    source = "import torch\nX = 1\ndef f(a):\n    return g(a) + X + len(a) + torch.ones(1)\nclass C:\n    y = h\n"
    assert undefined_names(source) == ["g", "h"]
    assert undefined_names("from math import *\ndef f():\n    return sqrt(g)\n") == []
    assert undefined_names("def f(x):\n    global Y\n    Y = x\n    return Y\n") == []


@pytest.mark.slow
@pytest.mark.parametrize("group", ["scores", "masking", "dropout", "heads", "modules"])
def test_the_kits_notebooks_stubbed_and_filled_are_never_refused(kit, tmp_path, group):
    notebook = tmp_path / f"{group}.ipynb"
    shutil.copy(kit / "notebooks" / f"{group}.ipynb", notebook)
    submit([notebook], tmp_path / "stub.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    fill_notebook(notebook)
    packed = submit([notebook], tmp_path / "filled.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    assert packed.warnings == []


# --- the hand-in is imported as the grader imports it, in a child Python --------------------------------


@pytest.mark.slow
def test_a_package_whose_import_fails_is_refused_naming_file_and_line(kit, tmp_path, monkeypatch):
    package = tmp_path / "exercises"
    shutil.copytree(kit / "exercises", package)
    scores = package / "scores.py"
    lines = scores.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("import torch")) + 1
    lines.insert(at, "import os; os.environ['ATTNKIT_TEST_IMPORTED'] = 'yes'; import numpyy")
    scores.write_text("\n".join(lines) + "\n")
    monkeypatch.delenv("ATTNKIT_TEST_IMPORTED", raising=False)
    line = f"exercises/scores.py:{at + 1}: ModuleNotFoundError: No module named 'numpyy'"
    with pytest.raises(SubmitError, match=rf"^{re.escape(line)}: it would grade as an error; .*--force$"):
        submit([package], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    assert not (tmp_path / "out.zip").exists()
    assert "ATTNKIT_TEST_IMPORTED" not in os.environ  # loaded in a child, never in submit's process
    result = CliRunner().invoke(main, ["submit", str(package), "--out", str(tmp_path / "out.zip"), "--no-check"])
    assert result.exit_code == 1 and line in result.output, result.output
    assert result.output.strip().count("\n") == 0 and "Traceback" not in result.output
    forced = submit([package], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS, force=True)
    assert [w for w in forced.warnings if "--force" in w] == [f"packed anyway (--force): {line}"]
    assert read_zip(forced.out)["exercises/scores.py"] == scores.read_bytes()


def test_a_correct_hand_in_loads_and_packs_without_a_warning(solved, tmp_path):
    packed = submit([solved / "exercises"], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    assert packed.warnings == [] and packed.out.is_file()


def test_a_notebook_whose_kept_code_fails_at_import_is_refused_naming_the_cell(kit, tmp_path):
    notebook = tmp_path / "scores.ipynb"
    shutil.copy(kit / "notebooks" / "scores.ipynb", notebook)
    add_cell(notebook, "class Settings:\n    WIDTH = int('wide')\n")  # a class body runs at import
    cell = len(json.loads(notebook.read_text())["cells"])
    where = rf"cell {cell} \(`class Settings:`\), line 2"  # the cell by its number and first line
    with pytest.raises(SubmitError, match=rf"^scores\.ipynb: {where}: ValueError: invalid literal"):
        submit([notebook], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)


def test_a_load_past_the_timeout_is_reported_and_packed_not_refused(tmp_path):
    from grader.submit import load_problem

    started = datetime.now(timezone.utc)
    problem, warning = load_problem("py", {"slow.py": b"import time\ntime.sleep(60)\n"}, None, timeout=2)
    assert problem is None and warning is not None and "took over 2 s" in warning
    assert datetime.now(timezone.utc) - started < timedelta(seconds=30)  # the child was stopped, not waited for
    problem, warning = load_problem("py", {"gone.py": b"import os\nos._exit(3)\n"}, None)
    assert warning is None and problem == "gone.py: importing it ended Python (exit code 3)"


# --- an nbformat 3 notebook ------------------------------------------------------------------------------


def v3_scores_notebook() -> str:
    """A notebook as Jupyter 2 saved it (nbformat 3), with the scores answers and a wrong softmax, tagged."""
    import nbformat

    v3 = nbformat.v3
    tag = {"tags": ["attnkit-solution"]}
    wrong = "def softmax_weights(scores, dim=-1):\n    return torch.softmax(scores, dim=0)  # ignores dim\n"
    cells = [
        v3.new_heading_cell("Scores", level=1),
        v3.new_code_cell(input=reference_source(only=SCORES_HOOKS), metadata=tag),
        v3.new_code_cell(input="print(dot_product_scores(torch.ones(1, 2, 3), torch.ones(1, 2, 3)))\n"),
        v3.new_code_cell(input=wrong, metadata=tag),
    ]
    return v3.writes_json(v3.new_notebook(worksheets=[v3.new_worksheet(cells=cells)]))


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is tested on Linux")
def test_a_v3_notebook_is_packed_and_grades_like_its_v4_conversion(tmp_path):
    import csv

    import nbformat

    text = v3_scores_notebook()
    (tmp_path / "old.ipynb").write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["submit", str(tmp_path / "old.ipynb"), "--student", "old",
                                       "--out", str(tmp_path / "old.zip"), "--no-check"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(read_zip(tmp_path / "old.zip")["old.ipynb"])["nbformat"] == 3  # packed as it is
    (tmp_path / "new.ipynb").write_text(nbformat.writes(nbformat.reads(text, as_version=4)), encoding="utf-8")
    out = tmp_path / "graded"
    args = ["grade", str(tmp_path / "old.zip"), str(tmp_path / "new.ipynb"), "--out", str(out),
            "--seed", "7", "--devices", "cpu", "--timeout", "5"]  # fmt: skip
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with (out / "grades.csv").open(newline="", encoding="utf-8") as fh:
        header, *rows = list(csv.reader(fh))
    by_student = {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}
    assert set(by_student) == {"old", "new"}
    assert by_student["old"] == by_student["new"]
    row = by_student["old"]
    assert float(row["dot_product_scores"]) > 0 and float(row["softmax_weights"]) == 0  # graded, not an error row
