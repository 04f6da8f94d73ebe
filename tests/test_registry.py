"""The solution registry: adoption, isolation, clear errors, discovery and blocking.

Every test loads its own solutions, so each gets fresh plugin managers.  Learner
code is written to ``tmp_path``; entry points are faked by patching
``importlib.metadata.entry_points`` as ``grader.registry`` uses it.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import torch
from learner_code import reference_source

import grader.registry
from grader.hook_table import row
from grader.registry import (
    BLOCK_ENV_VAR,
    ENTRY_POINT_GROUP,
    HOOK_NAMES,
    HookNotImplemented,
    SolutionError,
    discover_solutions,
    load_solution,
)

KIT_ROOT = Path(__file__).resolve().parent.parent

EXPECTED_SIGNATURES = {
    "dot_product_scores": "dot_product_scores(queries, keys)",
    "scaled_dot_product_scores": "scaled_dot_product_scores(queries, keys)",
    "softmax_weights": "softmax_weights(scores, dim=-1)",
    "softmax_with_temperature": "softmax_with_temperature(scores, temperature, dim=-1)",
    "context_vectors": "context_vectors(weights, values)",
    "causal_mask": "causal_mask(num_tokens, device=None)",
    "apply_causal_mask": "apply_causal_mask(scores)",
    "renormalize_masked_weights": "renormalize_masked_weights(weights)",
    "dropout_scale": "dropout_scale(weights, keep_mask, p)",
    "attention_dropout": "attention_dropout(weights, p, training=True, generator=None)",
    "split_heads": "split_heads(x, num_heads)",
    "merge_heads": "merge_heads(x)",
    "make_self_attention": "make_self_attention(d_in, d_out, qkv_bias=False)",
    "make_causal_attention": "make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False)",
    "make_multihead_attention": (
        "make_multihead_attention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False)"
    ),
    "sliding_window_mask": "sliding_window_mask(num_tokens, window, device=None)",
    "chunked_attention": "chunked_attention(queries, keys, values, chunk_size, causal=False)",
    "plot_attention": "plot_attention(weights, tokens=None)",
}
"""The chapter's contract, written out by hand.  Every other group pins its own hooks in its own tests
(``tests/test_patterns_group.py``), so a new group adds nothing here."""
CHAPTER_HOOKS = tuple(EXPECTED_SIGNATURES)


def sample_args(hook):
    """Valid arguments for every hook of the chapter, small and distinct in shape."""
    weights = torch.softmax(torch.randn(2, 5, 5), dim=-1)
    return {
        "dot_product_scores": (torch.randn(2, 5, 3), torch.randn(2, 4, 3)),
        "scaled_dot_product_scores": (torch.randn(2, 5, 3), torch.randn(2, 4, 3)),
        "softmax_weights": (torch.randn(2, 5, 4),),
        "softmax_with_temperature": (torch.randn(2, 5, 4), 0.5),
        "context_vectors": (weights, torch.randn(2, 5, 3)),
        "causal_mask": (5,),
        "apply_causal_mask": (torch.randn(2, 5, 5),),
        "renormalize_masked_weights": (weights,),
        "dropout_scale": (weights, torch.ones(2, 5, 5, dtype=torch.bool), 0.1),
        "attention_dropout": (weights, 0.1),
        "split_heads": (torch.randn(2, 5, 6), 3),
        "merge_heads": (torch.randn(2, 3, 5, 2),),
        "make_self_attention": (3, 4),
        "make_causal_attention": (3, 4, 6, 0.0),
        "make_multihead_attention": (3, 4, 6, 0.0, 2),
        "sliding_window_mask": (5, 2),
        "chunked_attention": (torch.randn(2, 5, 3), torch.randn(2, 7, 3), torch.randn(2, 7, 4), 3),
        "plot_attention": (weights[0],),
    }[hook]


@pytest.fixture(autouse=True)
def restore_imports(tmp_path):
    """Leave sys.path and sys.modules as they were: drop whatever was imported from tmp_path.

    The kit's own ``exercises*`` modules are snapshotted and put back too, since one
    test imports the kit's ``exercises`` afresh.
    """
    path_before = list(sys.path)
    exercises_before = {k: m for k, m in sys.modules.items() if k == "exercises" or k.startswith("exercises.")}
    yield
    sys.path[:] = path_before
    root = str(tmp_path)
    for key, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(root):
            del sys.modules[key]
    for key in [k for k in sys.modules if k == "exercises" or k.startswith("exercises.")]:
        del sys.modules[key]
    sys.modules.update(exercises_before)


@pytest.fixture
def write(tmp_path):
    """Write dedented source to ``tmp_path / relpath``; return the path."""

    def write(relpath: str, source: str) -> Path:
        path = tmp_path / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip("\n"))
        return path

    return write


def one_line(message: str) -> bool:
    return "\n" not in message and message.strip() == message and message != ""


# --- the reference and the exercises --------------------------------------------------------


def test_hook_names_are_the_hookspecs_in_order():
    assert HOOK_NAMES[: len(CHAPTER_HOOKS)] == CHAPTER_HOOKS  # the chapter's group comes first (POSITION 0)
    assert {row(h).group for h in HOOK_NAMES[len(CHAPTER_HOOKS) :]}.isdisjoint({"chapter"})
    for hook, signature in EXPECTED_SIGNATURES.items():
        assert grader.registry.format_hook(hook) == signature


def test_reference_exposes_every_hook_without_problems():
    reference = load_solution("reference")
    assert reference.name == "reference"
    assert reference.problems == []
    assert reference.implemented == HOOK_NAMES
    for hook in HOOK_NAMES:
        assert reference.implements(hook)
        assert len(getattr(reference.plugin_manager.hook, hook).get_hookimpls()) == 1
    torch.testing.assert_close(reference.softmax_weights(torch.zeros(3)), torch.full((3,), 1 / 3))
    torch.testing.assert_close(reference.causal_mask(2), torch.tensor([[False, True], [False, False]]))


@pytest.mark.parametrize("hook", CHAPTER_HOOKS, ids=CHAPTER_HOOKS)
def test_reference_hooks_run_on_sample_arguments(hook):
    result = load_solution("reference").call(hook, *sample_args(hook))
    assert result is not None


@pytest.mark.parametrize("hook", CHAPTER_HOOKS, ids=CHAPTER_HOOKS)
def test_exercise_stubs_raise_not_implemented(hook):
    exercises = load_solution("exercises")
    assert exercises.problems == []
    assert exercises.implemented == HOOK_NAMES
    with pytest.raises(NotImplementedError, match=hook) as info:
        exercises.call(hook, *sample_args(hook))
    # raised by the learner's stub, not by the registry for a hook it could not adopt
    assert not isinstance(info.value, HookNotImplemented)
    assert Path(info.traceback[-1].path).resolve().parent == KIT_ROOT / "exercises"


# --- adoption -----------------------------------------------------------------------------------


def test_plain_functions_in_a_py_file_are_adopted(write):
    path = write(
        "plain.py",
        """
        import torch

        def dot_product_scores(queries, keys):
            return queries @ keys.transpose(-2, -1)

        def softmax_weights(scores, dim=-1):
            e = torch.exp(scores - scores.amax(dim=dim, keepdim=True))
            return e / e.sum(dim=dim, keepdim=True)

        def helper_that_is_not_a_hook(x):
            return x
        """,
    )
    solution = load_solution(path)
    assert solution.name == "plain"
    assert solution.implemented == ("dot_product_scores", "softmax_weights")
    queries, keys = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
    torch.testing.assert_close(solution.dot_product_scores(queries, keys), torch.einsum("bid,bjd->bij", queries, keys))
    scores = torch.randn(4, 6)
    torch.testing.assert_close(solution.softmax_weights(scores, dim=0), torch.softmax(scores, dim=0))
    missing = [h for h in HOOK_NAMES if h not in solution.implemented]
    assert len(solution.problems) == len(missing) == len(HOOK_NAMES) - 2


def test_hookimpl_decorated_functions_are_adopted_like_plain_ones(write):
    path = write(
        "decorated.py",
        """
        from grader import hookimpl

        @hookimpl
        def merge_heads(x):
            b, h, t, d = x.shape
            return x.transpose(1, 2).reshape(b, t, h * d)
        """,
    )
    solution = load_solution(path)
    assert solution.implemented == ("merge_heads",)
    x = torch.randn(2, 3, 5, 4)
    torch.testing.assert_close(solution.merge_heads(x), torch.cat([x[:, h] for h in range(3)], dim=-1))


def test_loading_restores_sys_path(write):
    path = write("pathcheck.py", "def merge_heads(x):\n    return x\n")
    before = list(sys.path)
    load_solution(path)
    assert sys.path == before


def test_main_guard_does_not_run_at_load(write):
    path = write(
        "guarded.py",
        """
        import sys

        def causal_mask(num_tokens, device=None):
            return ("mine", num_tokens)

        if __name__ == "__main__":
            sys.exit("training loop")
        """,
    )
    assert load_solution(path).causal_mask(4) == ("mine", 4)


@pytest.mark.parametrize(
    ("class_name", "hook", "init", "args"),
    [
        ("SelfAttention", "make_self_attention", "d_in, d_out, qkv_bias=False", (3, 4)),
        (
            "CausalAttention",
            "make_causal_attention",
            "d_in, d_out, context_length, dropout, qkv_bias=False",
            (3, 4, 6, 0.0),
        ),
        (
            "MultiHeadAttention",
            "make_multihead_attention",
            "d_in, d_out, context_length, dropout, num_heads, qkv_bias=False",
            (3, 4, 6, 0.0, 2),
        ),
    ],
    ids=["SelfAttention", "CausalAttention", "MultiHeadAttention"],
)
def test_class_alias_is_adopted_for_the_module_hook(write, class_name, hook, init, args):
    path = write(
        "classes.py",
        f"""
        from torch import nn

        class {class_name}(nn.Module):
            def __init__(self, {init}):
                super().__init__()
                self.config = ({init.replace("=False", "")})

            def forward(self, x):
                return x
        """,
    )
    solution = load_solution(path)
    assert solution.implemented == (hook,)
    module = solution.call(hook, *args)
    assert type(module).__name__ == class_name
    assert module.config == (*args, False)  # qkv_bias defaults to False


@pytest.mark.parametrize(
    ("classes", "adopted"),
    [
        (("SelfAttention_v2",), "SelfAttention_v2"),
        (("SelfAttention_v1",), "SelfAttention_v1"),
        (("SelfAttention_v1", "SelfAttention_v2"), "SelfAttention_v2"),
        (("SelfAttention_v2", "SelfAttention"), "SelfAttention"),
    ],
    ids=["v2", "v1", "v2-over-v1", "plain-over-v2"],
)
def test_the_chapters_numbered_self_attention_classes_are_adopted(write, classes, adopted):
    body = "\n".join(
        f"""
