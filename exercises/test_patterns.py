"""Public tests: the strided and dilated masks, the entropy of attention weights, one heatmap per head."""

import math

import pytest
import torch

from exercises._expect import expect, expect_close, expect_raises, expect_unchanged, f64, like, rand


def strided_oracle(num_tokens, stride):
    """mask[i, j] = not (j <= i and (i - j < stride or (i - j) % stride == 0)), written out with loops."""
    return torch.tensor(
        [
            [not (j <= i and (i - j < stride or (i - j) % stride == 0)) for j in range(num_tokens)]
            for i in range(num_tokens)
        ],
        dtype=torch.bool,
    )


def dilated_oracle(num_tokens, window, dilation):
    """mask[i, j] = False exactly for j in i, i - d, ..., i - (window - 1) d, written out with loops."""
    mask = [[True] * num_tokens for _ in range(num_tokens)]
    for i in range(num_tokens):
        for step in range(window):
            j = i - step * dilation
            if j >= 0:
                mask[i][j] = False
    return torch.tensor(mask, dtype=torch.bool)


def causal(num_tokens, device):
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1).to(device)  # only the future


# --- strided_mask --------------------------------------------------------------------------------------


@pytest.mark.exercise("strided_mask")
def test_strided_mask_worked_example(solution, device):
    # T = 7, stride 3: each token sees itself, the 2 before it, and every 3rd token back (i - 3, i - 6)
    F, T = False, True  # noqa: N806 - a picture of the mask
    expected = torch.tensor(
        [
            [F, T, T, T, T, T, T],
            [F, F, T, T, T, T, T],
            [F, F, F, T, T, T, T],
            [F, F, F, F, T, T, T],
            [T, F, F, F, F, T, T],  # key 0 is 4 back: neither in the band nor on the stride
            [T, T, F, F, F, F, T],
            [F, T, T, F, F, F, F],  # key 0 is 6 back: on the stride
        ],
        device=device,
    )
    expect_close(solution.strided_mask(7, 3, device=device), expected, "T=7, stride=3")


@pytest.mark.exercise("strided_mask")
@pytest.mark.parametrize(
    "num_tokens, stride", [(9, 2), (11, 3), (13, 4), (1, 3)], ids=["T=9-s=2", "T=11-s=3", "T=13-s=4", "T=1"]
)
def test_strided_mask(solution, num_tokens, stride, device):
    got = solution.strided_mask(num_tokens, stride, device=device)
    expect_close(got, strided_oracle(num_tokens, stride).to(device), f"T={num_tokens}, stride={stride}")


@pytest.mark.exercise("strided_mask")
@pytest.mark.parametrize("stride", [1, 5, 9], ids=["stride=1", "stride=T", "stride>T"])
def test_strided_mask_that_sees_every_earlier_token_is_causal(solution, stride, device):
    expect_close(solution.strided_mask(5, stride, device=device), causal(5, device), f"T=5, stride={stride}")


@pytest.mark.exercise("strided_mask")
@pytest.mark.parametrize("num_tokens, stride", [(5, 0), (5, -1), (0, 2)], ids=["stride=0", "stride=-1", "T=0"])
def test_strided_mask_rejects_bad_sizes(solution, num_tokens, stride, device):
    case = f"T={num_tokens}, stride={stride}"
    expect_raises(ValueError, case, solution.strided_mask, num_tokens, stride, device=device)


# --- dilated_window_mask -------------------------------------------------------------------------------


@pytest.mark.exercise("dilated_window_mask")
def test_dilated_window_mask_worked_example(solution, device):
    # T = 7, window 3, dilation 2: token i sees i, i - 2 and i - 4, no more
    F, T = False, True  # noqa: N806 - a picture of the mask
    expected = torch.tensor(
        [
            [F, T, T, T, T, T, T],
            [T, F, T, T, T, T, T],
            [F, T, F, T, T, T, T],
            [T, F, T, F, T, T, T],
            [F, T, F, T, F, T, T],
            [T, F, T, F, T, F, T],
            [T, T, F, T, F, T, F],  # key 0 is 6 back: the 4th key of the grid, one more than the window holds
        ],
        device=device,
    )
    expect_close(solution.dilated_window_mask(7, 3, 2, device=device), expected, "T=7, window=3, dilation=2")


