"""``attnkit submit``: pack a learner's work into one zip to hand in.

What goes in:

- the learner's ``exercises`` package (by default the one in the current
  folder's kit): its ``.py`` files, under ``exercises/`` -- never the public
  tests (``test_*.py``, ``conftest.py``), ``__pycache__``,
  ``.ipynb_checkpoints`` or hidden files;
- or one notebook, packed as it is;
- or several notebooks (a folder such as ``notebooks/``, or several paths),
  merged into one ``notebooks.ipynb``: from each, the cells the grader would
  take (those tagged ``attnkit-solution``, or every code cell but the check
  cells when none is tagged), all tagged, in the order given;
- or one ``.py`` file;
- and ``manifest.json``: the kit version, when it was packed (UTC), the sha256
  of every packed file (and of the notebooks merged), and the public check
  results at packing time, per exercise.

``attnkit grade`` reads these zips like any other: the manifest is not Python
and is ignored; the package is graded as ``exercises``, a notebook as a notebook.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import platform
import re
import tempfile
import unicodedata
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
PACKAGE = "exercises"
MERGED_NOTEBOOK = "notebooks.ipynb"
SOLUTION_TAG = "attnkit-solution"
CHECK_TAG = "attnkit-check"

# What `attnkit grade` accepts (grader/instructor/intake.py): refused here first, where the learner can fix it.
MAX_PY_BYTES = 1 << 20
MAX_NOTEBOOK_BYTES = 20 << 20
MAX_TOTAL_BYTES = 50 << 20
MAX_FILES = 400

SKIPPED_DIRS = frozenset({"__pycache__", ".ipynb_checkpoints", "__MACOSX"})
NOT_CHECKED = "not checked"


class SubmitError(Exception):
    """Nothing was packed; the message says why and what to do, in one line."""


@dataclass
class Packed:
    """A zip written by :func:`submit`."""

    out: Path
    kind: str  # "exercises", "notebook", "notebooks" or "py"
    manifest: dict[str, Any]
    sizes: dict[str, int] = field(default_factory=dict)  # packed name -> bytes

    @property
    def checks(self) -> dict[str, dict[str, Any]]:
        return self.manifest.get("checks") or {}


# --- what to pack --------------------------------------------------------------------------------


def _hidden_or_cache(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRS


def _is_test_file(name: str) -> bool:
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _notebooks_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if p.is_file() and not p.name.startswith("."))


def locate(paths: list[Path], cwd: Path | None = None) -> tuple[str, list[Path]]:
    """``(kind, paths)``: what the learner asked to hand in, or :class:`SubmitError` saying what is wrong."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if not paths:
        if (cwd / PACKAGE / "__init__.py").is_file():
            return "exercises", [cwd / PACKAGE]
        if cwd.name == PACKAGE and (cwd / "__init__.py").is_file():
            return "exercises", [cwd]
        raise SubmitError(
            f"no {PACKAGE}/ folder in {cwd}: run attnkit submit in your kit's folder, "
            "or name what to hand in (your exercises/ folder, a notebook or a .py file)"
        )
    for p in paths:
        if not p.exists():
            raise SubmitError(f"{p}: no such file or folder")
    if len(paths) > 1:
        if all(p.is_file() and p.suffix.lower() == ".ipynb" for p in paths):
            return "notebooks", list(paths)
        raise SubmitError("give one folder, one .py file, or one or more notebooks (.ipynb)")
    path = paths[0]
    if path.is_dir():
        if (path / PACKAGE / "__init__.py").is_file():
            return "exercises", [path / PACKAGE]
        if (path / "__init__.py").is_file():
            return "exercises", [path]
        notebooks = _notebooks_in(path)
        if len(notebooks) == 1:
            return "notebook", notebooks
        if notebooks:
            return "notebooks", notebooks
        raise SubmitError(f"{path}: neither an exercises package (no __init__.py) nor a folder of notebooks")
    suffix = path.suffix.lower()
    if suffix == ".ipynb":
        return "notebook", [path]
    if suffix == ".py":
        return "py", [path]
    raise SubmitError(f"{path}: hand in your exercises/ folder, a notebook (.ipynb) or a .py file")


def package_files(package: Path) -> dict[str, Path]:
    """``{"exercises/<rel>": path}`` for every ``.py`` of the package, tests, caches and hidden files left out."""
    found: dict[str, Path] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(package, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not _hidden_or_cache(d) and not Path(dirpath, d).is_symlink())
        for name in sorted(filenames):
            full = Path(dirpath) / name
            if not name.endswith(".py") or _hidden_or_cache(name) or _is_test_file(name) or full.is_symlink():
                continue
            rel = full.relative_to(package).as_posix()
            size = full.stat().st_size
            if size > MAX_PY_BYTES:
                raise SubmitError(f"{rel}: {size // 1024} KB is over the 1 MB a .py file may hold")
            total += size
            found[f"{PACKAGE}/{rel}"] = full
    if f"{PACKAGE}/__init__.py" not in found:
        raise SubmitError(f"{package}: no __init__.py, so it is not your exercises package")
    if len(found) > MAX_FILES:
        raise SubmitError(f"{package}: more than {MAX_FILES} .py files")
    if total > MAX_TOTAL_BYTES:
        raise SubmitError(f"{package}: more than 50 MB of .py files")
    return found


