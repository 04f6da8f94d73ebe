"""Meta-tests, datasette style: every hook is complete everywhere it must appear.

An exercise group is declared once (:mod:`grader.groups`): its module holds the rows and the hookspecs and names
its hidden cases, reference and mistakes; its stubs and public tests are ``exercises/<group>.py`` and
``exercises/test_<group>.py``.  :func:`missing_steps` checks each part for one hook and says, in one line each,
which are missing; ``test_every_step_of_the_recipe_is_done`` runs it for every hook, and
``test_a_group_with_only_its_rows_and_hookspecs_is_told_every_step`` shows that it fails, naming the parts, for
a group declared with nothing else yet.

Beyond the recipe: the groups' hookspecs' "Not allowed inside" prose names calls the rows' banned names
catch; the exercise modules' docstrings end with the line the notebooks replace and name the helpers the
module classes may reuse; each catalogue entry has hints in both languages and a source; docs/contract.md's table
has a row per hook of the chapter.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import types
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the chapter's and the prose's name

from grader import hook_table, hookspecs, packs
from grader.child.call import call_hook
from grader.hook_row import HookRow
from grader.hook_table import GROUPS, HELPERS_OF_MODULES, ROWS, TABLE
from grader.instructor.cases import Maker, make_cases
from grader.instructor.suite import build_suite
from grader.notebooks import CHECK_LINE
from grader.packs import groups, hookspec_of
from grader.registry import HOOK_NAMES, format_hook, load_solution
from solutions.mistakes import catalogue

KIT = Path(__file__).resolve().parent.parent
EXERCISES = KIT / "exercises"
CONTRACT_DOC = (KIT / "docs" / "contract.md").read_text(encoding="utf-8")
CJK = re.compile(r"[\u4e00-\u9fff]")
HOOKS = list(HOOK_NAMES)
CHAPTER = next(g for g in groups() if g.name == "grader.groups.chapter")
CATALOGUE = catalogue()


def test_the_chapter_s_eighteen_hooks_come_first_in_chapter_order():
    chapter = [r.hook for r in CHAPTER.rows]
    assert HOOKS[: len(chapter)] == chapter
    assert chapter[0] == "dot_product_scores" and chapter[-1] == "plot_attention"
    assert chapter.index("softmax_with_temperature") == chapter.index("softmax_weights") + 1
    assert chapter.index("sliding_window_mask") == chapter.index("make_multihead_attention") + 1
    assert chapter.index("chunked_attention") == chapter.index("sliding_window_mask") + 1
    assert len(HOOKS) == len(set(HOOKS)) and len(chapter) == 18
    hookspec_order = [n for n, obj in vars(hookspecs).items() if callable(obj) and hasattr(obj, "attnkit_spec")]
    assert chapter == hookspec_order, "the chapter's rows list the hooks in another order than grader/hookspecs.py"


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


def _part(group: packs.Group, name: str) -> types.ModuleType | None:
    module = group.part(name)
    return importlib.import_module(module) if module else None


def missing_steps(hook: str, group: packs.Group) -> list[str]:
    """One line per part of ``group``'s declaration that ``hook`` lacks; empty when it is complete."""
    where = f"exercise group {group.name}"
    missing = []
    row = next((r for r in group.rows if r.hook == hook), None)
    if row is None:
        return [f"hook {hook!r}: no row in {where}'s ROWS"]
    if not row.points > 0:
        missing.append(f"hook {hook!r}: its row in {where} gives it no rubric points")
    reference = _part(group, "REFERENCE")
    fn = getattr(reference, hook, None)
    if not callable(fn) or not hasattr(fn, f"{hookspecs.PROJECT_NAME}_impl"):
        missing.append(f"hook {hook!r}: the reference does not implement it (@hookimpl def {hook} in REFERENCE)")
    cases = _part(group, "HIDDEN_CASES")
    if cases is None or not cases.hidden_cases(Maker(0)).get(hook):  # make_cases refuses a hook missing too
        missing.append(f"hook {hook!r}: no hidden cases (hidden_cases in the module {where} names as HIDDEN_CASES)")
    mistakes = _part(group, "MISTAKES")
    if not [m for m in getattr(mistakes, "CATALOGUE", ()) if m.exercise == hook]:
        missing.append(f"hook {hook!r}: no catalogued mistake (CATALOGUE in the module {where} names as MISTAKES)")
    alias = row.class_alias
    if hook not in load_solution("exercises").implemented:
        missing.append(f"hook {hook!r}: no stub in exercises/ (a def {hook} in exercises/{row.group}.py)")
    elif not {hook, alias} & _names_defined(EXERCISES / f"{row.group}.py"):
        missing.append(f"hook {hook!r}: its stub is not in exercises/{row.group}.py, the group its row names")
    if not public_tests_of(hook):
        missing.append(f"hook {hook!r}: no public test marked exercise({hook!r}) in exercises/test_*.py")
    return missing


