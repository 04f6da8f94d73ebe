"""`attnkit release`: the learner's kit, and the proof that nothing of the answers leaks into it.

The learner's kit is exercised the way a learner would run it: `pytest` and
`attnkit check` in a subprocess whose cwd is the kit, with the kit first on
``PYTHONPATH``.  One catch: this repository is installed *editable* into the
virtualenv, and setuptools' editable finder (a ``sys.meta_path`` entry added by a
``.pth`` file) resolves ``grader.<anything>`` and ``solutions`` to *this* checkout
whenever the kit lacks them: without care, the kit would silently import our
``grader.instructor.submission_grading`` and ``solutions.mistakes``.  :func:`learner_env` therefore puts a
``sitecustomize.py`` on the path that removes the editable finder at start-up
(``python -I`` or ``-S`` would also drop PYTHONPATH or site-packages, and torch with
them); ``test_the_learner_env_imports_the_kit_and_nothing_of_ours`` proves it works.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from learner_code import answers_of, reference_source

from grader.cli import InstructorCommand, main
from grader.hook_table import GROUPS
from grader.instructor.release import RECORD, ReleaseError, find_leaks, release
from grader.registry import HOOK_NAMES

KIT = Path(__file__).resolve().parent.parent
STUB_MODULES = GROUPS  # one stub module per exercise group
LEARNER_GRADER = {
    "__init__.py",
    "hookspecs.py",
    "registry.py",
    "hook_row.py",
    "hook_table.py",
    "packs.py",
    "check.py",
    "notebook_check.py",
    "notebooks.py",
    "notebook_helpers.py",
    "cell_places.py",
    "deadline.py",
    "submit.py",
    "handin.py",
    "cli.py",
    "cli_options.py",
    "grade_command.py",
    "instructor_command.py",
    "course_commands.py",
    "hints.py",
    "rules.py",
    "rule_words.py",
    "gradients.py",
    "watch.py",
}
"""What a learner's kit holds of ``grader/``: the top level of ours, ``instructor/`` left out."""
NEVER = {"cases.py", "suite.py", "verdict.py", "replies.py", "diagnosis.py", "observations.py", "fingerprints.py",
         "module_trial_model.py", "text_rules.py", "structure_diagnosis.py", "sandbox.py", "audit.py",
         "submission_grading.py", "class_grading.py", "intake.py", "intake_model.py", "class_folder.py",
         "handin_reading.py", "identify.py", "review_flags.py", "gradebook.py",
         "reports.py", "rubric.py", "rubric.toml", "heatmaps.py", "release.py", "reference.py",
         "mistakes.py", "gradient_mistakes.py"}  # fmt: skip

GIVEN_BY_THE_STUBS = {"make_self_attention", "make_causal_attention", "make_multihead_attention"}
"""Reference functions whose body is one line the stubs give away on purpose: ``return SelfAttention(...)``."""

HIDDEN_CASES = ("all-masked-row", "indivisible-raises", "non-square-raises", "float-keep-mask", "large-logits",
                "H3-T5-hd4", "reference-weights", "init-seed")  # fmt: skip
"""Names of hidden cases in grader/instructor/groups/chapter.py that the public tests do not use."""

SLOW_TIMEOUT = 300


# --- helpers ---------------------------------------------------------------------------------------


def paste_reference(kit: Path) -> None:
    for stub in STUB_MODULES:
        path = kit / "exercises" / f"{stub}.py"
        path.write_text(path.read_text() + "\n\n# --- my answers ---\n" + answers_of(stub))


SITECUSTOMIZE = '''"""Test shim: forget the editable install of our checkout (see tests/test_release.py)."""
import sys

def _ours(obj):
    return "__editable__" in (getattr(obj, "__module__", "") or "")

sys.meta_path[:] = [f for f in sys.meta_path if not _ours(f)]
sys.path_hooks[:] = [h for h in sys.path_hooks if not _ours(h)]
sys.path[:] = [p for p in sys.path if "__editable__" not in p]
sys.path_importer_cache.clear()
'''


def learner_env(kit: Path) -> dict[str, str]:
    """The environment of a learner working in ``kit``: the kit first on the path, our checkout invisible."""
    shim = kit.parent / f"{kit.name}-shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNKIT_", "PYTEST_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(kit), str(shim)]), PYTHONDONTWRITEBYTECODE="1", COLUMNS="200")
    return env


