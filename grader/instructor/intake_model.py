"""What intake hands on, and the names a hand-in's path gives it.

Each hand-in read as text is a :class:`Submission` (:mod:`grader.instructor.handin_reading` reads it); what was
found and not graded is a :class:`Skipped`, with why; a run's whole intake is an :class:`Intake`
(:func:`grader.instructor.intake.collect`), or an :class:`IntakeError` when nothing can be graded.  A hand-in's
name, stem and first id come from its path (:func:`name_of`, :func:`stem_of`, :func:`id_from_path`), and a path
that is not valid UTF-8 is shown as text every report can hold (:func:`shown_path`).  Every text made here from a
learner's input is one inert line (:func:`~grader.instructor.inert.inert_line`).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader.handin import safe_name
from grader.instructor.inert import inert_line
from grader.instructor.roster import Roster, RosterEntry

FORMATS = ("py", "folder", "zip", "ipynb")


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
    notes: list[str] = field(default_factory=list)  # one inert line per id decision worth reading (note)
    claimed: str | None = None  # the id its manifest claims (grader.handin.manifest_student): a claim, never the id
    handed_in: datetime | None = None  # when its manifest says it was packed (UTC): a claim, never an order
    collected: datetime | None = None  # when it was collected (collected_time): what --latest orders by

    def __post_init__(self) -> None:
        if self.error is not None:
            self.error = inert_line(self.error)

    def load_message(self) -> dict[str, object]:
        """The ``load`` request for :mod:`grader.child.serve` (the caller adds ``hooks``)."""
        return {"op": "load", "files": dict(self.files), "entry": self.entry}


def note(sub: Submission, text: str) -> None:
    """Add one note to ``sub``: one inert line, whatever file names or claims it quotes."""
    sub.notes.append(inert_line(text))


def name_of(path: Path) -> str:
    return path.name if path.name not in ("", ".", "..") else path.resolve().name


def stem_of(path: Path) -> str:
    """A hand-in's file name without its suffix, or its folder's name, as given (not sanitised)."""
    name = name_of(path)
    return Path(name).stem if not path.is_dir() else name


def id_from_path(path: Path) -> str:
    return safe_name(stem_of(path))


def shown_path(path: str) -> str:
    """``path`` as text every report can hold: a name that is not valid UTF-8 (``b'mall\\xffory.py'``, read as
    surrogates) with its bad bytes written ``\\xff``; any other name as it is."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    return path


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


@dataclass(frozen=True)
class Intake:
    """What :func:`~grader.instructor.intake.collect` found: the submissions to grade, what it skipped and why, and
    the roster's view: ``missing`` the roster's students with no hand-in, ``unmatched`` the ids of hand-ins that match
    no one on it (graded under their own), ``notes`` one line per id decision worth reading (a manifest's other id, a
    renamed id)."""

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