class {name}(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.name = "{name}"
"""
        for name in classes
    )
    path = write("numbered.py", "from torch import nn\n" + body)
    assert load_solution(path).make_self_attention(3, 4).name == adopted


def test_make_function_wins_over_class_alias_in_one_file(write):
    path = write(
        "both.py",
        """
        from torch import nn

        class CausalAttention(nn.Module):
            def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
                super().__init__()
                self.source = "class"

        def make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=False):
            module = CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            module.source = "function"
            return module
        """,
    )
    assert load_solution(path).make_causal_attention(3, 4, 6, 0.0).source == "function"


def test_a_function_named_like_a_class_alias_is_not_adopted(write):
    path = write(
        "notaclass.py",
        """
        def CausalAttention(d_in, d_out, context_length, dropout, qkv_bias=False):
            return "a function, not a class"
        """,
    )
    solution = load_solution(path)
    assert solution.implemented == ()
    with pytest.raises(HookNotImplemented, match="make_causal_attention"):
        solution.make_causal_attention(3, 4, 6, 0.0)


def test_a_folder_of_modules_is_one_solution(write, tmp_path):
    tag = uuid.uuid4().hex[:8]
    write(
        f"folder/scores_{tag}.py",
        """
        def dot_product_scores(queries, keys):
            return queries @ keys.transpose(-2, -1)
        """,
    )
    write(
        f"folder/attention_{tag}.py",
        f"""
        from scores_{tag} import dot_product_scores

        def scaled_dot_product_scores(queries, keys):
            return dot_product_scores(queries, keys) / keys.shape[-1] ** 0.5
        """,
    )
    write(f"folder/test_{tag}.py", "this is not python, and a test file is never imported(\n")
    solution = load_solution(tmp_path / "folder")
    assert solution.name == "folder"
    assert set(solution.implemented) == {"dot_product_scores", "scaled_dot_product_scores"}
    queries, keys = torch.randn(5, 9), torch.randn(4, 9)
    torch.testing.assert_close(solution.scaled_dot_product_scores(queries, keys), queries @ keys.T / 3)
    assert f"scores_{tag}" not in sys.modules
    assert f"attention_{tag}" not in sys.modules


@pytest.mark.parametrize("kit_imported_before", [True, False], ids=["kit-imported", "kit-not-imported"])
def test_a_package_named_exercises_does_not_replace_the_kits(write, tmp_path, kit_imported_before):
    write("learner/exercises/__init__.py", "from .attn import softmax_weights\n")
    write(
        "learner/exercises/attn.py",
        """
        def softmax_weights(scores, dim=-1):
            return ("learner", dim)
        """,
    )
    if kit_imported_before:
        import exercises as kit  # noqa: F401

        before = {k: m for k, m in sys.modules.items() if k == "exercises" or k.startswith("exercises.")}
    else:
        for key in [k for k in sys.modules if k == "exercises" or k.startswith("exercises.")]:
            del sys.modules[key]
        before = {}
    solution = load_solution(tmp_path / "learner" / "exercises")
    assert solution.name == "exercises"
    assert solution.softmax_weights(torch.zeros(2)) == ("learner", -1)
    after = {k: m for k, m in sys.modules.items() if k == "exercises" or k.startswith("exercises.")}
    assert after == before
    assert "exercises.attn" not in sys.modules
    kit_solution = load_solution("exercises")  # the kit's stubs, not the learner's package
    assert Path(sys.modules["exercises"].__file__).resolve() == KIT_ROOT / "exercises" / "__init__.py"
    with pytest.raises(NotImplementedError):
        kit_solution.softmax_weights(torch.zeros(2))


def test_a_file_named_exercises_py_does_not_replace_the_kits(write):
    import exercises as kit

    path = write("exercises.py", "def merge_heads(x):\n    return 'file'\n")
    assert load_solution(path).merge_heads(torch.zeros(1, 1, 1, 1)) == "file"
    assert sys.modules["exercises"] is kit


# --- clear messages -------------------------------------------------------------------------------


@pytest.mark.parametrize("hook", ["dot_product_scores", "softmax_weights", "causal_mask", "make_multihead_attention"])
def test_missing_function_names_file_hook_and_signature(write, hook):
    path = write("partial.py", "def merge_heads(x):\n    return x\n")
    solution = load_solution(path)
    assert solution.implemented == ("merge_heads",)
    assert len(solution.problems) == len(HOOK_NAMES) - 1
    assert all(one_line(p) for p in solution.problems)
    [problem] = [p for p in solution.problems if f"no function {hook}" in p]
    assert "partial.py" in problem
    assert EXPECTED_SIGNATURES[hook] in problem
    if hook == "make_multihead_attention":
        assert "MultiHeadAttention" in problem  # the class alias is offered too
    with pytest.raises(HookNotImplemented, match=r"partial\.py") as info:
        solution.call(hook, *sample_args(hook))
    assert EXPECTED_SIGNATURES[hook] in str(info.value)
    assert one_line(str(info.value))


WRONG_SIGNATURES = [
    ("softmax_weights", "def softmax_weights(x, axis=-1):"),
    ("softmax_weights", "def softmax_weights(scores):"),
    ("softmax_weights", "def softmax_weights(scores, dim=-1, /):"),
    ("causal_mask", "def causal_mask(num_tokens, dtype, device=None):"),
    ("causal_mask", "def causal_mask(n, device=None):"),
    ("dropout_scale", "def dropout_scale(weights, mask, p):"),
    ("split_heads", "def split_heads(x, heads):"),
    ("make_causal_attention", "def make_causal_attention(d_in, d_out, context_length):"),
]


@pytest.mark.parametrize(
    ("hook", "def_line"),
    WRONG_SIGNATURES,
    ids=[
        "renamed",
        "missing-dim",
        "positional-only",
        "extra-required",
        "renamed-first",
        "renamed-mask",
        "renamed-heads",
        "missing-dropout",
    ],
)
def test_wrong_signature_names_file_line_hook_and_signature(write, hook, def_line):
    path = write(
        "wrong.py",
        f"""
        import torch


        def merge_heads(x):
            return "merged"


        {def_line}
            return "never adopted"
        """,
    )
    solution = load_solution(path)
    assert solution.implemented == ("merge_heads",)  # the other hooks still load
    assert solution.merge_heads(torch.zeros(1, 1, 1, 1)) == "merged"
    [problem] = [p for p in solution.problems if "no function" not in p]
    assert one_line(problem)
    assert "wrong.py:8" in problem  # the line of the def
    assert hook in problem
    assert EXPECTED_SIGNATURES[hook] in problem
    with pytest.raises(HookNotImplemented, match=hook):
        solution.call(hook, *sample_args(hook))


def test_wrong_class_signature_names_the_class(write):
    path = write(
        "wrongclass.py",
        """
        from torch import nn


        class CausalAttention(nn.Module):
            def __init__(self, d_in, d_out):
                super().__init__()
        """,
    )
    solution = load_solution(path)
    assert solution.implemented == ()
    [problem] = [p for p in solution.problems if "CausalAttention:" in p]
    assert one_line(problem)
    assert "wrongclass.py:5" in problem
    assert EXPECTED_SIGNATURES["make_causal_attention"] in problem


@pytest.mark.parametrize(
    ("def_line", "call_kwargs", "expected"),
    [
        ("def softmax_weights(scores, dim=-1):", {}, -1),
        ("def softmax_weights(scores, dim=-1):", {"dim": 0}, 0),
        ("def softmax_weights(scores, dim=1):", {}, -1),  # the hook's default, not the learner's
        ("def softmax_weights(scores, dim):", {}, -1),
        ("def softmax_weights(scores, dim=-1, eps=1e-9):", {"dim": 2}, 2),
        ("def softmax_weights(*, scores, dim=-1):", {"dim": -2}, -2),
        ("def softmax_weights(scores, **kwargs):", {"dim": 0}, 0),
    ],
    ids=["default", "dim=0", "other-default", "no-default", "extra-optional", "keyword-only", "var-kwargs"],
)
def test_hooks_are_called_with_the_hooks_defaults(write, def_line, call_kwargs, expected):
    path = write(
        "defaults.py",
        f"""
        {def_line}
            return locals().get("dim", locals().get("kwargs", {{}}).get("dim"))
        """,
    )
    solution = load_solution(path)
    assert all("no function" in p for p in solution.problems)
    assert solution.implemented == ("softmax_weights",)
    assert solution.softmax_weights(torch.zeros(3), **call_kwargs) == expected


def test_hook_arguments_pass_through_positionally_and_by_name(write):
    path = write(
        "passthrough.py",
        """
        def attention_dropout(weights, p, training=True, generator=None):
            return (p, training, generator)

        def causal_mask(num_tokens, device=None):
            return (num_tokens, device)
        """,
    )
    solution = load_solution(path)
    gen = torch.Generator()
    assert solution.attention_dropout(torch.zeros(2), 0.25) == (0.25, True, None)
    assert solution.attention_dropout(torch.zeros(2), 0.25, False, gen) == (0.25, False, gen)
    assert solution.attention_dropout(torch.zeros(2), p=0.5, generator=gen) == (0.5, True, gen)
    assert solution.causal_mask(7, device="meta") == (7, "meta")
    with pytest.raises(TypeError):
        solution.causal_mask(7, dev="meta")
    with pytest.raises(AttributeError):
        solution.not_a_hook  # noqa: B018
    with pytest.raises(AttributeError, match="not an attnkit hook"):
        solution.call("not_a_hook")


@pytest.mark.parametrize(
    ("source", "line", "kind"),
    [
        ("def softmax_weights(scores, dim=-1):\n    return scores\n\ndef broken(:\n    pass\n", 4, "SyntaxError"),
        ("import torch\nimport attnkit_no_such_module_xyz\n", 2, "ModuleNotFoundError"),
        ("import torch\n\nx = 1 / 0\n", 3, "ZeroDivisionError"),
        ("import sys\nsys.exit(3)\n", 2, "SystemExit"),
        ("raise SystemExit('bye')\n", 1, "SystemExit"),
    ],
    ids=["syntax-error", "import-error", "runtime-error", "sys-exit", "raise-system-exit"],
)
def test_a_file_that_cannot_be_imported_is_one_clear_solution_error(write, source, line, kind):
    path = write("broken.py", source)
    with pytest.raises(SolutionError) as info:
        load_solution(path)
    message = str(info.value)
    assert one_line(message)
    assert f"broken.py:{line}" in message
    assert kind in message


def test_a_relative_path_still_gets_the_line_number(write, tmp_path, monkeypatch):
    write("sub/rel.py", "import torch\n\nx = 1 / 0\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SolutionError) as info:
        load_solution(os.path.join("sub", "rel.py"))
    assert "rel.py:3" in str(info.value)
    assert "ZeroDivisionError" in str(info.value)


BROKEN_MODULES = [
    ("def ok(:\n", 1, "SyntaxError"),
    ("import sys\nsys.exit(1)\n", 2, "SystemExit"),
    ("import no_such_module_here\n", 1, "ModuleNotFoundError"),
    ("x = 1\nraise RuntimeError('boom at import')\n", 2, "RuntimeError"),
]
BROKEN_IDS = ["syntax-error", "sys-exit", "import-error", "exception-at-import"]


@pytest.mark.parametrize(("source", "line", "kind"), BROKEN_MODULES, ids=BROKEN_IDS)
@pytest.mark.parametrize("package", [False, True], ids=["modules", "package"])
def test_a_folder_whose_every_module_is_broken_is_one_named_error(write, tmp_path, source, line, kind, package):
    tag = uuid.uuid4().hex[:8]
    folder = f"sub_{tag}"
    if package:
        write(f"{folder}/__init__.py", "")
    write(f"{folder}/bad_{tag}.py", source)
    with pytest.raises(SolutionError) as info:
        load_solution(tmp_path / folder)
    message = str(info.value)
    assert one_line(message)
    assert f"bad_{tag}.py:{line}" in message
    assert kind in message


@pytest.mark.parametrize(("source", "line", "kind"), BROKEN_MODULES, ids=BROKEN_IDS)
@pytest.mark.parametrize("package", [False, True], ids=["modules", "package"])
def test_a_broken_module_costs_only_the_hooks_it_defines(write, tmp_path, source, line, kind, package):
    """The good module's hooks load and compute; the broken module's hooks (found by ast, or by its def
    lines where it does not parse) each carry its error; hooks defined nowhere still say "no function"."""
    tag = uuid.uuid4().hex[:8]
    folder = f"sub_{tag}"
    if package:  # the chapter's layout: an __init__ that imports every module, so it breaks too
        write(f"{folder}/__init__.py", f"from .good_{tag} import *\nfrom .bad_{tag} import *\n")
    write(f"{folder}/good_{tag}.py", reference_source(("merge_heads", "split_heads")))
    defs = "def softmax_weights(scores, dim=-1):\n    return scores\n\n\nclass SelfAttention:\n    pass\n"
    write(f"{folder}/bad_{tag}.py", source + "\n" + defs)
    solution = load_solution(tmp_path / folder)
    assert set(solution.implemented) == {"merge_heads", "split_heads"}
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    torch.testing.assert_close(solution.merge_heads(x), x.transpose(1, 2).reshape(2, 4, 15))
    for hook in ("softmax_weights", "make_self_attention"):
        (problem,) = [p for p in solution.problems if p.startswith(f"exercise {hook}:")]
        assert one_line(problem)
        assert f"could not load {folder + '/' if package else ''}bad_{tag}.py:{line}" in problem, problem
        assert kind in problem
        with pytest.raises(HookNotImplemented, match="could not load"):
            solution.call(hook, torch.zeros(2, 2)) if hook == "softmax_weights" else solution.call(hook, 3, 2)
    assert any(p.startswith(f"{tmp_path / folder}: no function causal_mask") for p in solution.problems)


def test_the_kits_exercises_with_one_broken_module_still_load_the_others(tmp_path, monkeypatch):
    """``load_solution("exercises")`` in a learner's kit whose scores.py has a SyntaxError."""
    kit = tmp_path / "kit"
    shutil.copytree(KIT_ROOT / "exercises", kit / "exercises", ignore=shutil.ignore_patterns("__pycache__", "test_*"))
    heads = kit / "exercises" / "heads.py"
    heads.write_text(heads.read_text() + "\n" + reference_source(("merge_heads",)))
    scores = kit / "exercises" / "scores.py"
    scores.write_text(scores.read_text().replace("def softmax_weights(scores, dim=-1):", "def softmax_weights(scores)"))
    for key in [k for k in sys.modules if k == "exercises" or k.startswith("exercises.")]:
        monkeypatch.delitem(sys.modules, key)
    monkeypatch.syspath_prepend(str(kit))
    solution = load_solution("exercises")
    assert "merge_heads" in solution.implemented
    x = torch.randn(1, 2, 3, 4)
    torch.testing.assert_close(solution.merge_heads(x), x.transpose(1, 2).reshape(1, 3, 8))
    lost = {p.split(":")[0].removeprefix("exercise ") for p in solution.problems if "could not load" in p}
    assert lost >= {"dot_product_scores", "softmax_weights", "context_vectors"}, solution.problems
    assert "merge_heads" not in lost and "causal_mask" not in lost
    assert all("scores.py:" in p and "SyntaxError" in p for p in solution.problems if "could not load" in p)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("missing.py", "no such file"), ("notes.txt", ".py file"), ("empty", "no .py files")],
    ids=["missing-py", "not-py", "empty-folder"],
)
def test_paths_that_are_not_solutions(tmp_path, name, expected):
    if name == "notes.txt":
        (tmp_path / name).write_text("hello")
    if name == "empty":
        (tmp_path / name).mkdir()
    with pytest.raises(SolutionError, match=expected) as info:
        load_solution(tmp_path / name)
    assert one_line(str(info.value))