def run_in(kit: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=kit, env=learner_env(kit), capture_output=True, text=True, timeout=SLOW_TIMEOUT
    )


def squeeze(text: str) -> str:
    return "".join(text.split())


def without_comments(source: str) -> str:
    """Python source with every ``#`` comment cut off (a reference body is compared without its comments)."""
    import io
    import tokenize

    lines = source.splitlines(keepends=True)
    for tok in reversed(list(tokenize.generate_tokens(io.StringIO(source).readline))):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col] + "\n"
    return "".join(lines)


def reference_bodies() -> dict[str, tuple[int, str]]:
    """``{qualified name: (statements, body)}`` for every function and method of the reference.

    The body is ``ast.get_source_segment`` of each body statement, comments and
    all whitespace removed, so re-indenting or re-wrapping never hides a copy.
    """
    source = without_comments((KIT / "solutions" / "reference.py").read_text())
    found: dict[str, tuple[int, str]] = {}
    for node in ast.parse(source).body:
        members = [(node.name + ".", m) for m in node.body] if isinstance(node, ast.ClassDef) else [("", node)]
        for prefix, fn in members:
            if isinstance(fn, ast.FunctionDef):
                body = "".join(ast.get_source_segment(source, stmt) for stmt in fn.body)
                found[prefix + fn.name] = (len(fn.body), squeeze(body))
    return found


