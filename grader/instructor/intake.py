"""Reading submissions safely: files become text, nothing is ever executed here.

A submission reaches the learner's sandboxed process (:mod:`grader.child`) as ``{relpath: source text}`` plus an
*entry* to import: a ``.py`` file; a folder's graded ``.py`` files (:func:`grader.handin.is_graded_source`) keyed
under its name; a learner's kit, only its ``exercises`` package (so ``from exercises.scores import x`` works); a
``.zip`` of any of these (entry count and sizes capped, declared *and* counted while reading; no absolute paths,
``..`` or links; one shared top folder is that folder); a ``.ipynb`` (:func:`grader.notebooks.notebook_to_source`).
Intake never follows a link, and opens only regular files (``O_NOFOLLOW``: a FIFO cannot hang the grader).  The
caps and rules are :mod:`grader.handin`'s, which ``attnkit submit`` packs by.  Every submission read is scanned,
never run, for evasion constructs (``Submission.review``).  :func:`read_submission` never raises for bad input (an
error row); :func:`collect` never drops and never invents.  Every text made here from a learner's input is one
inert line (:func:`~grader.instructor.inert.inert_line`).
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
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from grader.handin import (
    KIT_PACKAGE,
    MANIFEST,
    MAX_ENTRIES,
    MAX_FOLDER_DEPTH,
    MAX_NAME_LENGTH,
    MAX_NOTEBOOK_BYTES,
    MAX_PY_BYTES,
    MAX_TOTAL_BYTES,
    MAX_WALKED,
    MAX_ZIP_BYTES,
    RELEASE_RECORD,
    SKIPPED_DIRS,
    is_graded_source,
    is_hidden,
    is_skipped_dir,
    is_test_file,
    manifest_student,
    manifest_time,
    safe_name,
    size_text,
    text_problem,
    too_big,
)
from grader.instructor.inert import inert_line
from grader.instructor.out_folder import CLASS_FILES, GRADEBOOK
from grader.instructor.review_flags import scan_files
from grader.instructor.roster import Roster, RosterEntry
from grader.notebooks import notebook_to_source

MAX_HASHED_BYTES = 256 << 20
"""An error row's input is hashed only up to this size (a multi-gigabyte file gets no hash)."""

FORMATS = ("py", "folder", "zip", "ipynb")
NOT_A_SUBMISSION = "not a submission: expected a .py, .ipynb or .zip file, or a folder"

_CHUNK = 64 << 10


@dataclass
class Submission:
    """One learner's hand-in as text for a sandboxed process: ``files`` (relative POSIX path -> source text), the
    ``entry`` it imports (a key of ``files`` or a folder above them); ``error`` one line when it cannot be graded."""

    student: str
    source: str
    format: str
    files: dict[str, str] = field(default_factory=dict)
    entry: str = ""
    sha256: str = ""
    error: str | None = None
    review: list[str] = field(default_factory=list)  # ``file:line: construct`` findings (review_flags)
    notes: list[str] = field(default_factory=list)  # one inert line per id decision worth reading (_note)
    claimed: str | None = None  # the id its manifest claims (grader.handin.manifest_student): a claim, never the id
    handed_in: datetime | None = None  # when its manifest says it was packed (UTC): a claim, never an order
    collected: datetime | None = None  # when it was collected (collected_time): what --latest orders by

    def __post_init__(self) -> None:
        if self.error is not None:
            self.error = inert_line(self.error)

    def load_message(self) -> dict[str, object]:
        """The ``load`` request for :mod:`grader.child.serve` (the caller adds ``hooks``)."""
        return {"op": "load", "files": dict(self.files), "entry": self.entry}


class Refused(Exception):
    """Input that cannot be accepted (the message is the one-line error shown); a zip refused after its manifest was
    read carries the manifest's claim, so its error row keeps the student's id."""

    claimed: str | None = None
    handed_in: datetime | None = None

    def __init__(self, message: str) -> None:
        super().__init__(inert_line(message))  # it names files and entries the learner named: one inert line


def _note(sub: Submission, text: str) -> None:
    """Add one note to ``sub``: one inert line, whatever file names or claims it quotes."""
    sub.notes.append(inert_line(text))


def _name_of(path: Path) -> str:
    return path.name if path.name not in ("", ".", "..") else path.resolve().name


def _stem(path: Path) -> str:
    """A hand-in's file name without its suffix, or its folder's name, as given (not sanitised)."""
    name = _name_of(path)
    return Path(name).stem if not path.is_dir() else name


def _id_from_path(path: Path) -> str:
    return safe_name(_stem(path))


RESERVED_IDS = frozenset(name.lower() for name in CLASS_FILES)
"""The files ``attnkit grade`` writes beside the student folders (lower case): no student may take one."""