# --- isolation --------------------------------------------------------------------------------------


def test_calling_one_solution_never_calls_another(write):
    source = """
        CALLS = []

        def softmax_weights(scores, dim=-1):
            CALLS.append(dim)
            return "{tag}"
        """
    first = load_solution(write("first.py", source.format(tag="first")))
    second = load_solution(write("second.py", source.format(tag="second")))
    reference = load_solution("reference")
    assert first.plugin_manager is not second.plugin_manager
    assert first.softmax_weights(torch.zeros(2)) == "first"
    assert second.softmax_weights(torch.zeros(2), dim=0) == "second"
    torch.testing.assert_close(reference.softmax_weights(torch.zeros(2)), torch.tensor([0.5, 0.5]))
    assert first.functions["softmax_weights"].__globals__["CALLS"] == [-1]
    assert second.functions["softmax_weights"].__globals__["CALLS"] == [0]
    for solution in (first, second, reference):
        assert len(solution.plugin_manager.hook.softmax_weights.get_hookimpls()) == 1


def test_sibling_helpers_of_two_files_do_not_mix(write, tmp_path):
    helper = f"helper_{uuid.uuid4().hex[:8]}"
    for who in ("alice", "bob"):
        write(f"{who}/{helper}.py", f"def answer():\n    return '{who}'\n")
        write(
            f"{who}/solution.py",
            f"""
            import {helper}

            def merge_heads(x):
                return {helper}.answer()
            """,
        )
    alice = load_solution(tmp_path / "alice" / "solution.py")
    bob = load_solution(tmp_path / "bob" / "solution.py")
    assert alice.merge_heads(torch.zeros(1, 1, 1, 1)) == "alice"
    assert bob.merge_heads(torch.zeros(1, 1, 1, 1)) == "bob"


