"""The hand-in policy (grader/handin.py): each rule once, one definition of each, and submit ⇒ intake.

- one test per rule: the test-file rule, hidden and cache folders, the text rule, the name rule, the size
  messages, the notebook tags and the cells graded, the kernelspec, the kit's version;
- the child runtime's own copy of the test-file rule agrees with handin's on a table of names;
- no module of ``grader/`` but handin.py defines a policy name, a tag, the kernelspec or a version reader
  (read with :mod:`ast`), and that check finds a planted copy;
- whatever ``attnkit submit`` packs, intake reads without an error, at and just over every cap.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import string
import zipfile
from pathlib import Path

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader import handin
from grader.child import load as child_load
from grader.handin import (
    CHECK_TAG,
    MAX_ENTRIES,
    MAX_NAME_LENGTH,
    MAX_NOTEBOOK_BYTES,
    MAX_PY_BYTES,
    MAX_TOTAL_BYTES,
    SOLUTION_TAG,
    UNKNOWN_VERSION,
    cell_tags,
    graded_cells,
    is_graded_source,
    is_skipped_dir,
    is_skipped_file,
    is_test_file,
    kit_version,
    notebook_metadata,
    safe_name,
    size_text,
    text_problem,
    too_big,
)
from grader.instructor.handin_reading import read_submission
from grader.submit import MANIFEST, SubmitError, Validation, submit

NO_CHECKS = Validation(public_checks=False)
"""submit without running the public cases (the tests that are not about them)."""
NO_IMPORT = Validation(trial_import=False)
"""submit without its trial import in a child Python (about 3 s each)."""
PARSE_ONLY = Validation(public_checks=False, trial_import=False)


KIT = Path(__file__).resolve().parent.parent
GRADER = KIT / "grader"

# --- the rules, one test each ---------------------------------------------------------------------------

FILE_NAMES = [
    # (name, a test file?, skipped as a file?)
    ("scores.py", False, False),
    ("test_scores.py", True, True),
    ("scores_test.py", True, True),
    ("_test.py", True, True),
    ("test_.py", True, True),
    ("conftest.py", True, True),
    ("testing.py", False, False),
    ("test.py", False, False),
    ("latest.py", False, False),
    ("contest.py", False, False),
    ("my_conftest.py", False, False),
    ("Test_scores.py", False, False),
    ("scores_test.pyc", False, False),
    (".hidden.py", False, True),
    (".test_x.py", False, True),
    ("__init__.py", False, False),
]
FILE_IDS = [name for name, _, _ in FILE_NAMES]


@pytest.mark.parametrize("name, test_file, skipped", FILE_NAMES, ids=FILE_IDS)
def test_the_test_file_rule_is_pytests_default_patterns(name, test_file, skipped):
    assert is_test_file(name) is test_file
    assert is_skipped_file(name) is skipped


@pytest.mark.parametrize("name, test_file, skipped", FILE_NAMES, ids=FILE_IDS)
def test_the_child_runtimes_copy_agrees_with_handin(name, test_file, skipped):
    """The runtime imports nothing of the kit, so it keeps a one-line copy: this table holds the two equal."""
    assert child_load._is_test_file(Path("submission") / name) is is_skipped_file(name) is skipped


@pytest.mark.parametrize(
    "rel, graded",
    [
        ("scores.py", True),
        ("helpers/util.py", True),
        ("exercises/__init__.py", True),
        ("notes.md", False),
        ("scores.ipynb", False),
        ("test_scores.py", False),
        ("helpers/conftest.py", False),
        (".hidden.py", False),
        ("__pycache__/scores.py", False),
        (".ipynb_checkpoints/scores-checkpoint.py", False),
        ("__MACOSX/scores.py", False),
        (".git/hooks/x.py", False),
        ("a/.venv/lib/x.py", False),
        ("pycache/scores.py", True),
    ],
    ids=["top", "nested", "package-init", "markdown", "notebook", "test", "nested-conftest", "hidden", "pycache",
         "checkpoints", "macosx", "git", "nested-hidden-folder", "not-a-cache"],
)
def test_graded_sources_are_py_files_outside_skipped_folders(rel, graded):
    assert is_graded_source(rel) is graded


@pytest.mark.parametrize(
    "name, skipped",
    [("__pycache__", True), (".ipynb_checkpoints", True), ("__MACOSX", True), (".git", True), (".venv", True),
     ("venv", False), ("pycache", False), ("exercises", False), ("helpers", False)],
    ids=["pycache", "checkpoints", "macosx", "git", "dot-venv", "venv", "not-a-cache", "exercises", "helpers"],
)  # fmt: skip
def test_hidden_and_cache_folders_are_skipped(name, skipped):
    assert is_skipped_dir(name) is skipped


@pytest.mark.parametrize(
    "data, problem",
    [
        (b"x = 1\n", None),
        ("é = 'ü'\n".encode(), None),
        (b"\xef\xbb\xbfx = 1\n", None),
        (b"x = '\xff'\n", "not valid UTF-8 at byte 5"),
        (b"x = 1\x00\n", "contains a null byte (at byte 5)"),
    ],
    ids=["ascii", "utf8", "bom", "latin1", "null"],
)
def test_the_text_rule(data, problem):
    assert text_problem(data) == problem


@pytest.mark.parametrize(
    "n, text",
    [(0, "0 bytes"), (1023, "1023 bytes"), (1024, "1 KB"), (1536, "1.5 KB"), (1 << 20, "1 MB"),
     ((1 << 20) + 1, "1.0 MB"), (50 << 20, "50 MB"), (3 << 30, "3 GB")],
    ids=["zero", "under-a-kb", "kb", "kb-and-a-half", "mb", "mb-and-a-byte", "fifty-mb", "gb"],
)  # fmt: skip
def test_sizes_are_written_for_people(n, text):
    assert size_text(n) == text


def test_a_refusal_names_the_size_the_kind_and_the_cap():
    assert too_big(int(2.3 * (1 << 20)), ".py file", MAX_PY_BYTES) == "2.3 MB .py file is over the 1 MB limit"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("alice", "alice"),
        ("alice smith", "alice_smith"),
        ("José", "Jose"),
        ("Zoë-Ann.v2", "Zoe-Ann.v2"),
        ("李雷", "__"),
        ("../x", "_x"),
        ("..", "student"),
        ("...hidden", "hidden"),
        ("", "student"),
        ("a/b\\c", "a_b_c"),
        ("x" * 100, "x" * 64),
        ("tab\there\nnl", "tab_here_nl"),
        ("-rf", "rf"),
        ("--.-x", "x"),
        ("=cmd|' /C calc'!A0", "_cmd____C_calc__A0"),
    ],
    ids=["plain", "space", "accent", "accent-dash-dot", "cjk", "dotdot-slash", "dotdot", "leading-dots", "empty",
         "separators", "long", "control-chars", "leading-dash", "dots-and-dashes", "formula"],
)
def test_safe_name(raw, expected):
    assert safe_name(raw) == expected


SAFE = set(string.ascii_letters + string.digits + "._-")


@given(st.text(max_size=200))
def test_a_safe_name_is_safe_short_and_stable(raw):
    name = safe_name(raw)
    assert set(name) <= SAFE and 0 < len(name) <= MAX_NAME_LENGTH
    assert name[0] not in ".-"
    assert safe_name(name) == name
    assert safe_name(raw, fallback="") in (name, "")


def _cell(kind: str, tags=None, metadata=None) -> dict:
    cell = {"cell_type": kind, "source": "", "metadata": dict(metadata or {})}
    if tags is not None:
        cell["metadata"]["tags"] = tags
    return cell


@pytest.mark.parametrize(
    "cell, tags",
    [
        (_cell("code", [SOLUTION_TAG, "other"]), [SOLUTION_TAG, "other"]),
        (_cell("code"), []),
        (_cell("code", [SOLUTION_TAG, 3, None]), [SOLUTION_TAG]),
        (_cell("code", SOLUTION_TAG), []),
        ({"cell_type": "code", "metadata": None}, []),
        ({"cell_type": "code", "metadata": ["tags"]}, []),
        ({"cell_type": "code"}, []),
        ("not a cell", []),
    ],
    ids=["tags", "none", "non-strings-dropped", "a-string-is-not-a-list", "null-metadata", "list-metadata",
         "no-metadata", "not-a-dict"],
)
def test_cell_tags_reads_any_cell_without_failing(cell, tags):
    assert cell_tags(cell) == tags


def test_graded_cells_are_the_tagged_ones_else_all_code_but_the_check():
    md, plain, check = _cell("markdown", [SOLUTION_TAG]), _cell("code"), _cell("code", [CHECK_TAG])
    solution, other = _cell("code", [SOLUTION_TAG]), _cell("code", ["scratch"])
    assert graded_cells([md, plain, solution, check]) == [(3, solution)]  # numbered over every cell
    assert graded_cells([md, plain, other, check]) == [(2, plain), (3, other)]  # none tagged: all but the check
    assert graded_cells([md, check]) == []
    both = _cell("code", [SOLUTION_TAG, CHECK_TAG])
    assert graded_cells([plain, both]) == [(2, both)]  # a tagged solution is taken even if also a check


def test_the_notebook_metadata_is_a_valid_python3_kernelspec_and_fresh_each_time():
    first = notebook_metadata({"group": "scores"})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", id="c1")])
    nb.metadata = nbformat.from_dict(first)
    nbformat.validate(nb)
    assert first["kernelspec"]["name"] == "python3" and first["language_info"]["name"] == "python"
    assert first[handin.METADATA_KEY] == {"group": "scores"}
    first["kernelspec"]["name"] = "changed"
    assert notebook_metadata({})["kernelspec"]["name"] == "python3"


# --- the kit's version: one function, one answer ----------------------------------------------------------


def _not_installed(name):
    raise importlib.metadata.PackageNotFoundError(name)


def _tree(root: Path, text: str | None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (root / "pyproject.toml").write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    "installed, pyproject, expected",
    [
        ("1.2.3", '[project]\nname = "attnkit"\nversion = "9.9.9"\n', "1.2.3"),
        (None, '[project]\nname = "attnkit"\nversion = "9.9.9"\n', "9.9.9"),
        (None, '[project]\nname = "someone-else"\nversion = "9.9.9"\n', UNKNOWN_VERSION),
        (None, '[project]\nname = "attnkit"\n', UNKNOWN_VERSION),
        (None, "[project\nname = ", UNKNOWN_VERSION),
        (None, None, UNKNOWN_VERSION),
    ],
    ids=["installed-wins", "source-tree", "another-project", "no-version", "broken-toml", "nothing"],
)
def test_kit_version_installed_else_source_tree_else_unknown(monkeypatch, tmp_path, installed, pyproject, expected):
    fake = (lambda name: installed) if installed else _not_installed
    monkeypatch.setattr(handin.importlib.metadata, "version", fake)
    monkeypatch.setattr(handin, "_SOURCE_ROOT", _tree(tmp_path / "kit", pyproject))
    assert kit_version() == expected


def test_kit_version_here_is_the_checkouts():
    """In this checkout (installed, or not) the answer is its pyproject.toml's version."""
    assert kit_version() == handin.source_tree_version(KIT) != UNKNOWN_VERSION


