"""Public tests: the attention heatmap, read back from the figure as data (never shown)."""

import pytest
import torch

from exercises._expect import english, expect, expect_close, expect_raises, f64, rand
from grader.rules import is_transpose

plt = pytest.importorskip("matplotlib.pyplot", reason="plot_attention needs matplotlib: pip install matplotlib")
Figure = pytest.importorskip("matplotlib.figure").Figure


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def read_figure(fig, case):
    """What the grader reads of a figure: the image's array, the axis labels, the tick labels, the colorbar."""
    expect(isinstance(fig, Figure), case, f"expected a matplotlib Figure, got {type(fig).__name__}")
    images = [(ax, image) for ax in fig.axes for image in ax.images]
    expect(len(images) == 1, case, f"expected one image (one imshow), found {len(images)}")
    ax, image = images[0]
    array = torch.from_numpy(image.get_array().astype("float64").filled(float("nan")))
    ticks = {
        axis: dict(zip(ax_.get_majorticklocs(), ax_.get_major_formatter().format_ticks(ax_.get_majorticklocs())))
        for axis, ax_ in (("x", ax.xaxis), ("y", ax.yaxis))
    }
    return {
        "array": array,
        "xlabel": ax.get_xlabel(),
        "ylabel": ax.get_ylabel(),
        "xticks": ticks["x"],
        "yticks": ticks["y"],
        "colorbar": image.colorbar is not None,
    }


def expect_image(array, weights, case, what):
    """The image's array is the weights as they are: its transpose is named in the grader's words."""
    weights = f64(weights.detach())
    expect(not is_transpose(array, weights), case, english("figure.transposed"))
    expect_close(array, weights, f"{case}: {what}")


def tick_labels(ticks, count):
    """The label of the tick at each position 0 .. count - 1 (None where there is none)."""
    return [ticks.get(float(j)) for j in range(count)]


@pytest.mark.exercise("plot_attention")
def test_plot_attention_worked_example(solution):
    # two queries ("Your", "journey") looking at three keys ("Your", "journey", "starts"):
    # the picture has 2 rows and 3 columns, its top row is 0.7 0.2 0.1, the keys' words run across
    weights = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    tokens = (["Your", "journey"], ["Your", "journey", "starts"])
    got = read_figure(solution.plot_attention(weights, tokens), "worked example")
    expect_image(got["array"], weights, "worked example", "the image's array is the weights")
    expect(tick_labels(got["xticks"], 3) == ["Your", "journey", "starts"], "worked example",
           f"the x ticks must be the key tokens, got {tick_labels(got['xticks'], 3)}")  # fmt: skip
    expect(tick_labels(got["yticks"], 2) == ["Your", "journey"], "worked example",
           f"the y ticks must be the query tokens, got {tick_labels(got['yticks'], 2)}")  # fmt: skip
    expect(got["colorbar"], "worked example", "the figure needs a colorbar for the image")


@pytest.mark.exercise("plot_attention")
@pytest.mark.parametrize("shape", [(5, 5), (3, 7), (8, 2)], ids=["5x5", "3x7", "8x2"])
def test_plot_attention_draws_the_weights_as_they_are(solution, shape, dtype, device):
    weights = rand(*shape, seed=3, dtype=dtype, device=device, low=0.0).softmax(dim=-1)
    case = f"{shape[0]}x{shape[1]}"
    got = read_figure(solution.plot_attention(weights), case)
    expect_image(got["array"], weights, case, "the image's array (row i = query i)")
    expect(got["xlabel"] == "Key positions", case, f'x axis labelled {got["xlabel"]!r}, expected "Key positions"')
    expect(got["ylabel"] == "Query positions", case, f'y axis labelled {got["ylabel"]!r}, expected "Query positions"')
    expect(got["colorbar"], case, "the figure needs a colorbar for the image")


@pytest.mark.exercise("plot_attention")
def test_plot_attention_one_sequence_names_both_axes(solution):
    words = ["Your", "journey", "starts", "with"]
    got = read_figure(solution.plot_attention(torch.eye(4), words), "4 tokens")
    expect(tick_labels(got["xticks"], 4) == words, "4 tokens", f"x ticks {tick_labels(got['xticks'], 4)}")
    expect(tick_labels(got["yticks"], 4) == words, "4 tokens", f"y ticks {tick_labels(got['yticks'], 4)}")


@pytest.mark.exercise("plot_attention")
def test_plot_attention_takes_weights_that_require_grad(solution, device):
    weights = rand(3, 4, seed=5, device=device, low=0.0).softmax(dim=-1).requires_grad_()
    got = read_figure(solution.plot_attention(weights), "requires grad")
    expect_image(got["array"], weights, "requires grad", "detach before drawing")


@pytest.mark.exercise("plot_attention")
@pytest.mark.parametrize(
    "case, shape, tokens",
    [
        ("batched (2, 3, 4)", (2, 3, 4), None),
        ("heads (2, 2, 3, 3)", (2, 2, 3, 3), None),
        ("3 key tokens for 4 keys", (3, 4), (["a", "b", "c"], ["w", "x", "y"])),
    ],
    ids=["batched", "heads", "wrong-token-count"],
)
def test_plot_attention_rejects(solution, case, shape, tokens):
    expect_raises(ValueError, case, solution.plot_attention, rand(*shape, seed=7, low=0.0), tokens)