# --- entry points, discovery, blocking ------------------------------------------------------------


@pytest.fixture
def fake_entry_points(monkeypatch, tmp_path, write):
    """Install plugin modules in tmp_path and fake the ``attnkit.solutions`` entry points.

    Returns ``install(name, source, attr=None)``; the entry points come back in
    installation order.
    """
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    installed: list[importlib.metadata.EntryPoint] = []

    def entry_points(**params):
        group = params.get("group")
        return [ep for ep in installed if group is None or ep.group == group]

    monkeypatch.setattr(grader.registry.importlib.metadata, "entry_points", entry_points)
    monkeypatch.delenv(BLOCK_ENV_VAR, raising=False)

    def install(name: str, source: str | None, attr: str | None = None) -> importlib.metadata.EntryPoint:
        module = f"attnkit_ep_{name}_{uuid.uuid4().hex[:8]}"
        if source is not None:
            write(f"site/{module}.py", source)
        value = f"{module}:{attr}" if attr else module
        ep = importlib.metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)
        installed.append(ep)
        return ep

    return install


PLUGIN = """
def softmax_weights(scores, dim=-1):
    return "{name}"
"""


def test_entry_point_module_is_loaded_by_name(fake_entry_points):
    ep = fake_entry_points("alice", PLUGIN.format(name="alice"))
    solution = load_solution("alice")
    assert solution.name == "alice"
    assert "entry point alice" in solution.origin and ep.value in solution.origin
    assert solution.softmax_weights(torch.zeros(2)) == "alice"


