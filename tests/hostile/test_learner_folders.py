"""A folder the instructor collected as one learner's is one hand-in (issue 21 part 3, meta4 h1 h2 a3 a3b).

Moodle's "submissions in folders" names each learner's folder ``<full name>_<id>_assignsubmission_file_``.  Such a
folder, graded as ``class/*``, was read as a class when it held more than one file: bob's modules in ``utils/``
or a notebook beside his ``.py`` made him ``missing`` with stray rows (an honest student failed), and mallory's
file named ``Alice Honest_101_assignsubmission_file_.py`` inside her own folder matched alice's roster pattern,
took alice's row (or, with an attempt time 2099 in it, won ``--latest``).  What is inside it names no one.
"""

from __future__ import annotations

import json
import os
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from grader.instructor.intake import collect
from grader.instructor.intake_model import IntakeError
from grader.instructor.roster import Roster

SCORES = "def dot_product_scores(queries, keys):\n    return queries @ keys.transpose(-2, -1)\n"
NOTEBOOK = json.dumps(
    {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [], "source": SCORES}
        ],
    }
)
FOLDER = "{}_{}_assignsubmission_file_"
PEOPLE = {"alice": ("Alice Honest", 101), "bob": ("Bob Builder", 102), "mallory": ("Mallory Evil", 103)}
WHEN = datetime(2026, 2, 1, tzinfo=timezone.utc).timestamp()


