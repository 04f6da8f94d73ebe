"""Notebooks: the generated exercise notebooks, run in a real kernel, and notebooks as submissions."""

from __future__ import annotations

import ast
import copy
import json
import math
import os
import re
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from grader import notebooks
from grader.handin import CHECK_TAG, SOLUTION_TAG
from grader.hook_table import CLASS_ALIASES
from grader.instructor.handin_reading import read_submission
from grader.instructor.sandbox import Limits
from grader.instructor.submission_grading import grade_submission
from grader.instructor.suite import build_suite
from grader.instructor.verdict import FAILED, PASSED
from grader.notebooks import (
    GROUPS,
    NotebookError,
    build_notebook,
    notebook_to_source,
    write_notebooks,
)
from grader.registry import HOOK_NAMES

KIT = Path(__file__).resolve().parents[1]
ALICE = KIT / "examples" / "submissions" / "alice.py"
REFERENCE = KIT / "solutions" / "reference.py"
SEED = 20261130
v4 = nbformat.v4


def hooks_of(cell) -> list[str]:
    return list(cell.metadata.get("attnkit", {}).get("hooks", []))


def tagged(nb, tag: str) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


# --- building -----------------------------------------------------------------------------------


def test_five_valid_notebooks_are_written(tmp_path):
    paths = write_notebooks(tmp_path / "nb")
    assert [p.name for p in paths] == [f"{g}.ipynb" for g in GROUPS]
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.nbformat == 4
        assert nb.metadata.kernelspec.name == "python3"
        assert nb.metadata.language_info.name == "python"
        assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
        assert nb.cells[-1].metadata["tags"] == [CHECK_TAG]
        first_code = next(c for c in nb.cells if c.cell_type == "code")
        assert SOLUTION_TAG in first_code.metadata["tags"] and hooks_of(first_code) == []
        assert {"import math", "import torch", "from torch import nn"} <= set(first_code.source.splitlines())
        assert all(c.get("outputs", []) == [] for c in nb.cells)


def test_notebooks_are_deterministic(tmp_path):
    first = [p.read_bytes() for p in write_notebooks(tmp_path / "a")]
    second = [p.read_bytes() for p in write_notebooks(tmp_path / "b")]
    assert first == second
    assert all(b.endswith(b"\n") for b in first)
    ids = [c["id"] for b in first for c in json.loads(b)["cells"]]
    assert len(ids) == len(set(ids))
    assert "scores-00" in ids