CANONICAL_SUFFIXES = ("", ".py", ".zip", ".ipynb")
"""A file whose name is ``<id><suffix>`` with one of these (lower case) suffixes names its id exactly."""
ONE_FILE_SUFFIXES = (".py", ".ipynb")
"""Hand-ins of one file of code; a ``.zip`` or folder is a container, named by whoever packed it, so it claims an
id less well than one file so named (:func:`_claim_rank`)."""

ID_HASH_CHARS = 8
"""Hex digits of sha256 added to an id that collides: ``a_b-1c2d3e4f``."""


def _claim_rank(sub: Submission) -> int:
    """How strongly a submission claims its id: 0 its name is exactly the id and it is one file (``alice.py``,
    ``alice.ipynb``), 1 a container so named (``alice.zip``, ``alice/``), 2 the same up to case, 3 sanitised."""
    name = _name_of(Path(sub.source))
    for suffix in CANONICAL_SUFFIXES:
        if name == sub.student + suffix:
            return 2 if sub.student != sub.student.lower() else 0 if suffix in ONE_FILE_SUFFIXES else 1
    return 3


def _hashed_id(base: str, seed: str, length: int) -> str:
    digest = hashlib.sha256(seed.encode("utf-8", "surrogateescape")).hexdigest()[:length]
    return f"{base[: MAX_NAME_LENGTH - length - 1]}-{digest}"


def deduplicate_ids(
    submissions: list[Submission],
    owned: Iterable[str] = (),
    roster_ids: Iterable[str] = (),
    given: Collection[str] = (),
) -> list[Submission]:
    """Make student ids unique (ignoring case, for macOS and Windows), whatever order the submissions come in.

    Among several claimants of an id, the single best by :func:`_claim_rank` keeps it; every other, and all when no
    single one is best, gets ``<id>-<8 hex digits of sha256 of its file name>`` (of its path where names tie).
    Never kept: a file the grader writes (``grades.csv`` …), an id in ``owned`` (other hand-ins', a roster's), a
    roster student's id (``roster_ids``: these names do not name the student).  Each change is noted why.
    """
    claims: dict[str, list[Submission]] = {}
    for sub in submissions:
        claims.setdefault(sub.student.lower(), []).append(sub)
    owned = {name.lower() for name in owned}
    listed = {name.lower() for name in roster_ids} - owned
    taken = {name.lower() for name in RESERVED_IDS} | owned | listed
    renamed: list[tuple[Submission, str]] = []  # (submission, why)
    for key, subs in claims.items():
        blocked = (
            (RESERVED_IDS, "is the name of a file attnkit grade writes"),
            (owned, "is the roster's id of another hand-in"),
            (listed, "is a roster student's id, which this name names only once sanitised"),
        )
        why = next((why for keys, why in blocked if key in keys), None)
        if why is not None:  # a roster student's id is said as the first claimant spells it
            renamed += [(sub, f"{(subs[0] if why == blocked[2][1] else sub).student!r} {why}") for sub in subs]
            continue
        ranks = [_claim_rank(sub) - (sub.source in given and _claim_rank(sub) < 2) * 2 for sub in subs]
        best = [sub for sub, rank in zip(subs, ranks) if rank == min(ranks)]
        keeper = best[0] if len(best) == 1 else None
        if keeper is not None:
            taken.add(key)
        shown = _listed(sorted({_name_of(Path(sub.source)) for sub in subs}), 4)
        kept = f", kept by {_name_of(Path(keeper.source))!r}" if keeper is not None else ""
        for sub in [sub for sub in subs if sub is not keeper]:
            packed = f" ({PACKED_LOSES})" if keeper is not None and min(ranks) == 0 and _claim_rank(sub) == 1 else ""
            renamed.append((sub, f"{sub.student!r} is claimed by {len(subs)} submissions ({shown}){kept}{packed}"))
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
        _note(sub, f"{_name_of(Path(sub.source))!r} was given the id {candidate!r}: {why}")
        sub.student = candidate
    for sub in submissions:  # an id its name gives only once made safe (ｂｏｂ → bob, =SUM(1) → _SUM_1_): said too
        stem = _stem(Path(sub.source))
        if not sub.notes and sub.student != stem and sub.student == safe_name(stem):
            _note(sub, f"{_name_of(Path(sub.source))!r} was given the id {sub.student!r}: its name made safe "
                       "(only letters, digits, '.', '_' and '-' are kept)")  # fmt: skip
    return submissions


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
                _note(sub, f"{path.name}: {manifest}; its id is taken from its name")
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


