"""A figure of several images: as many as its gold answer says, read as data, judged as the grader judges.

A figure hook's gold is the reference figure's array read as a learner's is (``grader.child.figures.figure_facts``):
one ``(Tq, Tk)`` image, or, for a per-head grid, the stack ``(H, Tq, Tk)`` of its images in axes order.  The
figure must hold one image for a 2-D gold and ``H`` for a 3-D one (``grader.rules.expected_images``); the
learner's process sends the stack of several images of one shape, or their shapes where they differ.

No hook draws a grid yet: the grids here are drawn by functions written in this file and graded as a figure hook
is (``plot_attention``'s row: a figure, float64), with an ``(H, Tq, Tk)`` gold made as the suite makes a figure's
gold.  The calls run through the child runtime's own ``call_hook``, the reply through the trusted side's schema
and caps, then ``judge``; the local check through ``RuledSolution``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

plt = pytest.importorskip("matplotlib.pyplot", reason="the figure hooks need matplotlib")

from grader.child.call import call_hook  # noqa: E402
from grader.child.figures import FIGURE_IMAGES, figure_facts  # noqa: E402
from grader.child.wire import FIGURE_IMAGES as WIRE_FIGURE_IMAGES  # noqa: E402
from grader.child.wire import CallReply, fit  # noqa: E402
from grader.hook_table import row  # noqa: E402
from grader.instructor.cases import Case, Trial, make_cases  # noqa: E402
from grader.instructor.replies import MalformedReply, caps_for, validate_call_reply  # noqa: E402
from grader.instructor.said import message_in  # noqa: E402
from grader.instructor.verdict import FAILED, PASSED, judge, own_inputs  # noqa: E402
from grader.rules import (  # noqa: E402
    KEY_AXIS_LABEL,
    QUERY_AXIS_LABEL,
    RuledSolution,
    expected_images,
    figure_form_problem,
    image_stack_problem,
)

HOOK = "plot_attention"
"""The figure hook whose row grades the grids here (no grid hook yet): output "figure", float64."""

SEVERAL = "the figure holds 2 images; draw the weights once, with one imshow"
"""plot_attention's refusal of two images, word for word as it always was."""


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def heads(h: int, tq: int, tk: int, seed: int = 0) -> torch.Tensor:
    """``(H, Tq, Tk)`` attention weights, each head different (rows sum to 1)."""
    return torch.rand(h, tq, tk, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).softmax(-1)


def _labelled(fig: Any, ax: Any, image: Any) -> None:
    fig.colorbar(image, ax=ax)
    ax.set_xlabel(KEY_AXIS_LABEL)
    ax.set_ylabel(QUERY_AXIS_LABEL)


def grid(weights: torch.Tensor, tokens: Any = None) -> Any:
    """A correct per-head grid: one imshow per head in axes order, the first axes labelled, with a colorbar."""
    w = weights.detach().cpu().numpy()
    fig, axes = plt.subplots(1, w.shape[0], squeeze=False)
    for h, ax in enumerate(axes[0]):
        image = ax.imshow(w[h])
        if h == 0:
            _labelled(fig, ax, image)
    return fig


def grid_shared_colorbar_on_the_last(weights: torch.Tensor, tokens: Any = None) -> Any:
    """One colour scale for every head, its colorbar made from the last head's image."""
    w = weights.detach().cpu().numpy()
    fig, axes = plt.subplots(1, w.shape[0], squeeze=False)
    images = [ax.imshow(w[h], vmin=float(w.min()), vmax=float(w.max())) for h, ax in enumerate(axes[0])]
    axes[0][0].set_xlabel(KEY_AXIS_LABEL)
    axes[0][0].set_ylabel(QUERY_AXIS_LABEL)
    fig.colorbar(images[-1], ax=list(axes[0]))
    return fig


def grid_missing_one(weights: torch.Tensor, tokens: Any = None) -> Any:
    return grid(weights[:-1])


def grid_reordered(weights: torch.Tensor, tokens: Any = None) -> Any:
    return grid(weights.flip(0))


def grid_transposed(weights: torch.Tensor, tokens: Any = None) -> Any:
    return grid(weights.transpose(-2, -1))


def grid_one_transposed(weights: torch.Tensor, tokens: Any = None) -> Any:
    """Head 1 drawn transposed, the others as they are (of one shape only where the weights are square)."""
    w = weights.detach().cpu().numpy()
    fig, axes = plt.subplots(1, w.shape[0], squeeze=False)
    for h, ax in enumerate(axes[0]):
        image = ax.imshow(w[h].T if h == 1 else w[h])
        if h == 0:
            _labelled(fig, ax, image)
    return fig


