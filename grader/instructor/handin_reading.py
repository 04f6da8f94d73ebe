"""Reading one hand-in safely: files become text, nothing is ever executed here.

A submission reaches the learner's sandboxed process (:mod:`grader.child`) as ``{relpath: source text}`` plus an
*entry* to import: a ``.py`` file; a folder's graded ``.py`` files (:func:`grader.handin.is_graded_source`) keyed
under its name; a learner's kit, only its ``exercises`` package (so ``from exercises.scores import x`` works); a
``.zip`` of any of these (entry count and sizes capped, declared *and* counted while reading; no absolute paths,
``..`` or links; one shared top folder is that folder); a ``.ipynb`` (:func:`grader.notebooks.notebook_to_source`).
Intake never follows a link, and opens only regular files (``O_NOFOLLOW``: a FIFO cannot hang the grader).  The
caps and rules are :mod:`grader.handin`'s, which ``attnkit submit`` packs by.  Every submission read is scanned,
never run, for evasion constructs (``Submission.review``).  :func:`read_submission` never raises for bad input (an
error row: a :class:`~grader.instructor.intake_model.Submission` with its ``error``).  Every text made here from a
learner's input is one inert line (:func:`~grader.instructor.inert.inert_line`).
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import zipfile
import zlib
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from grader.handin import (
    KIT_PACKAGE,
    MANIFEST,
    MAX_ENTRIES,
    MAX_FOLDER_DEPTH,
    MAX_NOTEBOOK_BYTES,
    MAX_PY_BYTES,
    MAX_TOTAL_BYTES,
    MAX_WALKED,
    MAX_ZIP_BYTES,
    is_graded_source,
    is_hidden,
    is_skipped_dir,
    manifest_student,
    manifest_time,
    safe_name,
    size_text,
    text_problem,
    too_big,
)
from grader.instructor.class_folder import sort_out
from grader.instructor.inert import inert_line
from grader.instructor.intake_model import Submission, id_from_path, name_of, note, shown_path
from grader.instructor.review_flags import scan_files
from grader.notebooks import notebook_to_source

MAX_HASHED_BYTES = 256 << 20
"""An error row's input is hashed only up to this size (a multi-gigabyte file gets no hash)."""

NOT_A_SUBMISSION = "not a submission: expected a .py, .ipynb or .zip file, or a folder"

_CHUNK = 64 << 10


class Refused(Exception):
    """Input that cannot be accepted (the message is the one-line error shown); a zip refused after its manifest was
    read carries the manifest's claim, so its error row keeps the student's id."""

    claimed: str | None = None
    handed_in: datetime | None = None

    def __init__(self, message: str) -> None:
        super().__init__(inert_line(message))  # it names files and entries the learner named: one inert line


def decode_source(data: bytes, name: str) -> str:
    """UTF-8 text without null bytes (:func:`grader.handin.text_problem`) declaring no other coding
    (:func:`coding_problem`), or :class:`Refused` saying where not."""
    why = text_problem(data)
    text = data.decode("utf-8").removeprefix("\ufeff") if why is None else ""
    why = coding_problem(text) if why is None else why
    if why is not None:
        raise Refused(f"{name}: {why}")
    return text


_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
"""A coding declaration (PEP 263), as Python's tokenizer finds it on either of a file's first two lines."""


def coding_problem(text: str) -> str | None:
    """Why ``text`` may not be graded as read: a coding declaration other than UTF-8, or None.  The review scan reads
    the UTF-8 text; Python's importer would decode the same bytes with the declared coding (``# -*- coding: utf-7
    -*-`` makes a comment of the scan's code of the importer's), so the text scanned would not be the text run."""
    for number, line in enumerate(re.split(r"\r\n|\r|\n", text)[:2], 1):  # lines as Python's tokenizer splits them
        if (found := _CODING.match(line)) is None:
            continue
        try:
            known = codecs.lookup(found.group(1)).name
        except LookupError:
            known = ""
        if known not in ("utf-8", "utf-8-sig"):
            return f"line {number} declares the coding {found.group(1)[:40]!r}: only UTF-8 is graded " \
                   "(save the file as UTF-8 and remove the declaration)"  # fmt: skip
    return None


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
    """``path`` opened for reading, never through a symbolic link (``O_NOFOLLOW``) and only if a regular file
    (``O_NONBLOCK`` keeps a FIFO from blocking the open; it is refused right after)."""
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


