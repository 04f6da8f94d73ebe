"""Notebooks graded as the check cell ran them: helpers from untagged cells, errors located by cell."""

from __future__ import annotations

import ast
import math

import nbformat
import pytest

from grader.handin import CHECK_TAG, SOLUTION_TAG
from grader.notebooks import build_notebook, notebook_to_source

v4 = nbformat.v4
SOLVED = {SOLUTION_TAG}


def notebook(*cells: tuple[str, set[str]] | str) -> str:
    """A notebook of code cells (``(source, tags)``, or markdown for a ``md:`` string)."""
    nb = v4.new_notebook()
    for i, cell in enumerate(cells):
        if isinstance(cell, str):
            nb.cells.append(v4.new_markdown_cell(cell.removeprefix("md:"), id=f"c{i}"))
        else:
            source, tags = cell
            nb.cells.append(v4.new_code_cell(source, id=f"c{i}", metadata={"tags": sorted(tags)}))
    return nbformat.writes(nb)


def run(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "nb.py", "exec"), namespace)  # noqa: S102 - our own test notebooks
    return namespace


def kept(source: str) -> list[str]:
    return [ast.unparse(n) for n in ast.parse(source).body]


def test_a_helper_in_an_untagged_cell_is_graded_with_the_tagged_code_that_calls_it():
    text = notebook(
        "md:# scores",
        ("import math", SOLVED),
        ("EPS = 1e-9\nx = [1, 2]\nprint('trying', x)\n\ndef _total(v):\n    return sum(v) + EPS", set()),
        ("def normalise(v):\n    return [a / _total(v) for a in v]\n\n\nprint(normalise([1.0, 3.0]))", set()),
        ("def scale(v):\n    return [a * math.pi for a in normalise(v)]", SOLVED),
        ("def unused_experiment():\n    return 1 / 0\nimport json", set()),
        ("from grader.notebook_check import check\nrows = check(globals(), ['scale'])", {CHECK_TAG}),
    )
    source = notebook_to_source(text)
    assert run(source)["scale"]([1.0, 3.0]) == pytest.approx([0.25 * math.pi, 0.75 * math.pi])
    assert kept(source) == [
        "import math",
        "EPS = 1e-09",
        "def _total(v):\n    return sum(v) + EPS",
        "def normalise(v):\n    return [a / _total(v) for a in v]",
        "def scale(v):\n    return [a * math.pi for a in normalise(v)]",
    ]
    assert "# [not run] print('trying', x)" in source and "unused_experiment" not in "\n".join(kept(source))
    lines = source.splitlines()  # the untagged cells keep their places and their line numbers
    start = lines.index("# --- cell 4 ---")
    assert lines[start + 1] == "def normalise(v):"


def test_the_tagged_cells_still_say_what_is_graded():
    """An untagged cell that redefines a tagged answer (an experiment) is never taken; nor is a notebook with
    nothing missing changed by its untagged cells."""
    answer = ("def f(x):\n    return helper(x) + 1", SOLVED)
    text = notebook(
        ("def helper(x):\n    return 2 * x", set()),
        answer,
        ("def f(x):\n    return 'junk'\n\ndef helper(x):\n    return 10 * x", set()),
    )
    namespace = run(notebook_to_source(text))
    assert namespace["f"](1) == 11, "the last helper wins, as in the kernel run in order; f stays the tagged one"
    whole = notebook(("def f(x):\n    return x", SOLVED), ("def g(x):\n    return x", set()))
    assert kept(notebook_to_source(whole)) == ["def f(x):\n    return x"]


def test_an_untagged_definition_that_cannot_run_at_import_is_left_out():
    """What a def or class evaluates when it runs must be defined then: else the whole hand-in would not import."""
    text = notebook(
        ("import torch", SOLVED),
        ("data = torch.randn(3)\n\ndef helper(x, w=data):\n    return x", set()),
        ("class Box(Base):\n    pass\n\nclass Ok(torch.nn.Module):\n    SIZE = 3\n    def forward(self, x):\n"
         "        return x", set()),
        ("def f(x):\n    return helper(x), Box, Ok", SOLVED),
    )  # fmt: skip
    source = notebook_to_source(text)
    assert [k.split("\n")[0] for k in kept(source)] == ["import torch", "class Ok(torch.nn.Module):", "def f(x):"]
    namespace = run(source)
    with pytest.raises(NameError, match="helper"):
        namespace["f"](1)


def test_the_kit_notebook_with_a_helper_cell_converts_with_the_helper():
    nb = build_notebook("scores")
    stub = next(i for i, c in enumerate(nb.cells) if "def softmax_weights" in c.source)
    nb.cells[stub].source = "def softmax_weights(scores, dim=-1):\n    return normalise(scores.exp(), dim)"
    nb.cells.insert(stub, v4.new_code_cell("def normalise(e, dim):\n    return e / e.sum(dim, keepdim=True)", id="mine"))
    source = notebook_to_source(nbformat.writes(nb))
    import torch

    scores = torch.tensor([[0.0, 1.0], [2.0, 2.0]])
    assert torch.allclose(run(source)["softmax_weights"](scores), torch.softmax(scores, -1))

