"""The out folder's own files: every name ``attnkit grade`` writes beside the student folders, declared once.

Each writer takes its file's name from here (:func:`class_file` refuses a name not declared) and writes it with
:func:`write_text` (atomically); intake reserves every one of them (:data:`CLASS_FILES`) so no student id may be
one (a hand-in named ``class.html.py`` gets its own folder).  Stdlib only: intake imports it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "CLASS_FILES", "CLASS_HTML", "CLASS_MD", "DIFF_CSV", "DIFF_HTML", "GRADEBOOK", "GRADES_CSV", "JUNIT_XML",
    "LMS_NAMES", "OutFolderBusy", "class_file", "holding", "lms_file", "write_text",
]  # fmt: skip

GRADEBOOK = "gradebook.sqlite"
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
"""What SQLite keeps beside the gradebook while it is open (WAL journal, shared memory, rollback journal)."""
GRADES_CSV = "grades.csv"
JUNIT_XML = "junit.xml"
CLASS_HTML = "class.html"
CLASS_MD = "class.md"
DIFF_CSV = "diff.csv"
DIFF_HTML = "diff.html"
LMS_NAMES = ("canvas", "moodle")
"""The LMS exports ``--lms`` names; each is written to ``<name>.csv``."""


def lms_file(name: str) -> str:
    """``<name>.csv`` for an LMS export of :data:`LMS_NAMES`; ValueError for any other."""
    if name not in LMS_NAMES:
        raise ValueError(f"unknown LMS {name!r}; attnkit writes {', '.join(LMS_NAMES)}")
    return f"{name}.csv"


CLASS_FILES = frozenset(
    {GRADES_CSV, JUNIT_XML, CLASS_HTML, CLASS_MD, DIFF_CSV, DIFF_HTML, GRADEBOOK}
    | {GRADEBOOK + side for side in SQLITE_SIDE_FILES}
    | {lms_file(name) for name in LMS_NAMES}
)
"""Every file name ``attnkit grade`` (and ``attnkit diff``) writes at the top of an out folder."""


def class_file(out: str | Path, name: str) -> Path:
    """``out/name`` for a file of :data:`CLASS_FILES`; ValueError for a name not declared there."""
    if name not in CLASS_FILES:
        raise ValueError(f"{name!r} is not one of the out folder's declared files (grader/instructor/out_folder.py)")
    return Path(out) / name


def write_text(path: Path, text: str) -> None:
    """Write atomically (a reader never sees half a file), UTF-8, ``\\n`` line endings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)
    os.replace(tmp, path)


class OutFolderBusy(Exception):
    """Another process holds the out folder (:func:`holding`)."""


@contextmanager
def holding(out: str | Path) -> Iterator[None]:
    """Hold the out folder while the block runs, so that two attnkit commands never write one class at once
    (``attnkit grade`` and ``attnkit override`` each hold it before they write); :class:`OutFolderBusy` where another
    holds it.  An ``flock`` on the folder itself: nothing is written into it, and the lock goes with the process
    however it ends.  The descriptor is not inherited (a learner's process never holds it)."""
    import fcntl

    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutFolderBusy(
                f"{out} is being written by another attnkit command (a grading or an override): wait until it ends"
            ) from None
        yield
    finally:
        os.close(fd)
