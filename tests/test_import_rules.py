"""The layout's import rules, read from the source with :mod:`ast` (nothing here imports or runs a module).

- the learner's side (``grader/child/``) imports nothing of the kit but its own modules: the template runs it
  with nothing else of the kit importable, and ``grader/__init__.py``, which importing it runs, imports nothing;
- the hook table (``grader/hook_table.py``) imports nothing of the kit: it is data every side reads;
- the top level of ``grader/`` is what a learner's kit holds, so it never needs ``grader.instructor``
  (nor ``solutions``) at import; inside a function it may try one and treat ImportError as "not in this kit";
- the output modules (gradebook, rubric, heatmaps, the report model and every report writer) never import the
  sandbox or the grading loops, at any level: writing a grade never runs learner code;
- nothing in ``grader/`` imports ``solutions`` at import: the reference and the catalogue are loaded when
  asked for (the registry's reference loader imports it inside a function), so a kit without them works;
- no module of ``grader/`` imports itself through others (no import cycle), counting the imports inside
  functions: a lazy import hides a cycle from Python, not from the reader.

An import is ``import m``, ``from m import n`` (which may import ``m.n``; relative ones resolved), or
``importlib.import_module("m")`` / ``__import__("m")`` with a constant name.  *Module level* is anything
outside a function body (a class body, an ``if`` or a ``try`` at the top included).
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Import:
    line: int
    module: str  # the dotted name imported
    module_level: bool


@dataclass(frozen=True)
class Rule:
    name: str
    files: tuple[str, ...]  # paths or glob patterns under the kit root; a plain path must exist
    forbidden: tuple[str, ...]  # dotted names; their submodules are forbidden too
    module_level_only: bool  # True: imports inside functions are allowed
    why: str
    allowed: tuple[str, ...] = ()  # dotted names under a forbidden one that stay allowed (and their submodules)


OUTPUT_MODULES = tuple(
    f"grader/instructor/{m}.py"
    for m in ("gradebook", "rubric", "heatmaps", "report_model", "reports", "grades_csv", "results_json", "feedback",
              "junit", "class_report", "lms", "output_txt", "console_summary")
)  # fmt: skip
RUNNERS = tuple(f"grader.instructor.{m}" for m in ("sandbox", "submission_grading", "class_grading"))

RULES = (
    Rule(
        "child-runtime-stands-alone",
        ("grader/child/*.py",),
        ("grader", "solutions", "exercises"),
        module_level_only=False,
        why="the template runs grader.child with nothing else of the kit importable",
        allowed=("grader.child",),
    ),
    Rule(
        "grader-package-door-is-light",
        ("grader/__init__.py",),
        ("grader", "solutions", "exercises"),
        module_level_only=True,
        why="importing grader.child, the learner's side, runs grader/__init__.py first",
    ),
    Rule(
        "hook-table-is-data",
        ("grader/hook_table.py", "grader/hook_row.py", "grader/packs.py", "grader/groups/*.py"),
        ("grader", "solutions", "exercises"),
        module_level_only=False,
        why="the table of hooks and the groups' declarations are plain data that every side reads, the learner's kit"
        " included",
        allowed=("grader.hook_row", "grader.packs", "grader.hookspecs", "grader.groups"),
    ),
    Rule(
        "learner-side-never-needs-instructor",
        ("grader/*.py",),
        ("grader.instructor", "solutions"),
        module_level_only=True,
        why="a learner's kit ships grader/ without instructor/ (and without solutions/)",
    ),
    Rule(
        "outputs-never-run-learner-code",
        OUTPUT_MODULES,
        RUNNERS,
        module_level_only=False,
        why="grades and reports are written from results, never by running a submission",
    ),
    Rule(
        "solutions-only-on-demand",
        ("grader/**/*.py",),
        ("solutions",),
        module_level_only=True,
        why="the reference and the catalogue are loaded when asked for, inside a function",
    ),
)


def package_of(path: Path, root: Path) -> str:
    """The dotted package a file's relative imports start from (its folder, relative to ``root``)."""
    return ".".join(path.relative_to(root).parent.parts)


def _absolute(module: str | None, level: int, package: str) -> str:
    if not level:
        return module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*base, module] if module else base)