def test_entry_point_attribute_is_loaded(fake_entry_points):
    source = """
import types

def _merge(x):
    return "namespace"

plugin = types.SimpleNamespace(merge_heads=_merge)
"""
    fake_entry_points("carol", source, attr="plugin")
    solution = load_solution("carol")
    assert solution.implemented == ("merge_heads",)
    assert solution.merge_heads(torch.zeros(1, 1, 1, 1)) == "namespace"


def test_discovery_order_is_reference_entry_points_paths(fake_entry_points, write):
    fake_entry_points("alice", PLUGIN.format(name="alice"))
    fake_entry_points("bob", PLUGIN.format(name="bob"))
    first = write("paths/first.py", PLUGIN.format(name="first"))
    second = write("paths/second.py", PLUGIN.format(name="second"))
    found, problems = discover_solutions([str(first), str(second)])
    assert problems == []
    assert [s.name for s in found] == ["reference", "alice", "bob", "first", "second"]
    results = [s.softmax_weights(torch.zeros(2)) for s in found[1:]]
    assert results == ["alice", "bob", "first", "second"]
    torch.testing.assert_close(found[0].softmax_weights(torch.zeros(2)), torch.tensor([0.5, 0.5]))
    assert len({id(s.plugin_manager) for s in found}) == 5


