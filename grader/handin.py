"""The hand-in policy, in one place: what a hand-in may hold and how its parts are told apart.

``attnkit submit`` (:mod:`grader.submit`, in the learner's kit) refuses, where the learner can fix it, whatever
``attnkit grade``'s intake (:mod:`grader.instructor.handin_reading`) would refuse; intake reads hand-ins by the same
rules.  So everything here is a constant or a small pure function, standard library only (no torch, no nbformat):
it ships in the learner's kit and is imported by the instructor's side.

- **Which files are code** (:func:`is_graded_source`): a ``.py`` that is not a test file (:func:`is_test_file`,
  pytest's default patterns), not hidden, in no hidden or cache folder (:data:`SKIPPED_DIRS`).  The learner's
  sandboxed process has its own copy of the rule (it imports nothing of the kit; a test holds the two together).
- **The caps** (``MAX_*``), with :func:`size_text` / :func:`too_big` for the one-line refusals naming them.
- **Text**: UTF-8 without null bytes (:func:`text_problem`); **names**: :func:`safe_name` (a student id or a packed
  file's name).
- **Notebooks**: the cell tags, :func:`cell_tags`, :func:`graded_cells` (the cells the grader takes),
  :func:`undefined_names` (what kept code reads but never defines) and :func:`notebook_metadata` (the kernelspec).
- **The manifest** (``manifest.json`` in a zip ``attnkit submit`` writes) and the student id it carries:
  :data:`MANIFEST`, :data:`STUDENT_ENV`, :func:`manifest_student`, :func:`manifest_time`.
- **The kit's version**: :func:`kit_version`, one answer everywhere.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import sys
import unicodedata
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "CHECK_TAG",
    "DISTRIBUTION",
    "KIT_PACKAGE",
    "MAX_ENTRIES",
    "MAX_NAME_LENGTH",
    "MAX_NOTEBOOK_BYTES",
    "MAX_PY_BYTES",
    "MAX_TOTAL_BYTES",
    "MAX_WALKED",
    "MAX_ZIP_BYTES",
    "MANIFEST",
    "METADATA_KEY",
    "SKIPPED_DIRS",
    "SOLUTION_TAG",
    "STUDENT_ENV",
    "STUDENT_FROM",
    "UNKNOWN_VERSION",
    "cell_tags",
    "graded_cells",
    "is_graded_source",
    "is_hidden",
    "is_skipped_dir",
    "is_skipped_file",
    "is_test_file",
    "kit_version",
    "manifest_student",
    "manifest_time",
    "notebook_metadata",
    "safe_name",
    "size_text",
    "source_tree_version",
    "text_problem",
    "too_big",
    "undefined_names",
]

KIT_PACKAGE = "exercises"
"""The learner's package: a kit's (or a hand-in's) ``exercises/`` is what is graded."""

# --- which files are code ---------------------------------------------------------------------------

RELEASE_RECORD = ".attnkit-release.json"
"""What ``attnkit release`` writes at the top of a learner's kit (the files it wrote, with their sha256)."""

SKIPPED_DIRS = frozenset({"__pycache__", ".ipynb_checkpoints", "__MACOSX"})
"""Folders never read (besides every hidden folder): caches, notebook checkpoints, macOS zip debris."""


def is_test_file(name: str) -> bool:
    """A test file by pytest's default patterns (``test_*.py``, ``*_test.py``) or ``conftest.py``: never graded."""
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def is_hidden(name: str) -> bool:
    """A hidden file or folder (``.git``, ``.secret.py``): never part of a hand-in."""
    return name.startswith(".")


def is_skipped_dir(name: str) -> bool:
    """A folder whose contents are never part of a hand-in: hidden, or one of :data:`SKIPPED_DIRS`."""
    return is_hidden(name) or name in SKIPPED_DIRS


def is_skipped_file(name: str) -> bool:
    """A file never part of a hand-in's code: hidden or a test file (the rule the child runtime copies)."""
    return is_hidden(name) or is_test_file(name)


def is_graded_source(rel: str) -> bool:
    """Whether the relative POSIX path ``rel`` is code to grade: a ``.py``, not skipped, in no skipped folder."""
    *folders, name = rel.split("/")
    return name.endswith(".py") and not is_skipped_file(name) and not any(is_skipped_dir(f) for f in folders)


# --- the caps --------------------------------------------------------------------------------------
#
# ``attnkit submit`` writes a zip of at most MAX_ENTRIES entries, its manifest included, that
# unpacks to at most MAX_TOTAL_BYTES and is at most MAX_ZIP_BYTES on disk; intake accepts exactly that.

MAX_PY_BYTES = 1 << 20
"""A single ``.py`` file (on disk or in a zip) may hold at most 1 MiB."""
MAX_NOTEBOOK_BYTES = 20 << 20
"""A notebook, outputs included, may hold at most 20 MiB."""
MAX_TOTAL_BYTES = 50 << 20
"""A hand-in may unpack to (a folder may hold) at most 50 MiB in all, a zip's manifest included."""
MAX_ZIP_BYTES = 50 << 20
"""A zip file itself may be at most 50 MiB on disk (its directory is parsed whole)."""
MAX_ENTRIES = 500
"""A zip may hold at most 500 entries (its manifest included), a folder at most 500 ``.py`` files."""
MAX_WALKED = 20_000
"""Walking a folder stops (refused) after this many entries: a stray virtualenv, say."""
MAX_FOLDER_DEPTH = 32
"""A folder hand-in nests at most this deep (Python 3.11's ``os.walk`` recurses: 1200 levels crashed the class)."""
MAX_NAME_LENGTH = 64
"""A student id (and a name :func:`safe_name` makes) holds at most 64 characters."""


def size_text(n: int) -> str:
    """``n`` bytes for people: ``1 MB``, ``2.3 MB``, ``512 KB``, ``12 bytes``."""
    for unit, label in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if n >= unit:
            return f"{n // unit} {label}" if n % unit == 0 else f"{n / unit:.1f} {label}"
    return f"{n} bytes"


def too_big(n: int, kind: str, limit: int) -> str:
    """The refusal of ``n`` bytes of ``kind`` over ``limit``: ``2.3 MB .py file is over the 1 MB limit``."""
    return f"{size_text(n)} {kind} is over the {size_text(limit)} limit"


# --- text and names --------------------------------------------------------------------------------


def text_problem(data: bytes) -> str | None:
    """Why ``data`` is not a hand-in's text (UTF-8 without null bytes), or None when it is."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 at byte {exc.start}"
    if "\x00" in text:
        return f"contains a null byte (at byte {data.index(0)})"
    return None


def safe_name(text: str, fallback: str = "student") -> str:
    """``text`` made only of ``[A-Za-z0-9._-]``: safe as a folder or file name anywhere; the student id rule.

    Accents are dropped (``José`` → ``Jose``), every other character becomes ``_``, leading dots and dashes are
    removed (so ``..``, hidden names and names a shell or a spreadsheet would read as an option or a formula never
    survive); cut to :data:`MAX_NAME_LENGTH` characters, never empty (``fallback``).
    """
    out = []
    for ch in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(ch):
            continue
        out.append(ch if (ch.isascii() and (ch.isalnum() or ch in "._-")) else "_")
    return "".join(out).lstrip(".-")[:MAX_NAME_LENGTH] or fallback


# --- notebooks -------------------------------------------------------------------------------------

SOLUTION_TAG = "attnkit-solution"
"""A code cell tagged so is graded; when a notebook has none, every code cell but the check cells is."""
CHECK_TAG = "attnkit-check"
"""The cell that runs the public cases in the kernel: never graded."""
METADATA_KEY = "attnkit"
"""The notebook's and a cell's own metadata (``{"attnkit": {"hooks": [...]}}``)."""


def cell_tags(cell: Any) -> list[str]:
    """A cell's tags (the strings of ``metadata.tags``), ``[]`` for a cell whose metadata is not as expected."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def graded_cells(cells: Iterable[Any]) -> list[tuple[int, Any]]:
    """``(number, cell)`` of the cells the grader takes, numbered from 1 over every cell (markdown included): the
    code cells tagged :data:`SOLUTION_TAG` when there are any, else every code cell not tagged :data:`CHECK_TAG`."""
    code = [(n, c) for n, c in enumerate(cells, start=1) if isinstance(c, dict) and c.get("cell_type") == "code"]
    tagged = [(n, c) for n, c in code if SOLUTION_TAG in cell_tags(c)]
    return tagged or [(n, c) for n, c in code if CHECK_TAG not in cell_tags(c)]


def undefined_names(source: str) -> list[str]:
    """Module-level names the code reads (at the top level or in a function) but never defines, sorted, read with
    :mod:`symtable` (nothing run); ``[]`` with a ``from m import *``, which defines anything."""
    import ast
    import builtins
    import symtable

    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.parse(source).body):
        return []
    top = symtable.symtable(source, "<hand-in>", "exec")
    defined = {sym.get_name() for sym in top.get_symbols() if sym.is_assigned() or sym.is_imported()}
    defined |= set(dir(builtins)) | {"__name__", "__file__", "__doc__", "__builtins__", "__spec__"}
    used: set[str] = {sym.get_name() for sym in top.get_symbols() if sym.is_referenced()}
    tables = list(top.get_children())
    while tables:
        table = tables.pop()
        tables += table.get_children()
        for sym in table.get_symbols():
            if sym.is_referenced() and sym.is_global() and not sym.is_declared_global():
                used.add(sym.get_name())
    return sorted(used - defined)


