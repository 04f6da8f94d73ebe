"""The hidden suite itself: complete, reproducible from its seed, and passed by the reference."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from grader.child_runtime import run_call
from grader.instructor.cases import make_cases
from grader.instructor.suite import build_suite
from grader.instructor.verdict import PASSED, SKIPPED, judge
from grader.registry import HOOK_NAMES, load_solution

KIT = Path(__file__).resolve().parent.parent


def outcomes(solution_spec: str, seed: int) -> Counter:
    solution = load_solution(solution_spec)
    suite = build_suite(seed, ("cpu", "meta"))
    tally: Counter = Counter()
    for run in suite.runs:
        reply, outputs = run_call(solution.functions, dict(run.call, id=0), run.tensors)
        status, _ = judge(run, reply, outputs)
        tally[(run.hook, status)] += 1
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
