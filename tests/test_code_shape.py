"""The shape of the grader's code, read with :mod:`ast` (nothing here imports a module of the kit).

- no function in ``grader/`` takes more than :data:`MAX_PARAMETERS` parameters: more knobs than that
  go into a dataclass (``GradeOptions``, ``Limits``…), whose fields have names and defaults;
- the two orchestration functions stay short enough to read at once (:data:`MAX_LINES`).

A click command is the one exception to the first rule: its parameters are its declared options,
each with its help text in a decorator, and it hands them on in a dataclass.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parent.parent
MAX_PARAMETERS = 6
MAX_LINES = 50
ORCHESTRATION = {
    "grader/instructor/class_grading.py": "grade_class",
    "grader/instructor/submission_grading.py": "grade_submission",
}


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Every parameter a caller may pass (``*args`` and ``**kwargs`` count one each), ``self``/``cls`` not."""
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (args.vararg is not None) + (args.kwarg is not None)


def is_click_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated ``@<group>.command(...)``: a click command, whose parameters are its declared options."""
    for deco in node.decorator_list:
        func = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(func, ast.Attribute) and func.attr == "command":
            return True
    return False


def too_many_parameters(source: str, where: str) -> list[str]:
    """``where:line name(n parameters)`` for each function of ``source`` over the limit."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_click_command(node):
            count = parameter_count(node)
            if count > MAX_PARAMETERS:
                found.append(f"{where}:{node.lineno} {node.name}({count} parameters)")
    return found


def grader_files() -> list[Path]:
    files = sorted((KIT / "grader").rglob("*.py"))
    assert len(files) > 20, "the grader's sources were not found"
    return files


def test_no_function_in_the_grader_takes_more_than_six_parameters():
    found = [
        line
        for path in grader_files()
        for line in too_many_parameters(path.read_text(encoding="utf-8"), str(path.relative_to(KIT)))
    ]
    assert found == [], f"more than {MAX_PARAMETERS} parameters: put the knobs in a dataclass: {found}"


SHAPES = {
    "seven-positional": ("def f(a, b, c, d, e, f, g): ...", ["m.py:1 f(7 parameters)"]),
    "six-and-self": ("class C:\n    def f(self, a, b, c, d, e, f): ...", []),
    "keyword-only-and-kwargs": ("def f(a, *, b, c, d, e, f, **rest): ...", ["m.py:1 f(7 parameters)"]),
    "nested": ("def outer():\n    def inner(a, b, c, d, e, f, *g): ...", ["m.py:2 inner(7 parameters)"]),
    "click-command": ("@main.command()\ndef grade(a, b, c, d, e, f, g, h): ...", []),
    "other-decorator": ("@functools.cache\ndef f(a, b, c, d, e, f, g): ...", ["m.py:2 f(7 parameters)"]),
}


@pytest.mark.parametrize(("source", "expected"), list(SHAPES.values()), ids=list(SHAPES))
def test_the_parameter_count_catches_what_it_should(source, expected):
    assert too_many_parameters(textwrap.dedent(source), "m.py") == expected


@pytest.mark.parametrize(("path", "name"), list(ORCHESTRATION.items()), ids=list(ORCHESTRATION.values()))
def test_the_orchestration_functions_are_short(path, name):
    tree = ast.parse((KIT / path).read_text(encoding="utf-8"))
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    lines = (node.end_lineno or node.lineno) - node.lineno + 1
    assert lines <= MAX_LINES, f"{name} has {lines} lines (at most {MAX_LINES}): split it into named steps"
