"""A class folder's members: each file or folder in it that is one hand-in, and what is left out, with why.

:func:`sort_out` lists the folder, never reading a hand-in: ``.py``, ``.ipynb`` and ``.zip`` files, folders and
symbolic links are members; strays (hidden files, READMEs, OS and zip debris: :func:`is_stray`) are left out without
a word; anything else is a :class:`~grader.instructor.intake_model.Skipped` saying why it is not graded.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from grader.handin import SKIPPED_DIRS, is_hidden, is_test_file
from grader.instructor.intake_model import Skipped
from grader.instructor.out_folder import GRADEBOOK

HAND_IN_SUFFIXES = (".py", ".ipynb", ".zip")
"""The files a class folder's members may be (besides folders)."""
STRAY_NAMES = frozenset({"thumbs.db", "desktop.ini", "icon\r", "__macosx"})
"""Lower-case names an OS or a zip tool leaves beside hand-ins; with hidden names and READMEs, skipped silently."""

NOT_A_HAND_IN = "not a hand-in (expected a .py, .ipynb or .zip file, or a folder)"
TEST_FILE = "a test file (test_*.py, *_test.py, conftest.py): never graded"
RESULTS_FOLDER = "an attnkit grade results folder (it holds gradebook.sqlite)"
NOT_REGULAR = "not a regular file"
PACKAGE_INIT = "an __init__.py at the top of a class folder is no one's hand-in: not graded (--one: the folder is one)"


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
