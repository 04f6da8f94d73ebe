"""Notebooks graded as the check cell ran them: helpers from untagged cells, errors located by cell."""

from __future__ import annotations

import ast
import math
import re

import nbformat
import pytest
from test_notebooks import kernel_name  # noqa: F401 - the fixture: python3 started with this Python

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
    helper = "def normalise(e, dim):\n    return e / e.sum(dim, keepdim=True)"
    nb.cells.insert(stub, v4.new_code_cell(helper, id="mine"))
    source = notebook_to_source(nbformat.writes(nb))
    import torch

    scores = torch.tensor([[0.0, 1.0], [2.0, 2.0]])
    assert torch.allclose(run(source)["softmax_weights"](scores), torch.softmax(scores, -1))


# --- errors located by cell ---------------------------------------------------------------------------------


HELPER_NOTEBOOK = notebook(
    "md:# mine",
    ("import torch\nprint('hello')\nx = torch.ones(2)", SOLVED),
    ("print('first line dropped')\ndef helper(v):\n    return v / undefined_thing", set()),
    ("def f(v):\n    return helper(v)", SOLVED),
)


def test_a_line_of_the_converted_module_is_said_as_its_cell_and_first_line():
    from grader.cell_places import converted_place, in_cells

    source = notebook_to_source(HELPER_NOTEBOOK)
    lines = source.splitlines()
    at = lines.index("    return v / undefined_thing") + 1
    assert converted_place(source, at) == (3, "print('first line dropped')", 3)
    assert converted_place(source, lines.index("def f(v):") + 1) == (4, "def f(v):", 1)
    assert converted_place(source, 1) is None  # the converter's header is in no cell
    text = f"raised NameError: name 'undefined_thing' is not defined (at submission/nina.py:{at})"
    said = in_cells(text, "nina.py", source)
    assert said.endswith("(at cell 3 (`print('first line dropped')`), line 3)")
    assert "nina.py" not in said
    assert in_cells(f"other.py:{at} and xnina.py:{at}", "nina.py", source) == f"other.py:{at} and xnina.py:{at}"


def test_a_notebook_hand_ins_messages_name_the_cell_in_every_language():
    from grader.instructor.intake_model import Submission
    from grader.instructor.notebook_places import in_notebook
    from grader.instructor.said import message_in, said

    source = notebook_to_source(HELPER_NOTEBOOK)
    at = source.splitlines().index("    return v / undefined_thing") + 1
    notebook_hand_in = Submission("nina", "nina.ipynb", "ipynb", {"nina.py": source}, "nina.py")
    raised = said("at", message="NameError: name 'undefined_thing' is not defined", where=f"submission/nina.py:{at}")
    message = in_notebook(notebook_hand_in, said("inconclusive", message=raised))
    assert "cell 3 (`print('first line dropped')`), line 3" in message and "nina.py" not in message
    assert "第 3 个单元格（`print('first line dropped')`）第 3 行" in message_in(message, "zh")
    loading = in_notebook(notebook_hand_in, said("does_not_import", error=f"nina.py:{at}: NameError: x"))
    assert loading == "the submission does not import: cell 3 (`print('first line dropped')`), line 3: NameError: x"
    as_py = Submission("nina", "nina.py", "py", {"nina.py": source}, "nina.py")
    assert in_notebook(as_py, raised) is raised  # a .py hand-in's own file is the learner's


def test_the_check_cell_names_the_kernel_cell_not_its_temporary_file(monkeypatch):
    kernel = pytest.importorskip("ipykernel.compiler")  # the kernel's compiler: a cell is a temporary .py file

    from grader import cell_places

    compiler = kernel.XCachingCompiler()
    code = "# my helper\ndef helper(v):\n    return v / undefined_thing\n"
    filename = compiler.cache(code, number=7)
    namespace: dict = {}
    exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - as the kernel runs a cell
    try:
        namespace["helper"](1)
    except NameError as exc:
        line = exc.__traceback__.tb_next.tb_lineno
    text = f"test_f[x]: raised NameError: name 'undefined_thing' is not defined (at {filename}:{line})"
    assert cell_places.in_kernel(text) == text  # outside a kernel: as it was
    monkeypatch.setattr(cell_places, "_ipython_compiler", lambda: compiler)
    said = cell_places.in_kernel(text)
    assert said.endswith("(at cell In[7] (`# my helper`), line 3)"), said
    assert cell_places.in_kernel("see exercises/scores.py:3") == "see exercises/scores.py:3"


