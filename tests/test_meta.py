"""Meta-tests, datasette style: every hook is complete everywhere it must appear.

Adding a hook is a recipe (README.md, Development): a hookspec, a row in
``grader/hook_table.py``, the reference, hidden cases, a catalogued mistake, a
stub and a public test, a row of the README's contract.  :func:`missing_steps`
checks each step for one hook and says, in one line each, which are missing;
``test_every_step_of_the_recipe_is_done`` runs it for every hookspec, and
``test_a_hook_with_only_a_hookspec_is_told_every_step`` shows that it fails,
naming the steps, for a hook that has nothing else yet.

Beyond the recipe: the table holds one row per hookspec in hookspec order;
the hookspecs' "Not allowed inside" prose names calls the table's banned names
catch; the exercise modules' docstrings end with the line the notebooks replace
and name the helpers the module classes may reuse; each catalogue entry has
hints in both languages and a source.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the chapter's and the prose's name

from grader import hook_table, hookspecs
from grader.child.call import call_hook
from grader.child.load import find_callable
from grader.hook_table import GROUPS, HELPERS_OF_MODULES, ROWS, TABLE
from grader.instructor.cases import Maker, cases_by_hook, make_cases
from grader.instructor.suite import build_suite
from grader.notebooks import CHECK_LINE
from grader.registry import HOOK_NAMES, format_hook, load_solution
from solutions import reference
from solutions.mistakes import CATALOGUE

KIT = Path(__file__).resolve().parent.parent
EXERCISES = KIT / "exercises"
README = (KIT / "README.md").read_text(encoding="utf-8")
CJK = re.compile(r"[\u4e00-\u9fff]")
HOOKS = list(HOOK_NAMES)


def hookspec_names() -> list[str]:
    """Every hook with a hookspec, read from :mod:`grader.hookspecs` as it is now (a test may add one)."""
    marker = f"{hookspecs.PROJECT_NAME}_spec"
    return [name for name, obj in vars(hookspecs).items() if callable(obj) and hasattr(obj, marker)]


def test_there_are_eighteen_hooks_in_chapter_order():
    assert hookspec_names() == HOOKS
    assert HOOKS[0] == "dot_product_scores" and HOOKS[-1] == "plot_attention"
    assert HOOKS.index("softmax_with_temperature") == HOOKS.index("softmax_weights") + 1
    assert HOOKS.index("sliding_window_mask") == HOOKS.index("make_multihead_attention") + 1
    assert HOOKS.index("chunked_attention") == HOOKS.index("sliding_window_mask") + 1
    assert len(HOOKS) == len(set(HOOKS)) == 18


# --- the recipe, step by step -------------------------------------------------------------------


def _names_defined(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def public_tests_of(hook: str) -> list[str]:
    """``file::test`` for every public test decorated ``@pytest.mark.exercise(hook)``, read with ast."""
    found = []
    for path in sorted(EXERCISES.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for dec in node.decorator_list:
                if (
                    isinstance(dec, ast.Call)
                    and ast.unparse(dec.func) == "pytest.mark.exercise"
                    and [a.value for a in dec.args if isinstance(a, ast.Constant)] == [hook]
                ):
                    found.append(f"{path.name}::{node.name}")
    return found


def missing_steps(hook: str) -> list[str]:
    """One line per step of the recipe (README.md, Development) that ``hook`` lacks; empty when it is complete."""
    import exercises

    missing = []
    row = ROWS.get(hook)
    if row is None:
        missing.append(f"hook {hook!r} has a hookspec but no row in grader/hook_table.py")
    elif not row.points > 0:
        missing.append(f"hook {hook!r}: its row in grader/hook_table.py gives it no rubric points")
    fn = getattr(reference, hook, None)
    if not callable(fn) or not hasattr(fn, f"{hookspecs.PROJECT_NAME}_impl"):
        where = f"@hookimpl def {hook} in solutions/reference.py"
        missing.append(f"hook {hook!r}: the reference does not implement it ({where})")
    if not cases_by_hook(Maker(0)).get(hook):  # make_cases itself refuses a suite with a hook missing
        missing.append(f"hook {hook!r}: no hidden cases in grader/instructor/cases.py (a builder in cases_by_hook)")
    if not [m for m in CATALOGUE if m.exercise == hook]:
        missing.append(f"hook {hook!r}: no catalogued mistake in solutions/mistakes.py")
    alias = row.class_alias if row else None
    if find_callable([exercises], hook, alias) is None:
        missing.append(f"hook {hook!r}: no stub in exercises/ (a def {hook}, exported by exercises/__init__.py)")
    elif row is not None and not {hook, alias} & _names_defined(EXERCISES / f"{row.group}.py"):
        missing.append(f"hook {hook!r}: its stub is not in exercises/{row.group}.py, the group its row names")
    if not public_tests_of(hook):
        missing.append(f"hook {hook!r}: no public test marked exercise({hook!r}) in exercises/test_*.py")
    if not [ln for ln in README.splitlines() if ln.startswith(f"| `{format_hook(hook)}` |")]:
        missing.append(f"hook {hook!r}: no row | `{format_hook(hook)}` | … | in README.md's exercise contract")
    return missing


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_every_step_of_the_recipe_is_done(hook):
    missing = missing_steps(hook)
    assert not missing, "\n".join(missing)


def test_a_hook_with_only_a_hookspec_is_told_every_step(monkeypatch):
    """The recipe's checks can fail: a hookspec added with nothing else is missing every other step."""

    def attention_entropy(weights):
        """Return the entropy of each row of attention weights.

        :param weights: ``(..., Tq, Tk)``.
        :returns: ``(..., Tq)``.
        """

    spec = hookspecs.hookspec(firstresult=True)(attention_entropy)
    monkeypatch.setattr(hookspecs, "attention_entropy", spec, raising=False)
    assert "attention_entropy" in hookspec_names()
    missing = missing_steps("attention_entropy")
    print("\n".join(missing))  # what a maintainer who stopped after the hookspec reads (pytest -s shows it)
    assert [line.split(":")[0].split(" has ")[0] for line in missing] == ["hook 'attention_entropy'"] * 7
    for step in (
        "has a hookspec but no row in grader/hook_table.py",
        "the reference does not implement it",
        "no hidden cases in grader/instructor/cases.py",
        "no catalogued mistake in solutions/mistakes.py",
        "no stub in exercises/",
        "no public test marked exercise('attention_entropy')",
        "in README.md's exercise contract",
    ):
        assert [line for line in missing if step in line], f"no line says {step!r}: {missing}"