def text_of(path: Path) -> str:
    """What a file says: Python without comments; for a notebook, its cells' sources as well as the raw JSON."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".py":
        return without_comments(text)
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]
        return "\n".join(without_comments(s) if c["cell_type"] == "code" else s for s, c in zip(sources, cells)) + text
    return text


def files_in(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def solved_kit(kit, tmp_path_factory) -> Path:
    """The released kit with the reference pasted below every stub, as a learner who finished would have it."""
    dest = tmp_path_factory.mktemp("solved") / "kit"
    shutil.copytree(kit, dest)
    paste_reference(dest)
    return dest


# --- what the kit holds ----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_kit_holds_stubs_public_tests_notebooks_and_the_learners_grader(kit):
    ours = sorted(p.name for p in (KIT / "exercises").iterdir() if p.suffix == ".py")
    assert sorted(p.name for p in (kit / "exercises").iterdir()) == ours
    for name in ours:  # stubs and public tests, byte for byte
        assert (kit / "exercises" / name).read_bytes() == (KIT / "exercises" / name).read_bytes(), name
    ours_top = {p.name for p in (KIT / "grader").iterdir() if p.is_file() and p.suffix not in (".pyc", ".pyo")}
    assert ours_top == LEARNER_GRADER  # the top level of grader/ is exactly what a learner's kit holds
    # and instructor/ stays out; the release adds the hints file
    assert {p.name for p in (kit / "grader").iterdir()} == LEARNER_GRADER | {"hints.json", "child", "groups"}
    ours_groups = sorted(p.name for p in (KIT / "grader" / "groups").glob("*.py"))  # every group's contract, whole
    assert sorted(p.name for p in (kit / "grader" / "groups").iterdir()) == ours_groups
    ours_child = sorted(p.name for p in (KIT / "grader" / "child").glob("*.py"))
    assert sorted(p.name for p in (kit / "grader" / "child").iterdir()) == ours_child  # the learner's side, whole
    for name in LEARNER_GRADER:
        assert (kit / "grader" / name).read_bytes() == (KIT / "grader" / name).read_bytes(), name
    top = {p.name for p in kit.iterdir()}
    assert top >= {"exercises", "grader", "conftest.py", "pyproject.toml", "constraints.txt", "README.md", RECORD}
    assert not top & {"solutions", "examples", "tests", "tox.ini", "Makefile", "benchmarks"}
    if (KIT / "grader" / "notebooks.py").exists():
        import nbformat

        notebooks = sorted((kit / "notebooks").glob("*.ipynb"))
        assert [p.stem for p in notebooks] == sorted(GROUPS)  # one notebook per exercise group
        for path in notebooks:
            nbformat.validate(nbformat.read(path, as_version=4))


@pytest.mark.slow
def test_the_kit_gets_all_of_grader_but_instructor_with_no_list_to_keep(tmp_path, monkeypatch):
    """The folder is the boundary: a new top-level module ships with no edit to release, instructor/ never does."""
    import grader.instructor.release

    ours = tmp_path / "src" / "grader"
    shutil.copytree(KIT / "grader", ours, ignore=shutil.ignore_patterns("__pycache__"))
    (ours / "progress.py").write_text('"""A learner-side module added later."""\n')
    (ours / "instructor" / "new_report.py").write_text('"""An instructor-side module added later."""\n')
    monkeypatch.setattr(grader.instructor.release, "GRADER_DIR", ours)
    monkeypatch.setattr(grader.instructor.release, "INSTRUCTOR_DIR", ours / "instructor")
    dest = tmp_path / "kit"
    release(dest)
    shipped = {p.relative_to(dest / "grader").as_posix() for p in (dest / "grader").rglob("*") if p.is_file()}
    child = {f"child/{p.name}" for p in (KIT / "grader" / "child").glob("*.py")}
    groups = {f"groups/{p.name}" for p in (KIT / "grader" / "groups").glob("*.py")}  # every group's contract
    assert shipped == LEARNER_GRADER | child | groups | {"progress.py", "hints.json"}


def load_conftest(path: Path, monkeypatch) -> types.ModuleType:
    """``path`` (a root conftest.py) imported as a module; the folder it puts on ``sys.path`` is taken off again."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = importlib.util.spec_from_file_location(f"conftest_of_{path.parent.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_conftest_is_ours_unchanged_and_checks_the_learners_own_exercises(kit, monkeypatch):
    assert (kit / "conftest.py").read_bytes() == (KIT / "conftest.py").read_bytes()
    assert load_conftest(KIT / "conftest.py", monkeypatch).DEFAULT_SOLUTION == "reference"  # solutions/ beside it
    assert load_conftest(kit / "conftest.py", monkeypatch).DEFAULT_SOLUTION == "exercises"  # ours is not the kit's


def test_the_leak_scan_knows_every_case_the_case_builder_makes(tmp_path, monkeypatch):
    """The names come from calling the builder, so a case made any way (an f-string, a loop) is scanned for."""
    from grader.instructor import cases

    built = cases.make_cases

    def with_one_more(seed):
        made = built(seed)
        return [*made, dataclasses.replace(made[0], name=f"quietly-added-{seed}")]

    monkeypatch.setattr(cases, "make_cases", with_one_more)
    (tmp_path / "notes.md").write_text("quietly-added-0 and random-1, but not quietly-added-7\n")
    leaks = find_leaks(tmp_path)
    assert "notes.md: names the hidden case 'quietly-added-0'" in leaks
    assert "notes.md: names the hidden case 'random-1'" in leaks  # made in a loop with an f-string
    assert not [line for line in leaks if "quietly-added-7" in line]


def test_the_learners_pyproject_and_constraints(kit):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    ours = tomllib.loads((KIT / "pyproject.toml").read_text())["project"]
    data = tomllib.loads((kit / "pyproject.toml").read_text())
    project = data["project"]
    assert (project["name"], project["version"]) == ("attnkit", ours["version"])
    assert project["scripts"] == {"attnkit": "grader.cli:main"}
    assert data["tool"]["setuptools"]["packages"] == ["exercises", "grader"]
    names = [re.split(r"[<>=!~ ;\[]", d, maxsplit=1)[0] for d in project["dependencies"]]
    assert names[:7] == ["torch", "pluggy", "pytest", "click", "rich", "nbformat", "matplotlib"]  # plot_attention
    assert "tomli>=2; python_version < '3.11'" in project["dependencies"]  # the hand-in's manifest on 3.10
    assert "torch>=2.1" in project["dependencies"] and "pluggy>=1.7" in project["dependencies"]
    assert {re.split(r"[<>=]", d)[0] for d in project["optional-dependencies"]["notebooks"]} == {
        "nbclient",
        "ipykernel",
    }
    pytest_ini = data["tool"]["pytest"]["ini_options"]
    assert pytest_ini["testpaths"] == ["exercises"]
    assert any(m.startswith("exercise(name)") for m in pytest_ini["markers"])
    pins = [ln for ln in (kit / "constraints.txt").read_text().splitlines() if ln and not ln.startswith("#")]
    ours_pin = [ln for ln in (KIT / "constraints.txt").read_text().splitlines() if ln.startswith("torch")]
    assert pins == ours_pin


OPTIONAL_IMPORTS = {"pyseccomp": "the sandbox's seccomp filter, imported under a guard (the kit's check runs without)"}
"""Third-party modules the kit's files import that no dependency of the kit must provide, each with why."""


def test_the_kits_dependencies_provide_every_module_its_files_import(kit):
    """A learner installs the kit's pyproject and nothing else (the kit's README): every third-party module the kit's
    own files import must come with one of its dependencies or theirs (a newcomer's walk found `attnkit check`
    failing every exercise with ModuleNotFoundError: msgspec, which the grader's pyproject had and the kit's not)."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((kit / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["notebooks"]]
    provided, seen = set(), set()
    while wanted:  # the declared distributions and, through their own requirements, everything they bring
        req = Requirement(wanted.pop())
        name = req.name.lower()
        if name in seen or "extra" in str(req.marker or ""):  # another extra's; a Python version's counts (tomli)
            continue
        seen.add(name)
        provided.add(name.replace("-", "_"))  # a distribution not installed here (tomli on 3.11): its own name
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        provided.update(m for m in (dist.read_text("top_level.txt") or "").split())
        provided.update(p.parts[0].removesuffix(".py") for p in dist.files or () if p.parts and p.suffix in (".py", ""))
        wanted.extend(dist.requires or [])
    own = {"exercises", "grader", "conftest"}
    imported: dict[str, str] = {}
    for path in kit.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                names = [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else []
            for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - own:
                imported.setdefault(top, str(path.relative_to(kit)))
    unprovided = {m: f for m, f in imported.items() if m not in provided and m not in OPTIONAL_IMPORTS}
    assert not unprovided, f"the kit imports what none of its dependencies provides: {unprovided}"
    assert "msgspec" in imported and "torch" in imported, "the walk over the kit's imports found too little"


def test_the_readme_tells_a_learner_what_to_do(kit):
    readme = (kit / "README.md").read_text()
    for phrase in ("NotImplementedError", "attnkit check", "pytest", "notebooks/", "attnkit submit", "pip install -e"):
        assert phrase in readme, phrase
    for hook in HOOK_NAMES:
        assert f"`{hook}`" in readme, hook
    assert "{{" not in readme and "{%" not in readme


# --- refusing and replacing --------------------------------------------------------------------------


def test_a_non_empty_dest_is_refused_without_force(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["release", str(dest)])
    assert result.exit_code == 1, result.output
    assert "not empty" in result.output and "--force" in result.output
    assert "Traceback" not in result.output
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]


@pytest.mark.slow
def test_release_writes_the_kit_and_says_so(tmp_path):
    result = CliRunner().invoke(main, ["release", str(tmp_path / "new" / "kit")], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "Wrote the learner's kit" in result.output
    assert result.output.index("Building the kit in a staging folder") < result.output.index("Wrote the learner's")
    assert (tmp_path / "new" / "kit" / "exercises" / "scores.py").is_file()


@pytest.mark.slow
def test_force_replaces_an_earlier_release_and_deletes_nothing_else(tmp_path):
    dest = tmp_path / "kit"
    release(dest)
    (dest / ".git").mkdir()
    (dest / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (dest / "notes.txt").write_text("the instructor's own file")
    stale = dest / "exercises" / "old_stub.py"  # written by an "earlier" release, not by this one
    stale.write_text("old\n")
    record = json.loads((dest / RECORD).read_text())
    written = (dest / "exercises" / "scores.py").read_bytes()
    assert record["files"]["exercises/scores.py"] == hashlib.sha256(written).hexdigest()
    record["files"]["exercises/old_stub.py"] = hashlib.sha256(b"old\n").hexdigest()
    (dest / RECORD).write_text(json.dumps(record))

    result = CliRunner().invoke(main, ["release", str(dest), "--force"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert (dest / "exercises" / "scores.py").read_bytes() == (KIT / "exercises" / "scores.py").read_bytes()
    assert not stale.exists()
    assert (dest / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (dest / "notes.txt").read_text() == "the instructor's own file"
    assert "Kept 2 file(s)" in result.output and "notes.txt" in result.output


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files_in(root)}


@pytest.mark.slow
def test_force_never_overwrites_a_file_edited_since_the_last_release(tmp_path):
    dest = tmp_path / "kit"
    release(dest)
    (dest / "exercises" / "scores.py").write_text("# my answers\n")  # the learner's work
    (dest / "README.md").write_text("my notes\n")
    stale = dest / "exercises" / "old_stub.py"  # an earlier release's file, edited since: never removed either
    stale.write_text("mine now\n")
    record = json.loads((dest / RECORD).read_text())
    record["files"]["exercises/old_stub.py"] = hashlib.sha256(b"as released\n").hexdigest()
    (dest / RECORD).write_text(json.dumps(record))
    before = _snapshot(dest)

    result = CliRunner().invoke(main, ["release", str(dest), "--force"], terminal_width=200)
    assert result.exit_code == 1, result.output
    assert "3 file(s)" in result.output and "nothing was written" in result.output
    for rel in ("exercises/scores.py", "README.md", "exercises/old_stub.py"):
        assert rel in result.output
    assert "exercises/masking.py" not in result.output  # unchanged files are not listed
    assert _snapshot(dest) == before  # not a byte changed, the record included
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_force_refreshes_the_files_unchanged_since_the_last_release(tmp_path, monkeypatch):
    dest = tmp_path / "kit"
    release(dest)
    record = json.loads((dest / RECORD).read_text())
    # as if the last release wrote an older stub: the file is what the record says, so it is refreshed
    (dest / "exercises" / "masking.py").write_text("# an older stub\n")
    record["files"]["exercises/masking.py"] = hashlib.sha256(b"# an older stub\n").hexdigest()
    (dest / RECORD).write_text(json.dumps(record))
    summary = release(dest, force=True)
    assert (dest / "exercises" / "masking.py").read_bytes() == (KIT / "exercises" / "masking.py").read_bytes()
    assert "exercises/masking.py" in summary.files


@pytest.mark.slow
def test_force_on_an_old_kit_without_hashes_treats_every_differing_file_as_edited(tmp_path):
    dest = tmp_path / "kit"
    release(dest)
    record = json.loads((dest / RECORD).read_text())
    (dest / RECORD).write_text(json.dumps(dict(record, files=sorted(record["files"]))))  # an older record: a list
    (dest / "exercises" / "heads.py").write_text("# edited or old, nobody knows\n")
    with pytest.raises(ReleaseError, match=r"1 file\(s\).*\n  exercises/heads.py"):
        release(dest, force=True)
    (dest / RECORD).unlink()  # no record at all
    with pytest.raises(ReleaseError, match="exercises/heads.py"):
        release(dest, force=True)
    (dest / "exercises" / "heads.py").write_bytes((KIT / "exercises" / "heads.py").read_bytes())
    release(dest, force=True)  # identical files are never in the way


def test_the_kit_itself_is_never_a_destination(tmp_path):
    for dest in (KIT, KIT / "solutions", KIT.parent):
        with pytest.raises(ReleaseError):
            release(dest, force=True)


@pytest.mark.slow
def test_a_stub_holding_an_answer_stops_the_release(tmp_path, monkeypatch):
    """The release's own scan: an instructor who filled in a stub by mistake gets an error, and DEST stays empty."""
    import grader.instructor.release

    exercises = tmp_path / "exercises"
    shutil.copytree(KIT / "exercises", exercises, ignore=shutil.ignore_patterns("__pycache__"))
    path = exercises / "masking.py"
    path.write_text(path.read_text() + "\n\n" + reference_source())
    monkeypatch.setattr(grader.instructor.release, "EXERCISES_DIR", exercises)
    dest = tmp_path / "kit"
    with pytest.raises(ReleaseError, match="holds the body of the reference's softmax_weights"):
        release(dest)
    assert not dest.exists() or not any(dest.iterdir())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".attnkit-release-")], "staging left behind"