def shown_path(path: str) -> str:
    """``path`` as text every report can hold: a name that is not valid UTF-8 (``b'mall\\xffory.py'``, read as
    surrogates) with its bad bytes written ``\\xff``; any other name as it is."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return path


LMS_TIME = re.compile(r"^[^_]*_[^_]*_attempt_(\d{4})-(\d{2})-(\d{2})-(\d{2})-(\d{2})-(\d{2})(?=[_.]|$)")
"""The attempt time an LMS writes into a download's name (Blackboard: ``<assignment>_<user>_attempt_<Y-m-d-H-M-S>_…``),
only where the LMS writes it: the third field.  One later in the name is the learner's own file name (a Canvas
download keeps it after its prefix), and is no time at all: the file's time as collected stands."""


def collected_time(path: Path) -> datetime | None:
    """When a hand-in was collected: the LMS's attempt time in its name (:data:`LMS_TIME`), else the time of the
    file or folder on the instructor's disk (its mtime, not followed through a link); None when neither is known.
    Never the time a manifest states: the learner writes that."""
    if (found := LMS_TIME.search(_name_of(path))) is not None:
        year, month, day, hour, minute, second = (int(g) for g in found.groups())
        with contextlib.suppress(ValueError):  # no such date: the time on disk stands
            return datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc)
    try:
        return datetime.fromtimestamp(os.lstat(path).st_mtime_ns / 1e9, tz=timezone.utc)
    except (OSError, ValueError, OverflowError):
        return None


def _read_submission(p: Path, source: str) -> Submission:
    student, fmt = _id_from_path(p), _format_of(p)
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


HAND_IN_SUFFIXES = (".py", ".ipynb", ".zip")
"""The files a class folder's members may be (besides folders)."""
STRAY_NAMES = frozenset({"thumbs.db", "desktop.ini", "icon\r", "__macosx"})
"""Lower-case names an OS or a zip tool leaves beside hand-ins; with hidden names and READMEs, skipped silently."""

NOT_A_HAND_IN = "not a hand-in (expected a .py, .ipynb or .zip file, or a folder)"
TEST_FILE = "a test file (test_*.py, *_test.py, conftest.py): never graded"
RESULTS_FOLDER = "an attnkit grade results folder (it holds gradebook.sqlite)"
NOT_REGULAR = "not a regular file"
PACKAGE_INIT = "an __init__.py at the top of a class folder is no one's hand-in: not graded (--one: the folder is one)"
KIT_IN_CLASS = "a kit's package beside other hand-ins: graded as one hand-in of the class (--one: the folder is a kit)"
BESIDE_KIT = f"beside a kit's {KIT_PACKAGE}/: not graded (the kit's {KIT_PACKAGE} package is; --class grades each)"
VENV_NAMES = frozenset({"venv", "env", "virtualenv"})
KIT_FOLDERS = frozenset({KIT_PACKAGE, "notebooks", "grader"})
"""The folders a released kit holds (:mod:`grader.instructor.release`): with ``exercises/__init__.py`` and no other
hand-in beside them, the folder is a learner's kit (:func:`folder_reading`)."""


class IntakeError(Exception):
    """Nothing can be graded as asked (one line saying what to do): a usage error, nothing is written."""

    def __init__(self, message: str) -> None:
        super().__init__(inert_line(message, 4000))  # it may name files a learner named


@dataclass(frozen=True)
class Skipped:
    """Something found and not graded, and why (one line)."""

    path: str
    reason: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", shown_path(self.path))
        object.__setattr__(self, "reason", inert_line(self.reason))


HIDDEN_HAND_IN = "a hidden file (its name starts with a dot); name it on the command line to grade it"


def is_stray(name: str) -> bool:
    """A file or folder nobody hands in: hidden (``.DS_Store``, ``.gitignore``), a README, OS or zip debris."""
    low = name.lower()
    return is_hidden(name) or name in SKIPPED_DIRS or low in STRAY_NAMES or low.startswith("readme")


def sort_out(path: Path) -> tuple[list[Path], list[Skipped]]:
    """A class folder's members (each one submission), sorted by name, and what is skipped there, with why.

    Members: ``.py`` (no test file, no ``__init__.py``), ``.ipynb`` and ``.zip`` files, folders, and symbolic links
    (each an error row naming it, never read).  Strays (:func:`is_stray`) are left out without a word; the rest is a
    :class:`Skipped` (other files, test files, a folder ``attnkit grade`` wrote, a FIFO or socket)."""
    members: list[Path] = []
    skipped: list[Skipped] = []
    with os.scandir(path) as found:
        entries = sorted(found, key=lambda e: e.name)
    for e in entries:
        child = Path(e.path)
        suffix = child.suffix.lower()
        regular = e.is_file(follow_symlinks=False)
        why: str | None = None  # None: a member; "": left out without a word
        if is_stray(e.name):  # a hidden hand-in never silently: name it to grade it
            why = HIDDEN_HAND_IN if suffix in HAND_IN_SUFFIXES and is_hidden(e.name) and regular else ""
        elif e.is_symlink():
            why = None
        elif e.is_dir(follow_symlinks=False):
            why = RESULTS_FOLDER if _holds_gradebook(child) else None
        elif suffix == ".py" and is_test_file(e.name):
            why = TEST_FILE
        elif e.name == "__init__.py" and regular:
            why = PACKAGE_INIT
        elif suffix not in HAND_IN_SUFFIXES:  # one named like a hand-in, a FIFO too, is a member: its error row
            why = NOT_A_HAND_IN if regular else NOT_REGULAR
        if why is None:
            members.append(child)
        elif why:
            skipped.append(Skipped(str(child), why))
    return members, skipped


