"""Reading submissions safely: files become text, nothing is ever executed here.

A submission reaches the learner's sandboxed process as ``{relpath: source
text}`` plus an *entry* (the file or folder inside those files to import), see
:mod:`grader.child_runtime`.  This module turns what an instructor points the
grader at into exactly that, on the trusted side, without importing or running
anything:

- a ``.py`` file: ``files={"alice.py": text}``, ``entry="alice.py"``;
- a folder of loose modules or a package: its ``.py`` files, recursively, keyed
  under the folder's own name (``{"alice/scores.py": ...}``, ``entry="alice"``),
  test files, ``conftest.py``, hidden files, ``__pycache__`` and hidden folders
  left out (:func:`grader.handin.is_graded_source`);
- a learner's whole kit (a folder holding ``exercises/__init__.py``): only the
  ``exercises`` package, keyed ``exercises/...`` with ``entry="exercises"``, so
  absolute imports such as ``from exercises.scores import x`` keep working;
- a ``.zip`` of any of these, read entry by entry with caps on entry count,
  sizes (declared *and* counted while reading), no absolute paths, no ``..``,
  no links; a zip whose entries share one top folder is that folder;
- a ``.ipynb`` notebook, converted by ``grader.notebooks.notebook_to_source``
  (a notebook it refuses is an error row).

Intake never follows a link: a submission path, a class member, a file or folder
inside a folder, a notebook found in a folder and a zip entry that is a symbolic
link are refused with an error row naming it, never read (files are opened with
``O_NOFOLLOW`` and checked to be regular files, so a FIFO cannot hang the grader).

The caps, the test-file rule, the text rule and the student id rule are
:mod:`grader.handin`'s, the ones ``attnkit submit`` packs by: a zip it writes is
accepted here.

Every submission read is scanned for known evasion constructs
(:mod:`grader.instructor.review_flags`, never run); the findings go with it as
``Submission.review``.  Student ids are made unique by :func:`deduplicate_ids`
in a way that does not depend on the order the files come in.

:func:`read_submission` never raises for bad input: every problem becomes
``Submission.error``, one line, and the submission is graded as an error row.
"""

from __future__ import annotations

import ast
import errno
import hashlib
import os
import stat
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from grader.handin import (
    KIT_PACKAGE,
    MAX_ENTRIES,
    MAX_NAME_LENGTH,
    MAX_NOTEBOOK_BYTES,
    MAX_PY_BYTES,
    MAX_TOTAL_BYTES,
    MAX_WALKED,
    MAX_ZIP_BYTES,
    SKIPPED_DIRS,
    is_graded_source,
    is_hidden,
    is_skipped_dir,
    safe_name,
    size_text,
    text_problem,
    too_big,
)
from grader.hook_table import CLASS_NAMES
from grader.instructor.review_flags import scan_files
from grader.notebooks import notebook_to_source
from grader.registry import HOOK_NAMES

MAX_HASHED_BYTES = 256 << 20
"""An error row's input is hashed only up to this size (a multi-gigabyte file gets no hash)."""

FORMATS = ("py", "folder", "zip", "ipynb")
NOT_A_SUBMISSION = "not a submission: expected a .py, .ipynb or .zip file, or a folder"

_CHUNK = 64 << 10


@dataclass
class Submission:
    """One learner's hand-in, as text, ready to send to a sandboxed process.

    ``files`` maps a relative POSIX path to its source text; ``entry`` is the
    file or folder (a key of ``files`` or a folder they live under) that the
    learner's process imports.  ``error`` is one line when the submission
    cannot be graded at all (``files`` is then usually empty).
    """

    student: str
    source: str
    format: str
    files: dict[str, str] = field(default_factory=dict)
    entry: str = ""
    sha256: str = ""
    error: str | None = None
    review: list[str] = field(default_factory=list)  # ``file:line: construct`` findings (review_flags)
    notes: list[str] = field(default_factory=list)  # one line per change made to the student id

    def load_message(self) -> dict[str, object]:
        """The ``load`` request for :mod:`grader.child_runtime` (the caller adds ``hooks``)."""
        return {"op": "load", "files": dict(self.files), "entry": self.entry}


class Refused(Exception):
    """Input that cannot be accepted; the message is the one-line error shown to people."""


# --- student ids --------------------------------------------------------------------