def test_the_table_has_one_row_per_hookspec_in_hookspec_order():
    rows = [r.hook for r in TABLE]
    specs = hookspec_names()
    assert [h for h in rows if h not in specs] == [], "rows in grader/hook_table.py for hooks without a hookspec"
    assert [h for h in specs if h not in rows] == [], "hookspecs without a row in grader/hook_table.py"
    assert rows == specs, "grader/hook_table.py lists the hooks in another order than grader/hookspecs.py"


def test_the_hidden_cases_follow_the_hookspec_order():
    assert list(cases_by_hook(Maker(0))) == hookspec_names(), "cases_by_hook in grader/instructor/cases.py"


def test_each_group_is_an_exercise_module_with_its_public_tests():
    assert list(GROUPS) == list(dict.fromkeys(r.group for r in TABLE))
    for group in GROUPS:
        assert (EXERCISES / f"{group}.py").is_file(), f"group {group!r}: no exercises/{group}.py"
        assert (EXERCISES / f"test_{group}.py").is_file(), f"group {group!r}: no exercises/test_{group}.py"


def test_the_table_refuses_a_row_that_contradicts_itself():
    with pytest.raises(ValueError, match="banned calls and why_banned go together"):
        hook_table.HookRow("x", "scores", "tensor", points=1, banned=("softmax",))
    with pytest.raises(ValueError, match="output 'matrix' is not one of tensor, weights, mask, module"):
        hook_table.HookRow("x", "scores", "matrix", points=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="points must be a non-negative finite number"):
        hook_table.HookRow("x", "scores", "tensor", points=float("nan"))
    with pytest.raises(KeyError, match="hook 'nope' has no row in grader/hook_table.py"):
        hook_table.row("nope")


# --- per hook, beyond the recipe -----------------------------------------------------------------


@pytest.fixture(scope="module")
def hidden_cases():
    return {seed: make_cases(seed) for seed in (0, 1)}


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hidden_case_names_are_unique_per_hook(hook, hidden_cases):
    for seed, cases in hidden_cases.items():
        names = [c.name for c in cases if c.hook == hook]
        assert names, f"no hidden case for {hook} (seed {seed})"
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


@pytest.fixture(scope="module")
def stubs():
    return load_solution("exercises")


@pytest.fixture(scope="module")
def suite():
    return build_suite(0, ("cpu",))


@pytest.mark.slow
@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hook_has_a_stub_raising_not_implemented_error(hook, stubs, suite):
    assert hook in stubs.implemented, f"exercises/ has no usable {format_hook(hook)}: {stubs.problems}"
    runs = [r for r in suite.trials if r.hook == hook]
    assert runs
    for run in runs:
        reply, _ = call_hook(stubs.functions, dict(run.call, id=0), run.tensors)
        error = reply.get("error") or {}
        assert error.get("type") == "NotImplementedError", (hook, run.case.name, reply)
        assert hook in error.get("message", ""), f"the stub's message should name its exercise: {error}"