def _holds_gradebook(folder: Path) -> bool:
    """``folder`` is one ``attnkit grade`` wrote; a folder its mode closes to this grader is a member, and its
    error row says it cannot be read (a learner's ``chmod 000`` folder never stops the class: red team 7b)."""
    with contextlib.suppress(OSError):
        return (folder / GRADEBOOK).exists()
    return False


def class_members(path: Path) -> list[Path]:
    """The submissions in a class folder (:func:`sort_out`'s members), sorted by name."""
    return sort_out(path)[0]


def _regular(path: Path) -> bool:
    return stat.S_ISREG(os.lstat(path).st_mode)


def is_kit_or_package(path: Path) -> bool:
    """``path`` holds a package's ``__init__.py`` or a kit's ``exercises/__init__.py``: one learner's, where the
    folder is known to be one learner's (named beside other hand-ins, a Gradescope upload), never otherwise."""
    return (path / "__init__.py").exists() or (path / KIT_PACKAGE / "__init__.py").exists()


def _is_kit(path: Path, members: list[Path]) -> bool:
    """A learner's whole kit: ``exercises/__init__.py`` and, beside it, no hand-in but the kit's own folders and
    what the kit grows as it is used (:func:`_kit_by_product`)."""
    kit = (path / KIT_PACKAGE / "__init__.py").is_file() and not (path / "__init__.py").exists()
    released = (path / RELEASE_RECORD).is_file() and not (path / RELEASE_RECORD).is_symlink()
    return kit and all(
        (m.name in KIT_FOLDERS and m.is_dir() and not m.is_symlink()) or _kit_by_product(m, released) for m in members
    )


def _kit_by_product(member: Path, released: bool) -> bool:
    """What a learner's kit grows beside its folders: a virtual environment, an editable install's ``*.egg-info``;
    and only where the kit's release record is (``released``: never a class folder) ``attnkit submit``'s zips and
    the learner's notebooks (each skipped, :data:`BESIDE_KIT`).  Never a ``.py`` file (then it is a class)."""
    if member.is_symlink():
        return False
    if member.is_dir():
        return member.name in VENV_NAMES or member.name.endswith(".egg-info") or (member / "pyvenv.cfg").is_file()
    suffix = member.suffix.lower()
    submitted = suffix == ".zip" and ATTNKIT_NAME.fullmatch(_stem(member)) is not None
    return released and _regular(member) and (suffix == ".ipynb" or submitted)


LMS_FOLDER = re.compile(r".+_\d+_assign(?:submission|feedback)_[a-z]+_?")
"""The name an LMS gives one learner's folder of a download (Moodle's "submissions in folders": ``<full name>_<id>_
assignsubmission_file_``): the instructor's collection, never a class (:func:`folder_reading`)."""


def folder_reading(path: Path, listed: bool = False, collected: bool = False) -> str:
    """How ``attnkit grade`` reads a folder: ``"class"`` (each member its own submission) or ``"one"`` submission.

    By its shape and own name alone, never by the code or names in it (the learner's: decoys can look like
    anything).  One: a folder the collection named as one learner's (:data:`LMS_FOLDER`, or ``collected`` by a
    roster pattern); a learner's kit (:func:`_is_kit`); a folder whose only hand-in is one ``.py`` or notebook, or
    a lone package ``__init__.py``.  Else a class (:func:`sort_out`), unless the instructor names the folder beside
    other hand-ins (``listed``), where ``.py`` files only, a package or a kit is one.
    """
    if collected or LMS_FOLDER.fullmatch(_name_of(path)):
        return "one"
    members, _ = sort_out(path)
    if (listed and is_kit_or_package(path)) or _is_kit(path, members):
        return "one"
    init = path / "__init__.py"
    lone = len(members) == 1 and members[0].suffix.lower() in (".py", ".ipynb") and _regular(members[0])
    lone = lone or (not members and init.is_file() and not init.is_symlink())
    modules = listed and bool(members) and all(m.suffix.lower() == ".py" and _regular(m) for m in members)
    return "one" if lone or modules else "class"