def _name_of(path: Path) -> str:
    return path.name if path.name not in ("", ".", "..") else path.resolve().name


def _id_from_path(path: Path) -> str:
    name = _name_of(path)
    stem = name[: -len(path.suffix)] if path.suffix and not path.is_dir() else name
    return safe_name(stem)


RESERVED_IDS = frozenset(
    {"grades.csv", "junit.xml", "gradebook.sqlite", "gradebook.sqlite-wal", "gradebook.sqlite-shm"}
)
"""Names of the files ``attnkit grade`` writes beside the student folders: no student may take one."""

CANONICAL_SUFFIXES = ("", ".py", ".zip", ".ipynb")
"""A file whose name is ``<id><suffix>`` with one of these (lower case) suffixes names its id exactly."""

ID_HASH_CHARS = 8
"""Hex digits of sha256 added to an id that collides: ``a_b-1c2d3e4f``."""


def _claim_rank(sub: Submission) -> int:
    """How strongly a submission claims its id: 0 its name is exactly the id, 1 the same up to case, 2 sanitised."""
    name = _name_of(Path(sub.source))
    for suffix in CANONICAL_SUFFIXES:
        if name == sub.student + suffix:
            return 0 if sub.student == sub.student.lower() else 1
    return 2


def _hashed_id(base: str, seed: str, length: int) -> str:
    digest = hashlib.sha256(seed.encode("utf-8", "surrogateescape")).hexdigest()[:length]
    return f"{base[: MAX_NAME_LENGTH - length - 1]}-{digest}"


def deduplicate_ids(submissions: list[Submission]) -> list[Submission]:
    """Make student ids unique (ignoring case, for macOS and Windows), whatever order the submissions come in.

    An id claimed by one submission only is kept.  Among several claimants of
    one id, the one whose file name is exactly that id (``a_b.py`` for ``a_b``,
    ``alice.py`` rather than ``Alice.py`` or ``alice.PY``) keeps it; every other
    claimant, and every claimant when no single one is exact, gets
    ``<id>-<8 hex digits of sha256 of its file name>`` (of its path, where the
    names are the same too).  An id equal to one of the grader's own output
    files (``grades.csv`` …) is never kept.  Each changed id gets one line in
    ``Submission.notes`` saying why.
    """
    claims: dict[str, list[Submission]] = {}
    for sub in submissions:
        claims.setdefault(sub.student.lower(), []).append(sub)
    taken = {name.lower() for name in RESERVED_IDS}
    renamed: list[tuple[Submission, str]] = []  # (submission, why)
    for key, subs in claims.items():
        if key in RESERVED_IDS:
            renamed += [(sub, f"{sub.student!r} is the name of a file attnkit grade writes") for sub in subs]
            continue
        ranks = [_claim_rank(sub) for sub in subs]
        best = [sub for sub, rank in zip(subs, ranks) if rank == min(ranks)]
        keeper = best[0] if len(best) == 1 else None
        if keeper is not None:
            taken.add(key)
        others = sorted({_name_of(Path(sub.source)) for sub in subs})
        shown = ", ".join(repr(name) for name in others[:4])
        shown += f" and {len(others) - 4} more" if len(others) > 4 else ""
        for sub in subs:
            if sub is not keeper:
                kept = f", kept by {_name_of(Path(keeper.source))!r}" if keeper is not None else ""
                renamed.append((sub, f"{sub.student!r} is claimed by {len(subs)} submissions ({shown}){kept}"))
    # The hash of the file name, or of the whole path where two names are the same; identical paths
    # (the same file given twice) are told apart by a counter, which cannot depend on anything else.
    names = [_name_of(Path(sub.source)) for sub, _ in renamed]
    seeds = [name if names.count(name) == 1 else sub.source for (sub, _), name in zip(renamed, names)]
    for i, seed in enumerate(seeds):
        if seeds.count(seed) > 1:
            seeds[i] = f"{seed}#{seeds[: i + 1].count(seed)}"
    for (sub, why), seed in sorted(zip(renamed, seeds), key=lambda item: item[1]):
        candidate, n = _hashed_id(sub.student, seed, ID_HASH_CHARS), 0
        while candidate.lower() in taken:  # a real file named like a hashed id keeps its name
            n += 1
            candidate = _hashed_id(sub.student, f"{seed}#{n}", 2 * ID_HASH_CHARS)
        taken.add(candidate.lower())
        source = _name_of(Path(sub.source))
        sub.notes.append(f"{source!r} was given the id {candidate!r}: {why}")
        sub.student = candidate
    return submissions


