"""A class roster: who is in the class, read from a CSV the instructor keeps, and how a hand-in names one of them.

``attnkit grade --roster roster.csv`` reads a CSV with a header row (read case-insensitively) and the columns ``id``,
``name``, ``email`` and, optionally, ``pattern`` (other columns, such as a section, are ignored)::

    id,name,email,pattern
    s1001,Jane Doe,jane.doe@uni.example,doejane_*
    s1002,Li Wei,li.wei@uni.example,

- ``id`` is the student's id in ``grades.csv`` and their feedback folder's name, so it must already be a safe id
  (letters, digits, ``.``, ``_``, ``-``; :func:`grader.handin.safe_name` leaves it unchanged): one the grader would
  have to change would not match the LMS's id on import, so it is refused, not changed.  Ids are unique, ignoring
  case (a folder per id on macOS/Windows).
- ``email`` is optional per row, unique where given; its local part (before ``@``) is a name a hand-in may carry.
- ``pattern`` is a **glob** (``*``, ``?``, ``[...]``; :mod:`fnmatch`), matched case-insensitively against a hand-in's
  file or folder name (not its path), as LMS downloads are named: Canvas ``doejane_12345_6789_submission.zip``,
  Moodle ``Jane Doe_12345_assignsubmission_file_...``.  A glob, not a regular expression: people write it in a
  spreadsheet cell without escaping a file name's dots, and it cannot backtrack catastrophically on a hostile name.

A bad file is a :class:`RosterError` naming the line: ``roster.csv:4: ...``.  :meth:`Roster.to_rows` /
:meth:`Roster.from_rows` turn a roster into plain dicts and back, for the gradebook.  Matching hand-ins to students
is :mod:`grader.instructor.identify`'s; this module only answers lookups.
"""

from __future__ import annotations

import csv
import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from grader.handin import MAX_NAME_LENGTH, safe_name

__all__ = ["COLUMNS", "MAX_ROSTER_BYTES", "Roster", "RosterEntry", "RosterError", "load"]

COLUMNS = ("id", "name", "email", "pattern")
"""The columns a roster has; ``pattern`` may be left out."""
REQUIRED = ("id", "name", "email")
MAX_ROSTER_BYTES = 8 << 20
"""A roster file may hold at most 8 MiB (tens of thousands of students)."""


class RosterError(Exception):
    """A roster that cannot be used: ``path:line: why`` (line 0 when the problem is the whole file)."""

    def __init__(self, path: str | os.PathLike[str], line: int, why: str) -> None:
        self.path, self.line, self.why = str(path), line, why
        super().__init__(f"{self.path}:{line}: {why}" if line else f"{self.path}: {why}")


@dataclass(frozen=True)
class RosterEntry:
    """One student of the roster; ``pattern`` is a glob over hand-in file names, or None."""

    id: str
    name: str
    email: str
    pattern: str | None = None

    @property
    def names(self) -> frozenset[str]:
        """The names (lower case, sanitised) a hand-in may carry for this student: id, email, email's local part."""
        found = {self.id.lower()}
        if self.email:
            found.add(safe_name(self.email).lower())
            found.add(safe_name(self.email.split("@", 1)[0]).lower())
        return frozenset(found)

    def matches_file(self, file_name: str) -> bool:
        """Whether this student's pattern matches ``file_name`` (a name, not a path), ignoring case."""
        return self.pattern is not None and _compiled(self.pattern).fullmatch(file_name.lower()) is not None


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern.lower()))


