"""A course's own exercise pack, installed as a distribution of its own, works with no edit of the kit.

``tests/packs/attnkit-toy`` declares one group ("toy", one hook ``peak_weight``) through the entry-point group
``attnkit.exercises``: its contract, hidden cases, reference with two known mistakes, stub and public test.  It is
installed with pip into a folder of its own; with that folder on ``PYTHONPATH`` the kit documents it
(``attnkit contract``), grades it, audits it and releases its learner's half (and nothing of its answers); without
it, the kit is the kit.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

KIT = Path(__file__).resolve().parent.parent
PACK = Path(__file__).resolve().parent / "packs" / "attnkit-toy"
RIGHT = '''
def peak_weight(weights):
    return weights.max(dim=-1).values
'''
ARGMAX = '''
def peak_weight(weights):
    return weights.argmax(-1).to(weights.dtype)
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The pack installed by pip (built from a copy, so the source tree gets no build folders)."""
    root = tmp_path_factory.mktemp("toy-pack")
    source = root / "source"
    shutil.copytree(PACK, source)
    target = root / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    assert (target / "attnkit_toy" / "contract.py").is_file()
    assert list(target.glob("attnkit_toy-0.1.dist-info/entry_points.txt"))
    return target


def attnkit(*args: str, site: Path | None, cwd: Path = KIT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    program = "import sys; from grader.cli import main; sys.argv[0] = 'attnkit'; main()"
    return subprocess.run(
        [sys.executable, "-c", program, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def test_the_pack_is_documented_beside_the_kit_s_groups(site):
    listed = attnkit("contract", site=site)
    assert listed.returncode == 0, listed.stderr
    assert "| `peak_weight(weights)` | toy | Return the largest attention weight of each query" in listed.stdout
    assert "| `dot_product_scores(queries, keys)` | scores |" in listed.stdout
    alone = attnkit("contract", site=None)
    assert alone.returncode == 0 and "peak_weight" not in alone.stdout


def test_the_pack_is_graded_and_its_mistake_named(site, tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "ada.py").write_text(RIGHT, encoding="utf-8")
    (folder / "bo.py").write_text(ARGMAX, encoding="utf-8")
    out = tmp_path / "out"
    graded = attnkit("grade", str(folder), "--out", str(out), "--seed", "7", "--timeout", "20", site=site)
    assert graded.returncode in (0, 1), graded.stdout + graded.stderr
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open(encoding="utf-8"))}
    assert float(rows["ada"]["peak_weight"]) == 2.0
    assert float(rows["bo"]["peak_weight"]) == 0.0
    assert float(rows["ada"]["dot_product_scores"]) == 0.0  # a hook they did not write
    assert "toy-peak-index" in (out / "bo" / "results.json").read_text(encoding="utf-8")
    feedback = (out / "bo" / "feedback.md").read_text(encoding="utf-8")
    assert "Do you return where the largest weight is, or how large it is?" in feedback, "the mistake's hint"
    assert "one-hot rows give 1" in feedback, "the case's own description"


def test_the_pack_is_audited(site):
    audited = attnkit("audit", "--group", "toy", "--devices", "cpu", "--json", site=site)
    assert audited.returncode == 0, audited.stdout[-2000:] + audited.stderr[-2000:]
    report = json.loads(audited.stdout)
    assert {m["id"]: m["killed"] for m in report["mistakes"]} == {"toy-peak-over-queries": True, "toy-peak-index": True}
    assert report["reference_failures"] == []


def test_the_release_ships_the_learner_s_half_only(site, tmp_path):
    kit = tmp_path / "kit"
    released = attnkit("release", str(kit), site=site)
    assert released.returncode == 0, released.stdout + released.stderr
    assert (kit / "grader" / "groups" / "toy.py").read_bytes() == (PACK / "attnkit_toy" / "contract.py").read_bytes()
    assert (kit / "exercises" / "toy.py").read_bytes() == (PACK / "attnkit_toy" / "stub.py").read_bytes()
    assert (kit / "exercises" / "test_toy.py").is_file()
    assert (kit / "notebooks" / "toy.ipynb").is_file()
    shipped = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in kit.rglob("*") if p.is_file())
    for answer in ("toy-peak-index", "toy-peak-over-queries", "weights.amax(dim=-1)", "or how large it is?"):
        assert answer not in shipped, f"the kit holds {answer!r}"
    # the learner's kit finds the group as one of its own, with nothing installed
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    program = "import grader, grader.hook_table as t; print(grader.__file__); print(t.GROUPS)"
    found = subprocess.run(
        [sys.executable, "-c", program], cwd=kit, env=env, capture_output=True, text=True, check=True
    )
    where, groups = found.stdout.splitlines()
    assert Path(where).resolve().is_relative_to(kit.resolve()) and "'toy'" in groups