def test_reference_loads_every_hook_without_problems():
    solution = load_solution("reference")
    assert solution.implemented == HOOK_NAMES
    assert solution.problems == []


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_catalogued_mistakes_override_their_own_hook(hook):
    mine = [m for m in CATALOGUE if m.exercise == hook]
    assert all(hook in m.overrides for m in mine), [m.id for m in mine if hook not in m.overrides]


# --- the exercise modules' docstrings, which the notebooks are built from -----------------------


@pytest.mark.parametrize("group", GROUPS, ids=GROUPS)
def test_exercise_module_docstring_ends_with_the_check_line(group):
    """The notebooks leave out exactly this last paragraph (the check cell does its work)."""
    doc = ast.get_docstring(ast.parse((EXERCISES / f"{group}.py").read_text(encoding="utf-8"))) or ""
    paragraphs = [p.strip() for p in doc.split("\n\n") if p.strip()]
    assert paragraphs and paragraphs[-1] == CHECK_LINE.format(group=group), (
        f"exercises/{group}.py: the docstring's last paragraph should be {CHECK_LINE.format(group=group)!r}"
    )


def test_the_modules_docstring_names_the_helpers_of_the_table():
    """``exercises/modules.py`` shows the imports of what the classes may reuse: the table's helpers, in order."""
    doc = ast.get_docstring(ast.parse((EXERCISES / "modules.py").read_text(encoding="utf-8"))) or ""
    code = "\n".join(line[4:] for line in doc.splitlines() if line.startswith("    "))
    tree = ast.parse(code)
    imports = [(n.module, tuple(a.name for a in n.names)) for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert imports == list(HELPERS_OF_MODULES)


# --- banned calls ------------------------------------------------------------------------------

NAMESPACES = {"torch": torch, "F": F, "nn": nn, "Tensor": torch.Tensor}
"""How the hookspecs' prose names torch (a bare name is ``torch.<name>``; ``pyplot.<name>`` is matplotlib's)."""

X = torch.randn(1, 3, 4)
CLASS_PROBES = {
    "nn.Dropout": lambda: nn.Dropout(0.5)(X),
    "nn.MultiheadAttention": lambda: nn.MultiheadAttention(4, 2, batch_first=True)(X, X, X),
}
"""How to use each class the prose names, to see that the recorder catches what it calls."""


def banned_in_prose(hook: str) -> list[str]:
    """The ``calls`` listed after "Not allowed inside:" in the hook's hookspec docstring."""
    doc = " ".join((inspect.getdoc(getattr(hookspecs, hook)) or "").split())
    if "Not allowed inside:" not in doc:
        return []
    sentence = re.split(r"\.(?:\s|$)", doc.split("Not allowed inside:", 1)[1], maxsplit=1)[0]
    return re.findall(r"``([^`]+)``", sentence)


def _resolve(name: str):
    head, *rest = name.split(".")
    if head == "pyplot":
        obj = pytest.importorskip("matplotlib.pyplot", reason="the prose names matplotlib's pyplot")
    else:
        obj = NAMESPACES[head] if rest else getattr(torch, head)
    for part in rest:
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_hookspec_prose_names_the_calls_the_table_bans(hook):
    row = ROWS.get(hook)
    if row is None:
        pytest.skip("no row in grader/hook_table.py (test_every_step_of_the_recipe_is_done names the step)")
    named = banned_in_prose(hook)
    assert bool(named) == bool(row.banned), (
        f"{hook}: grader/hook_table.py bans {list(row.banned)} but the hookspec's 'Not allowed inside:' says {named}"
    )
    for name in named:
        obj = _resolve(name)
        if inspect.isclass(obj):
            assert name in CLASS_PROBES, f"{hook}: add a probe for {name} to CLASS_PROBES"
            call = {"id": 0, "hook": "probe", "banned": list(row.banned)}
            reply, _ = call_hook({"probe": CLASS_PROBES[name]}, call, {})
            assert reply["ok"] and reply["banned"], f"{hook}: {name} calls nothing the table bans ({row.banned})"
        else:
            assert obj.__name__ in row.banned, f"{hook}: the prose bans {name}, the table does not ban {obj.__name__!r}"


@pytest.mark.parametrize("hook", [r.hook for r in TABLE if r.banned], ids=[r.hook for r in TABLE if r.banned])
def test_banned_exercise_says_why(hook):
    why = ROWS[hook].why_banned
    assert len(why.split()) >= 5, f"{hook}: the why_banned sentence in grader/hook_table.py says too little"


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