def first_head_only(weights: torch.Tensor, tokens: Any = None) -> Any:
    return one_image(weights[0])


def grid_scaled(weights: torch.Tensor, tokens: Any = None) -> Any:
    return grid(weights * 2)


def grid_without_colorbar(weights: torch.Tensor, tokens: Any = None) -> Any:
    w = weights.detach().cpu().numpy()
    fig, axes = plt.subplots(1, w.shape[0], squeeze=False)
    for h, ax in enumerate(axes[0]):
        ax.imshow(w[h])
    axes[0][0].set_xlabel(KEY_AXIS_LABEL)
    axes[0][0].set_ylabel(QUERY_AXIS_LABEL)
    return fig


def one_image(weights: torch.Tensor, tokens: Any = None) -> Any:
    """plot_attention's figure: one image of (Tq, Tk) weights."""
    fig, ax = plt.subplots()
    _labelled(fig, ax, ax.imshow(weights.detach().cpu().numpy()))
    return fig


def two_images(weights: torch.Tensor, tokens: Any = None) -> Any:
    """plot_attention's mistake: the weights drawn twice."""
    w = weights.detach().cpu().numpy()
    fig, (a, b) = plt.subplots(1, 2)
    _labelled(fig, a, a.imshow(w))
    b.imshow(w)
    return fig


# --- the child: what it reads of a figure of several images --------------------------------------------------


def test_the_child_sends_several_images_of_one_shape_as_their_stack_in_axes_order():
    weights = heads(3, 4, 5)
    facts, array = figure_facts(grid(weights))
    assert facts["images"] == 3 and "image_shapes" not in facts and "array_problem" not in facts
    assert array.dtype == torch.float64 and tuple(array.shape) == (3, 4, 5)
    assert torch.equal(array, weights)
    assert (facts["xlabel"], facts["ylabel"], facts["colorbar"]) == (KEY_AXIS_LABEL, QUERY_AXIS_LABEL, True)


def test_the_child_sends_one_image_as_its_own_array():
    weights = heads(1, 4, 5)[0]
    facts, array = figure_facts(one_image(weights))
    assert facts["images"] == 1 and tuple(array.shape) == (4, 5) and torch.equal(array, weights)


def test_the_child_sends_images_of_mixed_shapes_as_their_shapes_and_no_array():
    facts, array = figure_facts(grid_one_transposed(heads(3, 4, 5)))
    assert array is None and facts["images"] == 3
    assert facts["image_shapes"] == [[4, 5], [5, 4], [4, 5]]


def test_the_child_sends_no_array_past_its_cap_of_images():
    assert FIGURE_IMAGES == WIRE_FIGURE_IMAGES == 64
    facts, array = figure_facts(grid(heads(FIGURE_IMAGES + 1, 2, 2)))
    assert facts["images"] == FIGURE_IMAGES + 1 and array is None and "image_shapes" not in facts
    facts, array = figure_facts(grid(heads(FIGURE_IMAGES, 2, 2)))
    assert facts["images"] == FIGURE_IMAGES and tuple(array.shape) == (FIGURE_IMAGES, 2, 2)


def test_an_unreadable_image_of_several_is_named_in_the_array_problem():
    fig = grid(heads(3, 2, 2))
    fig.axes[2].images[0].get_array = lambda: [["a", "b"], ["c", "d"]]  # type: ignore[method-assign]
    facts, array = figure_facts(fig)
    assert array is None and facts["array_problem"].startswith("image 2: ValueError"), facts


# --- the trusted rules: the count is the gold's ----------------------------------------------------------------


def test_the_count_a_figure_must_hold_is_its_golds():
    assert expected_images(torch.zeros(4, 5)) == 1
    assert expected_images(torch.zeros(3, 4, 5)) == 3


def test_one_expected_image_keeps_plot_attentions_words():
    facts = {"images": 2, "xlabel": KEY_AXIS_LABEL}
    assert figure_form_problem(facts) == figure_form_problem(facts, expected=1) == SEVERAL
    none = "the figure holds no image: draw the weights with ax.imshow(...)"
    assert figure_form_problem({"images": 0}, expected=1) == none
    assert figure_form_problem({"images": 1}) is None