def _read_text(path: Path, limit: int) -> bytes:
    size = path.stat().st_size
    if size > limit:
        raise SubmitError(f"{path.name}: {size // (1 << 20)} MB is over the {limit >> 20} MB limit")
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmitError(f"{path.name}: not UTF-8 text (at byte {exc.start}); save it as UTF-8") from None
    return data


def _cell_tags(cell: dict[str, Any]) -> list[str]:
    tags = (cell.get("metadata") or {}).get("tags") or []
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def merge_notebooks(paths: list[Path]) -> bytes:
    """One notebook holding, from each notebook in turn, the code cells the grader would take, all tagged.

    From a notebook with cells tagged ``attnkit-solution``: those cells; from one
    with none: every code cell except the check cells.  So each notebook counts
    the way it would on its own, whatever the others do.
    """
    import nbformat

    v4 = nbformat.v4
    cells = []
    for index, path in enumerate(paths, start=1):
        text = _read_text(path, MAX_NOTEBOOK_BYTES).decode("utf-8")
        try:
            nb = nbformat.reads(text, as_version=4)
        except Exception as exc:  # nbformat raises many kinds on a broken file
            line = (str(exc) or type(exc).__name__).splitlines()[0]
            raise SubmitError(f"{path.name}: not a notebook ({line})") from None
        code = [c for c in nb.cells if c.get("cell_type") == "code"]
        tagged = [c for c in code if SOLUTION_TAG in _cell_tags(c)]
        chosen = tagged or [c for c in code if CHECK_TAG not in _cell_tags(c)]
        stem = re.sub(r"[^A-Za-z0-9_-]", "-", path.stem)[:40] or "notebook"
        cells.append(v4.new_markdown_cell(f"# From `{path.name}`", id=f"n{index}-{stem}"[:64]))
        for n, cell in enumerate(chosen, start=1):
            metadata = dict(cell.get("metadata") or {})
            metadata["tags"] = sorted(set(_cell_tags(cell)) | {SOLUTION_TAG})
            metadata["attnkit_from"] = path.name
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            cells.append(v4.new_code_cell(source, id=f"n{index}-{n}-{stem}"[:64], metadata=metadata))
    merged = v4.new_notebook(cells=cells)
    merged.metadata = nbformat.from_dict(
        {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
            "attnkit": {"merged_from": [p.name for p in paths]},
        }
    )
    nbformat.validate(merged)
    return nbformat.writes(merged, version=4).encode("utf-8")


# --- checks at packing time ----------------------------------------------------------------------


def _kit_tests_dir(fallback: Path | None) -> Path | None:
    """The public tests `attnkit check` runs: the kit's own, else those beside the package."""
    try:
        from grader.check import public_tests_dir

        return public_tests_dir()
    except (RuntimeError, ImportError):
        pass
    if fallback is not None and any(fallback.glob("test_*.py")):
        return fallback
    return None


def _solution_spec(package: Path) -> str:
    """``"exercises"`` when ``package`` is the importable ``exercises`` (what `attnkit check` checks), else its path."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if locations and Path(locations[0]).resolve() == package.resolve():
        return PACKAGE
    return str(package)


def _run_checks(solution: str, tests_dir: Path | None) -> tuple[dict[str, dict[str, Any]], str]:
    if tests_dir is None:
        return {}, f"{NOT_CHECKED}: the public tests were not found (run attnkit submit in your kit's folder)"
    try:
        from grader.check import run_public_cases

        results = run_public_cases(solution=solution, tests_dir=tests_dir)
    except Exception as exc:  # a broken kit or learner code that breaks pytest itself: still pack
        line = (str(exc) or type(exc).__name__).splitlines()[0]
        return {}, f"{NOT_CHECKED}: {line}"
    checks = {
        r.exercise: {"status": r.status, "passed": r.passed, "total": r.passed + r.failed + r.not_implemented}
        for r in results
    }
    return checks, "public cases run at packing time"


def _check_notebook(data: bytes, tests_dir: Path | None) -> tuple[dict[str, dict[str, Any]], str]:
    try:
        from grader.notebooks import notebook_to_source
    except ImportError:
        return {}, f"{NOT_CHECKED}: this kit cannot read notebooks (grader/notebooks.py is missing)"
    try:
        source = notebook_to_source(data.decode("utf-8"))
    except ValueError as exc:
        return {}, f"{NOT_CHECKED}: {str(exc).splitlines()[0] if str(exc) else 'the notebook cannot be read'}"
    with tempfile.TemporaryDirectory(prefix="attnkit-submit-") as tmp:
        module = Path(tmp) / "notebook_submission.py"
        module.write_text(source, encoding="utf-8")
        return _run_checks(str(module), tests_dir)


# --- the zip -----------------------------------------------------------------------------------


def kit_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("attnkit")
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():
        match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
        if match:
            return match.group(1)
    return "unknown"


def _safe_name(text: str) -> str:
    out = []
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(ch):
            continue
        out.append(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "-")
    return re.sub(r"-{2,}", "-", "".join(out)).strip(".-")[:40]


def _student(who: str | None, folder: Path) -> str:
    """``who`` (``--name``), else the login name, else the folder's name; safe in a file name."""
    if not who:
        try:
            who = getpass.getuser()
        except Exception:  # no login name in some containers
            who = None
    return _safe_name(who or "") or _safe_name(folder.resolve().name) or "learner"