def test_every_side_reports_the_same_version(tmp_path):
    from click.testing import CliRunner

    from grader.cli import main
    from grader.instructor import class_grading

    (tmp_path / "mine.py").write_text("X = 1\n")
    packed = submit([tmp_path / "mine.py"], tmp_path / "out.zip", student="v", cwd=tmp_path, validation=NO_CHECKS)
    shown = CliRunner().invoke(main, ["--version"]).output
    assert packed.manifest["kit_version"] == kit_version()
    assert shown.strip().endswith(f"version {kit_version()}"), shown
    assert class_grading.kit_version is handin.kit_version  # the grade run's info and the gradebook's run row


def test_release_refuses_when_the_installed_version_is_not_the_source_trees(monkeypatch, tmp_path):
    from grader.instructor import release as release_module

    monkeypatch.setattr(release_module, "kit_version", lambda: "0.0.0+stale")
    with pytest.raises(release_module.ReleaseError, match=r"installed attnkit is 0\.0\.0\+stale but pyproject"):
        release_module.release(tmp_path / "kit")
    assert not (tmp_path / "kit").exists()


# --- exactly one definition -------------------------------------------------------------------------------

POLICY_NAMES = frozenset(handin.__all__) | {
    # the names the copies had before handin.py owned them
    "PACKAGE", "MAX_FILES", "MAX_ID_LENGTH", "sanitize_student_id", "_safe_name", "_is_test_file", "_cell_tags",
    "_tags", "_hidden_or_cache", "_skipped_dir", "_wanted", "_too_big",
}  # fmt: skip
ALLOWED = {("grader/child/load.py", "_is_test_file")}
"""The child runtime's copy of the test-file rule, held equal by test_the_child_runtimes_copy_agrees_with_handin."""
POLICY_STRINGS = {SOLUTION_TAG, CHECK_TAG, UNKNOWN_VERSION}


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [name for elt in node.elts for name in _targets(elt)]
    return []