@pytest.mark.exercise("dilated_window_mask")
@pytest.mark.parametrize(
    "num_tokens, window, dilation",
    [(10, 3, 3), (12, 4, 2), (9, 2, 5), (8, 1, 3), (5, 3, 11), (1, 2, 2)],
    ids=["T=10-w=3-d=3", "T=12-w=4-d=2", "T=9-w=2-d=5", "window=1", "dilation>T", "T=1"],
)
def test_dilated_window_mask(solution, num_tokens, window, dilation, device):
    got = solution.dilated_window_mask(num_tokens, window, dilation, device=device)
    case = f"T={num_tokens}, window={window}, dilation={dilation}"
    expect_close(got, dilated_oracle(num_tokens, window, dilation).to(device), case)


@pytest.mark.exercise("dilated_window_mask")
def test_dilated_window_mask_with_dilation_1_is_the_sliding_window(solution, device):
    window = torch.tensor([[j > i or j <= i - 3 for j in range(8)] for i in range(8)], device=device)
    expect_close(solution.dilated_window_mask(8, 3, 1, device=device), window, "T=8, window=3, dilation=1")


@pytest.mark.exercise("dilated_window_mask")
@pytest.mark.parametrize(
    "num_tokens, window, dilation", [(5, 0, 2), (5, 2, 0), (0, 2, 2)], ids=["window=0", "dilation=0", "T=0"]
)
def test_dilated_window_mask_rejects_bad_sizes(solution, num_tokens, window, dilation, device):
    case = f"T={num_tokens}, window={window}, dilation={dilation}"
    expect_raises(ValueError, case, solution.dilated_window_mask, num_tokens, window, dilation, device=device)


# --- attention_entropy --------------------------------------------------------------------------------------


def entropy_oracle(weights):
    """-sum p ln p over the last dim, row by row with math.log, 0 ln 0 = 0, in float64."""
    w = f64(weights)
    rows = w.reshape(-1, w.shape[-1]).tolist()
    out = [-sum(p * math.log(p) for p in row if p > 0) for row in rows]
    return torch.tensor(out, dtype=torch.float64).reshape(w.shape[:-1])


@pytest.mark.exercise("attention_entropy")
def test_attention_entropy_worked_example(solution, dtype, device):
    weights = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0],  # concentrated: all on one key, entropy 0
            [0.5, 0.5, 0.0, 0.0],  # two keys: ln 2
            [0.25, 0.25, 0.25, 0.25],  # dispersed: uniform over 4 keys, ln 4, the most 4 keys allow
            [0.0, 0.0, 0.0, 0.0],  # a query that sees no key: 0, not NaN
        ],
        dtype=dtype,
        device=device,
    )
    expected = torch.tensor([0.0, math.log(2.0), math.log(4.0), 0.0], dtype=dtype, device=device)
    expect_close(solution.attention_entropy(weights), expected, "one-hot, two keys, uniform, no key")


# name: weights shape
ENTROPY_CASES = {"2-D, Tq != Tk": (5, 8), "batched": (3, 4, 7), "4-D heads": (2, 3, 5, 9)}


@pytest.mark.exercise("attention_entropy")
@pytest.mark.parametrize("case", ENTROPY_CASES, ids=list(ENTROPY_CASES))
def test_attention_entropy(solution, case, dtype, device):
    weights = rand(*ENTROPY_CASES[case], seed=41, dtype=dtype, device=device).softmax(dim=-1)
    before = weights.clone()
    got = solution.attention_entropy(weights)
    expect_close(got, like(entropy_oracle(weights), weights), case)
    expect_unchanged(weights, before, case, "weights")