def _free(path: Path) -> Path:
    if not path.exists():
        return path
    for n in range(2, 1000):
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists():
            return candidate
    raise SubmitError(f"{path}: too many submissions with this name; use --out")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def submit(
    paths: list[Path] | tuple[Path, ...] = (),
    out: Path | None = None,
    *,
    who: str | None = None,
    cwd: Path | None = None,
    check: bool = True,
) -> Packed:
    """Pack the learner's work into one zip (see the module docstring); returns what was written.

    ``out`` defaults to ``submission-<who>-<date>.zip`` in ``cwd`` (never
    overwriting: ``-2``, ``-3`` … are added); an ``out`` given explicitly is
    overwritten.  ``who`` defaults to the login name, else the folder's name.
    """
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if out is not None:
        if Path(out).suffix.lower() != ".zip":
            raise SubmitError(f"{out}: the hand-in is a zip; name it <something>.zip")
        if Path(out).is_dir():
            raise SubmitError(f"{out}: is a folder")
    kind, found = locate([Path(p) for p in paths], cwd)
    now = datetime.now(timezone.utc)
    contents: dict[str, bytes] = {}
    sources: dict[str, str] = {}
    if kind == "exercises":
        package = found[0]
        for arcname, full in package_files(package).items():
            contents[arcname] = _read_text(full, MAX_PY_BYTES)
        checks, note = _run_checks(_solution_spec(package), _kit_tests_dir(package)) if check else ({}, NOT_CHECKED)
    elif kind == "py":
        data = _read_text(found[0], MAX_PY_BYTES)
        contents[(_safe_name(found[0].stem) or "solution") + ".py"] = data
        checks, note = _run_checks(str(found[0]), _kit_tests_dir(None)) if check else ({}, NOT_CHECKED)
    else:
        if kind == "notebook":
            data = _read_text(found[0], MAX_NOTEBOOK_BYTES)
            name = (_safe_name(found[0].stem) or "notebook") + ".ipynb"
        else:
            data = merge_notebooks(found)
            name = MERGED_NOTEBOOK
            sources = {p.name: _sha256(p.read_bytes()) for p in found}
        contents[name] = data
        checks, note = _check_notebook(data, _kit_tests_dir(None)) if check else ({}, NOT_CHECKED)

    try:
        import torch

        torch_version = str(torch.__version__)
    except ImportError:
        torch_version = None
    passing = sum(c["status"] == "passing" for c in checks.values())
    student = _student(who, cwd)
    manifest: dict[str, Any] = {
        "kit": "attnkit",
        "kit_version": kit_version(),
        "created": now.isoformat(timespec="seconds"),
        "student": student,
        "kind": kind,
        "files": {name: _sha256(data) for name, data in sorted(contents.items())},
        "checked": bool(checks),
        "check_note": note,
        "checks": checks,
        "passing": passing,
        "exercises": len(checks),
        "python": platform.python_version(),
        "torch": torch_version,
    }
    if sources:
        manifest["merged_from"] = sources
    if out is None:
        target = _free(cwd / f"submission-{student}-{now.strftime('%Y-%m-%d')}.zip")
    else:
        target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in sorted(contents.items()):
                zf.writestr(_entry(name, now), data)
            zf.writestr(_entry(MANIFEST, now), json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        os.replace(partial, target)
    finally:
        if partial.exists():
            partial.unlink()
    sizes = {name: len(data) for name, data in sorted(contents.items())}
    return Packed(out=target, kind=kind, manifest=manifest, sizes=sizes)


def _entry(name: str, when: datetime) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=when.timetuple()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info
