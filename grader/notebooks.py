"""Notebooks: the exercises as Jupyter notebooks, and notebooks as submissions; neither runs the code it handles.

- :func:`build_notebook` / :func:`write_notebooks` turn each exercise module (``exercises/scores.py`` …, read with
  :mod:`ast`, never imported) into one nbformat-4 notebook: the module's explanation, then per stub its docstring
  and a code cell tagged ``attnkit-solution`` whose metadata names its hooks (``{"attnkit": {"hooks": [...]}}``),
  and last a check cell tagged ``attnkit-check`` that runs the group's public cases in the kernel
  (:func:`grader.notebook_check.check`).  The same sources give byte-identical ``.ipynb`` files.
- :func:`notebook_to_source` turns a learner's notebook into one Python module for grading: the cells tagged
  ``attnkit-solution`` (every code cell when none is, the check cells left out), IPython magics and shell lines
  removed, and at top level only imports, function and class definitions and simple constant assignments kept.
  Everything else (prints, plots, training loops, a ``time.sleep(3600)``) is commented out in place, so it never
  runs at grading time and a line number maps straight back to the notebook: each cell starts with a
  ``# --- cell N ---`` line (N counts every cell, markdown included, from 1) and its lines follow one for one.
  With tagged cells, what the other cells (check cells aside) define that the tagged code uses and does not define
  is kept too, in its cell's place (a helper in a cell of the learner's own: the check cell ran with it;
  :mod:`grader.notebook_helpers`); an error's place is said by cell (:mod:`grader.cell_places`).

This filter is about a learner's experiments, not security: a class body, a decorator or a default argument
still runs at import, which is why submissions are only ever imported in the grader's sandbox.

The conversion parses a learner's file in the grader's own (trusted) process, so it is bounded, like a zip is:
at most :data:`MAX_JSON_VALUES` JSON values (counted before parsing, so parsing costs at most about 150 MB),
:data:`MAX_NOTEBOOK_CELLS` cells, :data:`MAX_CELL_BYTES` of code per cell and :data:`MAX_CODE_BYTES` in all;
outputs, attachments and metadata other than a cell's tags are dropped before validation, so megabytes of outputs
cost one JSON parse; the work is linear in the notebook's size and checked against a deadline
(:data:`CONVERT_SECONDS`).  Over a cap or the deadline: a one-line :class:`NotebookError`
(``benchmarks/notebook_bombs.py`` measures the worst cases).  An nbformat-3 notebook (worksheets) is slimmed and
capped the same way, validated as v3, then upgraded by ``nbformat.convert``, a heading's level clamped first (the
upgrade writes ``"#" * level``), so it grades exactly as its v4 conversion would.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import json
import logging
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import nbformat

from grader.handin import (
    CHECK_TAG,
    METADATA_KEY,
    SOLUTION_TAG,
    cell_tags,
    graded_cells,
    notebook_metadata,
    undefined_names,
)
from grader.hook_table import CLASS_ALIASES, GROUPS, HELPERS_OF_MODULES, hooks_in, row
from grader.notebook_helpers import helpers, ready, span, stubs, target_names
from grader.registry import HOOK_NAMES

IMPORTS = "import math\n\nimport torch\nfrom torch import nn"
"""The first code cell of every notebook: what the stubs (and the reference) need."""

CHECK_LINE = "Run `pytest exercises/test_{group}.py` to check your work."
"""The last paragraph of every exercise module's docstring; in a notebook, the check cell takes its place."""

_CLASS_HOOK = {cls: hook for hook, cls in CLASS_ALIASES.items()}


MAX_JSON_VALUES = 1_000_000
"""A notebook submission's JSON may hold at most this many values (arrays, objects, strings, numbers …)."""
MAX_NOTEBOOK_CELLS = 1_000
"""A notebook submission may hold at most this many cells (of any kind)."""
MAX_CELL_BYTES = 256 << 10
"""A code cell may hold at most 256 KiB of source."""
MAX_CODE_BYTES = 512 << 10
"""All code cells together may hold at most 512 KiB (half the cap on a ``.py``: parsing is the cost)."""
CONVERT_SECONDS = 10.0
"""Converting one notebook stops (refused) after this long."""


