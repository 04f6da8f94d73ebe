"""``attnkit release DEST``: the learner's kit, with nothing of the answers in it (instructor-only module).

A release holds ``exercises/``, ``notebooks/``, ``grader/`` without ``grader/instructor/`` (the folder is the
boundary: no list of files to keep), the kit's ``conftest.py`` unchanged (it checks ``solutions`` where importable,
the learner's ``exercises`` otherwise), a learner's ``pyproject.toml``, ``constraints.txt`` and ``README.md``.  It
is built in a staging folder beside DEST and scanned for leaks (a reference body, a catalogue id or hint, a hidden
case name) before DEST is touched.

DEST must be empty or absent.  With ``force``, the files an earlier release wrote (:data:`RECORD`, with their
sha256) and this one no longer has are removed, this release's written over the earlier ones, and nothing else is
ever deleted (a ``.git`` folder is kept and listed).  A file to overwrite or remove that changed since the last
release (without a record: any that differs) is never touched: the release lists those and stops, writing nothing.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import io
import json
import os
import re
import shutil
import sys
import tempfile
import tokenize
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from grader.handin import RELEASE_RECORD, kit_version
from grader.notebooks import write_notebooks

KIT_ROOT = Path(__file__).resolve().parents[2]
GRADER_DIR = KIT_ROOT / "grader"
INSTRUCTOR_DIR = GRADER_DIR / "instructor"
"""What never ships: a learner's kit gets ``grader/`` without this folder."""
EXERCISES_DIR = KIT_ROOT / "exercises"
TEMPLATES = INSTRUCTOR_DIR / "templates"

RECORD = RELEASE_RECORD
"""The files a release wrote, with the sha256 of each, kept in DEST: ``--force`` removes only those and
refreshes only those unchanged since."""

HINTS = "grader/hints.json"
"""The kit's hints for known mistakes (:mod:`grader.instructor.kit_hints`): the one file that may name them."""

LEARNER_DEPENDENCIES = (
    "torch", "pluggy", "pytest", "click", "rich", "nbformat", "matplotlib", "safetensors", "msgspec", "tomli"
)  # fmt: skip
"""Distributions a learner's kit depends on; their version ranges (and markers) are taken from the kit's pyproject.
``tests/test_release.py`` checks that they provide every module the kit's own files import."""

GIVEN_BODIES = frozenset({"make_self_attention", "make_causal_attention", "make_multihead_attention"})
"""Reference functions whose one-line bodies the stubs give away on purpose (``return SelfAttention(...)``)."""