def test_discovery_without_entry_points_or_paths_is_the_reference(fake_entry_points):
    found, _ = discover_solutions()
    assert [s.name for s in found] == ["reference"]
    assert found[0].implemented == HOOK_NAMES


@pytest.mark.parametrize("blocked", ["alice", " alice , other", "other,alice,"], ids=["one", "spaces", "list"])
def test_blocked_entry_point_is_left_out_and_refused(fake_entry_points, monkeypatch, blocked):
    fake_entry_points("alice", PLUGIN.format(name="alice"))
    fake_entry_points("bob", PLUGIN.format(name="bob"))
    monkeypatch.setenv(BLOCK_ENV_VAR, blocked)
    assert [s.name for s in discover_solutions()[0]] == ["reference", "bob"]
    with pytest.raises(SolutionError) as info:
        load_solution("alice")
    message = str(info.value)
    assert one_line(message)
    assert "alice" in message and "blocked" in message and BLOCK_ENV_VAR in message
    assert load_solution("bob").softmax_weights(torch.zeros(2)) == "bob"


def test_unknown_name_lists_the_known_names(fake_entry_points, monkeypatch):
    fake_entry_points("alice", PLUGIN.format(name="alice"))
    fake_entry_points("bob", PLUGIN.format(name="bob"))
    monkeypatch.setenv(BLOCK_ENV_VAR, "bob")
    with pytest.raises(SolutionError) as info:
        load_solution("nobody")
    message = str(info.value)
    assert one_line(message)
    assert "'nobody'" in message
    for known in ("reference", "exercises", "alice"):
        assert known in message
    assert "bob" not in message.split("not one of", 1)[1]


def test_an_entry_point_that_cannot_be_imported_is_a_solution_error(fake_entry_points):
    fake_entry_points("ghost", None)  # its module does not exist
    with pytest.raises(SolutionError) as info:
        load_solution("ghost")
    message = str(info.value)
    assert one_line(message)
    assert "ghost" in message and "ModuleNotFoundError" in message


def test_an_entry_point_that_exits_at_import_is_a_solution_error(fake_entry_points):
    fake_entry_points("quitter", "import sys\nsys.exit(2)\n")
    with pytest.raises(SolutionError) as info:
        load_solution("quitter")
    assert "quitter" in str(info.value)


def test_one_bad_path_does_not_hide_the_others(write):
    good = write("good/sol.py", PLUGIN.format(name="good"))
    bad = write("bad/sol.py", "def softmax_weights(scores, dim=-1)\n    return scores\n")
    found, problems = discover_solutions([str(bad), str(good)])
    assert [s.name for s in found] == ["reference", "sol"]
    assert len(problems) == 1 and "SyntaxError" in problems[0] and "sol.py:1" in problems[0]