class NotebookError(ValueError):
    """A notebook that cannot be graded; the message is one line naming the problem."""


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n / (1 << 10):.0f} KB" if n >= 1 << 10 else f"{n} bytes"


class _Deadline:
    """Raises :class:`NotebookError` once ``seconds`` have passed since it was made."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def check(self) -> None:
        if time.monotonic() > self.at:
            raise NotebookError(f"refused: converting the notebook took more than {self.seconds:g} s")


# --- building notebooks from the exercise sources ---------------------------------------------


def default_exercises_dir() -> Path:
    """The ``exercises`` folder of this kit, found without importing it."""
    here = Path(__file__).resolve().parents[1] / "exercises"
    if (here / "__init__.py").is_file():
        return here
    from grader.check import public_tests_dir

    return public_tests_dir()


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _stub_source(node: ast.FunctionDef | ast.ClassDef, lines: list[str]) -> str:
    """The stub's source: decorators, body and trailing comments; docstrings cut to their first line."""
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    end = node.end_lineno or node.lineno
    # comments indented under the definition, right after its last statement, belong to it
    while end < len(lines) and (
        not lines[end].strip() or (lines[end][:1].isspace() and lines[end].lstrip().startswith("#"))
    ):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    replace: dict[int, tuple[int, str]] = {}  # first line -> (last line, replacement)
    for owner in [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))]:  # node first
        doc = ast.get_docstring(owner, clean=True)
        first = owner.body[0] if owner.body else None
        if doc is None or not isinstance(first, ast.Expr) or first.end_lineno is None:
            continue
        summary = doc.strip().splitlines()[0].strip() if doc.strip() else ""
        if first.lineno == first.end_lineno and summary == doc.strip():
            continue  # already one line
        indent = lines[first.lineno - 1][: first.col_offset]
        replace[first.lineno] = (first.end_lineno, f'{indent}"""{summary}"""')
    out = lines[start - 1 : end]
    for at, (last, text) in sorted(replace.items(), reverse=True):  # bottom up: the earlier indices hold
        out[at - start : last - start + 1] = [text]
    return "\n".join(line.rstrip() for line in out)


def _signature(node: ast.FunctionDef) -> str:
    return f"{node.name}({ast.unparse(node.args)})"


def _markdown_doc(text: str) -> str:
    """A docstring as markdown: code-ish lines (indented) become a code block."""
    out: list[str] = []
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith("    ") and line.strip():
            block.append(line[4:])
            continue
        if block:
            if not line.strip():
                continue  # blank lines inside an indented block stay in the block
            out += ["```python", *block, "```", ""]
            block = []
        out.append(line)
    if block:
        out += ["```python", *block, "```"]
    return "\n".join(out).strip()