@pytest.mark.exercise("attention_entropy")
def test_attention_entropy_of_causal_weights_has_no_nan(solution, dtype, device):
    case = "causal weights: exact zeros above the diagonal"
    scores = rand(2, 7, 7, seed=42, dtype=dtype, device=device)
    future = torch.ones(7, 7, dtype=torch.bool, device=device).triu(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    got = solution.attention_entropy(weights)
    expect(not bool(got.isnan().any()), case, "got NaN: 0 * ln(0) must count as 0")
    expect_close(got, like(entropy_oracle(weights), weights), case)
    expect_close(got[:, 0], torch.zeros(2, dtype=dtype, device=device), case + ", the first row (one-hot)", atol=0)


# --- plot_head_grid -------------------------------------------------------------------------------------------


@pytest.fixture
def _close_figures():
    """matplotlib, or the grid's tests skip (the other exercises run without it); every figure closed after."""
    plt = pytest.importorskip("matplotlib.pyplot", reason="plot_head_grid needs matplotlib: pip install matplotlib")
    yield
    plt.close("all")


def read_grid(fig, case):
    """What the grader reads of a grid: every image's array, its axes' title and labels, the tick labels, the
    colorbars."""
    from matplotlib.figure import Figure

    expect(isinstance(fig, Figure), case, f"expected a matplotlib Figure, got {type(fig).__name__}")
    images = [(ax, image) for ax in fig.axes for image in ax.images]
    heads = []
    for ax, image in images:
        ticks = {
            axis: dict(zip(a.get_majorticklocs(), a.get_major_formatter().format_ticks(a.get_majorticklocs())))
            for axis, a in (("x", ax.xaxis), ("y", ax.yaxis))
        }
        heads.append(
            {
                "array": torch.from_numpy(image.get_array().astype("float64").filled(float("nan"))),
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "xticks": ticks["x"],
                "yticks": ticks["y"],
            }
        )
    colorbars = sum(image.colorbar is not None for _, image in images)
    return heads, colorbars


def tick_labels(ticks, count):
    return [ticks.get(float(j)) for j in range(count)]


@pytest.mark.exercise("plot_head_grid")
@pytest.mark.usefixtures("_close_figures")
@pytest.mark.parametrize("shape", [(3, 5, 5), (2, 4, 7), (1, 3, 8)], ids=["3 heads 5x5", "2 heads 4x7", "one head"])
def test_plot_head_grid_draws_every_head_as_it_is(solution, shape, dtype, device, monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: shown.append(True))
    weights = rand(*shape, seed=43, dtype=dtype, device=device, low=0.0).softmax(dim=-1)
    case = f"{shape[0]} heads of {shape[1]}x{shape[2]}"
    heads, colorbars = read_grid(solution.plot_head_grid(weights), case)
    expect(not shown, case, "plt.show() was called: return the figure and let the caller show it")
    expect(len(heads) == shape[0], case, f"expected {shape[0]} images (one imshow per head), found {len(heads)}")
    for h, head in enumerate(heads):
        expect_close(head["array"], f64(weights[h]), f"{case}: head {h}'s image (row i = query i)")
        expect(head["title"] == f"Head {h}", case, f"image {h} is titled {head['title']!r}, expected 'Head {h}'")
        expect(head["xlabel"] == "Key positions", case, f"head {h}'s x axis is labelled {head['xlabel']!r}")
        expect(head["ylabel"] == "Query positions", case, f"head {h}'s y axis is labelled {head['ylabel']!r}")
    expect(colorbars >= 1, case, "the figure needs a colorbar")


@pytest.mark.exercise("plot_head_grid")
@pytest.mark.usefixtures("_close_figures")
def test_plot_head_grid_tokens_on_every_head(solution):
    queries, keys = ["A", "long", "road"], ["Your", "journey", "starts", "with"]
    heads, _ = read_grid(solution.plot_head_grid(rand(2, 3, 4, seed=44, low=0.0), (queries, keys)), "token pair")
    expect(len(heads) == 2, "token pair", f"expected 2 images, found {len(heads)}")
    for h, head in enumerate(heads):
        expect(tick_labels(head["xticks"], 4) == keys, "token pair", f"head {h}'s x ticks {head['xticks']}")
        expect(tick_labels(head["yticks"], 3) == queries, "token pair", f"head {h}'s y ticks {head['yticks']}")


@pytest.mark.exercise("plot_head_grid")
@pytest.mark.usefixtures("_close_figures")
def test_plot_head_grid_takes_weights_that_require_grad(solution, device):
    weights = rand(2, 3, 4, seed=45, device=device, low=0.0).softmax(dim=-1).requires_grad_()
    heads, _ = read_grid(solution.plot_head_grid(weights), "requires grad")
    expect_close(heads[1]["array"], f64(weights[1].detach()), "requires grad: detach before drawing")


@pytest.mark.exercise("plot_head_grid")
@pytest.mark.usefixtures("_close_figures")
@pytest.mark.parametrize(
    "case, shape, tokens",
    [
        ("one (3, 4) matrix", (3, 4), None),
        ("batched heads (2, 2, 3, 3)", (2, 2, 3, 3), None),
        ("3 key tokens for 4 keys", (2, 3, 4), (["a", "b", "c"], ["w", "x", "y"])),
    ],
    ids=["matrix", "batched", "wrong-token-count"],
)
def test_plot_head_grid_rejects(solution, case, shape, tokens):
    expect_raises(ValueError, case, solution.plot_head_grid, rand(*shape, seed=46, low=0.0), tokens)