def test_the_instructors_cli_offers_release_submit_and_notebooks():
    result = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    for command in ("check", "submit", "grade", "audit", "release", "notebooks", "gradescope"):
        assert f"  {command} " in result.output, command


@pytest.mark.skipif(not (KIT / "grader" / "notebooks.py").exists(), reason="grader/notebooks.py not here yet")
def test_notebooks_are_written_and_a_changed_one_is_never_overwritten_without_force(tmp_path):
    dest = tmp_path / "nbs"
    runner = CliRunner()
    first = runner.invoke(main, ["notebooks", str(dest)], terminal_width=200)
    assert first.exit_code == 0, first.output
    written = sorted(p.name for p in dest.glob("*.ipynb"))
    n = len(GROUPS)
    assert len(written) == n and f"Wrote {n} notebook(s)" in first.output
    again = runner.invoke(main, ["notebooks", str(dest)], terminal_width=200)
    assert again.exit_code == 0 and f"{n} already up to date" in again.output
    mine = dest / written[0]
    mine.write_text(mine.read_text().replace("NotImplementedError", "NotImplementedError  # my work"))
    edited = mine.read_bytes()
    refused = runner.invoke(main, ["notebooks", str(dest)], terminal_width=200)
    assert refused.exit_code == 1 and written[0] in refused.output and "--force" in refused.output
    assert mine.read_bytes() == edited
    forced = runner.invoke(main, ["notebooks", str(dest), "--force"], terminal_width=200)
    assert forced.exit_code == 0 and mine.read_bytes() != edited