def test_notebooks_merged_by_submit_keep_the_helpers_their_tagged_cells_call(tmp_path):
    from grader.submit import merge_notebooks

    (tmp_path / "a.ipynb").write_text(notebook(
        ("def helper(v):\n    return 2 * v", set()),
        ("def f(v):\n    return helper(v)", SOLVED),
        ("def f(v):\n    return 'an experiment'", set()),
        ("check(globals(), ['f'])", {CHECK_TAG}),
    ))  # fmt: skip
    (tmp_path / "b.ipynb").write_text(notebook(("def g(v):\n    return v\nprint(g(1))", set())))  # none tagged
    merged = merge_notebooks([tmp_path / "a.ipynb", tmp_path / "b.ipynb"]).decode()
    namespace = run(notebook_to_source(merged))
    assert (namespace["f"](1), namespace["g"](3)) == (2, 3)
    assert "check(" not in merged


# --- the check cell and the grade agree (a kernel, the sandbox) ----------------------------------------------

NORMALISE = (
    "# my helper, in a cell of my own\n"
    "def normalise(exp, dim):\n"
    "    total = exp.sum(dim=dim, keepdim=True)\n"
    "    safe = torch.where(total > 0, total, torch.ones_like(total))\n"
    "    return torch.where(total > 0, exp / safe, torch.zeros_like(exp))"
)
SOFTMAX = (
    "def softmax_weights(scores, dim=-1):\n"
    "    peak = scores.amax(dim=dim, keepdim=True)\n"
    "    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))\n"
    "    return normalise(torch.exp(scores - peak), dim)"
)
BROKEN = "# broken helper\ndef product(q, k):\n    return q @ k.transpose(-2, -1) * undefined_thing"
SCORES = "def dot_product_scores(queries, keys):\n    return product(queries, keys)"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.usefixtures("kernel_name")  # python3 is this Python
def test_the_check_cell_and_the_grade_agree_on_helpers_and_name_the_cell(tmp_path, template):
    from test_notebooks import SEED, check_output, execute, with_reference

    from grader.instructor.handin_reading import read_submission
    from grader.instructor.sandbox import Limits
    from grader.instructor.submission_grading import grade_submission
    from grader.instructor.suite import build_suite
    from grader.instructor.verdict import PASSED

    nb = with_reference(build_notebook("scores"))
    at = {name: next(i for i, c in enumerate(nb.cells) if f"def {name}(" in c.source)
          for name in ("softmax_weights", "dot_product_scores")}  # fmt: skip
    nb.cells[at["softmax_weights"]].source = SOFTMAX
    nb.cells[at["dot_product_scores"]].source = SCORES
    nb.cells.insert(at["softmax_weights"], v4.new_code_cell(NORMALISE, id="normalise"))
    nb.cells.insert(at["dot_product_scores"], v4.new_code_cell(BROKEN, id="broken"))
    path = tmp_path / "nina.ipynb"
    path.write_text(nbformat.writes(nb))
    broken_cell = at["dot_product_scores"] + 1  # numbered from 1, the helper's cell sits where the stub was

    execute([nb], "python3")
    text = check_output(nb)
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert " passing " in lines["softmax_weights"], text
    assert " failing " in lines["dot_product_scores"], text
    assert re.search(r"\(at cell In\[\d+\] \(`# broken helper`\), line 3\)", lines["dot_product_scores"]), text
    assert "ipykernel" not in text and ".py:" not in text

    submission = read_submission(path)
    results = grade_submission(submission, build_suite(SEED, ("cpu",)), template, Limits(call_seconds=5)).results
    softmax = [r for r in results if r.hook == "softmax_weights"]
    assert softmax and {r.status for r in softmax} == {PASSED}, [r.message for r in softmax if r.status != PASSED][:3]
    scores = [r.message for r in results if r.hook == "dot_product_scores"]
    assert all(f"(at cell {broken_cell} (`# broken helper`), line 3)" in m for m in scores), scores[:3]
    assert not any("nina.py" in m for r in results for m in (r.message, r.note))


def test_an_answer_written_in_a_new_cell_below_its_stub_is_graded():
    """The kit's stub left in its tagged cell, the answer in a cell of the learner's own below it: the kernel, run
    in order, has the answer (the check cell passes), so the grade does too.  Above the stub, the stub wins there
    and here; a tagged answer is never replaced."""
    stub = ('def f(x):\n    """Double x."""\n    raise NotImplementedError("write f")', SOLVED)
    answer = ("def f(x):\n    return 2 * x", set())
    assert run(notebook_to_source(notebook(stub, answer)))["f"](3) == 6
    with pytest.raises(NotImplementedError):
        run(notebook_to_source(notebook(answer, stub)))["f"](3)
    tagged = ("def f(x):\n    return 3 * x", SOLVED)
    assert run(notebook_to_source(notebook(tagged, answer)))["f"](3) == 9
