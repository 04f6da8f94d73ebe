"""The hidden suite itself: complete, reproducible from its seed, and passed by the reference."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

import solutions
from grader.instructor.cases import make_cases
from grader.instructor.suite import build_suite
from grader.instructor.suite_version import suite_version, verdict_modules
from grader.instructor.verdict import PASSED, SKIPPED, judge_in_process
from grader.registry import HOOK_NAMES, load_solution

KIT = Path(__file__).resolve().parent.parent


def outcomes(solution_spec: str, seed: int) -> Counter:
    solution = load_solution(solution_spec)
    suite = build_suite(seed, ("cpu", "meta"))
    tally: Counter = Counter()
    for trial in suite.trials:
        tally[(trial.hook, judge_in_process(solution, trial).status)] += 1
    return tally


@pytest.mark.parametrize("seed", [0, 12345], ids=["seed0", "seed12345"])
def test_reference_passes_every_hidden_case(seed):
    tally = outcomes("reference", seed)
    assert {status for (_, status) in tally} <= {PASSED, SKIPPED}
    assert sum(n for (_, status), n in tally.items() if status == SKIPPED) == 0


def test_every_hook_has_hidden_cases_with_unique_names():
    cases = make_cases(0)
    per_hook = Counter(c.hook for c in cases)
    assert set(per_hook) == set(HOOK_NAMES)
    assert min(per_hook.values()) >= 5
    names = [(c.hook, c.name) for c in cases]
    assert len(names) == len(set(names))
    assert all(c.what for c in cases), "every case says what it checks, for the feedback"


def test_every_hook_has_a_meta_case():
    assert {c.hook for c in make_cases(0) if c.meta} == set(HOOK_NAMES)


def test_inputs_come_from_the_seed():
    def tensors(seed):
        return [v for c in make_cases(seed) for v in c.args.values() if isinstance(v, torch.Tensor)]

    same_a, same_b, other = tensors(3), tensors(3), tensors(4)
    assert all(torch.equal(a, b) for a, b in zip(same_a, same_b, strict=True))
    assert not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(same_a, other, strict=False))


def test_shapes_avoid_coincidences_in_the_head_cases():
    for case in make_cases(0):
        if case.hook == "split_heads" and case.expect_error is None:
            b, t, d = case.args["x"].shape
            h = case.args["num_heads"]
            if h > 1 and d // h > 1:
                assert len({t, h, d // h}) == 3, case.name


def test_a_known_mistake_fails_only_its_own_hook():
    tally = outcomes(str(KIT / "examples" / "submissions" / "frank.py"), 0)
    failing = {hook for (hook, status), n in tally.items() if status not in (PASSED, SKIPPED) and n}
    assert failing == {"apply_causal_mask"}


@pytest.mark.slow
def test_the_pytest_entry_point_runs_the_hidden_cases():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "grader/instructor/hidden", "-q", "-p", "no:cacheprovider",
         "--solution", "examples/submissions/bob"],
        cwd=KIT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    failed = [ln for ln in done.stdout.splitlines() if ln.startswith("FAILED")]
    assert failed and all("softmax_weights" in ln for ln in failed)


# --- the suite version ------------------------------------------------------------------------


def reference_copy(tmp_path: Path, monkeypatch, edit=None) -> Path:
    """``solutions.reference`` replaced by a copy of its file (one line edited by ``edit``), imported from tmp_path."""
    text = (KIT / "solutions" / "reference.py").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if edit is not None:
        (index,) = [i for i, line in enumerate(lines) if line.strip() == edit[0]]
        lines[index] = lines[index].replace(edit[0], edit[1])
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "reference.py"
    path.write_text("".join(lines), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("solutions.reference", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "solutions.reference", module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(solutions, "reference", module)
    return path


ONE_LINE = ("d_k = keys.shape[-1]", "d_k = keys.size(-1)")
"""A fix of one line in the reference (the same value, other code)."""


def test_changing_one_line_of_the_reference_changes_the_suite_version(tmp_path, monkeypatch):
    before = suite_version()
    with monkeypatch.context() as mp:
        reference_copy(tmp_path / "same", mp)  # the same source from another file: the same version
        assert suite_version() == before
    with monkeypatch.context() as mp:
        reference_copy(tmp_path / "edited", mp, ONE_LINE)
        changed = suite_version()
    assert changed != before and len(changed) == 12
    assert suite_version() == before


@pytest.mark.parametrize("name", [m.__name__ for m in verdict_modules()], ids=[m.__name__ for m in verdict_modules()])
def test_the_source_of_every_verdict_module_counts(name, monkeypatch):
    before = suite_version()
    real = inspect.getsource

    def one_more_line(obj):
        return real(obj) + ("\n# one more line\n" if obj.__name__ == name else "")

    monkeypatch.setattr(inspect, "getsource", one_more_line)
    assert suite_version() != before


def test_the_verdict_modules_are_the_ones_imported():
    names = [m.__name__ for m in verdict_modules()]
    for needed in ("solutions.reference", "grader.child_runtime", "grader.hook_table", "grader.instructor.cases",
                   "grader.instructor.suite", "grader.instructor.verdict", "grader.instructor.replies"):  # fmt: skip
        assert needed in names
    assert all(m is sys.modules[m.__name__] for m in verdict_modules())
