"""The paths given to ``attnkit grade``, made into the hand-ins to grade (:func:`collect`).

A folder is read as a class, each of its members one hand-in (:mod:`grader.instructor.class_folder`), or as one
hand-in, decided by its shape and own name alone (:func:`folder_reading`) or forced (:data:`READINGS`); each hand-in
is read as text (:mod:`grader.instructor.handin_reading`) and given its student id
(:mod:`grader.instructor.identify`).  :func:`collect` never drops and never invents: what is not graded is a
:class:`~grader.instructor.intake_model.Skipped` saying why, and nothing at all to grade is an
:class:`~grader.instructor.intake_model.IntakeError`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

from grader.handin import KIT_PACKAGE, RELEASE_RECORD, is_graded_source
from grader.instructor.class_folder import HAND_IN_SUFFIXES, NOT_A_HAND_IN, is_stray, sort_out
from grader.instructor.handin_reading import read_submission
from grader.instructor.identify import ATTNKIT_NAME, identify
from grader.instructor.intake_model import Intake, IntakeError, Skipped, Submission, name_of, note, stem_of
from grader.instructor.roster import Roster

KIT_IN_CLASS = "a kit's package beside other hand-ins: graded as one hand-in of the class (--one: the folder is a kit)"
BESIDE_KIT = f"beside a kit's {KIT_PACKAGE}/: not graded (the kit's {KIT_PACKAGE} package is; --class grades each)"
VENV_NAMES = frozenset({"venv", "env", "virtualenv"})
KIT_FOLDERS = frozenset({KIT_PACKAGE, "notebooks", "grader"})
"""The folders a released kit holds (:mod:`grader.instructor.release`): with ``exercises/__init__.py`` and no other
hand-in beside them, the folder is a learner's kit (:func:`folder_reading`)."""


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
    submitted = suffix == ".zip" and ATTNKIT_NAME.fullmatch(stem_of(member)) is not None
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
    if collected or LMS_FOLDER.fullmatch(name_of(path)):
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
                collected = roster is not None and bool(roster.by_pattern(name_of(p)))
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
                    note(sub, f"{KIT_PACKAGE!r}: {KIT_IN_CLASS}")
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