def _dynamic(node: ast.Call) -> str | None:
    """The constant name given to ``importlib.import_module(...)`` or ``__import__(...)``, else None."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of(path: Path, root: Path = KIT) -> list[Import]:
    """Every import in one file, with its line and whether it runs at module level."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = package_of(path, root)
    found: list[Import] = []

    def walk(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            here = module_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend(Import(child.lineno, alias.name, here) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child.module, child.level, package)
                found.append(Import(child.lineno, base, here))
                found.extend(Import(child.lineno, f"{base}.{a.name}", here) for a in child.names if a.name != "*")
            elif isinstance(child, ast.Call) and (name := _dynamic(child)):
                found.append(Import(child.lineno, name, here))
            walk(child, here)

    walk(tree, True)
    return found


def files_of(rule: Rule, root: Path = KIT) -> list[Path]:
    """The files a rule holds for; a plain path that is missing is an error (a rename must not empty a rule)."""
    files: set[Path] = set()
    for pattern in rule.files:
        if any(c in pattern for c in "*?["):
            files.update(p for p in root.glob(pattern) if p.is_file())
        else:
            path = root / pattern
            if not path.is_file():
                raise FileNotFoundError(f"rule {rule.name}: {pattern} does not exist; update the rule")
            files.add(path)
    return sorted(files)


def _is_under(module: str, name: str) -> bool:
    return module == name or module.startswith(name + ".")


def violations(rule: Rule, root: Path = KIT) -> list[str]:
    """``file:line: rule name: what is imported (why it is not allowed)``, one line per broken import."""
    problems = []
    for path in files_of(rule, root):
        seen: set[tuple[int, str]] = set()
        for imp in imports_of(path, root):
            if rule.module_level_only and not imp.module_level:
                continue
            if any(_is_under(imp.module, name) for name in rule.allowed):
                continue
            hit = next((name for name in rule.forbidden if _is_under(imp.module, name)), None)
            if hit is None or (imp.line, hit) in seen:  # `from m import n` is m and m.n: one line for both
                continue
            seen.add((imp.line, hit))
            where = "at module level" if imp.module_level else "inside a function"
            problems.append(
                f"{path.relative_to(root).as_posix()}:{imp.line}: rule {rule.name}: imports {imp.module} "
                f"{where} ({hit} is forbidden here: {rule.why})"
            )
    return problems


# --- the real tree -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_the_kit_keeps_the_rule(rule):
    checked = files_of(rule)
    assert checked, f"rule {rule.name}: no file matches {rule.files}"
    problems = violations(rule)
    assert not problems, "\n".join(problems)


def test_the_rules_see_the_imports_that_are_there():
    """Not vacuous on the real tree: the imports the rules allow are found where we know they are."""
    check = {(i.module, i.module_level) for i in imports_of(KIT / "grader" / "cli.py")}
    assert ("grader.registry.HOOK_NAMES", True) in check
    assert ("grader.instructor.diagnosis", False) in check  # attnkit check's optional hints
    kit_hints = {(i.module, i.module_level) for i in imports_of(KIT / "grader" / "instructor" / "kit_hints.py")}
    assert ("solutions.mistakes.catalogue", False) in kit_hints  # the catalogue, imported inside a function
    model = {i.module for i in imports_of(KIT / "grader" / "instructor" / "report_model.py")}
    assert "grader.instructor.verdict" in model


# --- each rule fails on a wrong import -------------------------------------------------------------------

WRONG = {
    "child-runtime-stands-alone": (
        "grader/child/call.py",
        "import os\n\n\ndef run():\n    from grader.registry import HOOK_NAMES\n    return HOOK_NAMES\n",
        5,
        "grader.registry",
    ),
    "hook-table-is-data": (
        "grader/hook_table.py",
        '"""Doc."""\n\nfrom grader.registry import HOOK_NAMES\n',
        3,
        "grader.registry",
    ),
    "learner-side-never-needs-instructor": (
        "grader/check.py",
        '"""Doc."""\n\nfrom grader.instructor.diagnosis import hint\n',
        3,
        "grader.instructor.diagnosis",
    ),
    "outputs-never-run-learner-code": (
        "grader/instructor/reports.py",
        "def write():\n    from .sandbox import Template\n    return Template\n",
        2,
        "grader.instructor.sandbox",
    ),
    "solutions-only-on-demand": (
        "grader/instructor/suite.py",
        "import importlib\n\nMISTAKES = importlib.import_module('solutions.mistakes')\n",
        3,
        "solutions.mistakes",
    ),
}


def _tree_with(root: Path, rel: str, source: str) -> None:
    """A kit root holding ``rel`` with ``source`` and every other file a rule names by path (empty)."""
    for rule in RULES:
        for pattern in rule.files:
            if not any(c in pattern for c in "*?["):
                (root / pattern).parent.mkdir(parents=True, exist_ok=True)
                (root / pattern).touch()
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text(source)


@pytest.mark.parametrize("name", sorted(WRONG), ids=sorted(WRONG))
def test_a_wrong_import_breaks_the_rule_and_is_named(name, tmp_path):
    rel, source, line, module = WRONG[name]
    _tree_with(tmp_path, rel, source)
    rule = next(r for r in RULES if r.name == name)
    problems = violations(rule, tmp_path)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{rel}:{line}: rule {name}: imports {module} "), problems[0]


@pytest.mark.parametrize(
    "source",
    [
        "def hints():\n    try:\n        from grader.instructor.diagnosis import hint\n    except ImportError:\n"
        "        return None\n    return hint\n",
        "class Later:\n    def load(self):\n        import solutions.reference\n        return solutions.reference\n",
        "load = lambda: __import__('grader.instructor.sandbox')\n",
    ],
    ids=["function", "method", "lambda"],
)
def test_an_import_inside_a_function_is_allowed_on_the_learner_side(source, tmp_path):
    _tree_with(tmp_path, "grader/check.py", source)
    rule = next(r for r in RULES if r.name == "learner-side-never-needs-instructor")
    found = imports_of(tmp_path / "grader" / "check.py", tmp_path)
    assert found and not any(i.module_level for i in found), found  # seen, and seen as inside a function
    assert violations(rule, tmp_path) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from grader import instructor\n", "grader.instructor"),
        ("from . import instructor\n", "grader.instructor"),
        ("from .instructor.sandbox import Child\n", "grader.instructor.sandbox"),
        ("try:\n    import solutions\nexcept ImportError:\n    solutions = None\n", "solutions"),
        ("if True:\n    import grader.instructor.cases as cases\n", "grader.instructor.cases"),
        ("class A:\n    from grader.instructor import verdict\n", "grader.instructor"),
    ],
    ids=["from-package", "relative", "relative-deeper", "in-try", "in-if", "in-class-body"],
)
def test_module_level_imports_in_any_form_break_the_learner_rule(source, expected, tmp_path):
    _tree_with(tmp_path, "grader/submit.py", source)
    rule = next(r for r in RULES if r.name == "learner-side-never-needs-instructor")
    problems = violations(rule, tmp_path)
    assert problems and all(p.startswith("grader/submit.py:") for p in problems), problems
    assert any(f"imports {expected} at module level" in p for p in problems), problems