# A folder or a zip is first listed (nothing read yet), then a layout is chosen, then only the .py files the
# layout needs are read as text, counting bytes as they come.


def _read_folder(path: Path, student: str) -> Submission:
    source = str(path)
    if not (path / "__init__.py").exists() and (path / KIT_PACKAGE / "__init__.py").is_file():
        root, name = path / KIT_PACKAGE, KIT_PACKAGE  # a learner's whole kit: grade its package
    else:
        root, name = path, path.resolve().name or "submission"
    if root != path and root.is_symlink():
        raise Refused(f"refused folder: {KIT_PACKAGE} is a symbolic link")
    listing: dict[str, Path] = {}
    walked = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not is_skipped_dir(d))
        here = Path(dirpath)
        if len(here.relative_to(root).parts) >= MAX_FOLDER_DEPTH:
            raise Refused(f"refused folder: nested more than {MAX_FOLDER_DEPTH} folders deep")
        walked += len(dirnames) + len(filenames)
        if walked > MAX_WALKED:
            raise Refused(f"refused folder: more than {MAX_WALKED} entries")
        if links := [d for d in dirnames if (here / d).is_symlink()]:
            raise Refused(f"refused folder: {(here / links[0]).relative_to(path).as_posix()} is a symbolic link")
        for fname in sorted(filenames):
            full = here / fname
            rel = full.relative_to(root).as_posix()
            if not is_graded_source(rel):
                continue
            _check_name(rel, "folder")
            mode = os.lstat(full).st_mode
            if not stat.S_ISREG(mode):
                why = "is a symbolic link" if stat.S_ISLNK(mode) else "is not a regular file"
                raise Refused(f"refused folder: {full.relative_to(path).as_posix()} {why}")
            listing[rel] = full
            if len(listing) > MAX_ENTRIES:
                raise Refused(f"refused folder: more than {MAX_ENTRIES} .py files")
    if not listing:
        with os.scandir(path) as ls:  # links included: refused, not followed
            notebooks = sorted(Path(e.path) for e in ls if e.name.lower().endswith(".ipynb") and not is_hidden(e.name))
        if len(notebooks) == 1:
            if notebooks[0].is_symlink():
                raise _NotebookError(f"refused folder: {notebooks[0].name} is a symbolic link")
            return _read_notebook_file(notebooks[0], student, source)
        zips = [m for m in sort_out(path)[0] if m.suffix.lower() == ".zip"]
        if len(zips) == 1 and not notebooks:  # an LMS folder holding the learner's one zip: that zip, as this folder
            sub = _read_zip(zips[0], student)
            sub.source = source
            return sub
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
    parts = [p for p in name.split("/") if p not in ("", ".")]
    refusals = (  # in this order: the first that holds is the one said
        ("\x00" in name, "has a null byte in its name"),
        (name.startswith("/") or (len(name) > 1 and name[1] == ":"), "is an absolute path"),
        (".." in parts, "points outside the archive"),
        (stat.S_ISLNK(info.external_attr >> 16), "is a symbolic link"),
    )
    for refused, why in refusals:
        if refused:
            raise Refused(f"refused zip: entry {raw!r} {why}")
    return "/".join(parts)