@pytest.mark.parametrize(
    "images, phrase",
    [
        (2, "the figure draws 2 images; expected 3, one per head (one imshow per head, in the axes' order)"),
        (1, "the figure draws 1 image; expected 3, one per head"),
        (4, "the figure draws 4 images; expected 3, one per head"),
        (FIGURE_IMAGES + 1, f"the figure draws {FIGURE_IMAGES + 1} images; expected 3, one per head"),
        (0, "the figure holds no image"),
    ],
)
def test_a_count_other_than_the_golds_is_said(images, phrase):
    assert figure_form_problem({"images": images}, expected=3).startswith(phrase)


def test_images_of_mixed_shapes_are_a_problem_not_a_crash():
    facts = {"images": 3, "image_shapes": [[4, 5], [5, 4], [4, 5]]}
    assert figure_form_problem(facts, expected=3) == (
        "the figure's images have different shapes ((4, 5), (5, 4)); expected 3 images of one shape: each head's "
        "(Tq, Tk) weights as they are"
    )
    assert figure_form_problem({"images": 3, "image_shapes": [[4, 5]] * 3}, expected=3) is None


def test_a_stack_names_transposed_and_reordered_heads():
    gold = heads(3, 4, 5)
    assert image_stack_problem(gold.clone(), gold) is None
    assert image_stack_problem(gold.transpose(-2, -1), gold).startswith("the images are the transposes")
    assert image_stack_problem(gold[[0, 2, 1]], gold).startswith("the heads are out of order: image 1 shows head 2")
    square = heads(3, 4, 4)
    flipped = square.clone()
    flipped[2] = square[2].T
    assert image_stack_problem(flipped, square).startswith("the image of head 2 is the transpose of its weights")
    assert image_stack_problem(gold * 2, gold) is None  # the values' own comparison says that


# --- the grader's path: the child's call, the reply's schema and caps, the verdict ---------------------------------


def _trial(weights: torch.Tensor, reference: Any, name: str = "grid") -> Trial:
    """A figure trial of float32 ``weights``, its gold the array of ``reference``'s figure as the suite reads it."""
    drawn = next(c for c in make_cases(0) if c.hook == HOOK and c.name == "square").properties  # the labels' check
    case = Case(HOOK, name, {"weights": weights, "tokens": None}, "a grid of heads", properties=drawn)
    sent = weights.to(torch.float32)
    inputs = {"weights": sent.double()}
    gold = figure_facts(reference(inputs["weights"]))[1]
    plt.close("all")
    call = {
        "hook": HOOK,
        "args": {"weights": {"tensor": "w", "transposed": False}, "tokens": {"value": None}},
        "output": row(HOOK).output,
        "banned": list(row(HOOK).banned),
        "repeat": 1,
        "module": None,
    }
    return Trial(case, "cpu", "float32", call, {"w": sent}, [gold], inputs)


def graded(trial: Trial, fn: Any) -> tuple[str, Any]:
    """``fn`` as the hook, called by the child runtime, its reply checked and judged as the grader does."""
    raw, outputs = call_hook({HOOK: fn}, dict(trial.call, id=0), own_inputs(trial))
    reply = validate_call_reply(json.loads(json.dumps(fit(raw, CallReply))), caps_for(trial))
    return judge(trial, reply, outputs)


@pytest.fixture(scope="module")
def rectangular() -> Trial:
    return _trial(heads(3, 4, 5, seed=1), grid)


@pytest.fixture(scope="module")
def square() -> Trial:
    return _trial(heads(3, 4, 4, seed=2), grid)


def test_the_gold_of_a_grid_is_its_stack(rectangular):
    assert tuple(rectangular.golds[0].shape) == (3, 4, 5)
    assert torch.equal(rectangular.golds[0], rectangular.inputs["weights"])


def test_a_correct_grid_passes(rectangular, square):
    assert graded(rectangular, grid) == (PASSED, "")
    assert graded(square, grid) == (PASSED, "")
    assert graded(square, grid_shared_colorbar_on_the_last) == (PASSED, "")  # red team: one colorbar, any image


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (grid_missing_one, "the figure draws 2 images; expected 3, one per head"),
        (grid_reordered, "the heads are out of order: image 0 shows head 2"),
        (grid_transposed, "the images are the transposes of the heads' weights"),
        (grid_one_transposed, "the figure's images have different shapes ((4, 5), (5, 4)); expected 3 images"),
        (grid_scaled, "the images' arrays: values differ"),
        (grid_without_colorbar, "the figure has no colorbar for the image"),
        (first_head_only, "the figure draws 1 image; expected 3, one per head"),
    ],
    ids=["missing-one", "reordered", "transposed", "mixed-shapes", "scaled", "no-colorbar", "first-head-only"],
)
def test_a_wrong_grid_fails_with_its_reason(rectangular, fn, phrase):
    status, message = graded(rectangular, fn)
    assert status == FAILED and message.startswith(phrase), message
    assert message_in(message, "zh") != message, "said by id, in Chinese too"