def _not_in_one(path: Path) -> list[Skipped]:
    """What reading ``path`` as one submission leaves out: notebooks and zips beside its top-level ``.py`` files,
    every hand-in file beside a kit's ``exercises/`` (its package is graded)."""
    members, _ = sort_out(path)
    if (path / KIT_PACKAGE / "__init__.py").exists() and not (path / "__init__.py").exists():
        return [Skipped(str(m), BESIDE_KIT) for m in members if m.suffix.lower() in HAND_IN_SUFFIXES and m.is_file()]
    with os.scandir(path) as ls:
        if not any(is_graded_source(e.name) and e.is_file(follow_symlinks=False) for e in ls):
            return []
    why = "beside the .py files of a folder graded as one submission: not graded (--class grades each)"
    return [Skipped(str(m), why) for m in members if m.suffix.lower() in (".ipynb", ".zip")]


READINGS = ("auto", "class", "one")
"""How a folder given to :func:`collect` is read: decided by :func:`folder_reading`, or forced."""

ATTNKIT_NAME = re.compile(r"submission-(.+)-\d{4}-\d{2}-\d{2}(?:-\d+)?")
"""The name ``attnkit submit`` gives a hand-in (its stem): ``submission-<id>-<date>[-n]``.  Its ``<id>`` is the
learner's own ``--student`` (or login): a claim, like the manifest's (:func:`identify`)."""