def _read_zip(path: Path, student: str) -> Submission:
    with _open_regular(path, path.name) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_ZIP_BYTES:
            raise Refused(f"refused zip: {too_big(size, 'archive', MAX_ZIP_BYTES)}")
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise Refused(f"refused zip: not a readable zip archive ({exc})") from None
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
            name = path.resolve().name.removesuffix(path.suffix) or "submission"
            wrapped = len(tops) == 1 and all("/" in rel for rel in entries)
            if wrapped:
                name = tops.pop()
                entries = {rel.split("/", 1)[1]: info for rel, info in entries.items()}
            budget = [MAX_TOTAL_BYTES]  # counted while reading: declared sizes can lie

            def read(rel: str, limit: int) -> bytes:
                # ZipExtFile stops at the declared size and checks the CRC, so a size that lies
                # ends as BadZipFile; _read_capped counts what is actually read either way.
                if budget[0] < limit:
                    too_much = f"refused zip: more than {size_text(MAX_TOTAL_BYTES)} when unpacked, over the limit"
                else:
                    too_much = f"refused zip: {rel} unpacks to more than {size_text(limit)}, over the limit"
                data = _read_capped(zf.open(entries[rel]), min(limit, budget[0]), rel, too_much)
                budget[0] -= len(data)
                return data

            try:
                manifest = _zip_manifest(read, entries) if MANIFEST in entries else None
                try:
                    sub = _zip_submission(entries, read, path, student, name, wrapped)
                except Refused as exc:
                    exc.claimed, exc.handed_in = manifest_student(manifest), manifest_time(manifest)
                    raise
            except zipfile.BadZipFile as exc:
                raise Refused(f"refused zip: corrupt archive ({exc})") from None
            except (NotImplementedError, RuntimeError, OSError, EOFError, ValueError, zlib.error) as exc:
                raise Refused(f"refused zip: cannot read it ({type(exc).__name__}: {exc})") from None
            if isinstance(manifest, str):
                note(sub, f"{path.name}: {manifest}; its id is taken from its name")
            elif manifest is not None:
                sub.claimed, sub.handed_in = manifest_student(manifest), manifest_time(manifest)
            return sub