def test_a_renamed_file_fails_the_rule_instead_of_emptying_it(tmp_path):
    _tree_with(tmp_path, "grader/check.py", "")
    (tmp_path / "grader" / "instructor" / "heatmaps.py").unlink()
    rule = next(r for r in RULES if r.name == "outputs-never-run-learner-code")
    with pytest.raises(FileNotFoundError, match="heatmaps.py does not exist"):
        violations(rule, tmp_path)


# --- no import cycle ---------------------------------------------------------------------------------------


def module_name(path: Path, root: Path = KIT) -> str:
    """The dotted name of a file under ``root`` (a package's ``__init__.py`` is the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = KIT) -> dict[str, set[str]]:
    """``module -> the modules of grader/ it imports``, at any level (an import inside a function included)."""
    files = {module_name(path, root): path for path in sorted((root / "grader").rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        graph[name] = set()
        for imp in imports_of(path, root):
            target = imp.module
            while target and target not in files:  # `from m import n`: n is a name in m, not a module of its own
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The shortest way back to itself (``[a, b, a]``) of each module on a cycle, one per set of modules, sorted."""
    found: dict[frozenset[str], list[str]] = {}
    for start in sorted(graph):
        paths = {start: [start]}  # breadth first: the shortest path from start to each module reached
        todo = deque([start])
        while todo:
            here = todo.popleft()
            if start in graph[here]:
                found.setdefault(frozenset(paths[here]), paths[here] + [start])
                break
            for nxt in sorted(graph[here] - paths.keys()):
                paths[nxt] = paths[here] + [nxt]
                todo.append(nxt)
    return sorted(found.values())


def test_no_module_of_the_grader_imports_itself_through_others():
    found = cycles(import_graph())
    assert found == [], "import cycles (imports inside functions count):\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_import_graph_sees_imports_at_every_level():
    graph = import_graph()
    assert "grader.instructor.report_model" in graph["grader.instructor.reports"]  # module level
    assert "grader.instructor.class_grading" in graph["grader.instructor.gradescope"]  # inside a function
    assert "grader.instructor.sandbox" in graph["grader.instructor.class_grading"]  # `from m import n`: m
    assert "grader.instructor.heatmaps" in graph["grader.instructor.reports"]  # `from package import module`


@pytest.mark.parametrize(
    "a_source",
    [
        "from grader import b\n",
        "def later():\n    from .b import thing\n    return thing\n",
        "import importlib\n\nB = importlib.import_module('grader.b')\n",
    ],
    ids=["module-level", "inside-a-function", "dynamic"],
)
def test_a_cycle_is_found_and_named(a_source, tmp_path):
    files = {"__init__.py": "", "a.py": a_source, "b.py": "from grader.c import C\n", "c.py": "import grader.a\n",
             "d.py": "from grader.a import thing\n"}  # fmt: skip
    for name, source in files.items():
        (tmp_path / "grader").mkdir(exist_ok=True)
        (tmp_path / "grader" / name).write_text(source)
    assert cycles(import_graph(tmp_path)) == [["grader.a", "grader.b", "grader.c", "grader.a"]]
    (tmp_path / "grader" / "c.py").write_text("C = 1\n")
    assert cycles(import_graph(tmp_path)) == []
