"""The patterns group on its own: its contract, its reference against independent computations, its hidden cases,
and its catalogue (every mistake answers differently from the reference on some hidden case).

Everything runs in this process, in float64 on the CPU: the references and the mistakes are called directly with
the hidden cases' inputs, so these tests hold whatever the grader's machinery around the group does.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from grader.groups import patterns as contract
from grader.hookspecs import PROJECT_NAME
from grader.instructor.cases import DEVICE, Case, Maker
from grader.instructor.groups import patterns as hidden
from solutions import mistakes as chapter_mistakes
from solutions import patterns as reference
from solutions import reference as chapter

KIT = Path(__file__).resolve().parent.parent
HOOKS = [r.hook for r in contract.ROWS]
MASKS = ("strided_mask", "dilated_window_mask")
CJK = re.compile(r"[\u4e00-\u9fff]")
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
SEED_TEXT = re.compile(r"seed \d{3}_[0-9a-f]{16}\.txt")

plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- the contract --------------------------------------------------------------------------------------------


def test_the_contract_declares_its_rows_hookspecs_and_parts():
    assert HOOKS == ["strided_mask", "dilated_window_mask", "attention_entropy", "plot_head_grid"]
    specs = [name for name, obj in vars(contract).items() if callable(obj) and hasattr(obj, f"{PROJECT_NAME}_spec")]
    assert specs == HOOKS, "one hookspec per row, in the rows' order"
    assert all(r.group == "patterns" for r in contract.ROWS)
    assert [r.output for r in contract.ROWS] == ["mask", "mask", "tensor", "figure"]
    assert all(r.points > 0 for r in contract.ROWS)
    assert all(bool(r.why_banned_zh) == bool(r.banned) and (not r.banned or CJK.search(r.why_banned_zh))
               for r in contract.ROWS), "a row that bans a call says why in Chinese too"  # fmt: skip
    assert contract.POSITION == 20
    assert (contract.HIDDEN_CASES, contract.REFERENCE) == ("grader.instructor.groups.patterns", "solutions.patterns")
    assert (contract.STUB, contract.PUBLIC_TESTS) == ("exercises.patterns", "exercises.test_patterns")
    for hook in HOOKS:
        doc = inspect.getdoc(getattr(contract, hook)) or ""
        assert ":returns:" in doc and ("ValueError" in doc) == (hook != "attention_entropy"), hook


def test_the_contract_imports_only_the_row_and_the_hookspec_marker():
    tree = ast.parse((KIT / "grader" / "groups" / "patterns.py").read_text(encoding="utf-8"))
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module != "__future__"
        for alias in node.names
    }
    assert imported == {("grader.hook_row", "HookRow"), ("grader.hookspecs", "hookspec")}
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import)]


def test_the_prose_bans_what_the_row_bans():
    for r in contract.ROWS:
        doc = " ".join((inspect.getdoc(getattr(contract, r.hook)) or "").split())
        named = re.findall(r"``([^`]+)``", doc.split("Not allowed inside:", 1)[1]) if "Not allowed" in doc else []
        assert [n.rsplit(".", 1)[-1] for n in named] == list(r.banned), r.hook


def test_the_reference_stubs_and_mistakes_have_the_hookspecs_signatures():
    from exercises import patterns as stubs

    for hook in HOOKS:
        signature = inspect.signature(getattr(contract, hook))
        assert inspect.signature(getattr(reference, hook)) == signature, hook
        assert hasattr(getattr(reference, hook), f"{PROJECT_NAME}_impl"), f"{hook}: not an @hookimpl"
        assert inspect.signature(getattr(stubs, hook)) == signature, hook
    for mistake in reference.CATALOGUE:
        for hook, fn in mistake.overrides.items():
            assert inspect.signature(fn) == inspect.signature(getattr(contract, hook)), mistake.id


# --- the reference against independent computations ---------------------------------------------------------


def strided_loops(num_tokens: int, stride: int) -> torch.Tensor:
    mask = torch.ones(num_tokens, num_tokens, dtype=torch.bool)
    for i in range(num_tokens):
        for j in range(i + 1):
            if i - j < stride or (i - j) % stride == 0:
                mask[i, j] = False
    return mask


def dilated_loops(num_tokens: int, window: int, dilation: int) -> torch.Tensor:
    mask = torch.ones(num_tokens, num_tokens, dtype=torch.bool)
    for i in range(num_tokens):
        seen = 0
        for j in range(i, -1, -dilation):  # i, i - d, i - 2d, … while it exists
            if seen == window:
                break
            mask[i, j] = False
            seen += 1
    return mask


@pytest.mark.parametrize("num_tokens", [1, 2, 5, 11, 17])
def test_strided_mask_equals_the_loops(num_tokens):
    for stride in range(1, num_tokens + 3):
        got = reference.strided_mask(num_tokens, stride)
        assert got.dtype == torch.bool and got.shape == (num_tokens, num_tokens)
        assert torch.equal(got, strided_loops(num_tokens, stride)), (num_tokens, stride)


@pytest.mark.parametrize("num_tokens", [1, 4, 9, 16])
def test_strided_mask_sees_every_earlier_token_at_stride_1_and_from_stride_t(num_tokens):
    causal = chapter.causal_mask(num_tokens)
    for stride in (1, num_tokens, num_tokens + 1, 3 * num_tokens):
        assert torch.equal(reference.strided_mask(num_tokens, stride), causal), stride


@pytest.mark.parametrize("num_tokens", [1, 3, 8, 13])
def test_dilated_window_mask_equals_the_loops(num_tokens):
    for window, dilation in itertools.product(range(1, num_tokens + 3), range(1, num_tokens + 3)):
        got = reference.dilated_window_mask(num_tokens, window, dilation)
        assert got.dtype == torch.bool and got.shape == (num_tokens, num_tokens)
        assert torch.equal(got, dilated_loops(num_tokens, window, dilation)), (num_tokens, window, dilation)


@pytest.mark.parametrize("num_tokens", [1, 5, 12])
def test_dilated_window_mask_is_the_sliding_window_at_dilation_1_and_only_itself_from_dilation_t(num_tokens):
    only_itself = ~torch.eye(num_tokens, dtype=torch.bool)
    for window in range(1, num_tokens + 2):
        sliding = chapter.sliding_window_mask(num_tokens, window)
        assert torch.equal(reference.dilated_window_mask(num_tokens, window, 1), sliding), window
        for dilation in (num_tokens, num_tokens + 4):
            assert torch.equal(reference.dilated_window_mask(num_tokens, window, dilation), only_itself)
        assert torch.equal(reference.dilated_window_mask(num_tokens, 1, 3), only_itself)


@pytest.mark.parametrize(
    "call",
    [
        lambda: reference.strided_mask(5, 0),
        lambda: reference.strided_mask(5, -3),
        lambda: reference.strided_mask(0, 2),
        lambda: reference.dilated_window_mask(5, 0, 2),
        lambda: reference.dilated_window_mask(5, 2, 0),
        lambda: reference.dilated_window_mask(5, 2, -1),
        lambda: reference.dilated_window_mask(-2, 2, 2),
    ],
)
def test_the_masks_refuse_bad_sizes(call):
    with pytest.raises(ValueError):
        call()


def test_the_masks_are_built_on_the_device_given():
    for mask in (reference.strided_mask(7, 3, device="meta"), reference.dilated_window_mask(7, 3, 2, device="meta")):
        assert mask.device.type == "meta" and mask.dtype == torch.bool and mask.shape == (7, 7)


def test_entropy_equals_categoricals_on_rows_without_zeros():
    gen = torch.Generator().manual_seed(7)
    for shape in [(5, 9), (3, 4, 7), (2, 3, 5, 8), (1, 1, 1)]:
        weights = torch.rand(shape, generator=gen, dtype=torch.float64).add(0.01).softmax(dim=-1)
        expected = torch.distributions.Categorical(probs=weights).entropy()
        got = reference.attention_entropy(weights)
        assert got.shape == shape[:-1] and got.dtype == torch.float64
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_entropy_of_one_hot_uniform_and_zero_rows():
    one_hot = torch.eye(5, dtype=torch.float64)[[3, 0, 4]]  # (3, 5)
    assert torch.equal(reference.attention_entropy(one_hot), torch.zeros(3, dtype=torch.float64))
    for keys in (1, 2, 7, 10):
        uniform = torch.full((2, 3, keys), 1.0 / keys, dtype=torch.float64)
        torch.testing.assert_close(
            reference.attention_entropy(uniform), torch.full((2, 3), math.log(keys), dtype=torch.float64)
        )
    rows = torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.0, 0.5], [0.2, 0.3, 0.5]], dtype=torch.float64)
    got = reference.attention_entropy(rows)
    assert not got.isnan().any()
    expected = [0.0, math.log(2.0), -sum(p * math.log(p) for p in (0.2, 0.3, 0.5))]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64))


def test_entropy_of_causal_weights_matches_categorical_on_the_seen_keys():
    scores = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    weights = chapter.softmax_weights(chapter.apply_causal_mask(scores))
    got = reference.attention_entropy(weights)
    for i in range(6):  # row i sees keys 0 .. i: Categorical over those alone
        seen = torch.distributions.Categorical(probs=weights[:, i, : i + 1]).entropy()
        torch.testing.assert_close(got[:, i], seen, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_entropy_keeps_dtype_and_device_and_leaves_its_input(dtype):
    weights = torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]], dtype=dtype)
    before = weights.clone()
    got = reference.attention_entropy(weights)
    assert got.dtype == dtype and torch.equal(weights, before)
    expected = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    torch.testing.assert_close(got.double(), torch.tensor([expected, 0.0], dtype=torch.float64), rtol=1e-2, atol=1e-3)
    assert reference.attention_entropy(weights.to("meta")).device.type == "meta"
    view = torch.rand(2, 5, 4, dtype=torch.float64).softmax(dim=-2).transpose(-2, -1)  # rows of a transposed view
    torch.testing.assert_close(reference.attention_entropy(view), reference.attention_entropy(view.contiguous()))


@dataclass
class Drawn:
    """A figure read back the way the grader reads one, every image of it (in axes order)."""

    arrays: list[torch.Tensor]
    titles: list[str]
    labels: list[tuple[str, str]]
    ticks: list[tuple[list[str], list[str]]]
    colorbars: int
    shown: bool = False

    def same(self, other: Drawn) -> bool:
        return (
            len(self.arrays) == len(other.arrays)
            and all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(self.arrays, other.arrays))
            and (self.titles, self.labels, self.ticks, self.colorbars, self.shown)
            == (other.titles, other.labels, other.ticks, other.colorbars, other.shown)
        )


def read(fig, shown: bool = False) -> Drawn:
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure), type(fig)
    images = [(ax, image) for ax in fig.axes for image in ax.images]
    return Drawn(
        arrays=[torch.from_numpy(image.get_array().astype("float64").filled(float("nan"))) for _, image in images],
        titles=[ax.get_title() for ax, _ in images],
        labels=[(ax.get_xlabel(), ax.get_ylabel()) for ax, _ in images],
        ticks=[
            ([t.get_text() for t in ax.get_xticklabels()], [t.get_text() for t in ax.get_yticklabels()])
            for ax, _ in images
        ],
        colorbars=sum(image.colorbar is not None for _, image in images),
        shown=shown,
    )


@contextlib.contextmanager
def recording_show():
    seen: list[bool] = []
    saved = plt.show
    plt.show = lambda *a, **k: seen.append(True)
    try:
        yield seen
    finally:
        plt.show = saved


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 7), (1, 5, 2), (4, 2, 9)])
def test_the_grid_draws_every_head_as_it_is(shape):
    weights = torch.rand(shape, dtype=torch.float64).softmax(dim=-1)
    with recording_show() as seen:
        fig = reference.plot_head_grid(weights)
    drawn = read(fig, bool(seen))
    assert torch.equal(torch.stack(drawn.arrays), weights), "the stack of the images is the (H, Tq, Tk) weights"
    assert drawn.titles == [f"Head {h}" for h in range(shape[0])]
    assert drawn.labels == [("Key positions", "Query positions")] * shape[0]
    assert drawn.colorbars >= 1 and not drawn.shown
    assert [im.colorbar is not None for ax in fig.axes for im in ax.images][0], "the first image has the colorbar"


def test_the_grid_puts_the_tokens_on_every_head_and_takes_weights_that_require_grad():
    weights = torch.rand(2, 3, 4).softmax(dim=-1).requires_grad_()
    drawn = read(reference.plot_head_grid(weights, (["a", "b", "c"], ["w", "x", "y", "z"])))
    assert drawn.ticks == [(["w", "x", "y", "z"], ["a", "b", "c"])] * 2
    assert torch.equal(torch.stack(drawn.arrays), weights.detach().double())
    square = read(reference.plot_head_grid(torch.rand(3, 2, 2), ["p", "q"]))
    assert square.ticks == [(["p", "q"], ["p", "q"])] * 3


@pytest.mark.parametrize(
    "weights, tokens",
    [(torch.rand(3, 4), None), (torch.rand(2, 2, 3, 3), None), (torch.rand(5), None), (torch.rand(2, 3, 4), ["a"])],
    ids=["matrix", "batched", "vector", "wrong-tokens"],
)
def test_the_grid_refuses_what_is_not_heads(weights, tokens):
    with pytest.raises(ValueError):
        reference.plot_head_grid(weights, tokens)


# --- the hidden cases ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cases() -> dict[str, list[Case]]:
    return hidden.hidden_cases(Maker(0))


def test_the_hidden_cases_cover_every_hook_in_the_rows_order(cases):
    assert list(cases) == HOOKS
    for hook, hook_cases in cases.items():
        names = [c.name for c in hook_cases]
        assert len(hook_cases) >= 5 and len(names) == len(set(names)), hook
        assert all(c.hook == hook for c in hook_cases)
        meta = [c.name for c in hook_cases if c.meta]
        assert len(meta) == (0 if hook == "plot_head_grid" else 1), (hook, meta)
        raising = [c for c in hook_cases if c.expect_error == "ValueError"]
        assert bool(raising) == (hook != "attention_entropy"), f"{hook}: what raises is the contract's"
    assert [c.name for c in cases["attention_entropy"] if c.half] and not any(c.half for c in cases["strided_mask"])


def test_the_hidden_cases_are_the_same_shapes_under_every_seed():
    def shapes(seed):
        return [
            (c.name, c.what, c.what_zh, {k: tuple(v.shape) if isinstance(v, torch.Tensor) else str(v)
                                         for k, v in c.args.items()})
            for hook_cases in hidden.hidden_cases(Maker(seed)).values()
            for c in hook_cases
        ]  # fmt: skip

    assert shapes(0) == shapes(4242)


ALLOWED_WORDS = {"ValueError", "NaN", "window", "inf"}
"""English a case's Chinese keeps (the kit's test_messages allows these and more): names, not prose."""


def test_every_case_says_what_it_checks_in_english_and_in_chinese_with_the_same_numbers(cases):
    for case in (c for hook_cases in cases.values() for c in hook_cases):
        where = f"{case.hook}[{case.name}]"
        assert case.what and not CJK.search(case.what), where
        assert CJK.search(case.what_zh), f"{where}: {case.what_zh!r}"
        numbers = r"\d+(?:\.\d+)?"
        assert sorted(re.findall(numbers, case.what)) == sorted(re.findall(numbers, case.what_zh)), where
        english = [t for t in re.findall(r"[A-Za-z_][\w.]*", case.what_zh) if len(t) >= 3]
        assert [t for t in english if not re.search(r"[_.\d]", t) and t not in ALLOWED_WORDS] == [], where


def _sizes(case: Case) -> dict[str, int]:
    args = case.args
    if case.hook == "strided_mask":
        return {"T": args["num_tokens"], "stride": args["stride"]}
    if case.hook == "dilated_window_mask":
        return {"T": args["num_tokens"], "window": args["window"], "dilation": args["dilation"]}
    shape = args["weights"].shape
    sizes = {"T": shape[-2], "T_k": shape[-1]}
    if case.hook == "plot_head_grid" and len(shape) >= 3:
        sizes["num_heads"] = shape[-3]
    return sizes


def test_sizes_never_coincide_but_where_a_case_declares_it(cases):
    for case in (c for hook_cases in cases.values() for c in hook_cases):
        sizes = {k: v for k, v in _sizes(case).items() if v > 0}
        names = sorted(sizes)
        found = {f"{a}={b}" for i, a in enumerate(names) for b in names[i + 1 :] if sizes[a] == sizes[b]}
        found |= {f"{n}=6" for n in names if sizes[n] == 6}
        declared = {"=".join(sorted(c.split("="))) for c in case.coincide}
        assert found == declared, (case.hook, case.name, sizes)


def call(fn, case: Case, device: str = "cpu"):
    """``fn`` on the case's inputs in float64 (on ``device``), as the learner's process passes them."""
    args = {}
    for name, value in case.args.items():
        if value is DEVICE:
            value = device
        elif isinstance(value, torch.Tensor):
            value = value.to(device)
            if name in case.transposed:
                value = value.transpose(-2, -1).contiguous().transpose(-2, -1)
            if name in case.requires_grad:
                value = value.clone().requires_grad_()
        args[name] = value
    return fn(**args)


def outcome(fn, case: Case):
    """What ``fn`` does on a case: ``("raises", type)``, or ``("returns", tensor)``, or ``("draws", Drawn)``."""
    try:
        with recording_show() as seen:
            result = call(fn, case)
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome
        return ("raises", type(exc))
    if isinstance(result, torch.Tensor):
        return ("returns", result)
    drawn = read(result, bool(seen))
    plt.close(result)
    return ("draws", drawn)


def same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "returns":
        x, y = a[1], b[1]
        return x.shape == y.shape and x.dtype == y.dtype and torch.allclose(x, y, rtol=1e-7, atol=1e-9, equal_nan=False)
    if a[0] == "draws":
        return a[1].same(b[1])
    return a[1] is b[1]


def test_the_reference_passes_its_own_hidden_cases(cases):
    for case in (c for hook_cases in cases.values() for c in hook_cases):
        where = f"{case.hook}[{case.name}]"
        got = outcome(getattr(reference, case.hook), case)
        if case.expect_error:
            assert got == ("raises", ValueError), where
            continue
        assert got[0] == ("draws" if case.hook == "plot_head_grid" else "returns"), (where, got)
        if case.hook in MASKS:
            loops = strided_loops if case.hook == "strided_mask" else dilated_loops
            sizes = [v for k, v in case.args.items() if k != "device"]
            assert torch.equal(got[1], loops(*sizes)), where
        elif case.hook == "attention_entropy":
            weights = case.args["weights"]
            rows = weights.reshape(-1, weights.shape[-1]).tolist()
            expected = torch.tensor([-sum(p * math.log(p) for p in row if p > 0) for row in rows], dtype=torch.float64)
            torch.testing.assert_close(got[1], expected.reshape(weights.shape[:-1]), msg=where)
        else:
            assert torch.equal(torch.stack(got[1].arrays), case.args["weights"]), where
            assert got[1].colorbars >= 1 and got[1].labels[0] == ("Key positions", "Query positions"), where
        if case.meta:
            assert call(getattr(reference, case.hook), case, "meta").device.type == "meta", where


def test_the_reference_passes_in_half_precision_where_a_case_asks(cases):
    for case in (c for hook_cases in cases.values() for c in hook_cases if c.half):
        for dtype in (torch.float16, torch.bfloat16):
            weights = case.args["weights"].to(dtype)
            got = reference.attention_entropy(weights)
            assert got.dtype == dtype
            torch.testing.assert_close(
                got.double(), reference.attention_entropy(weights.double()), rtol=2e-2, atol=2e-2
            )


# --- the catalogue ------------------------------------------------------------------------------------------


def test_the_catalogue_entries_are_complete_and_their_ids_unique_across_every_catalogue():
    ids = [m.id for m in reference.CATALOGUE]
    assert len(ids) == len(set(ids)) and all(KEBAB.match(i) for i in ids)
    assert set(ids).isdisjoint(m.id for m in chapter_mistakes.CATALOGUE + chapter_mistakes.ACCEPTED)
    assert set(ids).isdisjoint(m.id for m in chapter_mistakes.READ_FROM_SOURCE)
    for hook in HOOKS:
        assert len([m for m in reference.CATALOGUE if m.exercise == hook]) >= 2, hook
    for m in reference.CATALOGUE:
        assert isinstance(m, chapter_mistakes.Mistake)
        assert m.hint.strip() and not CJK.search(m.hint) and CJK.search(m.hint_zh), m.id
        assert m.description.strip() and "\n" not in m.description, m.id
        assert set(m.overrides) == {m.exercise}, f"{m.id}: overrides its own hook only"
        assert m.source == "classic" or SEED_TEXT.fullmatch(m.source), m.id
        assert inspect.isfunction(m.overrides[m.exercise])
    assert any("002_5796c8154c5408de" in m.source for m in reference.CATALOGUE)


@pytest.mark.parametrize("mistake", reference.CATALOGUE, ids=[m.id for m in reference.CATALOGUE])
def test_every_mistake_answers_differently_from_the_reference_on_some_hidden_case(mistake, cases):
    hook = mistake.exercise
    wrong = mistake.overrides[hook]
    differ = [c.name for c in cases[hook] if not same(outcome(wrong, c), outcome(getattr(reference, hook), c))]
    assert differ, f"{mistake.id}: answers like the reference on every hidden case of {hook}"


def test_the_mistakes_that_should_raise_are_told_apart_by_the_raises_cases(cases):
    """``dilated-window-unchecked`` differs only where the reference raises: those cases are what catch it."""
    wrong = next(m for m in reference.CATALOGUE if m.id == "dilated-window-unchecked").overrides["dilated_window_mask"]
    raising = [c for c in cases["dilated_window_mask"] if c.expect_error]
    assert all(outcome(wrong, c) != ("raises", ValueError) for c in raising)
    assert all(same(outcome(wrong, c), outcome(reference.dilated_window_mask, c))
               for c in cases["dilated_window_mask"] if not c.expect_error)  # fmt: skip


# --- the stubs --------------------------------------------------------------------------------------------


def test_the_stubs_raise_not_implemented_error_naming_their_exercise(cases):
    from exercises import patterns as stubs

    doc = inspect.getdoc(stubs) or ""
    assert doc.strip().splitlines()[-1] == "Run `pytest exercises/test_patterns.py` to check your work."
    for hook in HOOKS:
        case = next(c for c in cases[hook] if not c.expect_error)
        with pytest.raises(NotImplementedError, match=f"exercise {hook}: not implemented yet — "):
            call(getattr(stubs, hook), case)


def test_every_public_test_is_marked_with_one_of_the_groups_hooks():
    tree = ast.parse((KIT / "exercises" / "test_patterns.py").read_text(encoding="utf-8"))
    marked = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            marks = [ast.unparse(d.args[0]) for d in node.decorator_list
                     if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.exercise"]  # fmt: skip
            marked[node.name] = marks
    assert marked and all(len(m) == 1 for m in marked.values()), marked
    assert {m[0].strip("'\"") for m in marked.values()} == set(HOOKS)


# --- the local check ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("heads", [1, 3])
def test_the_local_check_reads_the_grid_as_the_grader_does(heads):
    """``attnkit check`` judges a figure against the weights (its stand-in for the gold): one head's grid is one
    image of ``(Tq, Tk)``, several heads' a stack; a transposed grid fails either way."""
    from grader.rules import RuledSolution

    weights = torch.rand(heads, 3, 8, dtype=torch.float64).softmax(dim=-1)
    assert RuledSolution._figure_problem(reference.plot_head_grid(weights), {"weights": weights}) is None
    wrong = reference.grid_transposed(weights)
    assert RuledSolution._figure_problem(wrong, {"weights": weights}) is not None
