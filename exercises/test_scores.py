"""Public tests: scores, softmax weights (with and without a temperature) and context vectors."""

import math

import pytest
import torch

from exercises._expect import (
    chapter_inputs,
    expect_close,
    expect_raises,
    expect_shape,
    expect_unchanged,
    f64,
    like,
    rand,
)

CHAPTER_ATOL = 1e-4  # the chapter prints 4 decimals


def dot_oracle(q, k):
    """<q_i, k_j> for every pair, in float64 with einsum."""
    return torch.einsum("...id,...jd->...ij", f64(q), f64(k))


# name: (queries shape, keys shape, make keys non-contiguous)
SCORE_CASES = {
    "2-D 6x3": ((6, 3), (6, 3), False),
    "Tq=4 Tk=7": ((4, 5), (7, 5), False),
    "batched 3-D": ((2, 5, 3), (2, 6, 3), False),
    "batched 4-D": ((2, 3, 4, 5), (2, 3, 6, 5), False),
    "T=1 d=1": ((1, 1), (1, 1), False),
    "non-contiguous keys": ((2, 4, 3), (2, 5, 3), True),
}


def score_inputs(case, dtype, device):
    q_shape, k_shape, transposed = SCORE_CASES[case]
    queries = rand(*q_shape, seed=1, dtype=dtype, device=device)
    if transposed:  # a (..., d, Tk) tensor viewed as (..., Tk, d)
        keys = rand(*k_shape[:-2], k_shape[-1], k_shape[-2], seed=2, dtype=dtype, device=device).transpose(-2, -1)
    else:
        keys = rand(*k_shape, seed=2, dtype=dtype, device=device)
    return queries, keys


@pytest.mark.exercise("dot_product_scores")
@pytest.mark.parametrize("case", SCORE_CASES)
def test_dot_product_scores(solution, case, dtype, device):
    queries, keys = score_inputs(case, dtype, device)
    got = solution.dot_product_scores(queries, keys)
    expect_close(got, like(dot_oracle(queries, keys), queries), case)


@pytest.mark.exercise("dot_product_scores")
def test_dot_product_scores_chapter_numbers(solution, dtype, device):
    inputs = chapter_inputs(dtype, device)
    got = solution.dot_product_scores(inputs, inputs)
    expect_shape(got, (6, 6), "chapter")
    journey = torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865], dtype=dtype, device=device)
    expect_close(got[1], journey, "chapter, row 1 (journey)", atol=CHAPTER_ATOL, rtol=0)


@pytest.mark.exercise("scaled_dot_product_scores")
@pytest.mark.parametrize(
    "case, q_shape, k_shape",
    [
        ("d_k=4 Tq=3 Tk=5", (2, 3, 4), (2, 5, 4)),
        ("d_k=1", (4, 1), (6, 1)),
        ("d_k=9 4-D", (2, 3, 5, 9), (2, 3, 7, 9)),
    ],
    ids=["d_k=4", "d_k=1", "d_k=9-4D"],
)
def test_scaled_dot_product_scores(solution, case, q_shape, k_shape, dtype, device):
    queries = rand(*q_shape, seed=3, dtype=dtype, device=device)
    keys = rand(*k_shape, seed=4, dtype=dtype, device=device)
    expected = dot_oracle(queries, keys) / math.sqrt(k_shape[-1])
    expect_close(solution.scaled_dot_product_scores(queries, keys), like(expected, queries), case)


# name: (scores shape, dim, how to make the scores)
SOFTMAX_CASES = {
    "2-D dim=-1": ((4, 7), -1, "rand"),
    "batched dim=-1": ((2, 6, 6), -1, "rand"),
    "batched dim=1": ((2, 5, 3), 1, "rand"),
    "4-D dim=0": ((3, 2, 4, 5), 0, "rand"),
    "logits around 1e4": ((2, 6, 6), -1, "huge"),
    "some -inf": ((2, 6, 6), -1, "masked"),
}


def softmax_scores(case, dtype, device):
    shape, _, kind = SOFTMAX_CASES[case]
    scores = rand(*shape, seed=5, dtype=dtype, device=device, low=-3.0, high=3.0)
    if kind == "huge":
        scores = scores + torch.tensor([1e4, -1e4], dtype=dtype, device=device).view(2, 1, 1)
    if kind == "masked":
        scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool, device=device).triu(1), float("-inf"))
    return scores


@pytest.mark.exercise("softmax_weights")
@pytest.mark.parametrize("case", SOFTMAX_CASES)
def test_softmax_weights(solution, case, dtype, device):
    scores = softmax_scores(case, dtype, device)
    dim = SOFTMAX_CASES[case][1]
    before = scores.clone()
    got = solution.softmax_weights(scores, dim=dim)
    expect_close(got, like(torch.softmax(f64(scores), dim=dim), scores), case)
    expect_unchanged(scores, before, case, "scores")


@pytest.mark.exercise("softmax_weights")
def test_softmax_weights_all_masked_row_is_zero(solution, dtype, device):
    case = "row 0 all -inf"
    scores = rand(3, 4, seed=6, dtype=dtype, device=device)
    scores[0] = float("-inf")
    expected = torch.softmax(f64(scores), dim=-1)
    expected[0] = 0.0  # torch.softmax gives NaN here; the exercise asks for zeros
    expect_close(solution.softmax_weights(scores, dim=-1), like(expected, scores), case)