def notebook_metadata(attnkit: dict[str, Any]) -> dict[str, Any]:
    """A notebook's metadata: the Python 3 kernelspec, the language, and ``attnkit`` under :data:`METADATA_KEY`."""
    return {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        METADATA_KEY: attnkit,
    }


# --- the manifest and the student id it carries ---------------------------------------------------

MANIFEST = "manifest.json"
"""The zip entry ``attnkit submit`` writes beside the code: kit version, time, hashes, checks, student id."""
STUDENT_ENV = "ATTNKIT_STUDENT"
"""The environment variable ``attnkit submit`` takes the student id from without ``--student``: a JupyterHub admin
sets it per user (``c.Spawner.environment = {"ATTNKIT_STUDENT": "{username}"}``), so that every hand-in carries its
student's id instead of the shared login ``jovyan``."""
STUDENT_FROM = ("--student", STUDENT_ENV)
"""Where a manifest's ``student_from`` may say its id came from; any other manifest carries no id."""


def manifest_student(manifest: Any) -> str | None:
    """The student id a manifest claims (sanitised by :func:`safe_name`), or None when it claims none.

    Only a manifest whose ``student_from`` is one of :data:`STUDENT_FROM` claims an id: one written without
    ``--student`` and :data:`STUDENT_ENV` (or by a kit from before ids, whose ``student`` was the login, the same
    ``jovyan`` for a whole JupyterHub) claims none.  The learner writes it: ``attnkit grade`` takes a hand-in's id
    from its file name (``submission-<id>-<date>.zip``) and only checks the claim against it (a mismatch is a note).
    """
    if not isinstance(manifest, dict) or manifest.get("student_from") not in STUDENT_FROM:
        return None
    student = manifest.get("student")
    return (safe_name(student, "") or None) if isinstance(student, str) else None