# --- text and hashing -------------------------------------------------------------


def decode_source(data: bytes, name: str) -> str:
    """UTF-8 text without null bytes (:func:`grader.handin.text_problem`), or :class:`Refused` saying where not."""
    why = text_problem(data)
    if why is not None:
        raise Refused(f"{name}: {why}")
    return data.decode("utf-8").removeprefix("\ufeff")


def files_sha256(files: dict[str, str]) -> str:
    """sha256 over the sorted ``(relpath, text)`` pairs, each length-prefixed (unambiguous)."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        for part in (rel.encode("utf-8"), files[rel].encode("utf-8")):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    """sha256 of a file's raw bytes (for error rows), or "" when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with _open_regular(path, path.name) as fh:
            if os.fstat(fh.fileno()).st_size > MAX_HASHED_BYTES:
                return ""
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except (OSError, Refused):
        return ""
    return digest.hexdigest()


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_regular(path: Path, shown: str) -> BinaryIO:
    """``path`` opened for reading, never through a symbolic link (``O_NOFOLLOW``) and only if a regular file.

    ``O_NONBLOCK`` keeps a FIFO from blocking the open; it is refused right after.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise Refused(f"{shown} is a symbolic link, not followed") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(f"{shown}: not a regular file")
    return os.fdopen(fd, "rb")


def _read_file(path: Path, limit: int, shown: str, kind: str) -> bytes:
    """A regular file's bytes (never through a link), refused when over ``limit``: by its size, then as read."""
    with _open_regular(path, shown) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise Refused(f"{shown}: {too_big(size, kind, limit)}")
        return _read_capped(fh, limit, shown)


# --- a tree of files, from a folder or a zip ------------------------------------------
#
# Both are first listed (nothing read yet), then a layout is chosen, then only the
# .py files the layout needs are read as text, counting bytes as they come.


def _choose_layout(paths: Iterable[str], name: str) -> tuple[str, str, str]:
    """For the relative paths in a zip's tree called ``name``: (prefix to keep, key prefix, entry).

    ``prefix`` selects the paths to keep ("" = all); a path ``prefix + rest`` is
    stored as ``key_prefix + rest``.
    """
    paths = set(paths)
    if "__init__.py" not in paths and f"{KIT_PACKAGE}/__init__.py" in paths:
        return f"{KIT_PACKAGE}/", f"{KIT_PACKAGE}/", KIT_PACKAGE
    return "", f"{name}/", name


def _folder_name(path: Path) -> str:
    name = path.resolve().name
    return name or "submission"


def _top_notebooks(path: Path) -> list[Path]:
    """The ``*.ipynb`` entries at the top of a folder, links included (so they are refused, not followed)."""
    with os.scandir(path) as entries:
        return sorted(Path(e.path) for e in entries if e.name.lower().endswith(".ipynb") and not is_hidden(e.name))