# --- the leak test ------------------------------------------------------------------------------------


def test_no_reference_body_appears_anywhere_in_the_kit(kit):
    bodies = reference_bodies()
    assert len(bodies) >= 20, sorted(bodies)  # every hook, their classes' methods
    stubs = squeeze("".join(without_comments((KIT / "exercises" / f"{m}.py").read_text()) for m in STUB_MODULES))
    given = {name for name in bodies if name in GIVEN_BY_THE_STUBS}
    assert given == GIVEN_BY_THE_STUBS
    for name in given:  # the only exceptions: one line, and handed out in the stubs on purpose
        statements, body = bodies[name]
        assert statements == 1 and body.startswith("return") and body in stubs, name
    checked = {name: body for name, (_, body) in bodies.items() if name not in given}
    leaks = []
    for path in files_in(kit):
        text = squeeze(text_of(path))
        leaks += [f"{path.relative_to(kit)}: {name}" for name, body in checked.items() if body in text]
    assert leaks == []


def test_the_leak_scan_would_see_a_pasted_answer(solved_kit):
    """The test above is not vacuous: the same scan finds every non-trivial body in a solved kit."""
    checked = {name: body for name, (_, body) in reference_bodies().items() if name not in GIVEN_BY_THE_STUBS}
    text = "".join(squeeze(text_of(p)) for p in files_in(solved_kit / "exercises"))
    assert [name for name, body in checked.items() if body not in text] == []