@dataclass(frozen=True)
class Roster:
    """The students of a class, in the roster's order; ids unique ignoring case."""

    entries: tuple[RosterEntry, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", tuple(self.entries))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Roster:
        """Read a roster CSV (UTF-8, a BOM allowed); :class:`RosterError` naming the line when it is not one."""
        return load(path)

    @property
    def ids(self) -> list[str]:
        return [e.id for e in self.entries]

    def by_pattern(self, file_name: str) -> list[RosterEntry]:
        """The students whose pattern matches ``file_name``, in roster order (more than one is the caller's problem)."""
        return [e for e in self.entries if e.matches_file(file_name)]

    def by_name(self, name: str) -> RosterEntry | None:
        """The student whose id, email or email's local part is ``name`` (sanitised, ignoring case), or None.

        An id wins over an email's local part; a name shared by two emails' local parts (nobody's id) names no one.
        """
        key = safe_name(name).lower()
        for entry in self.entries:
            if entry.id.lower() == key:
                return entry
        found = [e for e in self.entries if key in e.names]
        return found[0] if len(found) == 1 else None

    def to_rows(self) -> list[dict[str, str]]:
        """The roster as plain dicts (``pattern`` ``""`` when none), for the gradebook."""
        return [{"id": e.id, "name": e.name, "email": e.email, "pattern": e.pattern or ""} for e in self.entries]

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, object]], source: str = "the gradebook's roster") -> Roster:
        """A roster from :meth:`to_rows`'s dicts, checked as a file is (:class:`RosterError` naming ``source``)."""
        return _checked(
            source, [(n, {k: str(row.get(k) or "") for k in COLUMNS}) for n, row in enumerate(rows, start=1)]
        )


def load(path: str | os.PathLike[str]) -> Roster:
    """Read the roster CSV at ``path`` (see the module docstring)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise RosterError(p, 0, "not a file")
        if size > MAX_ROSTER_BYTES:
            raise RosterError(p, 0, f"{size} bytes is over the {MAX_ROSTER_BYTES >> 20} MiB limit for a roster")
        data = p.read_bytes()
    except OSError as exc:
        raise RosterError(p, 0, f"cannot read it ({exc.strerror or type(exc).__name__})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise RosterError(p, line, "not valid UTF-8 (save the roster as CSV UTF-8)") from None
    if "\x00" in text:
        raise RosterError(p, text[: text.index("\x00")].count("\n") + 1, "contains a null byte; is it a CSV file?")
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise RosterError(p, 0, "empty file; expected a header row: " + ",".join(COLUMNS))
        columns = [h.strip().lower() for h in header]
        absent = [c for c in REQUIRED if c not in columns]
        if absent:
            raise RosterError(
                p, 1, f"the header has no {', '.join(absent)} column; expected {','.join(COLUMNS)} (pattern optional)"
            )
        twice = sorted({c for c in columns if c in COLUMNS and columns.count(c) > 1})
        if twice:
            raise RosterError(p, 1, f"the header names {', '.join(twice)} twice")
        where = {c: columns.index(c) for c in COLUMNS if c in columns}
        rows: list[tuple[int, dict[str, str]]] = []
        for fields in reader:
            line = reader.line_num
            if not any(f.strip() for f in fields):
                continue  # a blank line, or a spreadsheet's row of empty cells
            if len(fields) != len(header):
                raise RosterError(p, line, f"{len(fields)} fields where the header has {len(header)}")
            rows.append((line, {c: fields[i].strip() for c, i in where.items()}))
    except csv.Error as exc:
        raise RosterError(p, reader.line_num, f"not valid CSV ({exc})") from None
    return _checked(str(p), rows)


def _checked(source: str, rows: list[tuple[int, dict[str, str]]]) -> Roster:
    """The roster of ``(line, {column: text})`` rows, or :class:`RosterError` at the first bad line."""
    entries: list[RosterEntry] = []
    ids: dict[str, int] = {}
    emails: dict[str, int] = {}
    for line, row in rows:
        sid, email, pattern = row.get("id", ""), row.get("email", ""), row.get("pattern", "")
        if not sid:
            raise RosterError(source, line, "no id")
        if safe_name(sid, "") != sid or len(sid) > MAX_NAME_LENGTH:
            why = f"(at most {MAX_NAME_LENGTH} of A-Z a-z 0-9 . _ -, not starting with . or -)"
            raise RosterError(source, line, f"id {sid!r} is not a safe id {why}; for example {safe_name(sid)!r}")
        if sid.lower() in ids:
            raise RosterError(source, line, f"id {sid!r} is already on line {ids[sid.lower()]} (ids ignore case)")
        ids[sid.lower()] = line
        if email:
            if email.lower() in emails:
                raise RosterError(source, line, f"email {email!r} is already on line {emails[email.lower()]}")
            emails[email.lower()] = line
        entries.append(RosterEntry(sid, row.get("name", ""), email, pattern or None))
    if not entries:
        raise RosterError(source, 0, "no students in it (only a header)")
    return Roster(tuple(entries))