@pytest.mark.parametrize("hook", HOOKS, ids=HOOKS)
def test_every_step_of_the_recipe_is_done(hook):
    group = next(g for g in groups() if hook in [r.hook for r in g.rows])
    missing = missing_steps(hook, group)
    assert not missing, "\n".join(missing)


def test_a_group_with_only_its_rows_and_hookspecs_is_told_every_step():
    """The checks can fail: a group declared with a row and a hookspec and nothing else lacks every other part."""
    declared = types.ModuleType("course_pack_draft")

    def token_surprisal(weights):
        """Return the surprisal of each weight.

        :param weights: ``(..., Tq, Tk)``.
        :returns: ``(..., Tq, Tk)``.
        """

    declared.token_surprisal = hookspecs.hookspec(firstresult=True)(token_surprisal)
    declared.ROWS = (HookRow("token_surprisal", "draft", "tensor", points=1),)
    missing = missing_steps("token_surprisal", packs.Group(declared, "a test"))
    print("\n".join(missing))  # what a course author who stopped after the contract reads (pytest -s shows it)
    assert [line.split(":")[0] for line in missing] == ["hook 'token_surprisal'"] * 5
    for step in (
        "the reference does not implement it",
        "no hidden cases",
        "no catalogued mistake",
        "no stub in exercises/",
        "no public test marked exercise('token_surprisal')",
    ):
        assert [line for line in missing if step in line], f"no line says {step!r}: {missing}"


def test_the_contract_page_has_a_row_per_hook_of_the_chapter():
    for hook in (r.hook for r in CHAPTER.rows):
        rows = [ln for ln in CONTRACT_DOC.splitlines() if ln.startswith(f"| `{format_hook(hook)}` |")]
        assert rows, f"hook {hook!r}: no row | `{format_hook(hook)}` | … | in docs/contract.md's exercise contract"


def test_the_groups_hidden_cases_follow_their_rows():
    for group in groups():
        cases = _part(group, "HIDDEN_CASES")
        assert list(cases.hidden_cases(Maker(0))) == [r.hook for r in group.rows], group.name


def test_each_group_is_an_exercise_module_with_its_public_tests():
    assert list(GROUPS) == list(dict.fromkeys(r.group for r in TABLE))
    for group in GROUPS:
        assert (EXERCISES / f"{group}.py").is_file(), f"group {group!r}: no exercises/{group}.py"
        assert (EXERCISES / f"test_{group}.py").is_file(), f"group {group!r}: no exercises/test_{group}.py"


def test_the_table_refuses_a_row_that_contradicts_itself():
    with pytest.raises(ValueError, match="banned calls and why_banned go together"):
        HookRow("x", "scores", "tensor", points=1, banned=("softmax",))
    with pytest.raises(ValueError, match="output 'matrix' is not one of tensor, weights, mask, module"):
        HookRow("x", "scores", "matrix", points=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="points must be a non-negative finite number"):
        HookRow("x", "scores", "tensor", points=float("nan"))
    with pytest.raises(KeyError, match="hook 'nope' has no row: no exercise group declares it"):
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
    spec = hookspec_of(hook)
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
    doc = " ".join((inspect.getdoc(hookspec_of(hook)) or "").split())
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
        pytest.skip("no row (test_every_step_of_the_recipe_is_done names the step)")
    named = banned_in_prose(hook)
    assert bool(named) == bool(row.banned), (
        f"{hook}: its row bans {list(row.banned)} but the hookspec's 'Not allowed inside:' says {named}"
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
    assert len(why.split()) >= 5, f"{hook}: the why_banned sentence of its row says too little"


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