def test_no_hidden_case_and_no_instructor_file_in_the_kit(kit):
    cases = (KIT / "grader" / "instructor" / "groups" / "chapter.py").read_text()
    public = "".join(p.read_text() for p in (KIT / "exercises").glob("*.py"))
    for name in HIDDEN_CASES:  # real hidden case names, none of them public
        assert f'"{name}"' in cases and name not in public, name
    assert not (kit / "solutions").exists()
    assert not (kit / "grader" / "instructor").exists()
    found = []
    for path in files_in(kit):
        if path.name in NEVER:
            found.append(f"{path.relative_to(kit)}: an instructor-only file")
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [f"{path.relative_to(kit)}: hidden case {n!r}" for n in HIDDEN_CASES if n in text]
    assert found == []


def test_no_catalogue_entry_in_the_kit(kit):
    from solutions.mistakes import catalogue

    CATALOGUE = catalogue()  # noqa: N806 - every group's
    assert len(CATALOGUE) >= 40
    texts = {
        path.relative_to(kit).as_posix(): path.read_text(encoding="utf-8", errors="replace") for path in files_in(kit)
    }
    notebooks = {rel: text_of(kit / rel) for rel in texts if rel.endswith(".ipynb")}
    assert "grader/hints.json" in texts  # the one file that names the mistakes: data, tested in test_hints.py
    del texts["grader/hints.json"]
    found = []
    squeezed = {rel: squeeze(text) for rel, text in {**texts, **notebooks}.items()}  # once per file, not per mistake
    for mistake in CATALOGUE:
        for rel, text in {**texts, **notebooks}.items():
            if re.search(rf"(?<![\w-]){re.escape(mistake.id)}(?![\w-])", text):
                found.append(f"{rel}: id {mistake.id}")
            for hint in (mistake.hint, mistake.hint_zh):
                if squeeze(hint) in squeezed[rel]:
                    found.append(f"{rel}: a hint of {mistake.id}")
    assert found == []