def copies_of_the_policy(root: Path) -> list[str]:
    """``file:line: what`` for every definition of hand-in policy in ``root/grader`` outside handin.py."""
    found = []
    for path in sorted((root / "grader").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "grader/handin.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            names: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [n for target in node.targets for n in _targets(target)]
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                names = _targets(node.target)
            for name in names:
                if name in POLICY_NAMES and (rel, name) not in ALLOWED:
                    found.append(f"{rel}:{node.lineno}: defines {name}")
            if isinstance(node, ast.Constant) and node.value in POLICY_STRINGS:
                found.append(f"{rel}:{node.lineno}: spells out {node.value!r}")
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value in ("kernelspec", "language_info") for k in node.keys
            ):
                found.append(f"{rel}:{node.lineno}: writes a kernelspec")
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                reads = called in ("version", "distribution") and any(
                    isinstance(a, ast.Constant) and a.value == handin.DISTRIBUTION for a in node.args
                )
                named = {k.arg: k.value for k in node.keywords}.get("package_name")
                reads |= isinstance(named, ast.Constant) and named.value == handin.DISTRIBUTION
                if reads:
                    found.append(f"{rel}:{node.lineno}: reads the version of {handin.DISTRIBUTION}")
    return found


def test_the_hand_in_policy_has_exactly_one_definition():
    assert copies_of_the_policy(KIT) == []


