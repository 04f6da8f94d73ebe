"""Helpers from a notebook's untagged cells: what the graded (tagged) cells call but do not define.

A learner who defines a helper in a new cell of the kit's notebook, untagged, and calls it from a tagged answer
cell has the check cell pass: the kernel ran the new cell.  The grader takes the tagged cells only, so the helper
would be missing (``NameError``).  :func:`helpers` finds, in the untagged cells, the statements that define what
the tagged code reads and does not define (and what those read in turn); the conversion
(:func:`grader.notebooks.notebook_to_source`) keeps them, in their cells' places, and nothing else of those cells.
A name the tagged cells define is never taken from an untagged cell (the tags still say what is graded), but
for a stub they leave (:func:`stubs`): the learner's answer in a cell below it is what the kernel ran.

Read with :mod:`ast` only: nothing here runs a line of the notebook, and the work is linear in its size.  A
definition taken must be able to run at import (:func:`ready`): what a ``def`` or ``class`` evaluates when it
runs must be defined by then.
"""

from __future__ import annotations

import ast
from collections.abc import Callable


def target_names(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        names: list[str] = []
        for elt in target.elts:
            sub = target_names(elt)
            if sub is None:
                return None
            names += sub
        return names
    return None


def span(node: ast.stmt) -> tuple[int, int]:
    decorators = getattr(node, "decorator_list", [])
    start = min([d.lineno for d in decorators] + [node.lineno])
    return start, node.end_lineno or node.lineno


def bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement the conversion may keep binds (none for any other statement)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {a.asname or a.name for a in node.names if a.name != "*"}
    if isinstance(node, ast.Assign):
        return {name for target in node.targets for name in target_names(target) or ()}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def helpers(
    untagged: list[tuple[int, ast.Module]],
    wanted: list[str],
    defined: set[str],
    check: Callable[[], None] = lambda: None,
) -> dict[int, frozenset[int]]:
    """``{cell number: first lines of statements}``: what the ``untagged`` cells (``(number, tree)``) define of
    the names the tagged cells' module reads and does not define (``wanted``; it defines ``defined``), and what
    that needs in turn.  A statement binding a name the tagged cells define is never taken: those cells say what
    is graded.  Where several cells define a name, each is taken, in order, so the last one wins, as in the
    kernel.  ``check`` is called now and then (a deadline)."""
    offers: dict[str, list[tuple[int, ast.stmt]]] = {}  # name -> (cell, statement) binding it
    for number, tree in untagged:
        check()
        for node in tree.body:
            names = bound(node)
            if names and not names & defined:
                for name in names:
                    offers.setdefault(name, []).append((number, node))
    pulled: dict[int, set[int]] = {}
    todo, seen = sorted(wanted, reverse=True), set(wanted)
    while todo:
        for number, node in offers.get(todo.pop(), []):
            check()
            pulled.setdefault(number, set()).add(span(node)[0])
            fresh = [name for name in reads(node) if name not in seen and name not in defined]
            seen.update(fresh)
            todo += fresh
    return {number: frozenset(lines) for number, lines in pulled.items()}


def stubs(tagged: list[ast.Module]) -> set[str]:
    """The functions the tagged cells (in order) leave as stubs: their last definition only raises
    ``NotImplementedError`` (after a docstring).  The learner's own cell that defines one later answers it, as the
    kernel run in order does: an untagged definition of a stub is taken like a helper's."""
    last: dict[str, ast.stmt] = {}
    for tree in tagged:
        for node in tree.body:
            for name in bound(node):
                last[name] = node
    return {name for name, node in last.items() if isinstance(node, ast.FunctionDef) and _is_stub(node)}


def _is_stub(node: ast.FunctionDef) -> bool:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def reads(node: ast.stmt) -> set[str]:
    """The module's names a statement may read, from its tree alone (linear, nothing compiled): every name it
    loads but those bound inside it (parameters, assignments, loop variables); a name a function both binds and
    reads from the module (a class attribute of the same name, say) is missed: its definition is not taken."""
    loaded: set[str] = set()
    local: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            (loaded if isinstance(n.ctx, ast.Load) else local).add(n.id)
        elif isinstance(n, ast.arg):
            local.add(n.arg)
    top = bound(node) if isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)) else set()
    return loaded - (local - top)


def _evaluated_names(nodes: list[ast.AST]) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def ready(node: ast.stmt, defined: set[str], futures: list[str]) -> bool:
    """Whether a statement from an untagged cell can run at import: each name it evaluates when it runs (a
    function's decorators, defaults and annotations; a class's bases, decorators and a body of definitions,
    constants and docstrings) is defined by then.  Imports and constants: the conversion's own rules decide."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _evaluated_names(_when_defined(node, futures)) <= defined
    if not isinstance(node, ast.ClassDef):
        return True
    inside = set(defined)
    if not _evaluated_names([*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]) <= inside:
        return False
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            evaluated: list[ast.AST] = _when_defined(stmt, futures)
        elif isinstance(stmt, ast.Assign):
            evaluated = [stmt.value]
        elif isinstance(stmt, ast.AnnAssign):  # a dataclass's field, say
            annotation = [] if "annotations" in futures else [stmt.annotation]
            evaluated = [*annotation, *([stmt.value] if stmt.value is not None else [])]
        elif isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            evaluated = []
        else:
            return False
        if not _evaluated_names(evaluated) <= inside:
            return False
        inside |= bound(stmt)
    return True


def _when_defined(node: ast.FunctionDef | ast.AsyncFunctionDef, futures: list[str]) -> list[ast.AST]:
    """What a ``def`` evaluates when it runs: decorators, defaults, annotations (none under ``annotations``)."""
    args = node.args
    evaluated: list[ast.AST] = [*node.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d)]
    if "annotations" not in futures:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        evaluated += [a.annotation for a in every if a is not None and a.annotation is not None]
        evaluated += [node.returns] if node.returns is not None else []
    return evaluated
