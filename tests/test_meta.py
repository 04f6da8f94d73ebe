"""Meta-tests, datasette style: every hook is complete everywhere it must appear.

For each hook in :data:`grader.registry.HOOK_NAMES`: hidden cases, a hookspec
docstring, a row in the README's exercise contract, a stub in the learner's
``exercises`` package that raises ``NotImplementedError``, public tests, a
marked implementation in the reference, and at least one catalogued mistake.
For each catalogue entry: hints in both languages and a source.  For each
exercise with banned calls: a message saying why.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from grader import hookspecs
from grader.child_runtime import run_call
from grader.instructor.cases import BANNED, WHY_BANNED, make_cases
from grader.instructor.suite import build_suite
from grader.registry import HOOK_NAMES, format_hook, load_solution
from solutions import reference
from solutions.mistakes import CATALOGUE

KIT = Path(__file__).resolve().parent.parent
README = (KIT / "README.md").read_text(encoding="utf-8")
CJK = re.compile(r"[\u4e00-\u9fff]")
HOOKS = list(HOOK_NAMES)


def test_there_are_fourteen_hooks_in_chapter_order():
    assert HOOKS[0] == "dot_product_scores" and HOOKS[-1] == "make_multihead_attention"
    assert len(HOOKS) == len(set(HOOKS)) == 14


# --- per hook -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hidden_cases():
    return {seed: make_cases(seed) for seed in (0, 1)}


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hook_has_hidden_cases(hook, hidden_cases):
    for seed, cases in hidden_cases.items():
        mine = [c for c in cases if c.hook == hook]
        assert mine, f"no hidden case for {hook} (seed {seed})"
        names = [c.name for c in mine]
        assert len(names) == len(set(names)), f"{hook}: duplicate hidden case names {names}"
    assert all(c.hook in HOOK_NAMES for c in hidden_cases[0]), "a hidden case for something that is not a hook"


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hookspec_has_a_real_docstring(hook):
    spec = getattr(hookspecs, hook)
    doc = inspect.getdoc(spec) or ""
    lines = [ln for ln in doc.splitlines() if ln.strip()]
    assert len(lines) >= 2, f"{hook}: a one-line hookspec docstring says too little"
    # what comes back: a `:returns:` field, or the imperative "Return ..." summary line
    assert re.search(r":returns?:|\breturns?\b", doc, re.IGNORECASE), (
        f"{hook}: the docstring never says what it returns"
    )


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hook_is_in_the_readme_contract_table(hook):
    signature = format_hook(hook)
    rows = [ln for ln in README.splitlines() if ln.startswith(f"| `{signature}` |")]
    assert len(rows) == 1, f"README.md needs one contract row starting with | `{signature}` |"
    contract = rows[0].split("|")[2].strip()
    assert contract, f"README.md: empty contract for {signature}"


@pytest.fixture(scope="module")
def stubs():
    return load_solution("exercises")


@pytest.fixture(scope="module")
def suite():
    return build_suite(0, ("cpu",))


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hook_has_a_stub_raising_not_implemented_error(hook, stubs, suite):
    assert hook in stubs.implemented, f"exercises/ has no usable {format_hook(hook)}: {stubs.problems}"
    runs = [r for r in suite.runs if r.hook == hook]
    assert runs
    for run in runs:
        reply, _ = run_call(stubs.functions, dict(run.call, id=0), run.tensors)
        error = reply.get("error") or {}
        assert error.get("type") == "NotImplementedError", (hook, run.case.name, reply)
        assert hook in error.get("message", ""), f"the stub's message should name its exercise: {error}"


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hook_has_public_tests(hook):
    marker = f'@pytest.mark.exercise("{hook}")'
    found = [p.name for p in sorted((KIT / "exercises").glob("test_*.py")) if marker in p.read_text(encoding="utf-8")]
    assert found, f"no public test marked {marker} under exercises/"


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_reference_implements_hook_with_hookimpl(hook):
    fn = getattr(reference, hook, None)
    assert callable(fn), f"solutions/reference.py has no {hook}"
    assert hasattr(fn, f"{hookspecs.PROJECT_NAME}_impl"), f"solutions/reference.py: {hook} lacks @hookimpl"


def test_reference_loads_every_hook_without_problems():
    solution = load_solution("reference")
    assert solution.implemented == HOOK_NAMES
    assert solution.problems == []


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hook_has_a_catalogued_mistake(hook):
    mine = [m for m in CATALOGUE if m.exercise == hook]
    assert mine, f"no catalogued mistake for {hook}"
    assert all(hook in m.overrides for m in mine), [m.id for m in mine if hook not in m.overrides]


# --- per catalogue entry ---------------------------------------------------------------------


@pytest.mark.parametrize("mistake", CATALOGUE, ids=[m.id for m in CATALOGUE])
def test_catalogue_entry_has_hints_in_both_languages_and_a_source(mistake):
    assert mistake.hint.strip(), f"{mistake.id}: no hint"
    assert not CJK.search(mistake.hint), f"{mistake.id}: the English hint is not in English"
    assert mistake.hint_zh.strip() and CJK.search(mistake.hint_zh), f"{mistake.id}: hint_zh has no Chinese"
    assert mistake.hint_zh != mistake.hint
    assert mistake.source.strip(), f"{mistake.id}: no source"
    assert mistake.exercise in HOOK_NAMES
    assert mistake.overrides and set(mistake.overrides) <= set(HOOK_NAMES)


# --- banned calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise", sorted(BANNED), ids=sorted(BANNED))
def test_banned_exercise_says_why(exercise):
    assert exercise in HOOK_NAMES
    assert BANNED[exercise], f"{exercise}: an empty list of banned calls"
    why = WHY_BANNED.get(exercise, "")
    assert isinstance(why, str) and len(why.split()) >= 5, f"{exercise}: no WHY_BANNED message"


def test_no_why_banned_without_banned_calls():
    assert set(WHY_BANNED) <= set(BANNED)