# --- the learner's pytest and attnkit check, in the kit ---------------------------------------------------


@pytest.mark.slow
def test_the_learner_env_imports_the_kit_and_nothing_of_ours(kit):
    probe = (
        "import importlib.util, grader, exercises, grader.cli, grader.instructor_command; "
        "print(grader.__file__); print(exercises.__file__); "
        "print(importlib.util.find_spec('solutions')); print(importlib.util.find_spec('grader.instructor')); "
        "print(grader.instructor_command.INSTRUCTOR)"
    )
    done = run_in(kit, "-c", probe)
    assert done.returncode == 0, done.stderr
    grader_file, exercises_file, solutions, instructor_spec, instructor = done.stdout.split()
    assert Path(grader_file).resolve() == (kit / "grader" / "__init__.py").resolve()
    assert Path(exercises_file).resolve() == (kit / "exercises" / "__init__.py").resolve()
    assert (solutions, instructor_spec, instructor) == ("None", "None", "False")


@pytest.mark.slow
def test_learner_pytest_fails_on_the_stubs_with_not_implemented(kit):
    done = run_in(kit, "-m", "pytest", "--tb=line", "-p", "no:cacheprovider", "-p", "no:randomly")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "not implemented yet" in out and "NotImplementedError" in out
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\d+ failed", summary) and "passed" not in summary and "error" not in summary, summary
    assert "attnkit: solution 'exercises'" in out  # the report header: the kit checks the learner's own code


@pytest.mark.slow
def test_learner_check_lists_every_exercise_not_started_and_exits_1(kit):
    done = run_in(kit, "-m", "grader.cli", "check")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.count("not started") == len(HOOK_NAMES)
    assert f"0 of {len(HOOK_NAMES)} exercises passing" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.slow
def test_learner_cli_offers_check_and_submit_only(kit):
    done = run_in(kit, "-m", "grader.cli", "--help")
    assert done.returncode == 0, done.stderr
    commands = done.stdout.split("Commands:", 1)[1]
    listed = {line.split()[0] for line in commands.splitlines() if line.strip()}
    assert listed == {"check", "submit", "contract"}, commands  # the contract is the learner's to read too
    check_help = run_in(kit, "-m", "grader.cli", "check", "--help")
    assert check_help.returncode == 0 and "--solution" in check_help.stdout, check_help.stderr
    assert "reference" not in check_help.stdout  # a kit has no reference to check
    ours = " ".join(CliRunner().invoke(main, ["check", "--help"]).output.split())
    assert "or 'reference' (the instructor's)." in ours  # the repository has one
    instructors = sorted(name for name, command in main.commands.items() if isinstance(command, InstructorCommand))
    assert {"grade", "audit", "release", "notebooks", "gradescope"} <= set(instructors), instructors
    for command in instructors:
        refused = run_in(kit, "-m", "grader.cli", command, "--help")
        assert refused.returncode == 1, (command, refused.stdout, refused.stderr)
        message = (refused.stdout + refused.stderr).strip()
        assert message.count("\n") == 0 and "for instructors" in message, message
        assert "Traceback" not in message


