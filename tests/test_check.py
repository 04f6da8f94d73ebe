"""`attnkit check`: the learner's view of the public cases."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from learner_code import reference_source

from grader.check import FAILING, NOT_STARTED, PASSING, run_public_cases
from grader.cli import main
from grader.registry import HOOK_NAMES

KIT = Path(__file__).resolve().parent.parent


def test_stubs_are_all_not_started():
    results = run_public_cases("exercises")
    assert [r.exercise for r in results] == list(HOOK_NAMES)
    assert [r.status for r in results] == [NOT_STARTED] * len(HOOK_NAMES)
    assert all(r.passed == 0 and r.not_implemented > 0 for r in results)


def test_cli_on_stubs_lists_14_not_started_and_exits_non_zero():
    result = CliRunner().invoke(main, ["check"], terminal_width=200)
    assert result.exit_code == 1, result.output
    assert result.output.count("not started") == len(HOOK_NAMES)
    assert "Traceback" not in result.output
    assert "0 of 14 exercises passing" in result.output


def test_reference_passes_everything():
    results = run_public_cases("reference")
    assert [r.status for r in results] == [PASSING] * len(HOOK_NAMES)


@pytest.mark.parametrize(
    ("mistake", "exercise", "expected"),
    [
        ("examples/submissions/bob", "softmax_weights", r"case '.*', shape \(\d+(, \d+)*\): expected \["),
        ("examples/submissions/frank.py", "apply_causal_mask", r"size of tensor a \(6\)"),
    ],
    ids=["softmax-dim1", "fixed-size-mask"],
)
def test_a_mistake_shows_its_first_failure_in_one_line(mistake, exercise, expected):
    (result,) = run_public_cases(str(KIT / mistake), [exercise])
    assert result.status == FAILING
    assert "\n" not in result.first_failure
    assert re.search(expected, result.first_failure), result.first_failure


def test_a_learner_syntax_error_is_one_line_not_a_traceback(tmp_path):
    broken = tmp_path / "mine.py"
    broken.write_text("import torch\n\ndef softmax_weights(scores, dim=-1)\n    return scores\n")
    result = CliRunner().invoke(main, ["check", "--solution", str(broken)], terminal_width=200)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "mine.py:3: SyntaxError" in result.output


def test_unknown_exercise_is_refused():
    result = CliRunner().invoke(main, ["check", "softmax"])
    assert result.exit_code == 2
    assert "softmax_weights" in result.output


@pytest.mark.slow
def test_pasting_the_reference_bodies_makes_check_exit_0(tmp_path):
    """A learner's kit with every stub filled in (here: the reference pasted below each stub)."""
    kit = tmp_path / "kit"
    shutil.copytree(KIT / "exercises", kit / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(KIT / "conftest.py", kit / "conftest.py")
    for stub in ("scores", "masking", "dropout", "heads", "modules"):
        path = kit / "exercises" / f"{stub}.py"
        path.write_text(path.read_text() + "\n\n# --- my answers ---\n" + reference_source())
    env = dict(os.environ, PYTHONPATH=str(kit))
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "check"], cwd=kit, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "14 of 14 exercises passing" in done.stdout
    # and the same kit's own pytest agrees
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "exercises", "--solution", "exercises", "-p", "no:cacheprovider"],
        cwd=kit, env=env, capture_output=True, text=True, timeout=300,
    )
    assert tests.returncode == 0, tests.stdout[-2000:]