def test_every_hook_has_exactly_one_tagged_stub_cell():
    seen: list[str] = []
    for group in GROUPS:
        nb = build_notebook(group)
        solution_cells = tagged(nb, SOLUTION_TAG)
        (check_cell,) = tagged(nb, CHECK_TAG)
        group_hooks = [h for c in solution_cells for h in hooks_of(c)]
        assert hooks_of(check_cell) == group_hooks
        assert f"check(globals(), {group_hooks!r})" in check_cell.source
        assert "from grader.notebook_check import check" in check_cell.source
        for cell in solution_cells:
            for hook in hooks_of(cell):
                names = {n.name for n in ast.parse(cell.source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
                assert hook in names, (group, hook)
                if hook in CLASS_ALIASES:
                    assert CLASS_ALIASES[hook] in names
                assert "raise NotImplementedError(" in cell.source
        seen += group_hooks
    assert sorted(seen) == sorted(HOOK_NAMES)
    assert len(seen) == len(set(seen))


def test_stub_cells_keep_the_shape_comments_and_explain_in_markdown():
    nb = build_notebook("scores")
    (cell,) = [c for c in tagged(nb, SOLUTION_TAG) if hooks_of(c) == ["dot_product_scores"]]
    assert "# queries: (..., Tq, d)   keys: (..., Tk, d)   ->   scores: (..., Tq, Tk)" in cell.source
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Mind the\nleading (batch) dims" in text  # the stub's docstring
    assert "Three steps answer it" in text  # the chapter's reasoning (module docstring)
    modules = "\n".join(c.source for c in build_notebook("modules").cells if c.cell_type == "markdown")
    assert "from .scores" not in modules
    assert "paste" in modules and "exercises" in modules


def test_notebooks_are_built_from_sources_not_imports(tmp_path):
    folder = tmp_path / "exercises"
    folder.mkdir()
    for group in GROUPS:
        text = (KIT / "exercises" / f"{group}.py").read_text(encoding="utf-8")
        (folder / f"{group}.py").write_text("raise SystemExit('imported!')\n" + text, encoding="utf-8")
    nb = build_notebook("heads", folder)
    assert [hooks_of(c) for c in tagged(nb, SOLUTION_TAG)] == [[], ["split_heads"], ["merge_heads"]]
    with pytest.raises(ValueError, match="unknown exercise group"):
        build_notebook("nope", folder)


def test_the_intro_is_the_module_docstring_by_paragraphs(tmp_path):
    folder = tmp_path / "exercises"
    folder.mkdir()
    for group in GROUPS:
        (folder / f"{group}.py").write_bytes((KIT / "exercises" / f"{group}.py").read_bytes())
    doc = (
        "Heads: a title\nthat wraps.\n\nProse that says from .scores import x stays prose.\n\n"
        "    from .masking import causal_mask  # kept\n    from torch import nn\n\n"
        "Run `pytest exercises/test_heads.py` to check your work.\n"
    )
    stub = "def split_heads(x, num_heads):\n    raise NotImplementedError\n"
    (folder / "heads.py").write_text(f'"""{doc}"""\n\n\n{stub}')
    intro = build_notebook("heads", folder).cells[0].source
    assert intro == (
        "# Heads: a title that wraps.\n\nProse that says from .scores import x stays prose.\n\n"
        "```python\nfrom exercises.masking import causal_mask\nfrom torch import nn\n```"
    )
    # the check line is left out only as the last paragraph, and only its own group's
    other = "Run `pytest exercises/test_scores.py` to check your work."
    (folder / "heads.py").write_text(f'"""Heads.\n\n{other}\n"""\n')
    assert build_notebook("heads", folder).cells[0].source == f"# Heads.\n\n{other}"


# --- executing in a real kernel -------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """``python3``, started with this very Python (a kernelspec of our own when the installed one is not)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    with pytest.MonkeyPatch.context() as mp:
        try:
            argv = KernelSpecManager().get_kernel_spec("python3").argv
        except NoSuchKernel:
            argv = []
        plain = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
        same = bool(argv) and (argv[0] in plain or os.path.realpath(argv[0]) == os.path.realpath(sys.executable))
        if not same:
            root = tmp_path_factory.mktemp("jupyter")
            spec = root / "kernels" / "python3"
            spec.mkdir(parents=True)
            kernel = {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (attnkit tests)",
                "language": "python",
            }
            (spec / "kernel.json").write_text(json.dumps(kernel))
            mp.setenv(
                "JUPYTER_PATH", os.pathsep.join([str(root), os.environ.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
            )
            assert "python3" in KernelSpecManager().find_kernel_specs()
        yield "python3"


def execute(notebooks: list, kernel: str, side_by_side: int = 4, seconds: float = 120) -> None:
    """Run the notebooks, ``side_by_side`` at a time, each in its own kernel whose working folder is the kit.

    A notebook that has not run within ``seconds`` is run once more in a fresh kernel: on a loaded machine a
    kernel's start once waited for ever on its first message (CI: the test's 300 s ran out inside
    jupyter_client's ``kernel_info``, where the same notebooks run in 34 s alone).
    """
    import asyncio

    from nbclient import NotebookClient

    gate = asyncio.Semaphore(side_by_side)

    async def run(nb) -> None:
        async with gate:
            for attempt in (1, 2):
                client = NotebookClient(
                    nb, timeout=seconds, startup_timeout=seconds / 2, kernel_name=kernel,
                    resources={"metadata": {"path": str(KIT)}},
                )  # fmt: skip
                try:
                    await asyncio.wait_for(client.async_execute(), seconds)
                    return
                except (asyncio.TimeoutError, RuntimeError):  # RuntimeError: no answer to the first message
                    if attempt == 2:
                        raise

    async def run_all() -> None:
        await asyncio.gather(*(run(nb) for nb in notebooks))

    asyncio.run(run_all())


def output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append("\n".join(out.get("traceback", [])))
        else:
            parts.append(out.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def reference_definitions() -> dict[str, str]:
    """Each top-level function and class of the reference, as a learner would paste it (no decorator); a hook of a
    group with its own reference, with its imports and the helpers it uses (``learner_code.group_reference_source``)."""
    from learner_code import group_reference_source

    from grader.packs import groups

    text = REFERENCE.read_text(encoding="utf-8")
    lines = text.splitlines()
    definitions = {
        node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.parse(text).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    for group in groups():
        module = str(group.part("REFERENCE"))
        if module != "solutions.reference":
            definitions.update({r.hook: group_reference_source(module, [r.hook]) for r in group.rows})
    return definitions


def with_reference(nb):
    """The notebook with each tagged stub replaced by the reference's code for its hooks."""
    ref = reference_definitions()
    nb = copy.deepcopy(nb)
    cells = tagged(nb, SOLUTION_TAG)
    for cell in cells:
        parts = []
        for hook in hooks_of(cell):
            if hook in CLASS_ALIASES:
                parts.append(ref[CLASS_ALIASES[hook]])
            parts.append(ref[hook])
        if parts:
            cell.source = "\n\n\n".join(parts)
    if nb.metadata["attnkit"]["group"] == "modules":  # the classes build on the other groups' functions
        helpers = cells[1]
        assert hooks_of(helpers) == [] and "Paste your own functions" in helpers.source
        helpers.source = "\n\n\n".join(ref[h] for h in HOOK_NAMES if h not in CLASS_ALIASES)
    return nb


def check_output(nb) -> str:
    (cell,) = tagged(nb, CHECK_TAG)
    text = output_text(cell)
    assert "Traceback" not in text and "Error" not in text.split("\n")[0], text
    return text


@pytest.mark.slow
@pytest.mark.timeout(600)  # a notebook whose kernel did not start is run once more (execute)
def test_notebooks_run_in_a_kernel_with_stubs_and_with_answers(kernel_name):
    stubs = [build_notebook(g) for g in GROUPS]
    answers = [with_reference(nb) for nb in stubs]
    execute(stubs + answers, kernel_name)
    for nb in stubs:
        text = check_output(nb)
        hooks = nb.metadata["attnkit"]["hooks"]
        for hook in hooks:
            assert re.search(rf"^{hook}\s+not started\s+0/\d+", text, re.M), text
        assert f"0 of {len(hooks)} exercise{'s' * (len(hooks) != 1)} passing." in text
        (cell,) = tagged(nb, CHECK_TAG)
        html = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
        assert html.count("not started") == len(hooks), "the HTML table shows in Jupyter"
    for nb in answers:
        text = check_output(nb)
        hooks = nb.metadata["attnkit"]["hooks"]
        for hook in hooks:
            assert re.search(rf"^{hook}\s+passing\s+(\d+)/\1\b", text, re.M), text
        assert f"{len(hooks)} of {len(hooks)} exercise{'s' * (len(hooks) != 1)} passing." in text


def test_check_outside_jupyter_prints_plain_text(capsys):
    from grader.notebook_check import check
    from solutions import reference

    rows = check(dict(vars(reference)), ["causal_mask", "split_heads"])
    assert [(r.exercise, r.status) for r in rows] == [("causal_mask", "passing"), ("split_heads", "passing")]
    out = capsys.readouterr().out
    assert re.search(r"^causal_mask\s+passing\s+(\d+)/\1", out, re.M)
    assert out.rstrip().endswith("2 of 2 exercises passing.")


@pytest.mark.slow
def test_check_shows_not_started_failing_and_a_hint(capsys):
    import torch

    from grader.notebook_check import check
    from solutions import reference

    def softmax_weights(scores, dim=-1):  # the classic: dim=1 on batched scores
        e = torch.exp(scores - scores.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)

    namespace = dict(vars(reference), softmax_weights=softmax_weights)
    del namespace["split_heads"]
    rows = check(namespace, ["softmax_weights", "split_heads", "merge_heads"])
    assert [r.status for r in rows] == ["failing", "not started", "passing"]
    assert rows[0].first_failure and "\n" not in rows[0].first_failure
    out = capsys.readouterr().out
    assert "1 of 3 exercises passing." in out
    try:
        import solutions.mistakes  # noqa: F401
    except ImportError:
        return
    assert rows[0].mistake and rows[0].hint
    assert f"looks like {rows[0].mistake}" in out


# --- notebook submissions: conversion ---------------------------------------------------------------


def notebook(*cells, tags: dict[int, list[str]] | None = None, minor: int = 5) -> str:
    nb = v4.new_notebook()
    nb.nbformat_minor = minor
    for i, src in enumerate(cells):
        cell = v4.new_markdown_cell(src[3:]) if src.startswith("md:") else v4.new_code_cell(src)
        cell.id = f"c{i}"
        if tags and i in tags:
            cell.metadata["tags"] = tags[i]
        nb.cells.append(cell)
    return nbformat.writes(nb)


def kept_code(source: str) -> list[str]:
    """The top-level statements of a converted notebook, unparsed."""
    return [ast.unparse(n) for n in ast.parse(source).body]


def test_only_imports_definitions_and_constants_are_kept():
    text = notebook(
        "md:# my work",
        "import math\nimport torch\nfrom torch import nn\nD = 4\nNEG = -1.5\nDTYPE = torch.float32\nNAMES = ('a', 'b')",
        "import time\ntime.sleep(3600)",
        "%matplotlib inline\n!pip install torch\nx = torch.randn(3)\nprint(x)\nx",
        "def f(x):\n    return x * D\n\nclass M(nn.Module):\n    pass\n\nasync def g():\n    return 1\n\nalias = f",
        "for step in range(10**9):\n    print(step)\nwhile True:\n    pass\nwith open('x') as fh:\n    pass\n"
        "if __name__ == '__main__':\n    f(1)\ntry:\n    1 / 0\nexcept Exception:\n    pass",
        "%%time\ndef h():\n    return 2",
        "y = f(3)\nz = undefined_name\ndel D",
    )
    source = notebook_to_source(text)
    assert kept_code(source) == [
        "import math",
        "import torch",
        "from torch import nn",
        "D = 4",
        "NEG = -1.5",
        "DTYPE = torch.float32",
        "NAMES = ('a', 'b')",
        "import time",
        "def f(x):\n    return x * D",
        "class M(nn.Module):\n    pass",
        "async def g():\n    return 1",
        "alias = f",
    ]
    assert "# [not run] time.sleep(3600)" in source
    assert "# [not run] %matplotlib inline" in source
    namespace: dict = {}
    exec(compile(source, "nb.py", "exec"), namespace)  # noqa: S102 - our own test notebook
    assert namespace["f"](2) == 8


def test_line_numbers_map_back_to_the_cells():
    text = notebook("md:intro", "import torch\nprint(1)\n\ndef f(x):\n    return x\n", "def g(x):\n    return 1 / 0")
    source = notebook_to_source(text)
    lines = source.splitlines()
    start = lines.index("# --- cell 3 ---")
    assert lines[start + 2] == "    return 1 / 0"  # line 2 of cell 3
    start = lines.index("# --- cell 2 ---")
    assert lines[start + 4] == "def f(x):"


def test_tagged_cells_only_and_their_syntax_errors():
    junk = "this is not python(("
    text = notebook(junk, "def f(x):\n    return x", "print('experiment')", tags={1: [SOLUTION_TAG]})
    source = notebook_to_source(text)
    assert kept_code(source) == ["def f(x):\n    return x"]
    assert junk not in source and "experiment" not in source
    broken = notebook("def f(x):\n    return x", "def g(:\n    pass", tags={0: [SOLUTION_TAG], 1: [SOLUTION_TAG]})
    with pytest.raises(NotebookError, match=r"^cell 2: SyntaxError: .+ \(line 1\)$"):
        notebook_to_source(broken)


def test_untagged_cells_that_do_not_parse_are_skipped():
    source = notebook_to_source(notebook("def f(x):\n    return x", "oops((", "x = ="))
    assert kept_code(source) == ["def f(x):\n    return x"]
    with pytest.raises(NotebookError, match="^no Python code found in the notebook$"):
        notebook_to_source(notebook("oops((", "print(1)", "md:text"))
    with pytest.raises(NotebookError, match="^no Python code found in the notebook$"):
        notebook_to_source(notebook())


def test_the_check_cell_and_the_kits_own_packages_are_left_out():
    generated = nbformat.writes(build_notebook("heads"))
    source = notebook_to_source(generated)
    assert "check(" not in "\n".join(kept_code(source))
    untagged = notebook(
        "from grader import hookimpl\nfrom exercises.scores import softmax_weights\nimport torch",
        "@hookimpl\ndef split_heads(x, num_heads):\n    return x",
        "from grader.notebook_check import check\ncheck(globals(), ['split_heads'])",
    )
    source = notebook_to_source(untagged)
    assert kept_code(source) == ["import torch", "def split_heads(x, num_heads):\n    return x"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n "cells": [],\n oops\n}', "not a notebook: invalid JSON at line 3"),
        ("", "not a notebook: invalid JSON at line 1"),
        ("[1, 2]", "not a notebook: the JSON is not an object"),
        ('{"cells": []}', "not a notebook: no nbformat version"),
        (
            '{"nbformat": 2, "nbformat_minor": 0, "worksheets": [], "metadata": {}}',
            "not a notebook: nbformat version 2 is not supported (3 and 4 are)",
        ),
        (
            '{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [{"cell_type": "code"}]}]}',
            "not a notebook: ",
        ),
        ('{"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}', "no Python code found"),
        (
            '{"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [{"cell_type": "code", "source": "x"}]}',
            "not a notebook: ",
        ),
    ],
    ids=["bad-json", "empty", "array", "no-version", "v2", "invalid-v3", "empty-v3", "invalid-v4"],
)
def test_invalid_notebooks_are_one_line_errors(text, message):
    with pytest.raises(NotebookError) as info:
        notebook_to_source(text)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


# --- notebook submissions: bounded work -------------------------------------------------------------


def raw_notebook(cells: list[dict], metadata: dict | None = None) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {}, "cells": cells})


def raw_code(source, i: int = 0, **extra) -> dict:
    return {"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None, **extra}


def test_outputs_attachments_and_metadata_are_dropped_before_validation():
    """An output nbformat would reject, a huge metadata blob: neither is looked at, the code is converted."""
    cell = raw_code("def f(x):\n    return x\n", 1, outputs=[{"output_type": "not-an-output", "junk": [1] * 1000}])
    cell["metadata"] = {"tags": [SOLUTION_TAG], "scrolled": "not a bool", "junk": {"deep": [[[]]] * 1000}}
    markdown = {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "![x](attachment:x.png)",
                "attachments": {"x.png": {"image/png": "not base64 at all"}}}
    text = raw_notebook([markdown, cell], metadata={"kernelspec": "wrong type"})
    assert kept_code(notebook_to_source(text)) == ["def f(x):\n    return x"]


@pytest.mark.parametrize(
    ("cap", "value", "cells", "message"),
    [
        ("MAX_NOTEBOOK_CELLS", 3, [raw_code("x = 1", i) for i in range(4)],
         "refused: 4 cells is over the 3 cell limit"),
        ("MAX_CELL_BYTES", 100, [raw_code("x = 1\n"), raw_code("y = 1  # " + "#" * 100, 1)],
         "refused: cell 2 holds 109 bytes of code, over the 100 bytes limit"),
        ("MAX_CODE_BYTES", 100, [raw_code("x = 1  # " + "#" * 60, i) for i in range(2)],
         "refused: the code cells hold more than 100 bytes, over the limit"),
        ("MAX_JSON_VALUES", 50, [raw_code(["x = 1\n"] * 60)],
         "refused: about 75 JSON values is over the 50 value limit"),
    ],
    ids=["cells", "cell-size", "code-size", "json-values"],
)
def test_caps_refuse_in_one_line(monkeypatch, cap, value, cells, message):
    monkeypatch.setattr(notebooks, cap, value)
    with pytest.raises(NotebookError) as info:
        notebook_to_source(raw_notebook(cells))
    assert str(info.value) == message


def test_a_source_given_as_a_list_of_lines_counts_all_its_lines(monkeypatch):
    monkeypatch.setattr(notebooks, "MAX_CELL_BYTES", 20)
    with pytest.raises(NotebookError, match="cell 1 holds 24 bytes"):
        notebook_to_source(raw_notebook([raw_code(["x = 1\n"] * 4)]))


def test_the_deadline_refuses_a_conversion_that_runs_long(monkeypatch):
    monkeypatch.setattr(notebooks, "CONVERT_SECONDS", 0.0)
    with pytest.raises(NotebookError, match=r"^refused: converting the notebook took more than 0 s$"):
        notebook_to_source(raw_notebook([raw_code("def f(x):\n    return x\n")]))


def test_many_statements_on_one_line_are_kept_or_dropped_together():
    line = "; ".join(["A = 1", "print(A)", "B = 2"] * 2000)
    source = notebook_to_source(raw_notebook([raw_code(line)]))
    first = next(ln for ln in source.splitlines() if ln.startswith("A = 1"))
    assert first.startswith("; ".join(["A = 1", "B = 2"] * 2000) + "  # [partly run] A = 1; print(A)")
    namespace: dict = {}
    exec(compile(source, "nb.py", "exec"), namespace)  # noqa: S102 - our own test notebook
    assert (namespace["A"], namespace["B"]) == (1, 2)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_conversion_is_linear_in_the_statements_of_a_cell(monkeypatch):
    """100,000 statements on one line (the red team's 700 kB cell took 448 s when clustering was quadratic)."""
    monkeypatch.setattr(notebooks, "MAX_CELL_BYTES", 1 << 30)
    monkeypatch.setattr(notebooks, "MAX_CODE_BYTES", 1 << 30)
    source = notebook_to_source(raw_notebook([raw_code("x = 1; " * 100_000)]))
    assert len(ast.parse(source).body) == 100_000


@pytest.mark.timeout(60)
def test_counting_json_values_is_linear_even_in_an_unterminated_string():
    """A plain string pattern restarts inside ``"\\"\\"…`` and is quadratic: 40,000 pairs took 34 s."""
    assert notebooks._json_values('"' + '\\"' * 2_000_000) == 1
    assert notebooks._json_values('{"a": ["x,[{", "y\\\\", 3], "b": {}}') == 7
    with pytest.raises(NotebookError, match="^not a notebook: invalid JSON at line 1$"):
        notebook_to_source('{"cells": ["' + '\\"' * 2_000_000)


# --- nbformat 3 notebooks: upgraded by nbformat's converter, then read like any v4 notebook ----------------


def v3_notebook(tags: bool) -> str:
    """An nbformat-3 notebook (two worksheets, ``input``, a heading cell), built with nbformat.v3."""
    v3 = nbformat.v3
    meta = {"tags": [SOLUTION_TAG]} if tags else {}
    cells = [
        v3.new_heading_cell("Scores", level=1),
        v3.new_text_cell("markdown", source="My answers."),
        v3.new_code_cell(input="import math\nimport torch\n", metadata=meta),
        v3.new_code_cell(input="def softmax_weights(scores, dim=-1):\n    return torch.softmax(scores, dim=dim)\n",
                         metadata=meta),
        v3.new_code_cell(input="%timeit softmax_weights(torch.ones(3))\nprint(softmax_weights(torch.ones(3)))\n"),
        v3.new_code_cell(input="from grader.notebook_check import check\nrows = check(globals(), ['softmax_weights'])",
                         metadata={"tags": [CHECK_TAG]} if tags else {}),
    ]
    worksheets = [v3.new_worksheet(cells=cells[:3]), v3.new_worksheet(cells=cells[3:])]
    return v3.writes_json(v3.new_notebook(worksheets=worksheets))


@pytest.mark.parametrize("tags", [True, False], ids=["tagged", "untagged"])
def test_a_v3_notebook_converts_like_its_v4_conversion(tags):
    text = v3_notebook(tags)
    assert json.loads(text)["nbformat"] == 3 and "worksheets" in json.loads(text)
    as_v4 = nbformat.writes(nbformat.reads(text, as_version=4))
    source = notebook_to_source(text)
    assert source == notebook_to_source(as_v4)
    assert "# --- cell 4 ---" in source  # the cells of both worksheets, counted as one notebook
    kept = kept_code(source)
    softmax = "def softmax_weights(scores, dim=-1):\n    return torch.softmax(scores, dim=dim)"
    expected = ["import math", "import torch", softmax]
    assert kept == expected  # untagged: every code cell but the check cell, its print and magic left out
    namespace: dict = {}
    exec(compile(source, "nb.py", "exec"), namespace)  # noqa: S102 - our own test notebook
    torch = namespace["torch"]
    scores = torch.tensor([[1.0, 2.0, 0.5]], dtype=torch.float64)
    exp = [math.exp(x) for x in (1.0, 2.0, 0.5)]
    assert namespace["softmax_weights"](scores)[0].tolist() == pytest.approx([e / sum(exp) for e in exp])


def test_a_v3_notebook_is_capped_and_its_heading_levels_clamped(monkeypatch):
    data = json.loads(v3_notebook(tags=True))
    data["worksheets"][0]["cells"][0]["level"] = 10**15  # nbformat's upgrade writes "#" * level
    started = time.monotonic()
    source = notebook_to_source(json.dumps(data))
    assert time.monotonic() - started < 10 and "softmax_weights" in source
    monkeypatch.setattr(notebooks, "MAX_NOTEBOOK_CELLS", 5)  # cells are counted over every worksheet
    with pytest.raises(NotebookError, match="^refused: 6 cells is over the 5 cell limit$"):
        notebook_to_source(json.dumps(data))
    monkeypatch.setattr(notebooks, "MAX_NOTEBOOK_CELLS", 1000)
    monkeypatch.setattr(notebooks, "MAX_CELL_BYTES", 50)  # a v3 code cell's source is its input
    with pytest.raises(NotebookError, match="^refused: cell 4 holds .* of code, over the 50 bytes limit$"):
        notebook_to_source(json.dumps(data))


def test_the_deadline_holds_through_the_v3_upgrade(monkeypatch):
    real_convert, real_clock, late = nbformat.convert, time.monotonic, []

    def slow_convert(nb, to_version):
        late.append(True)  # as if nbformat's upgrade had taken an hour
        return real_convert(nb, to_version)

    monkeypatch.setattr(notebooks.nbformat, "convert", slow_convert)
    monkeypatch.setattr(notebooks.time, "monotonic", lambda: real_clock() + (3600 if late else 0))
    with pytest.raises(NotebookError, match=r"^refused: converting the notebook took more than 10 s$"):
        notebook_to_source(v3_notebook(tags=True))
    assert late


def test_deep_nesting_is_a_one_line_refusal_not_a_crash():
    deep = "x = " + "[" * 150 + "]" * 150 + "\n" + "y = " + "(" * 5000 + ")" * 5000
    with pytest.raises(NotebookError) as info:
        notebook_to_source(raw_notebook([raw_code(deep)], metadata={}))
    assert "\n" not in str(info.value)


# --- notebook submissions: grading --------------------------------------------------------------


def split_into_cells(source: str) -> list[str]:
    """A .py file as notebook cells: one cell per top-level definition, imports together."""
    lines = source.splitlines()
    cells, last = [], 0
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
            if "\n".join(lines[last:start]).strip():
                cells.append("\n".join(lines[last:start]).strip("\n"))
            cells.append("\n".join(lines[start : node.end_lineno]))
            last = node.end_lineno
    if "\n".join(lines[last:]).strip():
        cells.append("\n".join(lines[last:]).strip("\n"))
    return cells


HANGS = "import time\ntime.sleep(3600)"
EXPERIMENT = (
    "import torch\n"
    "x = torch.rand(6, 6)\n"
    "print(softmax_weights(x))\n"
    "for step in range(10**9):  # a 'plotting' loop that would never end\n"
    "    weights = softmax_weights(torch.rand(6, 6))\n"
    "    print(step, weights.sum())"
)


def alice_notebook(path: Path, tags: bool = False) -> Path:
    cells = split_into_cells(ALICE.read_text(encoding="utf-8"))
    cells = [cells[0], HANGS, *cells[1:], "%matplotlib inline\n!nvidia-smi", EXPERIMENT]
    marks = {i: [SOLUTION_TAG] for i, c in enumerate(cells) if c not in (HANGS, EXPERIMENT)} if tags else None
    path.write_text(notebook("md:# Alice's attention", *cells, tags=marks and {i + 1: t for i, t in marks.items()}))
    return path


@pytest.fixture(scope="module")
def suite():
    return build_suite(SEED, ("cpu",))


def grade(path: Path, suite, template):
    submission = read_submission(path)
    return submission, grade_submission(submission, suite, template, Limits(call_seconds=5)).results


def outcome(results) -> list[tuple[str, str, str]]:
    return [(r.test_name, r.status, r.message) for r in results]


@pytest.mark.slow
def test_untagged_notebook_that_would_hang_grades_like_the_py(tmp_path, suite, template):
    (tmp_path / "py").mkdir()
    (tmp_path / "nb").mkdir()
    py = tmp_path / "py" / "alice.py"
    py.write_text(ALICE.read_text(encoding="utf-8"), encoding="utf-8")
    nb = alice_notebook(tmp_path / "nb" / "alice.ipynb")
    assert "time.sleep(3600)" in nb.read_text()
    _, as_py = grade(py, suite, template)
    started = time.perf_counter()
    submission, as_nb = grade(nb, suite, template)
    elapsed = time.perf_counter() - started
    assert (submission.format, submission.error, submission.entry) == ("ipynb", None, "alice.py")
    assert elapsed < 60, f"the notebook took {elapsed:.0f} s to grade"
    assert {r.status for r in as_nb} == {PASSED}, [m for m in outcome(as_nb) if m[1] != PASSED][:3]
    assert {r.hook for r in as_nb} == set(HOOK_NAMES)
    assert outcome(as_nb) == outcome(as_py)


@pytest.mark.slow
def test_tagged_notebook_is_graded_from_its_tagged_cells(tmp_path, suite, template):
    path = alice_notebook(tmp_path / "alice.ipynb", tags=True)
    nb = nbformat.reads(path.read_text(), as_version=4)
    nb.cells.append(v4.new_code_cell("def softmax_weights(scores, dim=-1):\n    return scores  # junk, untagged"))
    nb.cells.append(v4.new_code_cell("this is not Python at all (("))
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    path.write_text(nbformat.writes(nb))
    submission, results = grade(path, suite, template)
    assert submission.error is None
    assert "junk" not in submission.files["alice.py"]
    assert {r.status for r in results} == {PASSED}


def test_broken_notebooks_become_error_rows(tmp_path, suite):
    class NoTemplate:  # an error row never reaches the sandbox
        def spawn(self, *args, **kwargs):
            raise AssertionError("spawned a child for an error row")

    broken = tmp_path / "bad.ipynb"
    broken.write_text('{\n "cells": [\n  {"cell_type": "code",,\n ]\n}\n', encoding="utf-8")
    v2 = tmp_path / "old.ipynb"
    v2.write_text(json.dumps({"nbformat": 2, "nbformat_minor": 0, "metadata": {}, "worksheets": []}))
    expected = {
        broken: "bad.ipynb: not a notebook: invalid JSON at line 3",
        v2: "old.ipynb: not a notebook: nbformat version 2 is not supported (3 and 4 are)",
    }
    for path, message in expected.items():
        submission = read_submission(path)
        assert (submission.format, submission.error) == ("ipynb", message)
        results = grade_submission(submission, suite=suite, template=NoTemplate()).results
        assert len(results) == len(suite.trials)
        assert all(r.status == FAILED and r.message == f"not graded: {message}" for r in results)


@pytest.mark.slow
def test_a_zip_holding_a_notebook_is_graded(tmp_path, suite, template):
    nb = alice_notebook(tmp_path / "work.ipynb")
    archive = tmp_path / "bob.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(nb, "bob/attention.ipynb")
        zf.writestr("bob/.ipynb_checkpoints/attention-checkpoint.ipynb", "{broken")
    submission, results = grade(archive, suite, template)
    assert (submission.student, submission.format, submission.error) == ("bob", "ipynb", None)
    assert list(submission.files) == ["attention.py"]
    assert {r.status for r in results} == {PASSED}


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["banned", "cpu-mask"], ids=["banned", "cpu-mask"])
def test_the_check_cell_holds_the_graders_rules(rule):
    """A notebook's torch.softmax, or its mask built on the CPU, fails the check cell with the grader's reason."""
    import torch

    from grader.notebook_check import collect
    from solutions import reference

    def softmax_weights(scores, dim=-1):
        return torch.nan_to_num(torch.softmax(scores, dim=dim), nan=0.0)

    def apply_causal_mask(scores):
        t = scores.shape[-1]
        return scores.masked_fill(torch.ones(t, t).triu(1).bool(), float("-inf"))

    hook, fn, reason = {
        "banned": ("softmax_weights", softmax_weights, "uses torch.softmax: this exercise is to write"),
        "cpu-mask": ("apply_causal_mask", apply_causal_mask, "will fail on a GPU: a tensor is built on the CPU"),
    }[rule]
    (row,) = collect(dict(vars(reference), **{hook: fn}), [hook])
    assert row.status == "failing"
    assert reason in row.first_failure, row.first_failure


def _globals_used(table) -> set[str]:
    """The global names a function or class (and what it nests) reads, from the compiler's own symbol table."""
    used = {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
    for child in table.get_children():
        used |= _globals_used(child)
    return used


@pytest.mark.parametrize("group", GROUPS)
def test_every_pasted_answer_finds_each_name_it_uses_in_the_notebook(group):
    """The answer notebook pastes each reference definition alone: a module helper it calls would be a NameError
    in the kernel (a fast stand-in for the kernel run above, which caught one in CI)."""
    import builtins
    import symtable

    nb = with_reference(build_notebook(group))
    cells = [c.source for c in nb.cells if c.cell_type == "code" and c not in tagged(nb, CHECK_TAG)]
    bound = set(dir(builtins))
    for source in cells:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
    missing = {
        f"{child.get_name()}: {name}"
        for source in cells
        for child in symtable.symtable(source, "<cell>", "exec").get_children()
        for name in _globals_used(child) - bound
    }
    assert missing == set()