def _read_folder(path: Path, student: str) -> Submission:
    source = str(path)
    if not (path / "__init__.py").exists() and (path / KIT_PACKAGE / "__init__.py").is_file():
        root, name = path / KIT_PACKAGE, KIT_PACKAGE  # a learner's whole kit: grade its package
    else:
        root, name = path, _folder_name(path)
    if root != path and root.is_symlink():
        raise Refused(f"refused folder: {KIT_PACKAGE} is a symbolic link")
    listing: dict[str, Path] = {}
    walked = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not is_skipped_dir(d))
        here = Path(dirpath)
        walked += len(dirnames) + len(filenames)
        if walked > MAX_WALKED:
            raise Refused(f"refused folder: more than {MAX_WALKED} entries")
        for d in dirnames:
            if (here / d).is_symlink():
                raise Refused(f"refused folder: {(here / d).relative_to(path).as_posix()} is a symbolic link")
        for fname in sorted(filenames):
            full = here / fname
            rel = full.relative_to(root).as_posix()
            if not is_graded_source(rel):
                continue
            _check_name(rel, "folder")
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                raise Refused(f"refused folder: {full.relative_to(path).as_posix()} is a symbolic link")
            if not stat.S_ISREG(mode):
                raise Refused(f"refused folder: {full.relative_to(path).as_posix()} is not a regular file")
            listing[rel] = full
            if len(listing) > MAX_ENTRIES:
                raise Refused(f"refused folder: more than {MAX_ENTRIES} .py files")
    if not listing:
        notebooks = _top_notebooks(path)
        if len(notebooks) == 1:
            if notebooks[0].is_symlink():
                raise _NotebookError(f"refused folder: {notebooks[0].name} is a symbolic link")
            return _read_notebook_file(notebooks[0], student, source)
        raise Refused(f"{path.name}: no .py files to grade")
    files: dict[str, str] = {}
    total = 0
    for rel in sorted(listing):
        data = _read_file(listing[rel], MAX_PY_BYTES, rel, ".py file")
        total += len(data)
        if total > MAX_TOTAL_BYTES:
            raise Refused(f"refused folder: {too_big(total, 'of .py files', MAX_TOTAL_BYTES)}")
        files[f"{name}/{rel}"] = decode_source(data, rel)
    return _made(student, source, "folder", files, name)


def _read_capped(stream, limit: int, name: str, too_much: str | None = None) -> bytes:
    """Read at most ``limit`` bytes, counting as it goes; more is refused, never held."""
    chunks: list[bytes] = []
    n = 0
    with stream:
        while chunk := stream.read(_CHUNK):
            n += len(chunk)
            if n > limit:
                shown = size_text(limit)
                raise Refused(too_much or f"{name}: more than {shown} when read, over the {shown} limit")
            chunks.append(chunk)
    return b"".join(chunks)


def _check_name(rel: str, what: str) -> None:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(f"refused {what}: a file name is not valid UTF-8 ({rel!r})") from None


def _zip_entry_path(info: zipfile.ZipInfo) -> str:
    """The entry's relative POSIX path, or :class:`Refused` when it could land outside."""
    raw = info.filename
    name = raw.replace("\\", "/")
    _check_name(name, "zip")
    if "\x00" in name:
        raise Refused(f"refused zip: entry {raw!r} has a null byte in its name")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise Refused(f"refused zip: entry {raw!r} is an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"refused zip: entry {raw!r} points outside the archive")
    mode = info.external_attr >> 16
    if stat.S_ISLNK(mode):
        raise Refused(f"refused zip: entry {raw!r} is a symbolic link")
    return "/".join(parts)


def _read_zip(path: Path, student: str) -> Submission:
    source = str(path)
    with _open_regular(path, path.name) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_ZIP_BYTES:
            raise Refused(f"refused zip: {too_big(size, 'archive', MAX_ZIP_BYTES)}")
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise Refused(f"refused zip: not a readable zip archive ({exc})") from None
        return _read_zip_members(zf, path, student, source)


def _read_zip_members(zf: zipfile.ZipFile, path: Path, student: str, source: str) -> Submission:
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise Refused(f"refused zip: {len(infos)} entries is over the {MAX_ENTRIES} entry limit")
        declared = sum(max(i.file_size, 0) for i in infos)
        if declared > MAX_TOTAL_BYTES:
            raise Refused(f"refused zip: {too_big(declared, 'unpacked', MAX_TOTAL_BYTES)}")
        entries: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            rel = _zip_entry_path(info)
            if not rel or info.is_dir():
                continue
            parts = rel.split("/")
            if any(is_skipped_dir(p) for p in parts[:-1]) or is_hidden(parts[-1]):
                continue
            if rel in entries:
                raise Refused(f"refused zip: entry {rel!r} appears twice")
            if rel.endswith(".py") and info.file_size > MAX_PY_BYTES:
                raise Refused(f"refused zip: {rel}: {too_big(info.file_size, '.py file', MAX_PY_BYTES)}")
            entries[rel] = info
        # A zip whose entries all share one top folder is that folder.
        tops = {rel.split("/")[0] for rel in entries}
        name = _folder_name(path).removesuffix(path.suffix) or "submission"
        wrapped = len(tops) == 1 and all("/" in rel for rel in entries)
        if wrapped:
            name = tops.pop()
            entries = {rel.split("/", 1)[1]: info for rel, info in entries.items()}
        budget = [MAX_TOTAL_BYTES]  # counted while reading: declared sizes can lie

        def read(rel: str, limit: int) -> bytes:
            if budget[0] < limit:
                too_much = f"refused zip: more than {size_text(MAX_TOTAL_BYTES)} when unpacked, over the limit"
                data = _read_capped(_open_member(zf, entries[rel]), budget[0], rel, too_much)
            else:
                too_much = f"refused zip: {rel} unpacks to more than {size_text(limit)}, over the limit"
                data = _read_capped(_open_member(zf, entries[rel]), limit, rel, too_much)
            budget[0] -= len(data)
            return data

        try:
            py = sorted(rel for rel in entries if is_graded_source(rel))
            top_py = [rel for rel in py if "/" not in rel]
            notebooks = sorted(rel for rel in entries if rel.endswith(".ipynb") and "/" not in rel)
            if not py:
                if len(notebooks) == 1:
                    text = decode_source(read(notebooks[0], MAX_NOTEBOOK_BYTES), notebooks[0])
                    return _from_notebook(text, student, source, notebooks[0])
                raise Refused(f"{path.name}: no .py files to grade")
            if not wrapped and py == top_py and len(py) == 1 and "__init__.py" not in py:
                rel = py[0]
                files = {rel: decode_source(read(rel, MAX_PY_BYTES), rel)}
                return _made(student, source, "zip", files, rel)
            keep, key_prefix, entry = _choose_layout(py, name)
            files = {}
            for rel in py:
                if rel.startswith(keep):
                    files[key_prefix + rel[len(keep) :]] = decode_source(read(rel, MAX_PY_BYTES), rel)
            return _made(student, source, "zip", files, entry)
        except zipfile.BadZipFile as exc:
            raise Refused(f"refused zip: corrupt archive ({exc})") from None
        except (NotImplementedError, RuntimeError, OSError, EOFError, ValueError, zlib.error) as exc:
            raise Refused(f"refused zip: cannot read it ({type(exc).__name__}: {exc})") from None


def _open_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo):
    # ZipExtFile stops at the declared size and checks the CRC, so a size that lies
    # ends as BadZipFile; _read_capped counts what is actually read either way.
    return zf.open(info)