@dataclass(frozen=True)
class Intake:
    """What :func:`collect` found: the submissions to grade, what it skipped and why, and the roster's view:
    ``missing`` the roster's students with no hand-in, ``unmatched`` the ids of hand-ins that match no one on it
    (graded under their own), ``notes`` one line per id decision worth reading (a manifest's other id, a renamed id)."""

    submissions: list[Submission]
    skipped: list[Skipped] = field(default_factory=list)
    missing: list[RosterEntry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    roster: Roster | None = None
    unmatched: list[str] = field(default_factory=list)

    @property
    def formats(self) -> dict[str, int]:
        """How many submissions of each format, in :data:`FORMATS` order (others after)."""
        counts = Counter(s.format for s in self.submissions)
        return {fmt: counts[fmt] for fmt in (*FORMATS, *sorted(set(counts) - set(FORMATS))) if counts[fmt]}

    def found_line(self) -> str:
        """``3 submissions found: 1 py, 2 ipynb (1 cannot be read: an error row)``."""
        n = len(self.submissions)
        formats = ", ".join(f"{count} {fmt}" for fmt, count in self.formats.items())
        errors = sum(s.error is not None for s in self.submissions)
        line = f"{n} submission{'s' if n != 1 else ''} found: {formats}"
        if errors:
            line += f" ({errors} cannot be read: {'an error row' if errors == 1 else 'error rows'})"
        return line


def collect(
    paths: Iterable[str | os.PathLike[str]],
    *,
    reading: str = "auto",
    roster: Roster | None = None,
    latest: bool = False,
) -> Intake:
    """Read every submission named by ``paths``, or :class:`IntakeError` (nothing is graded then).

    A path that does not exist, a folder that yields no submission and nothing at all to grade are errors.  A folder
    is read as :func:`folder_reading` says or ``reading`` forces; a file that is not a hand-in is skipped (silently
    when a stray, such as a README a shell glob picked up).  Ids are given by :func:`identify`."""
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {', '.join(READINGS)}, not {reading!r}")
    paths = list(paths)
    subs: list[Submission] = []
    skipped: list[Skipped] = []
    given: set[str] = set()  # hand-ins named on the command line beside others: their names are the instructor's
    for raw in paths:
        p = Path(raw)
        if not p.is_symlink() and not p.exists():
            raise IntakeError(f"{raw}: no such file or folder")
        if p.is_dir() and not p.is_symlink():
            try:
                collected = roster is not None and bool(roster.by_pattern(_name_of(p)))
                how = reading if reading != "auto" else folder_reading(p, len(paths) > 1, collected)
                members, left = sort_out(p) if how == "class" else ([p], _not_in_one(p))
            except OSError as exc:
                if len(paths) == 1:  # the instructor's class folder: nothing to grade
                    raise IntakeError(f"{raw}: cannot list it ({exc.strerror or type(exc).__name__})") from None
                how, members, left = "one", [p], []  # one hand-in beside others: its own error row
            skipped += left
            if not members:
                said = f" ({len(left)} skipped, listed)" if left else " (only hidden files, READMEs or OS debris)"
                said = said if left or any(p.iterdir()) else " (it is empty)"
                raise IntakeError(f"{raw}: no submissions in it{said}: {_skipped_text(left)}".rstrip(": "))
            read = [read_submission(m) for m in members]
            if how != "class" and len(paths) > 1:
                given.update(sub.source for sub in read)
            for sub in read if how == "class" else []:
                if sub.format == "folder" and Path(sub.source).name == KIT_PACKAGE:
                    _note(sub, f"{KIT_PACKAGE!r}: {KIT_IN_CLASS}")
            subs += read
        elif is_stray(p.name) and not p.is_symlink() and p.suffix.lower() not in HAND_IN_SUFFIXES:
            continue  # a hand-in named on the command line is graded, hidden or not
        elif p.suffix.lower() not in HAND_IN_SUFFIXES and not p.is_symlink() and p.is_file():
            skipped.append(Skipped(str(raw), NOT_A_HAND_IN))
        else:
            subs.append(read_submission(p))
            if len(paths) > 1:
                given.add(subs[-1].source)
    if not subs:
        shown = ", ".join(str(p) for p in paths) or "no paths"
        raise IntakeError(f"nothing to grade in {shown}" + (f": {_skipped_text(skipped)}" if skipped else ""))
    return identify(subs, skipped, roster=roster, latest=latest, given=given)


def _skipped_text(skipped: list[Skipped], limit: int = 5) -> str:
    shown = "; ".join(f"{Path(s.path).name}: {s.reason}" for s in skipped[:limit])
    return shown + (f"; and {len(skipped) - limit} more" if len(skipped) > limit else "")


def collect_submissions(paths: list[str]) -> list[Submission]:
    """:func:`collect`'s submissions, folders read as :func:`folder_reading` says, without a roster."""
    return collect(paths).submissions


def _by_file_name(roster: Roster, sub: Submission) -> RosterEntry | None:
    """The student a hand-in's stem names (id, email or its local part), or None.  Only a name that is already a
    safe id names anyone: one that had to be sanitised (``ａｌｉｃｅ.py``, a confusable of an id) names no one."""
    stem = _stem(Path(sub.source))
    return roster.by_name(stem) if safe_name(stem, "") == stem else None


PATTERN_RANK, EXACT_RANK, PACKED_RANK, VARIANT_RANK = 0, 1, 2, 3
"""How well a hand-in claims its roster student: by the student's file pattern, by one file of code named exactly
as one of the student's names (:func:`_name_rank`), by a container so named, by a name equal only up to case."""

PACKED_LOSES = "one file named as the id outranks a .zip or folder of that name: whoever packs a container names it"


def _name_rank(sub: Submission, entry: RosterEntry) -> int:
    """:data:`EXACT_RANK` for a ``.py``/``.ipynb`` named exactly as one of ``entry``'s names (as spelled or in lower
    case), :data:`PACKED_RANK` for a ``.zip`` or folder so named; else :data:`VARIANT_RANK` (``Alice.py``)."""
    name, stem = _name_of(Path(sub.source)), _stem(Path(sub.source))
    spelled = {entry.id, *((safe_name(entry.email), safe_name(entry.email.split("@", 1)[0])) if entry.email else ())}
    spelled |= {n.lower() for n in spelled}
    suffix = name[len(stem) :]
    if stem not in spelled or suffix not in CANONICAL_SUFFIXES:
        return VARIANT_RANK
    return EXACT_RANK if suffix in ONE_FILE_SUFFIXES else PACKED_RANK


def _name_claim(sub: Submission, roster: Roster | None) -> tuple[str, RosterEntry | None] | None:
    """The id a name in ``attnkit submit``'s form claims (:data:`ATTNKIT_NAME`) and the roster student it names
    (only where the name is already a safe id, as :func:`_by_file_name`), or None for any other name."""
    stem = _stem(Path(sub.source))
    if (made := ATTNKIT_NAME.fullmatch(safe_name(stem))) is None:
        return None
    entry = roster.by_name(made.group(1)) if roster is not None and safe_name(stem, "") == stem else None
    return safe_name(made.group(1)), entry


CLAIMED = "attnkit submit's name, from the learner's own --student"


def _listed(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(repr(name) for name in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


_Claims = dict[str, list[tuple[Submission, str, RosterEntry | None]]]
"""Names in attnkit submit's form by the lower-case id they claim: (hand-in, the id, the roster student it names)."""


def _settle_name_claims(
    claims: _Claims, owned: dict[str, list[Submission]], named: list[Submission], with_roster: bool
) -> tuple[list[tuple[Submission, RosterEntry | None]], list[Submission]]:
    """Which names in attnkit submit's form (``claims``, by lower-case id) get that id (granted, with the roster
    student it names), which are graded under their whole stem (disowned, noted why): granted only where no
    hand-in holds the id by a collected name (``owned``, ``named``), it is no reserved name and no other claims it."""
    held: dict[str, list[str]] = {}
    for sub in [*(sub for subs in owned.values() for sub in subs), *named]:  # an owned one's id is its key
        held.setdefault(sub.student.lower(), []).append(_name_of(Path(sub.source)))
    granted: list[tuple[Submission, RosterEntry | None]] = []
    disowned: list[Submission] = []
    for key, group in sorted(claims.items()):
        for sub, claimed, entry in group:
            source = _name_of(Path(sub.source))
            wanted = entry.id if entry is not None else claimed
            others = sorted(_name_of(Path(other.source)) for other, _, _ in group if other is not sub)
            if key in held:
                why = f"which {_listed(sorted(held[key]))} has"
            elif key in RESERVED_IDS:
                why = "the name of a file attnkit grade writes"
            elif others:
                theirs = wanted + (Path(source).suffix if not Path(sub.source).is_dir() else "")
                why = f"as {_listed(others)} does too: no one of them takes it (rename the one that is theirs "
                why += f"{theirs!r})"
            else:
                sub.student = wanted
                granted.append((sub, entry))
                if with_roster and entry is not None:
                    _note(sub, f"{source!r}: graded as {wanted!r}, whom its name claims ({CLAIMED}); no roster pattern "
                               "confirms it")  # fmt: skip
                continue
            sub.student = _id_from_path(Path(sub.source))
            _note(sub, f"{source!r}: its name claims the id {wanted!r} ({CLAIMED}), {why}: graded as {sub.student!r}")
            disowned.append(sub)
    return granted, disowned


def identify(
    subs: list[Submission],
    skipped: list[Skipped] | None = None,
    *,
    roster: Roster | None = None,
    latest: bool = False,
    given: Collection[str] = (),
) -> Intake:
    """Give every submission its student id, whatever order they come in; :class:`IntakeError` when it cannot.

    The id comes from what the instructor collected, never from what the learner wrote: 1. with a roster, the
    student whose file ``pattern`` matches its name (two patterns: an error row, never a refusal of the class);
    2. with a roster, the student its stem names when it is already a safe id; 3. its sanitised stem, made unique
    (:func:`deduplicate_ids`).  A name in attnkit submit's form (:data:`ATTNKIT_NAME`) is only a claim, never in a
    ``--latest`` contest (:func:`_settle_name_claims`); a manifest's id only confirms (:func:`_check_claim`); a
    student's less exact names take no roster id (:func:`_demote_weaker_claims`); equally good ones are an error row
    unless ``latest`` (:func:`_latest_of_each`).  Hand-ins off the roster are graded under their own id and listed
    in ``unmatched`` (shown, not dropped); roster students without a hand-in are ``missing``.
    """
    skipped = list(skipped or [])
    if roster is not None and (reserved := [e.id for e in roster.entries if e.id.lower() in RESERVED_IDS]):
        raise IntakeError(f"roster: the id {reserved[0]!r} is the name of a file attnkit grade writes; rename it")
    owned: dict[str, list[Submission]] = {}
    named: list[Submission] = []
    off_roster: list[Submission] = []
    entries: dict[int, RosterEntry] = {}
    claims: _Claims = {}

    ranks: dict[int, int] = {}

    def own(sub: Submission, entry: RosterEntry, rank: int) -> None:
        sub.student, entries[id(sub)], ranks[id(sub)] = entry.id, entry, rank
        owned.setdefault(entry.id.lower(), []).append(sub)

    for sub in subs:
        name = _name_of(Path(sub.source))
        hits = roster.by_pattern(name) if roster is not None else []
        claim = _name_claim(sub, roster)
        if len(hits) > 1:
            why = f"{name!r} matches the file patterns of {', '.join(e.id for e in hits)}"
            if sub.error is None:
                sub.error = f"{why}: not graded until the roster's patterns tell them apart"
            else:
                _note(sub, f"{why}: make the roster's patterns tell them apart")
        elif hits:
            own(sub, hits[0], PATTERN_RANK)
            continue
        elif roster is not None and (entry := _by_file_name(roster, sub)) is not None:
            rank = _name_rank(sub, entry)
            own(sub, entry, PATTERN_RANK if sub.source in given and rank < VARIANT_RANK else rank)
            continue
        elif claim is not None:
            claimed, entry = claim
            claims.setdefault((entry.id if entry is not None else claimed).lower(), []).append((sub, claimed, entry))
            continue
        elif roster is not None:
            off_roster.append(sub)
        sub.student = _id_from_path(Path(sub.source))
        named.append(sub)
    granted, disowned = _settle_name_claims(claims, owned, named, roster is not None)
    for sub, entry in granted:
        if entry is not None:
            own(sub, entry, VARIANT_RANK)
        else:
            named.append(sub)
            off_roster += [sub] if roster is not None else []
    named += disowned
    demoted = _demote_weaker_claims(owned, ranks)
    for sub in demoted:
        entries.pop(id(sub))
        sub.student = _id_from_path(Path(sub.source))
    named += demoted
    losers = _latest_of_each(owned, latest)
    skipped += [Skipped(sub.source, why) for sub, why in losers]
    dropped = {id(sub) for sub, _ in losers}
    kept = [sub for sub in subs if id(sub) not in dropped]
    roster_ids = [e.id for e in roster.entries] if roster is not None else ()
    deduplicate_ids(named, owned=owned, roster_ids=roster_ids, given=given)
    name_claims = {id(sub): claimed for group in claims.values() for sub, claimed, _ in group}
    for sub in kept:
        _check_claim(sub, entries.get(id(sub)), roster, name_claims.get(id(sub)))
    for sub in [sub for sub in off_roster if id(sub) not in dropped]:
        _note(sub, f"{_name_of(Path(sub.source))!r} matches no one on the roster: graded as {sub.student!r}")
    found = {sub.student.lower() for sub in kept}
    missing = [e for e in roster.entries if e.id.lower() not in found] if roster is not None else []
    strays = [*off_roster, *demoted, *(disowned if roster is not None else [])]
    unmatched = {sub.student for sub in strays if id(sub) not in dropped}
    return Intake(kept, skipped, missing, [note for sub in kept for note in sub.notes], roster, sorted(unmatched))


def _check_claim(sub: Submission, entry: RosterEntry | None, roster: Roster | None, named: str | None) -> None:
    """A note on ``sub`` when its manifest claims another id than the one it was given (a claim only confirms),
    unless its name claims the same (``named``, attnkit submit's ``<id>``: its note says it already)."""
    claim = sub.claimed
    own = entry.names if entry is not None else {sub.student.lower()}
    if claim is None or claim.lower() in own or (named is not None and safe_name(claim).lower() == named.lower()):
        return
    whose = roster.by_name(claim) if roster is not None and entry is None else None
    hint = f" ({whose.id} on the roster: if it is theirs, give the roster a file pattern for it)" if whose else ""
    _note(sub, f"{_name_of(Path(sub.source))!r}: its manifest claims the id {claim!r}{hint}; graded as "
               f"{sub.student!r}, the id its file name gives (a manifest's id only confirms it)")  # fmt: skip


def _demote_weaker_claims(owned: dict[str, list[Submission]], ranks: dict[int, int]) -> list[Submission]:
    """The hand-ins that claim their roster student less well than another of theirs (:data:`PATTERN_RANK` …):
    removed from ``owned``, each noted; graded under their own id (``--latest`` orders only equally good claims)."""
    demoted: list[Submission] = []
    for subs in owned.values():
        best = min(ranks[id(sub)] for sub in subs)
        strong = sorted(_name_of(Path(sub.source)) for sub in subs if ranks[id(sub)] == best)
        for sub in [sub for sub in subs if ranks[id(sub)] > best]:
            how = "its file pattern" if best == PATTERN_RANK else "an exact name"
            how = PACKED_LOSES if best == EXACT_RANK and ranks[id(sub)] == PACKED_RANK else how
            _note(sub, f"{_name_of(Path(sub.source))!r} names {sub.student} less exactly than {_listed(strong)} "
                       f"({how}): it takes no roster id")  # fmt: skip
            demoted.append(sub)
            subs.remove(sub)
    return demoted


def _latest_of_each(owned: dict[str, list[Submission]], latest: bool) -> list[tuple[Submission, str]]:
    """The hand-ins another of the same student's supersedes, with why.  Without ``latest``, or where it cannot tell
    the last (by ``collected``), the first by name is an error row naming them, the others skipped."""
    losers: list[tuple[Submission, str]] = []
    for _, subs in sorted(owned.items()):
        if len(subs) < 2:
            continue
        subs = sorted(subs, key=lambda s: _name_of(Path(s.source)))
        names = [_name_of(Path(s.source)) for s in subs]
        untimed = [s for s in subs if s.collected is None]
        newest = max((s.collected for s in subs if s.collected is not None), default=None)
        best = [s for s in subs if s.collected == newest]
        if not latest:
            why = "pass --latest to grade the one collected last, or remove the ones not to grade"
        elif untimed:
            why = f"--latest cannot choose: {_listed([_name_of(Path(s.source)) for s in untimed])}: no time known"
        elif len(best) > 1:
            why = f"--latest cannot choose: {_listed([_name_of(Path(s.source)) for s in best])} were collected at " \
                  "the same time"  # fmt: skip
        else:
            winner = _name_of(Path(best[0].source))
            for sub in [sub for sub in subs if sub is not best[0]]:
                then = sub.collected.isoformat() if sub.collected else "?"
                losers.append((sub, inert_line(
                    f"superseded by {winner!r} ({sub.student}'s latest hand-in, collected "
                    f"{newest.isoformat() if newest else '?'}; this one {then})")))  # fmt: skip
            continue
        row = subs[0]
        row.error = inert_line(
            f"two or more hand-ins for {row.student} ({_listed(names, 6)}): not graded; {why}, then grade again"
        )
        losers += [(sub, inert_line(f"one of {row.student}'s {len(subs)} hand-ins: see that row")) for sub in subs[1:]]
    return losers