def _roster(tmp_path: Path) -> Roster:
    path = tmp_path / "roster.csv"
    rows = [f"{sid},{name},{sid}@uni.example,{name}_*" for sid, (name, _) in PEOPLE.items()]
    path.write_text("id,name,email,pattern\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return Roster.load(path)


def _folder(klass: Path, sid: str, files: dict[str, str]) -> Path:
    folder = klass / FOLDER.format(*PEOPLE[sid])
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
        os.utime(folder / rel, (WHEN, WHEN))
    os.utime(folder, (WHEN, WHEN))
    return folder


LAYOUTS = {
    "modules-in-a-subfolder": ("bob", {"part1.py": SCORES, "part2.py": SCORES, "utils/part4.py": SCORES}),
    "a-notebook-beside-a-py": ("bob", {"attention.py": SCORES, "attention.ipynb": NOTEBOOK}),
    "another-students-lms-name": (
        "mallory",
        {"Alice Honest_101_assignsubmission_file_.py": "def (:\n", "notes.ipynb": NOTEBOOK},
    ),
    "another-students-attempt-time": (
        "mallory",
        {"Alice Honest_101_attempt_2099-01-01-00-00-00.py": "def (:\n", "notes.ipynb": NOTEBOOK},
    ),
}


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
@pytest.mark.parametrize("with_roster", [True, False])
def test_an_lms_folder_is_one_hand_in_whatever_it_holds(tmp_path, layout, with_roster):
    who, files = LAYOUTS[layout]
    klass = tmp_path / "class"
    for sid in PEOPLE:
        _folder(klass, sid, files if sid == who else {"attention.py": SCORES})
    roster = _roster(tmp_path) if with_roster else None
    for latest in (False, True):
        intake = collect(sorted(str(p) for p in klass.iterdir()), roster=roster, latest=latest)
        got = {Path(s.source).name: s for s in intake.submissions}
        assert sorted(got) == sorted(FOLDER.format(*PEOPLE[sid]) for sid in PEOPLE)  # one row per folder
        for sid in PEOPLE:
            sub = got[FOLDER.format(*PEOPLE[sid])]
            assert sub.student == (sid if with_roster else FOLDER.format(*PEOPLE[sid]).replace(" ", "_"))
            assert sub.collected == datetime.fromtimestamp(WHEN, tz=timezone.utc)  # the folder's time, not 2099
            assert sid == "mallory" or sub.error is None
        assert not intake.missing and not intake.unmatched
        assert all(Path(s.path).parent.name == FOLDER.format(*PEOPLE[who]) for s in intake.skipped)


def test_an_lms_folder_holding_one_zip_is_that_zip_under_the_folders_id(tmp_path):
    klass = tmp_path / "class"
    _folder(klass, "alice", {"attention.py": SCORES})
    bob = _folder(klass, "bob", {})
    with zipfile.ZipFile(bob / "Alice Honest_101_assignsubmission_file_.zip", "w") as zf:
        zf.writestr("attention.py", SCORES)
    intake = collect(sorted(str(p) for p in klass.iterdir()), roster=_roster(tmp_path))
    got = {Path(s.source).name: s for s in intake.submissions}
    assert got[bob.name].student == "bob" and got[bob.name].error is None and got[bob.name].format == "zip"
    assert [e.id for e in intake.missing] == ["mallory"] and intake.skipped == []


# --- a learner's kit graded alone (meta4 k1) ---------------------------------------------------------------------

KIT_BY_PRODUCTS = {
    "attnkit-submit-zip": {"submission-alice-2026-01-09.zip": None},
    "scratch-notebook": {"scratch.ipynb": NOTEBOOK},
    "venv": {"venv/bin/python": "", ".venv/pyvenv.cfg": "", "myenv/pyvenv.cfg": "", "attnkit_kit.egg-info/x": ""},
}


def _kit(root: Path, extra: dict[str, str | None], released: bool = True) -> Path:
    files = {"exercises/__init__.py": "", "exercises/scores.py": SCORES, "grader/__init__.py": "",
             "notebooks/scores.ipynb": NOTEBOOK, "README.md": "the kit\n", "conftest.py": ""}  # fmt: skip
    files |= {".attnkit-release.json": "{}"} if released else {}
    for rel, text in {**files, **extra}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            with zipfile.ZipFile(root / rel, "w") as zf:
                zf.writestr("exercises/scores.py", SCORES)
        else:
            (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("extra", list(KIT_BY_PRODUCTS), ids=list(KIT_BY_PRODUCTS))
def test_a_kit_with_its_own_by_products_beside_it_is_one_kit(tmp_path, extra):
    """After ``attnkit submit`` wrote its zip into the kit (or beside a scratch notebook, a venv), the kit was read
    as a class: rows ``exercises``, ``grader`` (flagged for review), ``notebooks`` (an error) and the zip."""
    kit = _kit(tmp_path / "kit", KIT_BY_PRODUCTS[extra])
    intake = collect([str(kit)])
    (sub,) = intake.submissions
    assert (sub.student, sub.entry, sub.error) == ("kit", "exercises", None)
    assert sorted(sub.files) == ["exercises/__init__.py", "exercises/scores.py"]
    files = [n for n in KIT_BY_PRODUCTS[extra] if "/" not in n]
    assert sorted(Path(s.path).name for s in intake.skipped) == files  # named, never silently left out


@pytest.mark.parametrize("members", [("alice.py", "bob.py"), ("alice.ipynb", "bob.ipynb"),
                                     ("submission-alice-2026-01-09.zip", "submission-bob-2026-01-09.zip")])  # fmt: skip
def test_a_kits_folders_dropped_into_a_class_folder_leave_it_a_class(tmp_path, members):
    """mallory's ``exercises/`` (with ``grader/`` and ``notebooks/``) among the hand-ins: still a class, every
    hand-in a row; only the kit's release record would make notebooks or submit zips a kit's by-products, and a
    ``.py`` never is one."""
    klass = _kit(tmp_path / "class", dict.fromkeys(members, NOTEBOOK), released=members[0].endswith(".py"))
    for name in members:
        if name.endswith(".zip"):
            (klass / name).unlink()
            with zipfile.ZipFile(klass / name, "w") as zf:
                zf.writestr("exercises/scores.py", SCORES)
        elif name.endswith(".py"):
            (klass / name).write_text(SCORES, encoding="utf-8")
    intake = collect([str(klass)])
    got = sorted(Path(s.source).name for s in intake.submissions)
    assert got == sorted([*members, "exercises", "grader", "notebooks"])


def test_a_student_id_with_dots_never_makes_another_students_junit_class():
    """meta4 j1: mallory's ``bob.causal_mask.py`` error row had classname ``attnkit.bob.causal_mask``, bob's own."""
    from grader.instructor.junit import junit_class

    ids = ["bob", "bob.causal_mask", "bob%2Ecausal_mask", "bob.causal_mask.x"]
    classes = [junit_class(sid) for sid in ids] + [junit_class(sid, "causal_mask") for sid in ids]
    assert len(set(classes)) == len(classes)
    assert junit_class("bob", "causal_mask") == "attnkit.bob.causal_mask" and junit_class("fay") == "attnkit.fay"


@pytest.mark.parametrize("with_roster", [False, True], ids=["no-roster", "roster"])
def test_a_name_inside_a_folder_never_outranks_a_folder_the_instructor_named(tmp_path, with_roster):
    """Folders named on the command line (``class/*``) without an LMS name: alice's is ``alice/``; mallory's,
    holding ``alice.py`` beside a notebook, reads as a class, and its ``alice.py`` (one file named exactly as the
    id) used to outrank alice's folder (a container so named) and take her id."""
    klass = tmp_path / "class"
    for sid, files in {"alice": {"attention.py": SCORES}, "bob": {"attention.py": SCORES},
                       "mallory": {"alice.py": SCORES, "notes.ipynb": NOTEBOOK}}.items():  # fmt: skip
        (klass / sid).mkdir(parents=True)
        for name, text in files.items():
            (klass / sid / name).write_text(text, encoding="utf-8")
    roster = _roster(tmp_path) if with_roster else None
    intake = collect([str(p) for p in sorted(klass.iterdir())], roster=roster)
    by_id = {sub.student: sub for sub in intake.submissions}
    assert Path(by_id["alice"].source) == klass / "alice", {k: v.source for k, v in by_id.items()}
    assert by_id["alice"].error is None
    inner = klass / "mallory" / "alice.py"
    assert not [s for s in intake.submissions if Path(s.source) == inner and s.student == "alice"]


# --- red team 7b: a folder that cannot be walked or entered is its own error row, never the class's end ---------


def test_a_folder_nested_past_the_cap_is_its_error_row_and_the_class_is_read(tmp_path):
    """1200 folders deep, Python 3.11's ``os.walk`` recursed past its limit and the RecursionError ended the run;
    the walk now stops at the cap, whatever lies below (40 levels here: a tree pytest's own cleanup can remove)."""
    klass = tmp_path / "class"
    (klass / "alice").mkdir(parents=True)
    (klass / "alice" / "attention.py").write_text(SCORES, encoding="utf-8")
    deep = klass.joinpath("mallory", *["d"] * 40)
    deep.mkdir(parents=True)
    (deep / "attention.py").write_text(SCORES, encoding="utf-8")
    got = {s.student: s for s in collect([str(klass)]).submissions}
    assert sorted(got) == ["alice", "mallory"]
    assert got["alice"].error is None
    assert "nested more than 32 folders deep" in str(got["mallory"].error), got["mallory"].error


def close_to_the_grader(monkeypatch, closed: Path) -> None:
    """``closed`` as a ``chmod 000`` folder is to an unprivileged grader: listing it or stat-ing what is in it
    raises PermissionError (root ignores the mode, so the refusal is made by the calls that meet it)."""
    real_stat, real_scandir = os.stat, os.scandir

    def as_another(real):
        def call(path=".", *args, **kwargs):
            name = Path(os.fsdecode(path)) if not isinstance(path, int) else None
            if name is not None and (name == closed and real is real_scandir or name.parent == closed):
                raise PermissionError(13, "Permission denied", os.fsdecode(path))
            return real(path, *args, **kwargs)

        return call

    monkeypatch.setattr(os, "stat", as_another(real_stat))  # what is in it: stat (3.11's Path.exists), list
    monkeypatch.setattr(os, "scandir", as_another(real_scandir))


def test_a_member_folder_the_grader_may_not_enter_is_its_error_row(tmp_path, monkeypatch):
    """An unprivileged grader and a learner's ``chmod 000`` folder (unzip restores it): a PermissionError on the
    folder's contents, as that grader's, stopped the whole class (exit 2)."""
    klass = tmp_path / "class"
    for sid in ("alice", "mallory"):
        (klass / sid).mkdir(parents=True)
        (klass / sid / "attention.py").write_text(SCORES, encoding="utf-8")
    close_to_the_grader(monkeypatch, klass / "mallory")
    got = {s.student: s for s in collect([str(klass)]).submissions}
    assert sorted(got) == ["alice", "mallory"]
    assert got["alice"].error is None
    assert got["mallory"].error, "a folder nothing of which could be read was graded as empty"


def test_a_closed_folder_named_beside_other_hand_ins_is_its_error_row(tmp_path, monkeypatch):
    """``attnkit grade alice.py mallory/``: the folder is one hand-in among those named, so it is its own
    error row; named alone it is the class folder, and the run stops with a usage error naming it."""
    (tmp_path / "alice.py").write_text(SCORES, encoding="utf-8")
    (tmp_path / "mallory").mkdir()
    (tmp_path / "mallory" / "attention.py").write_text(SCORES, encoding="utf-8")
    close_to_the_grader(monkeypatch, tmp_path / "mallory")
    got = {s.student: s for s in collect([str(tmp_path / "alice.py"), str(tmp_path / "mallory")]).submissions}
    assert sorted(got) == ["alice", "mallory"]
    assert got["alice"].error is None
    assert "cannot read it (Permission denied)" in str(got["mallory"].error), got["mallory"].error
    with pytest.raises(IntakeError, match="mallory: cannot list it"):
        collect([str(tmp_path / "mallory")])
