"""Public tests: scores, softmax weights and context vectors."""

import math

import pytest
import torch

from exercises._expect import chapter_inputs, expect_close, expect_shape, expect_unchanged, f64, like, rand

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