def _zip_manifest(read, entries: dict[str, zipfile.ZipInfo]) -> object:
    """The zip's parsed ``manifest.json`` (plain JSON data, never code), or a string saying why it is unreadable."""
    if entries[MANIFEST].file_size > MAX_PY_BYTES:
        return f"{MANIFEST} is over {size_text(MAX_PY_BYTES)}, not read"
    try:
        return json.loads(read(MANIFEST, MAX_PY_BYTES).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return f"{MANIFEST} is not JSON ({type(exc).__name__})"


def _zip_submission(entries, read, path: Path, student: str, name: str, wrapped: bool) -> Submission:
    """The submission a listed zip at ``path`` holds: a notebook, one ``.py`` file, a package or a kit's package."""
    source = str(path)
    py = sorted(rel for rel in entries if is_graded_source(rel))
    notebooks = sorted(rel for rel in entries if rel.endswith(".ipynb") and "/" not in rel)
    if not py:
        if len(notebooks) == 1:
            text = decode_source(read(notebooks[0], MAX_NOTEBOOK_BYTES), notebooks[0])
            return _from_notebook(text, student, source, notebooks[0])
        raise Refused(f"{path.name}: no .py files to grade")
    if not wrapped and len(py) == 1 and "/" not in py[0] and py[0] != "__init__.py":  # one loose module
        return _made(student, source, "zip", {py[0]: decode_source(read(py[0], MAX_PY_BYTES), py[0])}, py[0])
    keep, entry = "", name  # keep the paths under ``keep``, ``keep + rest`` stored as ``entry/rest``
    if "__init__.py" not in py and f"{KIT_PACKAGE}/__init__.py" in py:
        keep, entry = f"{KIT_PACKAGE}/", KIT_PACKAGE
    files = {
        f"{entry}/{rel[len(keep) :]}": decode_source(read(rel, MAX_PY_BYTES), rel) for rel in py if rel.startswith(keep)
    }
    return _made(student, source, "zip", files, entry)


def _from_notebook(text: str, student: str, source: str, name: str) -> Submission:
    try:
        code = notebook_to_source(text)
    except Exception as exc:  # the converter's own errors name the problem
        line = (str(exc) or type(exc).__name__).splitlines()[0]
        raise _NotebookError(f"{name}: {line}") from None
    if not isinstance(code, str) or "\x00" in code:
        raise _NotebookError(f"{name}: the notebook's code could not be extracted as text")
    rel = safe_name(PurePosixPath(name).stem) + ".py"
    return _made(student, source, "ipynb", {rel: code}, rel)


class _NotebookError(Refused):
    """A notebook that cannot be graded (the row keeps format ``ipynb``)."""


def _read_notebook_file(path: Path, student: str, source: str) -> Submission:
    try:
        data = _read_file(path, MAX_NOTEBOOK_BYTES, path.name, "notebook")
    except Refused as exc:
        raise _NotebookError(str(exc)) from None
    return _from_notebook(decode_source(data, path.name), student, source, path.name)


def _made(student: str, source: str, fmt: str, files: dict[str, str], entry: str) -> Submission:
    """A submission read whole: its hash, and its review findings (its source scanned, never run)."""
    return Submission(student, source, fmt, files, entry, files_sha256(files), review=scan_files(files))


def _format_of(path: Path) -> str:
    return "folder" if path.is_dir() else {".py": "py", ".zip": "zip", ".ipynb": "ipynb", "": "folder"}.get(
        path.suffix.lower(), "unknown"
    )


def read_submission(path: str | os.PathLike[str]) -> Submission:
    """Read one submission as text; never raises for bad input (see ``Submission.error``).

    The student id is the file stem, folder name or zip stem, sanitised; a path that is a symbolic link is refused,
    whatever it points to; its time as collected is :func:`collected_time`'s."""
    sub = _read_submission(Path(path), str(path))
    sub.collected = collected_time(Path(path))
    return sub


LMS_TIME = re.compile(r"^[^_]*_[^_]*_attempt_(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})(?=[_.]|$)")
"""The attempt time an LMS writes into a download's name (Blackboard: ``<assignment>_<user>_attempt_<Y-m-d-H-M-S>_…``),
only where the LMS writes it: the third field.  One later in the name is the learner's own file name (a Canvas
download keeps it after its prefix), and is no time at all: the file's time as collected stands."""


def collected_time(path: Path) -> datetime | None:
    """When a hand-in was collected: the LMS's attempt time in its name (:data:`LMS_TIME`), else the time of the
    file or folder on the instructor's disk (its mtime, not followed through a link); None when neither is known.
    Never the time a manifest states: the learner writes that."""
    if (found := LMS_TIME.search(name_of(path))) is not None:
        year, month, day, hour, minute, second = (int(g) for g in found.groups())
        with contextlib.suppress(ValueError):  # no such date: the time on disk stands
            return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    try:
        return datetime.fromtimestamp(os.lstat(path).st_mtime_ns / 1e9, tz=timezone.utc)
    except (OSError, ValueError, OverflowError):
        return None


def _read_submission(p: Path, source: str) -> Submission:
    student, fmt = id_from_path(p), _format_of(p)
    try:
        if shown_path(source) != source:  # a name not valid UTF-8 would fail every report, note and the gradebook
            source = shown_path(source)
            raise Refused(f"{shown_path(p.name)}: its name is not valid UTF-8: not graded (rename it)")
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
    except Refused as exc:
        return Submission(student, source, "ipynb" if isinstance(exc, _NotebookError) else fmt, sha256=_file_sha256(p),
                          error=str(exc), claimed=exc.claimed, handed_in=exc.handed_in)  # fmt: skip
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return Submission(student, source, fmt, error=f"{p.name}: cannot read it ({reason})")