def _paragraphs(text: str) -> list[str]:
    """The blank-line separated paragraphs of a docstring, each without trailing spaces."""
    paragraphs: list[list[str]] = [[]]
    for line in _lines(text):
        if line.strip():
            paragraphs[-1].append(line.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return ["\n".join(p) for p in paragraphs if p]


def _without_package(code: str) -> str:
    """Code with its relative imports made absolute (``from .scores`` -> ``from exercises.scores``): a notebook has no
    package around it.  Code that does not parse is left as it is."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    lines = code.split("\n")
    for node in reversed(tree.body):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.end_lineno is not None:
            module = f"exercises.{node.module}" if node.module else "exercises"
            lines[node.lineno - 1 : node.end_lineno] = [ast.unparse(ast.ImportFrom(module, node.names, 0))]
    return "\n".join(lines)


def _intro(group: str, docstring: str) -> str:
    """The notebook's first cell, from the exercise module's docstring parsed into paragraphs.

    The first paragraph (the summary) is the title; an indented paragraph is code (its relative imports made
    absolute); the last paragraph, when it is :data:`CHECK_LINE`, is left out: the notebook's check cell does that.
    """
    paragraphs = _paragraphs(docstring)
    title = " ".join(line.strip() for line in paragraphs[0].splitlines()) if paragraphs else ""
    body = paragraphs[1:]
    if body and body[-1] == CHECK_LINE.format(group=group):
        body = body[:-1]
    parts = [f"# {title or group.capitalize()}"]
    for paragraph in body:
        if all(line.startswith("    ") for line in paragraph.splitlines()):
            code = "\n".join(line[4:] for line in paragraph.splitlines())
            parts.append(f"```python\n{_without_package(code)}\n```")
        else:
            parts.append(_markdown_doc(paragraph))
    return "\n\n".join(parts)


HOW_TO = (
    "## How to work in this notebook\n\n"
    "Replace each `raise NotImplementedError(...)` in the code cells below with your code, keeping the "
    "names and signatures. Run the cells in order, then run the last cell: it runs the public cases "
    "for this notebook's exercises and shows a table, *not started*, *failing* or *passing* per exercise, "
    "with a hint where your code looks like a known mistake.\n\n"
    "When you hand this notebook in, the code cells tagged `attnkit-solution` are graded, with what "
    "your own cells define that they use (a helper function in a cell you added counts, as it did "
    "when the last cell ran), and of all that only the imports, function and class definitions and "
    "simple constants (`D_K = 4`): prints, plots and experiments at the top level of a cell are left "
    "out, so they never run at grading time. Add cells of your own for experiments: a function there "
    "never replaces your answer in a tagged cell (only a stub that still raises `NotImplementedError`, "
    "when your cell comes after it). An error is shown with its cell: the cell's number "
    "(counting every cell from the top, text cells too) and its first line."
)

MODULES_NOTE = (
    "## Reusing your functions from the other notebooks\n\n"
    "The classes below are built from the functions of the other notebooks ("
    + ", ".join(f"`{hook}`" for _, hooks in HELPERS_OF_MODULES for hook in hooks)
    + "). A notebook is graded on its own, "
    "so paste your versions of the ones you use into the next cell (it is tagged "
    "`attnkit-solution`, so it is graded with the classes). While you work, you may instead import "
    "them from your `exercises` package, as the comments in the cell show; the grader does not "
    "have your package, though, so paste the functions in before you hand the notebook in."
)


HELPERS_CELL = (
    "# Paste your own functions from the other notebooks here, for example:\n#\n"
    "# def softmax_weights(scores, dim=-1):\n#     ...\n#\n"
    "# or, while you work, import them from your exercises package:\n#\n"
    + "\n".join(f"# from exercises.{module} import {', '.join(names)}" for module, names in HELPERS_OF_MODULES)
)

CHECK_CELL = (
    "# Runs the public cases of this notebook's exercises here, in the kernel, and shows a table.\n"
    "from grader.notebook_check import check\n\nrows = check(globals(), [{}])"
)


def build_notebook(group: str, exercises_dir: Path | None = None) -> nbformat.NotebookNode:
    """The notebook of one exercise group, built from ``exercises/<group>.py`` (parsed, never imported)."""
    hooks_in(group)  # an unknown group: a ValueError naming the groups
    folder = Path(exercises_dir) if exercises_dir is not None else default_exercises_dir()
    text = (folder / f"{group}.py").read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(folder / f"{group}.py"))
    lines = _lines(text)
    v4 = nbformat.v4
    cells: list[nbformat.NotebookNode] = []

    def markdown(text: str) -> None:
        cells.append(v4.new_markdown_cell(text, id=f"{group}-{len(cells):02d}"))

    def code(text: str, tag: str, hooks: list[str]) -> None:
        metadata = {"tags": [tag], METADATA_KEY: {"hooks": list(hooks)}}
        cells.append(v4.new_code_cell(text, id=f"{group}-{len(cells):02d}", metadata=metadata))

    markdown(_intro(group, ast.get_docstring(tree, clean=True) or ""))
    markdown(HOW_TO)
    code(IMPORTS, SOLUTION_TAG, [])
    if any(row(hook).output == "module" for hook in hooks_in(group)):  # the classes reuse the other groups
        markdown(MODULES_NOTE)
        code(HELPERS_CELL, SOLUTION_TAG, [])

    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    builders = {n.name: n for n in defs if isinstance(n, ast.FunctionDef) and n.name in CLASS_ALIASES}
    group_hooks: list[str] = []
    for node in defs:
        if node.name in builders and CLASS_ALIASES[node.name] in {d.name for d in defs}:
            continue  # shown with its class below
        name = _CLASS_HOOK.get(node.name, "") if isinstance(node, ast.ClassDef) else node.name
        hooks = [name] if name in HOOK_NAMES else []  # a class's hook (a builder's name) is one too
        builder = builders.get(hooks[0]) if hooks and isinstance(node, ast.ClassDef) else None
        source = _stub_source(node, lines) + (f"\n\n\n{_stub_source(builder, lines)}" if builder else "")
        heading = f"## `{node.name}`" if isinstance(node, ast.ClassDef) else f"## `{_signature(node)}`"
        parts = [heading + (f" and `{_signature(builder)}`" if builder else "")]
        doc = ast.get_docstring(node, clean=True)
        if doc:
            parts.append(_markdown_doc(doc))
        if builder:
            parts.append(
                f"The grader builds it with `{hooks[0]}`, the function at the end of the cell; "
                "fill in the class and leave the function as it is."
            )
        markdown("\n\n".join(parts))
        code(source, SOLUTION_TAG, hooks)
        group_hooks += hooks

    markdown(
        "## Check your work\n\n"
        "Run every cell above, then this one: it runs the public cases of "
        + ", ".join(f"`{h}`" for h in group_hooks)
        + " against the functions defined in this notebook. The kernel must be able to import the kit's "
        "`grader` (open the notebook from your kit's folder, or install the kit)."
    )
    code(CHECK_CELL.format(", ".join(map(repr, group_hooks))), CHECK_TAG, group_hooks)

    nb = v4.new_notebook(cells=cells)
    nb.metadata = nbformat.from_dict(notebook_metadata({"group": group, "hooks": group_hooks}))
    return nb


def write_notebooks(dest: Path, exercises_dir: Path | None = None) -> list[Path]:
    """Write ``<group>.ipynb`` for every exercise group into ``dest`` (created if needed); return the paths."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for group in GROUPS:
        nb = build_notebook(group, exercises_dir)
        nbformat.validate(nb)
        path = dest / f"{group}.ipynb"
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(nbformat.writes(nb, version=4).rstrip("\n") + "\n")  # sorted keys, one trailing newline
        written.append(path)
    return written


# --- notebooks as submissions -------------------------------------------------------------------

_MAGIC = re.compile(r"^(\s*)(?:[A-Za-z_][\w, ]*=\s*)?[%!]")
_HELP = re.compile(r"^(\s*)(?:\?\??[\w.]+|[\w.]+\?\??)\s*$")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _strip_magics(lines: list[str]) -> tuple[list[str], dict[int, str]]:
    """IPython magics, shell escapes and help lines replaced by ``pass`` at their indentation; the new lines and
    ``{line number: original line}`` for those replaced."""
    out: list[str] = []
    replaced: dict[int, str] = {}
    continued = False  # the previous line was a magic ending in a backslash
    for n, line in enumerate(lines, start=1):
        m = _MAGIC.match(line) or _HELP.match(line)
        if continued or m:
            out.append("" if continued or m is None else f"{m.group(1)}pass")
            replaced[n] = line
            continued = line.rstrip().endswith("\\")
        else:
            out.append(line)
    return out, replaced


def _chain_root(node: ast.expr) -> str | None:
    """``a`` for ``a``, ``a.b.c``; None for anything else."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _constant_value(node: ast.expr, defined: set[str]) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float, complex))
    root = _chain_root(node)  # torch.float32, an alias of a function defined above
    return root is not None and root in defined


KIT_PACKAGES = frozenset({"grader", "exercises", "solutions"})
"""The kit's own packages: a submission never sees them, so imports of them are left out."""


@functools.lru_cache(maxsize=4096)
def importable(module: str) -> bool:
    """Whether a top-level import of ``module`` can work where submissions run (found, never imported)."""
    top = module.split(".")[0]
    if not top or top in KIT_PACKAGES:
        return False
    if top in sys.builtin_module_names or top in getattr(sys, "stdlib_module_names", ()):
        return True
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


class _Scope:
    """What the kept code defines so far, the names whose import was left out, and its ``__future__`` imports."""

    def __init__(self) -> None:
        self.defined: set[str] = set(dir(builtins))
        self.missing: set[str] = set()
        self.futures: list[str] = []  # moved to the top of the converted file


def _keep(node: ast.stmt, scope: _Scope) -> ast.stmt | None:
    """The statement to keep for a top-level ``node`` (itself, or an import trimmed of missing modules), or None."""
    if isinstance(node, ast.Import):
        names = [a for a in node.names if importable(a.name)]
        scope.missing.update((a.asname or a.name).split(".")[0] for a in node.names if a not in names)
        scope.defined.update((a.asname or a.name).split(".")[0] for a in names)
        if len(names) == len(node.names):
            return node
        return ast.Import(names=names) if names else None
    if isinstance(node, ast.ImportFrom):
        bound = [a.asname or a.name for a in node.names if a.name != "*"]
        if node.level or not importable(node.module or ""):
            scope.missing.update(bound)
            return None
        scope.defined.update(bound)
        return node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scope.defined.add(node.name)
        return node
    if isinstance(node, ast.Assign):
        targets = [target_names(target) for target in node.targets]
        if None in targets or not _constant_value(node.value, scope.defined):
            return None
        scope.defined.update(name for names in targets for name in names or ())
        return node
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.simple:
        if node.value is None or not _constant_value(node.value, scope.defined):
            return None
        if not isinstance(node.annotation, ast.Constant) and _chain_root(node.annotation) not in scope.defined:
            return None
        scope.defined.add(node.target.id)
        return node
    return None


def _comment(line: str, why: str = "not run") -> str:
    return f"# [{why}] {line}".rstrip() if line.strip() else ""


def _convert_cell(
    lines: list[str],
    tree: ast.Module,
    replaced: dict[int, str],
    scope: _Scope,
    deadline: _Deadline,
    only: frozenset[int] | None = None,
) -> tuple[list[str], int]:
    """The cell's lines, one for one, with dropped statements commented out; and how many were kept.

    ``only`` (an untagged cell of a tagged notebook): the first lines of the statements that may be kept, each only
    where what it evaluates when defined is defined by then (:func:`~grader.notebook_helpers.ready`); others dropped.
    """
    original, out = list(lines), list(lines)
    for n, line in replaced.items():  # magics inside kept code stay visible as a comment
        original[n - 1] = line
        out[n - 1] = f"{lines[n - 1]}  # [not run] {line.strip()}" if lines[n - 1].strip() else _comment(line)
    # statements that share lines (a; b on one line) are handled together; each cluster is
    # [first line, last line, statements], extended in place so that many statements stay linear
    clusters: list[list[Any]] = []
    for node in tree.body:
        start, end = span(node)
        if clusters and start <= clusters[-1][1]:
            clusters[-1][1] = max(clusters[-1][1], end)
            clusters[-1][2].append(node)
        else:
            clusters.append([start, end, [node]])
    kept_count = 0
    for i, (start, end, nodes) in enumerate(clusters):
        if i % 256 == 0:
            deadline.check()
        kept: list[ast.stmt] = []
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                scope.futures.extend(a.name for a in node.names)
                continue
            if only is not None and (span(node)[0] not in only or not ready(node, scope.defined, scope.futures)):
                continue
            chosen = _keep(node, scope)
            if chosen is not None:
                kept.append(chosen)
        kept_count += len(kept)
        if len(kept) == len(nodes) and all(k is n for k, n in zip(kept, nodes, strict=True)):
            for node in kept:  # a decorator whose import was left out (@hookimpl, say) would fail: drop it
                for deco in getattr(node, "decorator_list", []):
                    if _chain_root(deco.func if isinstance(deco, ast.Call) else deco) in scope.missing:
                        for i in range(deco.lineno, (deco.end_lineno or deco.lineno) + 1):
                            out[i - 1] = _comment(original[i - 1], "left out")
            continue  # verbatim
        for i in range(start, end + 1):
            out[i - 1] = _comment(original[i - 1])
        if kept:
            first = "; ".join(ast.unparse(k) for k in kept)
            out[start - 1] = f"{first}  # [partly run] {original[start - 1].strip()}"
    return out, kept_count


def _source_bytes(source: Any) -> int:
    if isinstance(source, list):
        return sum(len(part.encode("utf-8", "surrogatepass")) for part in source if isinstance(part, str))
    return len(source.encode("utf-8", "surrogatepass")) if isinstance(source, str) else 0


_COUNT_CHUNK = 1 << 20


def _json_values(text: str) -> int:
    """About how many values a JSON text holds: commas and opening brackets outside strings, plus one.

    Linear in time, with little memory and no regular expression (a ``"…"`` pattern is quadratic on an
    unterminated ``"\\"\\"…`` and keeps a backtracking record per escape): escaped backslashes and quotes
    are removed first (left to right, as JSON pairs them), then the text is split at its quotes a
    megabyte at a time, keeping track of whether a piece lies inside a string.
    """
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    outside, count = True, 0
    for start in range(0, len(unescaped), _COUNT_CHUNK):
        pieces = unescaped[start : start + _COUNT_CHUNK].split('"')
        kept = "".join(pieces[0 if outside else 1 :: 2])
        count += kept.count(",") + kept.count("[") + kept.count("{")
        if len(pieces) % 2 == 0:  # an odd number of quotes: the next chunk starts on the other side
            outside = not outside
    return count + 1


def _cells_of(data: dict[str, Any], version: int) -> list[Any] | None:
    """The notebook's cells: a v4 notebook's ``cells``, a v3 notebook's worksheets' cells in order (None: invalid)."""
    if version == 4:
        cells = data.get("cells")
        return cells if isinstance(cells, list) else None
    worksheets = data.get("worksheets")
    if not isinstance(worksheets, list):
        return None
    cells = []
    for worksheet in worksheets:
        if isinstance(worksheet, dict):
            if isinstance(worksheet.get("metadata"), dict):
                worksheet["metadata"] = {}
            if isinstance(worksheet.get("cells"), list):
                cells += worksheet["cells"]
    return cells


def _slim(data: dict[str, Any], version: int = 4) -> None:
    """Check the caps; drop outputs, attachments and all metadata but a cell's tags, in place, before validation.

    A v3 notebook (``worksheets``, a code cell's source in ``input``) is slimmed the same way, and a heading
    cell's ``level`` is kept within 1..6: nbformat's upgrade writes ``"#" * level``.
    """
    if isinstance(data.get("metadata"), dict):
        data["metadata"] = {}  # the kernel, the language: nothing the conversion reads
    cells = _cells_of(data, version)
    if cells is None:
        return  # validation says what is wrong
    if len(cells) > MAX_NOTEBOOK_CELLS:
        raise NotebookError(f"refused: {len(cells)} cells is over the {MAX_NOTEBOOK_CELLS} cell limit")
    code = 0
    source_key = "source" if version == 4 else "input"
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            continue
        if "outputs" in cell:
            cell["outputs"] = []  # never read, never validated: the grader runs the code itself
        cell.pop("attachments", None)
        metadata = cell.get("metadata")
        if isinstance(metadata, dict):
            cell["metadata"] = {k: v for k, v in metadata.items() if k in ("tags", METADATA_KEY)}
        level = cell.get("level")
        if cell.get("cell_type") == "heading" and isinstance(level, int) and not isinstance(level, bool):
            cell["level"] = min(max(level, 1), 6)
        if cell.get("cell_type") != "code":
            continue
        size = _source_bytes(cell.get(source_key))
        if size > MAX_CELL_BYTES:
            limit = _size(MAX_CELL_BYTES)
            raise NotebookError(f"refused: cell {number} holds {_size(size)} of code, over the {limit} limit")
        code += size
        if code > MAX_CODE_BYTES:
            raise NotebookError(f"refused: the code cells hold more than {_size(MAX_CODE_BYTES)}, over the limit")


def _parse_notebook(text: str, deadline: _Deadline) -> nbformat.NotebookNode:
    values = _json_values(text)
    if values > MAX_JSON_VALUES:
        raise NotebookError(f"refused: about {values} JSON values is over the {MAX_JSON_VALUES} value limit")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"not a notebook: invalid JSON at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:
        raise NotebookError(f"not a notebook: invalid JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise NotebookError("not a notebook: the JSON is not an object")
    if "nbformat" not in data:
        raise NotebookError("not a notebook: no nbformat version")
    version = data["nbformat"]
    if version not in (3, 4) or not isinstance(version, int) or isinstance(version, bool):
        shown = version if isinstance(version, int) and not isinstance(version, bool) else repr(version)
        raise NotebookError(f"not a notebook: nbformat version {shown} is not supported (3 and 4 are)")
    _slim(data, version)
    deadline.check()
    logger = logging.getLogger("traitlets")  # nbformat's: its upgrade logs what does not validate, as validate says
    disabled, logger.disabled = logger.disabled, True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if version == 3:  # validated as v3, then upgraded to v4 by nbformat's own converter
                nbformat.validate(data, version=3)
                deadline.check()
                data = nbformat.v3.to_notebook_json(data)  # multi-line sources joined, as nbformat.reads does
            nb = nbformat.convert(data, 4) if version == 3 else nbformat.from_dict(data)
            deadline.check()
            nbformat.validate(nb)
    except NotebookError:  # the deadline
        raise
    except Exception as exc:  # a ValidationError; nbformat's own readers may raise anything on odd input
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise NotebookError(f"not a notebook: {first}") from None
    finally:
        logger.disabled = disabled
    return nb


def notebook_to_source(text: str) -> str:
    """The Python module a notebook submission is graded as (see the module docstring).

    Raises :class:`NotebookError` (a ``ValueError``) with a one-line message: ``not a notebook: invalid JSON at
    line 3``, ``not a notebook: nbformat version 2 is not supported (3 and 4 are)``, ``not a notebook: <validation
    error>``, ``cell N: SyntaxError: <msg> (line L)`` for a tagged cell that does not parse, ``no Python code found
    in the notebook``, or ``refused: …`` for a notebook over a cap (cells, code per cell, code in all) or the deadline.
    """
    deadline = _Deadline(CONVERT_SECONDS)
    try:
        return _to_source(_parse_notebook(text, deadline), deadline)
    except (RecursionError, MemoryError) as exc:
        why = type(exc).__name__
        raise NotebookError(f"refused: the notebook's code is too deeply nested to convert ({why})") from None


def _to_source(nb: nbformat.NotebookNode, deadline: _Deadline) -> str:
    """The module of the graded cells; in a notebook with tagged cells, with what its untagged cells define that
    the tagged code uses and does not define itself, or leaves a stub (:mod:`grader.notebook_helpers`): the check
    cell ran with them too."""
    deadline.check()
    chosen = graded_cells(nb.cells)
    strict = any(SOLUTION_TAG in cell_tags(c) for _, c in chosen)  # tagged cells: a syntax error is an error
    parsed: dict[int, Any] = {}  # cell number -> _parsed_cell's answer (or its error): each cell parsed once
    source, scope = _assemble(chosen, {}, strict, deadline, parsed)
    if not strict:
        return source
    try:
        left = stubs([v[1] for n, _ in chosen if isinstance(v := parsed.get(n), tuple) and v[1] is not None])
        wanted = sorted({*undefined_names(source), *left})
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source
    if not wanted:
        return source
    pulled = helpers(_untagged_trees(nb.cells, deadline, parsed), wanted, scope.defined - left, deadline.check)
    if not pulled:
        return source
    cells = sorted(chosen + [(n, c) for n, c in enumerate(nb.cells, start=1) if n in pulled], key=lambda nc: nc[0])
    return _assemble(cells, pulled, strict, deadline, parsed)[0]


def _parsed(number: int, cell: Any, parsed: dict[int, Any]) -> tuple[list[str], ast.Module | None, dict[int, str]]:
    """A code cell's lines (magics replaced where it does not parse without), its tree (None for a cell magic) and the
    lines replaced.  Parsed once a cell: the answer, or the SyntaxError, ValueError, RecursionError or MemoryError it
    raised, is kept in ``parsed``."""
    if number not in parsed:
        source = cell.get("source", "")
        lines = _lines("".join(source) if isinstance(source, list) else source)
        try:
            if next((ln for ln in lines if ln.strip()), "").lstrip().startswith("%%"):
                parsed[number] = lines, None, {}
            else:
                try:
                    parsed[number] = lines, ast.parse("\n".join(lines), filename=f"<cell {number}>"), {}
                except SyntaxError:
                    stripped, replaced = _strip_magics(lines)
                    parsed[number] = stripped, ast.parse("\n".join(stripped), filename=f"<cell {number}>"), replaced
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            parsed[number] = exc
    if isinstance(parsed[number], BaseException):
        raise parsed[number]
    return parsed[number]  # type: ignore[no-any-return]


def _untagged_trees(cells: list[Any], deadline: _Deadline, parsed: dict[int, Any]) -> list[tuple[int, ast.Module]]:
    """``(number, tree)`` of each code cell tagged neither solution nor check that parses (magics replaced)."""
    trees = []
    for number, cell in enumerate(cells, start=1):
        tags = cell_tags(cell)
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or {SOLUTION_TAG, CHECK_TAG} & set(tags):
            continue
        deadline.check()
        try:
            tree = _parsed(number, cell, parsed)[1]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if tree is not None:
            trees.append((number, tree))
    return trees


def _assemble(
    chosen: list[tuple[int, Any]],
    pulled: dict[int, frozenset[int]],
    strict: bool,
    deadline: _Deadline,
    parsed: dict[int, Any],
) -> tuple[str, _Scope]:
    """The converted module of the ``chosen`` cells, and what it defines; a cell in ``pulled`` (untagged, taken
    for the helpers the tagged code uses) keeps only the statements starting on the lines it names."""
    scope = _Scope()
    body: list[str] = []
    kept = 0
    for number, cell in chosen:
        deadline.check()
        must_parse = strict and number not in pulled
        try:
            lines, tree, replaced = _parsed(number, cell, parsed)
        except SyntaxError as exc:
            if must_parse:
                raise NotebookError(f"cell {number}: SyntaxError: {exc.msg} (line {exc.lineno})") from None
            body += [f"# --- cell {number}: not used, SyntaxError: {exc.msg} (line {exc.lineno}) ---", ""]
            continue
        except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
            if must_parse:
                raise NotebookError(f"cell {number}: cannot parse it ({type(exc).__name__})") from None
            continue
        if tree is None:
            body += [f"# --- cell {number}: a cell magic, not run ---", ""]
            continue
        cell_lines, count = _convert_cell(lines, tree, replaced, scope, deadline, pulled.get(number))
        kept += count
        body += [f"# --- cell {number} ---", *cell_lines, ""]
    if not kept:
        raise NotebookError("no Python code found in the notebook")
    header = ["# Converted from a notebook by attnkit: each cell starts at its '# --- cell N ---' line;"]
    header.append("# top-level statements other than imports, definitions and constants are commented out.")
    if scope.futures:
        header.append(f"from __future__ import {', '.join(dict.fromkeys(scope.futures))}")
    result = "\n".join(header + [""] + body).rstrip("\n") + "\n"
    deadline.check()
    try:
        ast.parse(result)
    except SyntaxError as exc:  # cells that parse alone but not together
        raise NotebookError(f"the notebook's code does not parse: SyntaxError: {exc.msg} (line {exc.lineno})") from None
    return result, scope