@pytest.mark.exercise("softmax_weights")
def test_softmax_weights_chapter_numbers(solution, dtype, device):
    inputs = chapter_inputs(dtype, device)
    got = solution.softmax_weights(inputs @ inputs.T, dim=-1)
    expect_shape(got, (6, 6), "chapter")
    journey = torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581], dtype=dtype, device=device)
    expect_close(got[1], journey, "chapter, row 1 (journey)", atol=CHAPTER_ATOL, rtol=0)


# scores [0, ln 2]: the weights are 1 : 2 at temperature 1, 1 : 4 at 1/2 (the gap doubles), 1 : sqrt(2) at 2
BY_HAND = {
    "T=1": (1.0, [1 / 3, 2 / 3]),
    "T=0.5": (0.5, [1 / 5, 4 / 5]),
    "T=2": (2.0, [1 / (1 + math.sqrt(2)), math.sqrt(2) / (1 + math.sqrt(2))]),
}


@pytest.mark.exercise("softmax_with_temperature")
@pytest.mark.parametrize("case", BY_HAND)
def test_softmax_with_temperature_by_hand(solution, case, dtype, device):
    temperature, expected = BY_HAND[case]
    scores = torch.tensor([0.0, math.log(2.0)], dtype=dtype, device=device)
    got = solution.softmax_with_temperature(scores, temperature, dim=-1)
    expect_close(got, torch.tensor(expected, dtype=dtype, device=device), f"scores [0, ln 2], {case}")


# name: (scores shape, dim, temperature, scores from low to low + 6)
TEMPERATURE_CASES = {
    "T=1 is softmax_weights": ((2, 5, 7), -1, 1.0, -3.0),
    "T=0.3 sharpens": ((4, 7), -1, 0.3, -3.0),
    "T=3 flattens, dim=1": ((2, 5, 3), 1, 3.0, -3.0),
    "T=1e-4 near one-hot": ((2, 5, 7), -1, 1e-4, 1.0),  # scores / T from 1e4 to 7e4: exp overflows
    "T=1e4 near uniform": ((2, 5, 7), -1, 1e4, -3.0),
    "T=0.7 4-D dim=0": ((3, 2, 4, 5), 0, 0.7, -3.0),
}


@pytest.mark.exercise("softmax_with_temperature")
@pytest.mark.parametrize("case", TEMPERATURE_CASES)
def test_softmax_with_temperature(solution, case, dtype, device):
    shape, dim, temperature, low = TEMPERATURE_CASES[case]
    scores = rand(*shape, seed=9, dtype=dtype, device=device, low=low, high=low + 6.0)
    before = scores.clone()
    got = solution.softmax_with_temperature(scores, temperature, dim=dim)
    expect_close(got, like(torch.softmax(f64(scores) / temperature, dim=dim), scores), case)
    expect_unchanged(scores, before, case, "scores")


@pytest.mark.exercise("softmax_with_temperature")
def test_softmax_with_temperature_masked_rows(solution, dtype, device):
    case = "causal -inf, row 2 all -inf, T=0.5"
    scores = rand(4, 5, seed=10, dtype=dtype, device=device, low=-3.0, high=3.0)
    scores = scores.masked_fill(torch.ones(4, 5, dtype=torch.bool, device=device).triu(1), float("-inf"))
    scores[2] = float("-inf")
    expected = torch.softmax(f64(scores) / 0.5, dim=-1)
    expected[2] = 0.0  # torch.softmax gives NaN here; the exercise asks for zeros
    expect_close(solution.softmax_with_temperature(scores, 0.5, dim=-1), like(expected, scores), case)


@pytest.mark.exercise("softmax_with_temperature")
@pytest.mark.parametrize("temperature", [0.0, -1.0], ids=["T=0", "T=-1"])
def test_softmax_with_temperature_rejects_non_positive(solution, temperature, dtype, device):
    scores = rand(3, 4, seed=11, dtype=dtype, device=device)
    expect_raises(ValueError, f"temperature {temperature}", solution.softmax_with_temperature, scores, temperature)


def context_oracle(weights, values):
    """sum_j weights[..., i, j] * values[..., j, :], as an explicit sum over j."""
    w, v = f64(weights), f64(values)
    return sum(w[..., :, j, None] * v[..., j, None, :] for j in range(w.shape[-1]))


@pytest.mark.exercise("context_vectors")
@pytest.mark.parametrize(
    "case, w_shape, v_shape",
    [
        ("2-D dv=3 Tk=6", (6, 6), (6, 3)),
        ("Tq=4 Tk=5 dv=7", (4, 5), (5, 7)),
        ("batched 4-D", (2, 3, 4, 5), (2, 3, 5, 2)),
    ],
    ids=["2-D", "dv!=Tk", "batched-4D"],
)
def test_context_vectors(solution, case, w_shape, v_shape, dtype, device):
    weights = torch.softmax(rand(*w_shape, seed=7, dtype=dtype, device=device), dim=-1)
    values = rand(*v_shape, seed=8, dtype=dtype, device=device)
    expect_close(solution.context_vectors(weights, values), like(context_oracle(weights, values), values), case)


@pytest.mark.exercise("context_vectors")
def test_context_vectors_chapter_numbers(solution, dtype, device):
    inputs = chapter_inputs(dtype, device)
    weights = torch.softmax(inputs @ inputs.T, dim=-1)
    got = solution.context_vectors(weights, inputs)
    expect_shape(got, (6, 3), "chapter")
    journey = torch.tensor([0.4419, 0.6515, 0.5683], dtype=dtype, device=device)
    expect_close(got[1], journey, "chapter, row 1 (journey)", atol=CHAPTER_ATOL, rtol=0)