def test_the_handin_module_defines_every_name_it_exports():
    defined = set()
    for node in ast.parse((GRADER / "handin.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(n for target in node.targets for n in _targets(target))
    assert set(handin.__all__) <= defined, set(handin.__all__) - defined


@pytest.mark.parametrize(
    "source, expected",
    [
        ("MAX_FILES = 400\n", "1: defines MAX_FILES"),
        ("A, SKIPPED_DIRS = 1, frozenset()\n", "1: defines SKIPPED_DIRS"),
        ("def sanitize_student_id(name):\n    return name\n", "1: defines sanitize_student_id"),
        ("TAGS = ('attnkit-solution',)\n", "1: spells out 'attnkit-solution'"),
        ("META = {'kernelspec': {'name': 'python3'}}\n", "1: writes a kernelspec"),
        ("import importlib.metadata\nV = importlib.metadata.version('attnkit')\n", "2: reads the version of attnkit"),
        ("import click\n\n@click.version_option(package_name='attnkit')\ndef main():\n    pass\n",
         "3: reads the version of attnkit"),
        ("def _is_test_file(name):\n    return name.startswith('test_')\n", "1: defines _is_test_file"),
    ],
    ids=["cap", "tuple-target", "sanitiser", "tag", "kernelspec", "version", "click-version", "test-rule"],
)  # fmt: skip
def test_a_second_definition_is_found_and_named(tmp_path, source, expected):
    (tmp_path / "grader" / "instructor").mkdir(parents=True)
    (tmp_path / "grader" / "handin.py").write_text("MAX_FILES = 1\nSOLUTION_TAG = 'attnkit-solution'\n")
    (tmp_path / "grader" / "instructor" / "intake.py").write_text(source)
    assert copies_of_the_policy(tmp_path) == [f"grader/instructor/intake.py:{expected}"]


# --- submit accepts ⇒ intake accepts, at and over every cap ------------------------------------------------


BODY = "X = 1\n"


def _py(n: int) -> str:
    """A Python file of exactly ``n`` bytes (ASCII): a constant, then a comment padding it out."""
    pad = n - len(BODY)
    assert pad >= 0
    return BODY + ("" if pad == 0 else "\n" if pad == 1 else "#" + "x" * (pad - 2) + "\n")


def _package(root: Path, files: dict[str, int]) -> Path:
    """``root/exercises/`` holding an ``__init__.py`` of ``len(BODY)`` bytes and ``files`` (path -> exact size)."""
    package = root / "exercises"
    for rel, size in {"__init__.py": len(BODY), **files}.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(_py(size), encoding="utf-8")
    return package


def _notebook(n: int, code: str = "def f(x):\n    return x\n") -> str:
    """A valid notebook of exactly ``n`` bytes: one tagged code cell and a markdown cell padding it out."""

    def text(pad: int) -> str:
        cells = [nbformat.v4.new_code_cell(code, id="c1", metadata={"tags": [SOLUTION_TAG]}),
                 nbformat.v4.new_markdown_cell("x" * pad, id="m1")]  # fmt: skip
        nb = nbformat.v4.new_notebook(cells=cells)
        nb.metadata = nbformat.from_dict(notebook_metadata({}))
        return nbformat.writes(nb, version=4)

    pad = n - (len(text(1).encode()) - 1)  # an empty source is written differently from a one-line one
    out = text(pad)
    assert len(out.encode()) == n
    return out


def _zip_entries(path: Path) -> int:
    with zipfile.ZipFile(path) as zf:
        return len(zf.infolist())


BIG = pytest.mark.slow  # 50 MB on disk and through intake: a few seconds


def _totalling(total: int) -> dict[str, int]:
    """Files of at most MAX_PY_BYTES each that, with the package's ``__init__.py``, hold exactly ``total`` bytes."""
    left, files = total - len(BODY), {}
    while left > 0:
        files[f"b{len(files):03d}.py"] = size = min(MAX_PY_BYTES, left)
        left -= size
    return files


def _all_files(n: int) -> dict[str, int]:
    return {f"m{i:03d}.py": len(BODY) for i in range(n)}


CASES = [
    # (id, what to build, accepted by submit?)
    ("py-at-cap", lambda root: [_package(root, {"big.py": MAX_PY_BYTES})], True),
    ("py-over-cap", lambda root: [_package(root, {"big.py": MAX_PY_BYTES + 1})], False),
    ("entries-at-cap", lambda root: [_package(root, _all_files(MAX_ENTRIES - 2))], True),  # + __init__ + manifest
    ("entries-over-cap", lambda root: [_package(root, _all_files(MAX_ENTRIES - 1))], False),
    ("single-py-at-cap", lambda root: [_write(root / "mine.py", _py(MAX_PY_BYTES))], True),
    ("single-py-over-cap", lambda root: [_write(root / "mine.py", _py(MAX_PY_BYTES + 1))], False),
    ("single-py-named-as-a-test", lambda root: [_write(root / "test_mine.py", "X = 1\n")], False),
    ("null-byte", lambda root: [_write(root / "mine.py", "X = 1\x00\n")], False),
    ("notebook-at-cap", lambda root: [_write(root / "nb.ipynb", _notebook(MAX_NOTEBOOK_BYTES))], True),
    ("notebook-over-cap", lambda root: [_write(root / "nb.ipynb", _notebook(MAX_NOTEBOOK_BYTES + 1))], False),
    ("notebook-grader-refuses", lambda root: [_write(root / "nb.ipynb", _notebook(4096, "def f(:\n"))], False),
    ("notebooks-merged", lambda root: [_write(root / f"{g}.ipynb", _notebook(4096)) for g in ("a", "b")], True),
    pytest.param("total-under-cap", lambda root: [_package(root, _totalling(MAX_TOTAL_BYTES - (64 << 10)))], True,
                 marks=BIG, id="total-under-cap"),
    # the .py files alone are exactly the cap: the manifest takes the hand-in over it (intake counts every entry)
    pytest.param("total-at-cap", lambda root: [_package(root, _totalling(MAX_TOTAL_BYTES))], False,
                 marks=BIG, id="total-at-cap"),
]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def _case_id(case) -> str:
    return case.id if hasattr(case, "id") else case[0]


@pytest.mark.slow
@pytest.mark.parametrize("name, build, accepted", CASES, ids=[_case_id(c) for c in CASES])
def test_what_submit_packs_intake_accepts(tmp_path, name, build, accepted):
    paths = build(tmp_path / "work")
    out = tmp_path / "handed-in.zip"
    try:
        packed = submit(paths, out, student="ann", cwd=tmp_path, validation=NO_CHECKS)
    except SubmitError as exc:
        assert not accepted, f"submit refused what it should pack: {exc}"
        assert "\n" not in str(exc) and not out.exists()
        return
    assert accepted, f"submit packed {name}, over a cap"
    assert _zip_entries(packed.out) <= MAX_ENTRIES
    sub = read_submission(packed.out)
    assert sub.error is None, sub.error
    assert sub.files, "intake found nothing to grade in what submit packed"
    assert json.loads(zipfile.ZipFile(packed.out).read(MANIFEST))["kind"] == packed.kind


def test_the_entry_cap_is_reached_exactly(tmp_path):
    """At the cap the zip holds exactly MAX_ENTRIES entries, and intake would refuse one more."""
    package = _package(tmp_path / "work", _all_files(MAX_ENTRIES - 2))
    packed = submit([package], tmp_path / "at.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    assert _zip_entries(packed.out) == MAX_ENTRIES
    with zipfile.ZipFile(packed.out, "a") as zf:
        zf.writestr("exercises/one_more.py", "X = 1\n")
    assert "entry limit" in (read_submission(packed.out).error or "")


def test_a_notebook_the_grader_refuses_is_refused_with_the_graders_reason(tmp_path):
    path = _write(tmp_path / "nb.ipynb", _notebook(4096, "def f(:\n"))
    graded = read_submission(path).error
    assert graded and "SyntaxError" in graded
    with pytest.raises(SubmitError) as refused:
        submit([path], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    assert graded.removeprefix("nb.ipynb: ") in str(refused.value)


def test_a_zip_over_its_cap_on_disk_is_never_written(tmp_path, monkeypatch):
    """Deflate can grow incompressible text a little: the zip's own size is checked before it is kept."""
    from grader import submit as submit_module

    monkeypatch.setattr(submit_module, "MAX_ZIP_BYTES", 100)
    (tmp_path / "mine.py").write_text("X = 1\n" * 100)
    with pytest.raises(SubmitError, match="zip is over the 100 bytes limit"):
        submit([tmp_path / "mine.py"], tmp_path / "out.zip", student="ann", cwd=tmp_path, validation=NO_CHECKS)
    assert list(tmp_path.glob("*.zip")) == [] and list(tmp_path.glob(".*partial")) == []


@pytest.mark.parametrize(
    "created", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "2026-13-01", "x" * 10_000, 12, None]
)
def test_a_manifest_time_that_is_no_time_is_no_claim(created):
    """A red team's zip dated 9999-12-31T23:59:59-23:59 overflowed on the way to UTC and stopped the class."""
    from grader.handin import manifest_time

    assert manifest_time({"created": created}) is None


def test_a_manifest_time_is_read_as_utc():
    from grader.handin import manifest_time

    assert manifest_time({"created": "2026-12-01T10:00:00+01:00"}).isoformat() == "2026-12-01T09:00:00+00:00"