def test_one_head_transposed_in_a_square_grid_is_named(square):
    status, message = graded(square, grid_one_transposed)
    assert status == FAILED and message.startswith("the image of head 1 is the transpose of its weights"), message
    assert message_in(message, "zh").startswith("头 1 的图像是它的权重的转置")


def test_the_count_message_in_chinese(rectangular):
    message = graded(rectangular, grid_missing_one)[1]
    assert message_in(message, "zh").startswith("图中画了 2 个图像；应为 3 个，每个头一个")


def test_a_one_image_figure_is_judged_as_ever():
    """plot_attention's own words: a 2-D gold wants one image, and two are the same refusal they always were."""
    weights = heads(1, 4, 5, seed=3)[0]
    trial = _trial(weights, one_image, "one")
    assert tuple(trial.golds[0].shape) == (4, 5)
    assert graded(trial, one_image) == (PASSED, "")
    assert graded(trial, two_images) == (FAILED, SEVERAL)


# --- a child that lies: the trusted side believes the array it reads, within its caps ----------------------------


def _reply(trial: Trial, **facts: Any) -> Any:
    figure = {"images": 3, "xlabel": KEY_AXIS_LABEL, "ylabel": QUERY_AXIS_LABEL, "colorbar": True, **facts}
    header = {"id": 0, "ok": True, "banned": [], "results": [{"type": "matplotlib.figure.Figure", "figure": figure}]}
    return validate_call_reply(header, caps_for(trial))


def test_a_count_the_array_belies_fails_on_the_array(rectangular):
    inputs = {"in.weights": rectangular.tensors["w"].clone()}
    two = {"out0": rectangular.golds[0][:2].clone(), **inputs}
    status, message = judge(rectangular, _reply(rectangular), two)
    assert status == FAILED and message == "the images' arrays: returned shape (2, 4, 5), expected (3, 4, 5)"
    unread = "returned a figure whose image the grader could not read"
    assert judge(rectangular, _reply(rectangular), inputs)[1] == unread
    assert judge(rectangular, _reply(rectangular), {"out0": rectangular.golds[0].clone(), **inputs}) == (PASSED, "")


def test_more_image_shapes_than_the_cap_are_refused(rectangular):
    with pytest.raises(MalformedReply, match="image_shapes"):
        _reply(rectangular, image_shapes=[[4, 5]] * (FIGURE_IMAGES + 1))
    facts = _reply(rectangular, image_shapes=[[4, 5], [5, 4], [4, 5]])["results"][0]["figure"]
    assert facts["image_shapes"] == [[4, 5], [5, 4], [4, 5]]


# --- the local check: the weights stand in for the gold --------------------------------------------------------


def ruled(fn: Any, weights: torch.Tensor) -> list[str]:
    class Learner:
        @staticmethod
        def call(hook: str, weights: torch.Tensor, tokens: Any = None) -> Any:
            return fn(weights, tokens)

    solution = RuledSolution(Learner())
    solution.plot_attention(weights)
    return list(solution.pending)


@pytest.mark.parametrize(
    "fn, phrase",
    [
        (grid, None),
        (grid_shared_colorbar_on_the_last, None),
        (grid_missing_one, "the figure draws 2 images; expected 3, one per head"),
        (grid_reordered, "the heads are out of order: image 0 shows head 2"),
        (grid_transposed, "the images are the transposes of the heads' weights"),
        (grid_one_transposed, "the figure's images have different shapes"),
        (grid_scaled, "the images' arrays differ from the weights"),
        (grid_without_colorbar, "the figure has no colorbar for the image"),
    ],
    ids=["correct", "shared-colorbar", "missing-one", "reordered", "transposed", "mixed-shapes", "scaled",
         "no-colorbar"],
)
def test_the_local_check_reads_a_grid_as_the_grader_does(fn, phrase):
    pending = ruled(fn, heads(3, 4, 5, seed=4).to(torch.float32))
    if phrase is None:
        assert pending == []
    else:
        assert len(pending) == 1 and pending[0].startswith(phrase), pending


def test_the_local_check_keeps_plot_attentions_words():
    weights = heads(1, 4, 5, seed=5)[0].to(torch.float32)
    assert ruled(one_image, weights) == []
    assert ruled(two_images, weights) == [SEVERAL]