@pytest.mark.slow
def test_the_solved_kit_passes_pytest_and_check(solved_kit):
    tests = run_in(solved_kit, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly")
    assert tests.returncode == 0, (tests.stdout + tests.stderr)[-3000:]
    assert re.search(r"\d+ passed", tests.stdout) and "failed" not in tests.stdout.splitlines()[-1]
    check = run_in(solved_kit, "-m", "grader.cli", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{len(HOOK_NAMES)} of {len(HOOK_NAMES)} exercises passing" in check.stdout


PASTED = {
    "softmax-over-dim-1": (
        "scores",
        "softmax_weights",
        "def softmax_weights(scores, dim=-1):  # the seeds' mistake: dim=1 on batched scores\n"
        "    exp = torch.exp(scores - scores.amax(dim=1, keepdim=True).clamp(min=-1e30))\n"
        "    total = exp.sum(dim=1, keepdim=True)\n"
        "    return torch.where(total > 0, exp / total, torch.zeros_like(exp))\n",
    ),
    "triu-diagonal-0": (
        "masking",
        "causal_mask",
        "def causal_mask(num_tokens, device=None):\n"
        "    if num_tokens < 1:\n"
        "        raise ValueError('at least one token')\n"
        "    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu()\n",
    ),
    "dropout-scale-by-inverse-p": (
        "dropout",
        "dropout_scale",
        "def dropout_scale(weights, keep_mask, p):\n"
        "    if not 0 <= p <= 1:\n"
        "        raise ValueError('p')\n"
        "    return weights * keep_mask / p if p else weights * keep_mask.to(weights.dtype)\n",
    ),
    "mask-plain-attribute": (  # a module hook's mistake: named from its form and outputs on the public inputs
        "modules",
        "make_causal_attention",
        "import torch\n\n\n"
        "class CausalAttention(nn.Module):\n"
        "    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):\n"
        "        super().__init__()\n"
        "        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.dropout = nn.Dropout(dropout)\n"
        "        self.mask = torch.triu(torch.ones(context_length, context_length), diagonal=1).bool()\n\n"
        "    def forward(self, x):\n"
        "        b, t, _ = x.shape\n"
        "        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)\n"
        "        s = (q @ k.transpose(1, 2)).masked_fill(self.mask[:t, :t], -torch.inf)\n"
        "        return self.dropout(torch.softmax(s / k.shape[-1] ** 0.5, dim=-1)) @ v\n",
    ),
    "different wrong answer": (
        "scores",
        "softmax_weights",
        "def softmax_weights(scores, dim=-1):  # no catalogued mistake: the raw scores over their sum\n"
        "    return scores / scores.sum(dim=dim, keepdim=True)\n",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", PASTED, ids=list(PASTED))
def test_the_kits_check_names_a_known_mistake_from_its_hints_file(kit, tmp_path, case):
    """No diagnosis and no catalogue in the kit: the hints file names the mistake, in English and Chinese."""
    from solutions.mistakes import by_id

    module, hook, code = PASTED[case]
    wrong = tmp_path / "kit"
    shutil.copytree(kit, wrong)
    path = wrong / "exercises" / f"{module}.py"
    path.write_text(path.read_text() + "\n\n" + code)
    done = run_in(wrong, "-m", "grader.cli", "check", hook)
    out = re.sub(r"[│┃]", "", squeeze(done.stdout + done.stderr))  # a hint wraps inside the table's cell
    assert done.returncode == 1, out
    assert "failing" in out and "Traceback" not in out
    if case == "different wrong answer":
        assert "lookslike" not in out
        return
    assert squeeze(f"looks like {case}") in out and squeeze(by_id(case).hint) in out
    zh = run_in(wrong, "-m", "grader.cli", "check", hook, "--lang", "zh")
    assert squeeze(by_id(case).hint_zh) in re.sub(r"[│┃]", "", squeeze(zh.stdout)), zh.stdout


@pytest.mark.slow
def test_the_solved_kits_check_shows_no_hint(solved_kit):
    done = run_in(solved_kit, "-m", "grader.cli", "check", "softmax_weights", "causal_mask", "dropout_scale")
    assert done.returncode == 0 and "looks like" not in done.stdout, done.stdout


@pytest.mark.slow
def test_the_kits_notebook_check_names_a_known_mistake(kit):
    probe = (
        "import torch\n"
        "from grader.notebook_check import collect\n"
        "def causal_mask(num_tokens, device=None):\n"
        "    if num_tokens < 1:\n"
        "        raise ValueError('at least one token')\n"
        "    return torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).triu(0)\n"
        "for lang in ('en', 'zh'):\n"
        "    (row,) = collect(globals(), ['causal_mask'], lang)\n"
        "    print(row.status, row.mistake, row.hint)\n"
    )
    from solutions.mistakes import by_id

    done = run_in(kit, "-c", probe)
    assert done.returncode == 0, done.stderr
    en, zh = done.stdout.strip().splitlines()
    assert en == f"failing triu-diagonal-0 {by_id('triu-diagonal-0').hint}"
    assert zh == f"failing triu-diagonal-0 {by_id('triu-diagonal-0').hint_zh}"