def manifest_time(manifest: Any) -> datetime | None:
    """When the hand-in says it was packed (the manifest's ``created``, as UTC), or None when it does not say: a
    claim, shown to the instructor; ``attnkit grade --latest`` never orders by it."""
    created = manifest.get("created") if isinstance(manifest, dict) else None
    if not isinstance(created, str):
        return None
    try:
        when = datetime.fromisoformat(created[:64])
        return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # not a time, or one past year 9999 once made UTC: no claim at all
        return None


# --- the kit's version -----------------------------------------------------------------------------

DISTRIBUTION = "attnkit"
UNKNOWN_VERSION = "0+unknown"
"""The version when neither an installed distribution nor a source tree says (a valid PEP 440 version)."""

_SOURCE_ROOT = Path(__file__).resolve().parents[1]


def source_tree_version(root: Path) -> str | None:
    """The version in ``root/pyproject.toml`` when that file is this distribution's, else None."""
    path = Path(root) / "pyproject.toml"
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]
        except ImportError:
            return None
    try:
        with path.open("rb") as fh:
            project = tomllib.load(fh).get("project", {})
    except (OSError, ValueError):  # absent, unreadable, or not TOML (TOMLDecodeError is a ValueError)
        return None
    if not isinstance(project, dict) or project.get("name") != DISTRIBUTION:
        return None
    version = project.get("version")
    return version if isinstance(version, str) and version else None


def kit_version() -> str:
    """The kit's version: the installed distribution's, else the source tree's pyproject.toml, else ``0+unknown``."""
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version(DISTRIBUTION)
    return source_tree_version(_SOURCE_ROOT) or UNKNOWN_VERSION
