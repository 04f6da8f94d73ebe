"""The catalogue of known mistakes: complete, well described, and every entry killed by the hidden suite."""

from __future__ import annotations

import inspect
import re
import types
from collections import defaultdict

import pytest
import torch

from grader.child.load import describe_parameters
from grader.instructor.suite import build_suite
from grader.instructor.verdict import FAILED, judge_in_process, trial_id
from grader.registry import HOOK_NAMES, load_solution, signature_problem
from solutions.mistakes import Mistake, by_id, catalogue, mistake_solution

CATALOGUE = catalogue()
"""Every group's known mistakes: the chapter's, then each other group's (grader.groups)."""

SEEDS = (1,)
"""The seeds judged here: the audit (tests/test_audit.py) judges seed 0, every mistake on its own hooks' cases."""
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
CJK = re.compile(r"[\u4e00-\u9fff]")
SEED_TEXT = re.compile(r"seed \d{3}_[0-9a-f]{16}\.txt")
SEED_TEXTS = ("000_1895a4942bad7209.txt", "002_5796c8154c5408de.txt", "003_a61a69d2ef97d9b0.txt")


def _ids(mistakes):
    return [m.id for m in mistakes]


# --- the entries -------------------------------------------------------------------------


def test_ids_are_unique_kebab_case():
    ids = _ids(CATALOGUE)
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    assert [i for i in ids if not KEBAB.match(i)] == []


def test_catalogue_is_large_enough_and_covers_every_hook():
    assert len(CATALOGUE) >= 25
    covered = {m.exercise for m in CATALOGUE}
    assert set(HOOK_NAMES) - covered == set(), "every hook needs at least one catalogued mistake"


def test_every_seed_text_is_cited():
    sources = " ".join(m.source for m in CATALOGUE)
    assert [name for name in SEED_TEXTS if f"seed {name}" not in sources] == []


@pytest.mark.parametrize("mistake", CATALOGUE, ids=_ids(CATALOGUE))
def test_entry_is_complete(mistake: Mistake):
    assert mistake.exercise in HOOK_NAMES
    for name in ("description", "hint", "hint_zh", "source"):
        text = getattr(mistake, name)
        assert isinstance(text, str) and text.strip(), f"{mistake.id}: empty {name}"
    assert "\n" not in mistake.description, "the description is one line"
    assert CJK.search(mistake.hint_zh), f"{mistake.id}: hint_zh has no Chinese"
    assert not CJK.search(mistake.hint), f"{mistake.id}: the English hint has Chinese in it"
    if "seed" in mistake.source:
        assert SEED_TEXT.search(mistake.source), f"{mistake.id}: cite a seed text by its file name"
    assert mistake.exercise in mistake.overrides, "a mistake overrides its own exercise"
    for hook, fn in mistake.overrides.items():
        assert hook in HOOK_NAMES, f"{mistake.id}: {hook} is not a hook"
        assert inspect.isfunction(fn), f"{mistake.id}: {hook} is not a plain function"
        assert signature_problem(hook, describe_parameters(fn)) is None, f"{mistake.id}: {hook} signature"


@pytest.mark.parametrize("mistake", CATALOGUE, ids=_ids(CATALOGUE))
def test_mistake_solution_is_the_reference_but_for_the_overrides(mistake: Mistake):
    solution = mistake_solution(mistake)
    assert solution.problems == []
    assert set(solution.implemented) == set(HOOK_NAMES)
    reference = load_solution("reference").functions
    for hook in HOOK_NAMES:
        expected = mistake.overrides.get(hook, reference[hook])
        assert solution.functions[hook] is expected, hook


def test_by_id():
    for mistake in CATALOGUE:
        assert by_id(mistake.id) is mistake
    with pytest.raises(KeyError, match="no catalogued mistake"):
        by_id("not-a-mistake")


def test_entries_are_immutable():
    mistake = CATALOGUE[0]
    with pytest.raises(AttributeError):
        mistake.id = "renamed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        mistake.overrides["softmax_weights"] = None  # type: ignore[index]
    assert hash(mistake) == hash(by_id(mistake.id))


# --- the audit: the hidden suite kills every mistake ---------------------------------------------


@pytest.fixture(scope="module")
def suites():
    # Hundreds of tiny tensor ops: one thread is several times faster than handing each to a pool,
    # and much steadier when other processes share the cores.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield {seed: build_suite(seed, ("cpu", "meta")) for seed in SEEDS}
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_the_reference_passes_every_trial_of_the_other_seeds(seed: int, suites):
    """What a mistake's solution does in the hooks it does not override, under the seeds judged on its own hooks."""
    solution = mistake_solution(Mistake("none", "softmax_weights", "", "", "", "", types.MappingProxyType({})))
    failed = [trial_id(t) for t in suites[seed].trials if judge_in_process(solution, t).status == FAILED]
    assert failed == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
@pytest.mark.parametrize("mistake", CATALOGUE, ids=_ids(CATALOGUE))
def test_hidden_suite_kills_the_mistake(mistake: Mistake, seed: int, suites):
    """At least one hidden case fails, one of them in the mistake's own exercise, and nothing else fails.

    Every trial of the hooks the mistake overrides is judged.  Every other hook of the mistake's solution is the
    reference's own function (test_mistake_solution_is_the_reference_but_for_the_overrides), which passes every
    trial (the audit; test_the_reference_passes_every_trial_of_the_other_seeds): it could fail only if the wrong
    hook changed something shared at run time (a torch default, a patched function), which would show in any of
    that hook's trials.  So once the mistake's own trials ran, one trial of each other hook is judged after them.
    Seed 0's kills, and that the mistake's own exercise fails, are the audit's (tests/test_audit.py).
    """
    solution = mistake_solution(mistake)
    failed: dict[str, list[str]] = defaultdict(list)
    trials = [t for t in suites[seed].trials if t.hook in mistake.overrides]
    others = {t.hook: t for t in reversed(suites[seed].trials) if t.hook not in mistake.overrides}
    trials += list(others.values())
    for trial in trials:
        verdict = judge_in_process(solution, trial)
        if verdict.status == FAILED:
            failed[trial.hook].append(f"{trial_id(trial)}: {verdict.message}")
    assert failed, f"{mistake.id} survives the hidden suite (seed {seed}): no case fails"
    assert mistake.exercise in failed, (
        f"{mistake.id} survives its own exercise {mistake.exercise} (seed {seed}); failed only {sorted(failed)}"
    )
    stray = {hook: runs[:2] for hook, runs in failed.items() if hook not in mistake.overrides}
    assert stray == {}, f"{mistake.id} fails hooks it does not override"
