"""Public tests: the causal mask, masking scores with -inf, and renormalising masked weights."""

import pytest
import torch

from exercises._expect import expect_close, expect_raises, expect_unchanged, f64, like, rand


def future(num_tokens):
    """mask[i, j] = (j > i), written out with loops."""
    return torch.tensor([[j > i for j in range(num_tokens)] for i in range(num_tokens)], dtype=torch.bool)


@pytest.mark.exercise("causal_mask")
@pytest.mark.parametrize("num_tokens", [1, 4, 7], ids=["T=1", "T=4", "T=7"])
def test_causal_mask(solution, num_tokens, device):
    got = solution.causal_mask(num_tokens, device=device)
    expect_close(got, future(num_tokens).to(device), f"T={num_tokens}")


@pytest.mark.exercise("causal_mask")
def test_causal_mask_literal(solution, device):
    expected = torch.tensor(
        [
            [False, True, True],
            [False, False, True],
            [False, False, False],
        ],
        device=device,
    )
    expect_close(solution.causal_mask(3, device=device), expected, "T=3, diagonal is False")


@pytest.mark.exercise("causal_mask")
@pytest.mark.parametrize("num_tokens", [0, -2], ids=["T=0", "T=-2"])
def test_causal_mask_rejects_empty(solution, num_tokens, device):
    expect_raises(ValueError, f"T={num_tokens}", solution.causal_mask, num_tokens, device=device)


def masked_oracle(scores):
    """scores with -inf wherever j > i, set entry by entry."""
    out = f64(scores).clone()
    num_tokens = out.shape[-1]
    for i in range(num_tokens):
        for j in range(i + 1, num_tokens):
            out[..., i, j] = float("-inf")
    return out


@pytest.mark.exercise("apply_causal_mask")
@pytest.mark.parametrize(
    "case, shape",
    [("4x4", (4, 4)), ("batched T=5", (2, 5, 5)), ("4-D T=3", (2, 3, 3, 3)), ("T=1", (2, 1, 1))],
    ids=["4x4", "batched-T=5", "4D-T=3", "T=1"],
)
def test_apply_causal_mask(solution, case, shape, dtype, device):
    scores = rand(*shape, seed=11, dtype=dtype, device=device, low=-2.0, high=2.0)
    before = scores.clone()
    got = solution.apply_causal_mask(scores)
    expect_close(got, like(masked_oracle(scores), scores), case)
    expect_unchanged(scores, before, case, "scores")


@pytest.mark.exercise("apply_causal_mask")
def test_apply_causal_mask_rejects_non_square(solution, dtype, device):
    scores = rand(2, 3, 4, seed=12, dtype=dtype, device=device)
    expect_raises(ValueError, "scores (2, 3, 4)", solution.apply_causal_mask, scores)


def renormalized_oracle(weights):
    """w[i, j] / sum_{k <= i} w[i, k] for j <= i, else 0: one row at a time."""
    w = f64(weights)
    out = torch.zeros_like(w)
    for i in range(w.shape[-1]):
        out[..., i, : i + 1] = w[..., i, : i + 1] / w[..., i, : i + 1].sum(dim=-1, keepdim=True)
    return out


@pytest.mark.exercise("renormalize_masked_weights")
@pytest.mark.parametrize(
    "case, shape",
    [("6x6", (6, 6)), ("batched T=5", (2, 5, 5)), ("4-D T=4", (2, 3, 4, 4))],
    ids=["6x6", "batched", "4D"],
)
def test_renormalize_masked_weights(solution, case, shape, dtype, device):
    weights = torch.softmax(rand(*shape, seed=13, dtype=dtype, device=device, low=-2.0, high=2.0), dim=-1)
    got = solution.renormalize_masked_weights(weights)
    expect_close(got, like(renormalized_oracle(weights), weights), case)


@pytest.mark.exercise("renormalize_masked_weights")
def test_renormalize_equals_softmax_of_masked_scores(solution, dtype, device):
    case = "softmax(scores) renormalised == softmax(masked scores)"
    scores = rand(2, 6, 6, seed=14, dtype=dtype, device=device, low=-2.0, high=2.0)
    got = solution.renormalize_masked_weights(torch.softmax(scores, dim=-1))
    expected = torch.softmax(f64(scores).masked_fill(future(6), float("-inf")), dim=-1)
    expect_close(got, like(expected, scores), case)
    expect_close(got[:, 0], like(torch.eye(6)[0].expand(2, 6), scores), "first row is [1, 0, ...]")