SKIPPED_NAMES = frozenset({"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


class ReleaseError(Exception):
    """The release cannot be written (the message says why, in one line or a short list)."""


@dataclass
class ReleaseSummary:
    dest: Path
    version: str
    files: list[str] = field(default_factory=list)  # relative POSIX paths written
    notebooks: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # files of an earlier release, removed (--force)
    kept: list[str] = field(default_factory=list)  # other files found in DEST and left alone (--force)
    warnings: list[str] = field(default_factory=list)


# --- the kit's own metadata -------------------------------------------------------------


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]
    path = KIT_ROOT / "pyproject.toml"
    if not path.is_file():
        raise ReleaseError(f"no pyproject.toml at {KIT_ROOT}: release runs from the kit's source tree")
    with path.open("rb") as fh:
        return tomllib.load(fh)


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower()


def learner_pyproject(project: dict) -> str:
    """The learner's ``pyproject.toml``: same distribution and version, packages exercises and grader only."""
    deps = {_requirement_name(r): r for r in project.get("dependencies", [])}
    missing = [name for name in LEARNER_DEPENDENCIES if name not in deps]
    if missing:
        raise ReleaseError(f"pyproject.toml lists no {', '.join(missing)} among the dependencies")
    notebooks = project.get("optional-dependencies", {}).get("notebooks") or ["nbclient>=0.10", "ipykernel>=6.29"]

    def toml_list(items: list[str]) -> str:
        return "[\n" + "".join(f"    {json.dumps(item)},\n" for item in items) + "]"

    return (
        "[build-system]\n"
        'requires = ["setuptools>=68"]\n'
        'build-backend = "setuptools.build_meta"\n'
        "\n"
        "[project]\n"
        f"name = {json.dumps(project['name'])}\n"
        f"version = {json.dumps(project['version'])}\n"
        'description = "Exercises on attention mechanisms in PyTorch: the learner\'s kit"\n'
        'readme = "README.md"\n'
        f"requires-python = {json.dumps(project.get('requires-python', '>=3.10'))}\n"
        "# torch is an open range on purpose: keep the torch you have (constraints.txt pins the tested one).\n"
        f"dependencies = {toml_list([deps[name] for name in LEARNER_DEPENDENCIES])}\n"
        "\n"
        "[project.optional-dependencies]\n"
        f"notebooks = {toml_list(list(notebooks))}\n"
        "\n"
        "[project.scripts]\n"
        'attnkit = "grader.cli:main"\n'
        "\n"
        "[tool.setuptools]\n"
        'packages = ["exercises", "grader"]\n'
        "\n"
        "[tool.pytest.ini_options]\n"
        'minversion = "7.4"\n'
        'testpaths = ["exercises"]\n'
        'addopts = "-ra"\n'
        'markers = ["exercise(name): the exercise (hook name) a public test checks"]\n'
        'filterwarnings = ["ignore:Failed to initialize NumPy:UserWarning"]\n'
    )


def learner_constraints() -> str:
    path = KIT_ROOT / "constraints.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    pins = [ln.strip() for ln in lines if ln.strip().startswith("torch")] or ["torch>=2.1"]
    return (
        "# The torch release this kit was tested with. Optional:\n"
        '#   pip install -e ".[notebooks]" -c constraints.txt\n'
        "# Leave `-c constraints.txt` out to keep a torch you already have (any torch >= 2.1 works).\n"
        + "\n".join(pins)
        + "\n"
    )


def exercise_groups(exercises_dir: Path = EXERCISES_DIR) -> list[dict[str, str]]:
    """``[{"module": "scores.py", "names": "`dot_product_scores`, …"}]`` in the chapter's order, read with ast."""
    from grader.hook_table import CLASS_ALIASES
    from grader.registry import HOOK_NAMES

    order = {name: i for i, name in enumerate(HOOK_NAMES)}
    classes = set(CLASS_ALIASES.values())
    groups = []
    for path in sorted(exercises_dir.glob("*.py")):
        if path.name.startswith(("test_", "_")):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [
            n.name
            for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and (n.name in order or n.name in classes)
        ]
        hooks = [n for n in names if n in order]
        if hooks:
            groups.append((min(order[h] for h in hooks), path.name, names))
    return [{"module": m, "names": ", ".join(f"`{n}`" for n in names)} for _, m, names in sorted(groups)]


def learner_readme(version: str, exercises_dir: Path, notebooks: list[str]) -> str:
    import jinja2

    loader = jinja2.FileSystemLoader(str(TEMPLATES))
    env = jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.get_template("learner_README.md.j2").render(
        version=version, groups=exercise_groups(exercises_dir), example_notebook=notebooks[0] if notebooks else ""
    )


# --- the leak scan ------------------------------------------------------------------------


def _squeeze(text: str) -> str:
    """Text with every whitespace character removed: formatting never hides a match."""
    return "".join(text.split())


def strip_comments(source: str) -> str:
    """Python source with its comments cut out, lines and columns otherwise unchanged."""
    lines = source.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source
    for tok in reversed(tokens):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            line = lines[row - 1]
            lines[row - 1] = line[:col] + ("\n" if line.endswith("\n") else "")
    return "".join(lines)


def reference_bodies(path: Path | None = None) -> dict[str, str]:
    """``{qualified name: body}`` of every function and method of the reference (every group's, or the file
    ``path``), comments and whitespace removed; not the one-line bodies of :data:`GIVEN_BODIES` (the stubs')."""
    if path is None:
        from grader.packs import instructor_part

        every: dict[str, str] = {}
        for module in instructor_part("REFERENCE"):
            every.update(reference_bodies(Path(inspect.getfile(module))))
        return every
    source = strip_comments(path.read_text(encoding="utf-8"))
    tree = ast.parse(source)
    bodies: dict[str, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                if not (child.name in GIVEN_BODIES and len(child.body) == 1):
                    body = "".join(ast.get_source_segment(source, stmt) or "" for stmt in child.body)
                    bodies[name] = _squeeze(body)
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    return bodies


def hidden_case_names(seed: int = 0) -> set[str]:
    """Names of the hidden cases that say something (a hyphen and 8 characters at least), from the case builder
    (names do not depend on the seed but for the numbers in a few short ones: ``T=12``)."""
    from grader.instructor.cases import make_cases

    return {case.name for case in make_cases(seed) if "-" in case.name and len(case.name) >= 8}


def catalogue_strings() -> dict[str, str]:
    """``{text: what it is}`` for every id and hint of the catalogue of known mistakes."""
    from solutions.mistakes import catalogue

    found: dict[str, str] = {}
    for mistake in catalogue():
        found[mistake.id] = f"catalogue id {mistake.id}"
        for kind in ("hint", "hint_zh", "description"):
            text = getattr(mistake, kind, "") or ""
            if len(_squeeze(text)) >= 12:
                found[text] = f"catalogue {kind} of {mistake.id}"
    return found


def scannable_text(path: Path) -> str:
    """What a file says, for the leak scan: Python without comments, a notebook's cell sources and outputs."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix == ".py":
        return strip_comments(text)
    if path.suffix == ".ipynb":
        try:
            notebook = json.loads(text)
        except ValueError:
            return text
        parts = []
        for cell in notebook.get("cells", []):
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            parts.append(strip_comments(source) if cell.get("cell_type") == "code" else source)
            parts.append(json.dumps(cell.get("outputs", []), ensure_ascii=False))
            parts.append(json.dumps(cell.get("metadata", {}), ensure_ascii=False))
        return "\n".join(parts) + text
    return text


def find_leaks(root: Path, public_dir: Path = EXERCISES_DIR) -> list[str]:
    """One line per thing of the answers found under ``root``: a reference body, a catalogue entry, a hidden case
    (not those that the public exercises in ``public_dir`` use: public by definition)."""
    public = " ".join(
        p.read_text(encoding="utf-8", errors="replace") for p in sorted(public_dir.rglob("*.py")) if p.is_file()
    )
    bodies = reference_bodies()
    cases = {n for n in hidden_case_names() if n not in public}
    catalogue = {t: what for t, what in catalogue_strings().items() if t not in public}
    problems: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        parts = rel.split("/")
        if (
            parts[0] == "solutions"
            or parts[:2] == ["grader", "instructor"]
            or parts[-1] in ("cases.py", "suite.py", "mistakes.py", "reference.py")
        ):
            problems.append(f"{rel}: an instructor-only file")
        text = scannable_text(path)
        squeezed = _squeeze(text)
        if rel == HINTS:  # names the mistakes on purpose; it must be data, and nothing else
            from grader.instructor.kit_hints import problems_in

            problems += [f"{rel}: {why}" for why in problems_in(path)]
        for name, body in bodies.items():
            if body and body in squeezed:
                problems.append(f"{rel}: holds the body of the reference's {name}")
        for case in sorted(cases):
            if re.search(rf"(?<![\w-]){re.escape(case)}(?![\w-])", text):
                problems.append(f"{rel}: names the hidden case {case!r}")
        for needle, what in catalogue.items() if rel != HINTS else ():
            if " " in needle:  # a hint or a description: any formatting
                found = _squeeze(needle) in squeezed
            else:  # an id: a whole word
                found = re.search(rf"(?<![\w-]){re.escape(needle)}(?![\w-])", text) is not None
            if found:
                problems.append(f"{rel}: holds the {what}")
    return problems


# --- writing the kit ---------------------------------------------------------------------


def _copy_tree(src: Path, dst: Path, leave_out: Path | None = None) -> None:
    """Copy ``src`` into ``dst`` without caches, hidden files, links, or the folder ``leave_out``."""
    dst.mkdir(parents=True, exist_ok=True)
    for child in sorted(src.iterdir()):
        skipped = child.name in SKIPPED_NAMES or child.name.startswith(".") or child.suffix in (".pyc", ".pyo")
        if skipped or child.is_symlink() or child == leave_out:
            continue
        if child.is_dir():
            _copy_tree(child, dst / child.name, leave_out)
        else:
            shutil.copyfile(child, dst / child.name)


def _module_file(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ReleaseError(f"{name}: no such module (a source file), named by an exercise group")
    return Path(spec.origin)


def copy_installed_groups(stage: Path) -> list[str]:
    """Copy the learner's half of every exercise group installed from elsewhere (:mod:`grader.packs`) into the kit:
    its declaration as ``grader/groups/<group>.py``, its ``STUB`` and ``PUBLIC_TESTS`` as ``exercises/<group>.py``
    and ``exercises/test_<group>.py``; the kit then finds the group as one of its own.  Returns the groups copied."""
    from grader.packs import groups

    copied = []
    for group in groups():
        if group.module.__name__.startswith("grader.groups."):
            continue
        name = group.rows[0].group
        parts = {"STUB": f"exercises/{name}.py", "PUBLIC_TESTS": f"exercises/test_{name}.py"}
        missing = [part for part in parts if group.part(part) is None]
        if missing:
            raise ReleaseError(f"exercise group {group.name} ({group.origin}) declares no {' and no '.join(missing)}")
        targets = {f"grader/groups/{name}.py": _module_file(group.name)}
        targets.update({rel: _module_file(str(group.part(part))) for part, rel in parts.items()})
        for rel, source in targets.items():
            if (stage / rel).exists():
                raise ReleaseError(f"exercise group {group.name} ({group.origin}): the kit has its own {rel}")
            shutil.copyfile(source, stage / rel)
        copied.append(name)
    return copied


def _build(stage: Path, summary: ReleaseSummary, project: dict) -> None:
    _copy_tree(EXERCISES_DIR, stage / "exercises")
    _copy_tree(GRADER_DIR, stage / "grader", leave_out=INSTRUCTOR_DIR)
    copy_installed_groups(stage)
    shutil.copyfile(KIT_ROOT / "conftest.py", stage / "conftest.py")  # it chooses exercises where solutions is absent
    (stage / "pyproject.toml").write_text(learner_pyproject(project), encoding="utf-8")
    (stage / "constraints.txt").write_text(learner_constraints(), encoding="utf-8")
    from grader.instructor.kit_hints import write_hints

    # the public tests run under this kit's conftest (those shipped are copies); data only, never the mistakes' code
    write_hints(stage / HINTS, KIT_ROOT / "exercises")
    summary.notebooks = [Path(p).name for p in write_notebooks(stage / "notebooks", stage / "exercises")]
    readme = learner_readme(summary.version, stage / "exercises", summary.notebooks)
    (stage / "README.md").write_text(readme, encoding="utf-8")


def _files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink())


def _check_dest(dest: Path) -> None:
    resolved = dest.resolve()
    if resolved == KIT_ROOT or resolved in KIT_ROOT.parents:
        raise ReleaseError(f"{dest}: would hold this kit's own source (and its solutions); choose another folder")
    for inside in ("exercises", "grader", "solutions", "examples", "tests"):
        if resolved == KIT_ROOT / inside or (KIT_ROOT / inside) in resolved.parents:
            raise ReleaseError(f"{dest}: is inside the kit's {inside}/ folder; choose another folder")
    if dest.exists() and not dest.is_dir():
        raise ReleaseError(f"{dest}: exists and is not a folder")


def _earlier_release(dest: Path) -> dict[str, str | None]:
    """``{path: sha256 it was written with}`` from DEST's record (None where an older record kept no hash)."""
    try:
        files = json.loads((dest / RECORD).read_text(encoding="utf-8")).get("files", [])
    except (ValueError, OSError, AttributeError):  # no record, or not one
        return {}
    listed = files.items() if isinstance(files, dict) else ((rel, None) for rel in files if isinstance(files, list))
    return {
        rel: sha if isinstance(sha, str) else None
        for rel, sha in listed
        if isinstance(rel, str) and rel and not Path(rel).is_absolute() and ".." not in Path(rel).parts
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def edited_files(dest: Path, stage: Path, files: list[str], earlier: dict[str, str | None], removed: list[str]):
    """The files in DEST that ``--force`` would overwrite or remove although they changed since the last release:
    neither the sha256 the record says the last release wrote, nor what this release writes (without a record,
    an old kit, every existing file that differs)."""
    edited = []
    for rel in sorted(set(files) | set(removed)):
        target = dest / rel
        if target.is_file() and not target.is_symlink():
            sha = _sha256(target)
            if not (rel in files and sha == _sha256(stage / rel)) and earlier.get(rel) != sha:
                edited.append(rel)
    return edited


def _listed(items: list[str]) -> str:
    return "\n  ".join(items[:20]) + (f"\n  … and {len(items) - 20} more" if len(items) > 20 else "")


def release(dest: Path, force: bool = False) -> ReleaseSummary:
    """Write the learner's kit into ``dest``; see the module's docstring for what goes in and what ``force`` does."""
    dest = Path(dest)
    _check_dest(dest)
    existing = _files_under(dest) if dest.is_dir() else []
    if dest.is_dir() and any(dest.iterdir()) and not force:
        raise ReleaseError(f"{dest} is not empty; use --force to replace an earlier release there")
    project = _pyproject()["project"]
    version = kit_version()
    if version != project.get("version"):
        raise ReleaseError(
            f"the installed attnkit is {version} but pyproject.toml says {project.get('version')}: "
            "reinstall the kit (pip install -e .) and release again"
        )
    summary = ReleaseSummary(dest=dest, version=version)
    (parent := dest.resolve().parent).mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".attnkit-release-", dir=parent))
    try:
        _build(stage, summary, project)
        leaks = find_leaks(stage)
        if leaks:
            raise ReleaseError(f"the learner's kit would leak the answers; nothing was written:\n  {_listed(leaks)}")
        files = summary.files = _files_under(stage)
        recorded = _earlier_release(dest) if force else {}
        earlier = set(recorded)
        summary.removed = sorted(rel for rel in earlier & set(existing) if rel not in files)
        ours = earlier | set(files) | {RECORD}  # caches (__pycache__, .pytest_cache …) are kept too, not worth a line
        summary.kept = sorted(rel for rel in existing if rel not in ours and not SKIPPED_NAMES & set(rel.split("/")))
        edited = edited_files(dest, stage, files, recorded, summary.removed) if dest.is_dir() else []
        if edited:
            raise ReleaseError(
                f"{len(edited)} file(s) in {dest} changed since the last release (a learner's work?); "
                f"nothing was written. Move them away or restore them, and release again:\n  {_listed(edited)}"
            )
        dest.mkdir(parents=True, exist_ok=True)
        for rel in summary.removed:
            target = dest / rel
            if target.is_file() or target.is_symlink():
                target.unlink()
            for folder in target.parents:  # folders the removal emptied
                if folder == dest or dest not in folder.parents:
                    break
                try:
                    folder.rmdir()
                except OSError:
                    break
        for rel in files:
            target = dest / rel
            if target.is_symlink() or (target.exists() and not target.is_file()):
                raise ReleaseError(f"{target}: is in the way (a link or a folder); remove it and release again")
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / rel, target)
        created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        hashes = {rel: _sha256(dest / rel) for rel in files}
        record = {"kit_version": summary.version, "created": created, "files": hashes}
        (dest / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return summary