# --- notebooks -----------------------------------------------------------------------


def _from_notebook(text: str, student: str, source: str, name: str) -> Submission:
    try:
        code = notebook_to_source(text)
    except Exception as exc:  # the converter's own errors name the problem
        line = (str(exc) or type(exc).__name__).splitlines()[0]
        raise _NotebookError(f"{name}: {line}") from None
    if not isinstance(code, str) or "\x00" in code:
        raise _NotebookError(f"{name}: the notebook's code could not be extracted as text")
    rel = safe_name(PurePosixPath(name).stem) + ".py"
    files = {rel: code}
    return _made(student, source, "ipynb", files, rel)


class _NotebookError(Refused):
    """A notebook that cannot be graded (the row keeps format ``ipynb``)."""


def _read_notebook_file(path: Path, student: str, source: str) -> Submission:
    try:
        data = _read_file(path, MAX_NOTEBOOK_BYTES, path.name, "notebook")
    except Refused as exc:
        raise _NotebookError(str(exc)) from None
    return _from_notebook(decode_source(data, path.name), student, source, path.name)


# --- the public entry points -----------------------------------------------------------


def _made(student: str, source: str, fmt: str, files: dict[str, str], entry: str) -> Submission:
    """A submission read whole: its hash, and its review findings (its source scanned, never run)."""
    return Submission(student, source, fmt, files, entry, files_sha256(files), review=scan_files(files))


def _format_of(path: Path) -> str:
    if path.is_dir():
        return "folder"
    suffix = path.suffix.lower()
    return {".py": "py", ".zip": "zip", ".ipynb": "ipynb"}.get(suffix, "folder" if not suffix else "unknown")


