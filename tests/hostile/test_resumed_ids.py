"""A resumed run never takes an id the out folder's gradebook holds for another hand-in (meta4 r1 r2).

Run 1 graded alice.py (30/30) into ``--out``; run 2, into the same ``--out``, graded only mallory's late
``submission-alice-2026-01-09.py`` (r1) or her ``Alice.py`` beside a roster whose pattern had matched alice's
Moodle download (r2): alone in their run, both took ``alice``, and alice's 30/30 was gone.  Within one run both
lose to alice's hand-in; across runs they do too: an id of their own and a note.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from learner_code import alice_with

from grader.instructor.held_ids import claim_rank, keep_held_ids
from grader.instructor.intake import collect
from grader.instructor.intake_model import Submission
from grader.instructor.roster import Roster

KIT_ROOT = Path(__file__).resolve().parents[2]
SCORES = "def dot_product_scores(queries, keys):\n    return queries @ keys.transpose(-2, -1)\n"
MOODLE = "Alice Honest_101_assignsubmission_file_attention.py"


def _roster(tmp_path: Path) -> Roster:
    path = tmp_path / "roster.csv"
    path.write_text("id,name,email,pattern\nalice,Alice Honest,a@uni.example,Alice Honest_*\n"
                    "bob,Bob Builder,b@uni.example,Bob Builder_*\n", encoding="utf-8")  # fmt: skip
    return Roster.load(path)


def _file(folder: Path, name: str, text: str = "def (:\n") -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return str(folder / name)


@pytest.mark.parametrize(
    ("late", "stored", "with_roster"),
    [("submission-alice-2026-01-09.py", "alice.py", False), ("Alice.py", MOODLE, True),
     ("submission-alice-2026-01-09.py", MOODLE, True), ("alice.zip", "alice.py", False)],
)  # fmt: skip
def test_a_late_weaker_claim_takes_no_id_the_gradebook_holds(tmp_path, late, stored, with_roster):
    roster = _roster(tmp_path) if with_roster else None
    held = {"alice": Submission("alice", _file(tmp_path / "class", stored, SCORES), "py", sha256="a" * 64)}
    path = _file(tmp_path / "late", late) if not late.endswith(".zip") else None
    if path is None:
        import zipfile

        path = str(tmp_path / "late" / late)
        (tmp_path / "late").mkdir()
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("a.py", "def (:\n")
    alone = collect([path], roster=roster)
    assert [s.student for s in alone.submissions] == ["alice"]  # alone in its run, it takes the id
    (sub,) = keep_held_ids(alone, held).submissions
    assert sub.student.startswith("alice-") and len(sub.student) == len("alice-") + 8
    assert any(n.startswith(repr(late)) and repr(stored) in n and repr(sub.student) in n for n in sub.notes)
    both = collect([held["alice"].source, path], roster=roster)  # as within one run
    assert {Path(s.source).name: s.student for s in both.submissions}[stored] == "alice"


def test_the_same_hand_in_or_a_better_claim_keeps_the_id(tmp_path):
    held = {"alice": Submission("alice", str(tmp_path / "old" / "alice.py"), "py", sha256="a" * 64)}
    again = collect([_file(tmp_path / "new", "alice.py")])  # an updated download, the same name
    assert [s.student for s in keep_held_ids(again, held).submissions] == ["alice"]
    weak = {"alice": Submission("alice", str(tmp_path / "old" / "submission-alice-2026-01-01.py"), "py")}
    assert [s.student for s in keep_held_ids(collect([_file(tmp_path / "x", "alice.py")]), weak).submissions] == [
        "alice"
    ]
    assert claim_rank(MOODLE, "alice", _roster(tmp_path)) < claim_rank("Alice.py", "alice", _roster(tmp_path))


@pytest.mark.slow
def test_attnkit_grade_into_an_existing_out_keeps_alices_row(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("the sandbox is tested on Linux")
    out = tmp_path / "OUT"
    env = {**os.environ, "TMPDIR": str(tmp_path), "COLUMNS": "200"}
    env.pop("FORCE_COLOR", None)
    first = [_file(tmp_path / "class", "alice.py", alice_with(None))]
    late = [_file(tmp_path / "late", "submission-alice-2026-01-09.py")]
    for paths in (first, late):
        command = [sys.executable, "-m", "grader.cli", "grade", *paths, "--out", str(out), "--seed", "3",
                   "--devices", "cpu", "--timeout", "5"]  # fmt: skip
        done = subprocess.run(command, cwd=KIT_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stdout.decode()[-3000:] + done.stderr.decode()[-3000:]
    with (out / "grades.csv").open(newline="", encoding="utf-8") as fh:
        rows = {r["student"]: r for r in csv.DictReader(fh)}
    assert rows["alice"]["status"] == "graded" and float(rows["alice"]["total"]) == float(rows["alice"]["max"])
    (theirs,) = [sid for sid in rows if sid != "alice"]
    assert theirs.startswith("alice-") and rows[theirs]["status"].startswith("error")
    assert "is held in this out folder's gradebook by 'alice.py'" in " ".join(done.stdout.decode().split())