def read_submission(path: str | os.PathLike[str]) -> Submission:
    """Read one submission as text; never raises for bad input (see ``Submission.error``).

    The student id is the file stem, folder name or zip stem, sanitised.  A
    path that is a symbolic link is refused, whatever it points to.
    """
    p = Path(path)
    source = str(path)
    student = _id_from_path(p)
    fmt = _format_of(p)
    try:
        if p.is_symlink():
            raise Refused(f"{p.name} is a symbolic link, not followed")
        if not p.exists():
            raise Refused(f"{p.name}: no such file or folder")
        if p.is_dir():
            return _read_folder(p, student)
        if not p.is_file():
            raise Refused(f"{p.name}: not a regular file")
        if fmt == "py":
            text = decode_source(_read_file(p, MAX_PY_BYTES, p.name, ".py file"), p.name)
            return _made(student, source, "py", {p.name: text}, p.name)
        if fmt == "zip":
            return _read_zip(p, student)
        if fmt == "ipynb":
            return _read_notebook_file(p, student, source)
        raise Refused(f"{p.name}: {NOT_A_SUBMISSION}")
    except _NotebookError as exc:
        return Submission(student, source, "ipynb", sha256=_file_sha256(p), error=str(exc))
    except Refused as exc:
        return Submission(student, source, fmt, sha256=_file_sha256(p), error=str(exc))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return Submission(student, source, fmt, error=f"{p.name}: cannot read it ({reason})")


def _hooks_defined(path: Path) -> set[str]:
    """Hook names (or the chapter's class names) defined at the top of a .py file, read with ``ast``, never run."""
    try:
        tree = ast.parse(_read_file(path, MAX_PY_BYTES, path.name, ".py file"), filename=path.name)
    except Exception:  # a link, unreadable, not Python, too deeply nested: not evidence either way
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names & _HOOKISH


_HOOKISH = frozenset(HOOK_NAMES) | frozenset(n for names in CLASS_NAMES.values() for n in names)


def is_class_folder(path: Path) -> bool:
    """A folder of submissions rather than one submission.

    Never a package (``__init__.py``) or a learner's kit (``exercises/__init__.py``).
    Otherwise a class folder when it holds no ``.py`` at its top, or a ``.zip`` at
    its top, or a symbolic link at its top (each member, the link included, is
    then its own row: the link's an error row, never read), or two top-level
    ``.py`` files that define the same hook (each file then is one learner's
    solution, like ``examples/submissions/``).  Files are parsed with
    :mod:`ast`, never imported.
    """
    if not path.is_dir():
        return False
    if (path / "__init__.py").exists() or (path / KIT_PACKAGE / "__init__.py").exists():
        return False
    try:
        entries = [(c, os.lstat(c).st_mode) for c in path.iterdir() if not is_hidden(c.name)]
    except OSError:
        return False
    if any(stat.S_ISLNK(mode) and c.name not in SKIPPED_DIRS for c, mode in entries):
        return True
    children = [c for c, mode in entries if stat.S_ISREG(mode)]
    top_py = sorted(c for c in children if is_graded_source(c.name))
    if not top_py or any(c.suffix.lower() == ".zip" for c in children):
        return True
    seen: set[str] = set()
    for file in top_py[:MAX_ENTRIES]:
        hooks = _hooks_defined(file)
        if hooks & seen:
            return True
        seen |= hooks
    return False


def class_members(path: Path) -> list[Path]:
    """The submissions in a class folder: ``.py``, ``.zip``, ``.ipynb`` files and folders, sorted.

    Symbolic links among them are listed too, so that each becomes an error row
    naming it (:func:`read_submission` refuses a link), never read.
    """
    members = []
    for child in sorted(path.iterdir(), key=lambda c: c.name):
        if is_skipped_dir(child.name):
            continue
        if child.suffix.lower() in (".py", ".zip", ".ipynb") or child.is_symlink() or child.is_dir():
            members.append(child)
    return members


def collect_submissions(paths: list[str]) -> list[Submission]:
    """Read every submission named by ``paths``, a class folder (:func:`is_class_folder`) standing for its members.

    Ids claimed twice are told apart by :func:`deduplicate_ids`, whatever the order.
    Nonexistent paths come back as error submissions.
    """
    subs: list[Submission] = []
    for raw in paths:
        p = Path(raw)
        if is_class_folder(p):
            try:
                members = class_members(p)
            except OSError as exc:
                subs.append(Submission(_id_from_path(p), str(raw), "folder", error=f"cannot list {p.name}: {exc}"))
                continue
            subs.extend(read_submission(m) for m in members)
        else:
            subs.append(read_submission(raw))
    return deduplicate_ids(subs)
