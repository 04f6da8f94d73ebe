"""Public tests: inverted-dropout scaling and attention dropout drawn by hand."""

import math

import pytest
import torch

from exercises._expect import expect, expect_close, expect_raises, expect_shape, f64, like, rand


def positive_weights(*shape, seed, dtype, device):
    """Weights in [0.1, 1): never 0, so a dropped entry is unmistakable."""
    return rand(*shape, seed=seed, dtype=dtype, device=device, low=0.1, high=1.0)


@pytest.mark.exercise("dropout_scale")
@pytest.mark.parametrize(
    "case, p, mask_dtype",
    [
        ("p=0.1 keeps x1.1111", 0.1, torch.bool),
        ("p=0.25 float 0/1 mask", 0.25, None),
        ("p=0 identity", 0.0, torch.bool),
    ],
    ids=["p=0.1", "p=0.25-float-mask", "p=0"],
)
def test_dropout_scale(solution, case, p, mask_dtype, dtype, device):
    weights = positive_weights(3, 4, 5, seed=21, dtype=dtype, device=device)
    keep = rand(3, 4, 5, seed=22, device=device) >= 0.0  # about half kept
    keep = keep.to(mask_dtype or dtype)
    expected = torch.where(f64(keep).bool(), f64(weights) / (1.0 - p), torch.zeros(()).double())
    expect_close(solution.dropout_scale(weights, keep, p), like(expected, weights), case)


@pytest.mark.exercise("dropout_scale")
def test_dropout_scale_literal(solution, dtype, device):
    weights = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]], dtype=dtype, device=device)
    keep = torch.tensor([[True, False, True], [False, True, True]], device=device)
    expected = torch.tensor([[0.4, 0.0, 1.0], [0.0, 0.8, 0.0]], dtype=dtype, device=device)
    expect_close(solution.dropout_scale(weights, keep, 0.5), expected, "p=0.5 by hand")


@pytest.mark.exercise("dropout_scale")
def test_dropout_scale_p_one_is_zeros(solution, dtype, device):
    weights = positive_weights(4, 4, seed=23, dtype=dtype, device=device)
    keep = torch.zeros(4, 4, dtype=torch.bool, device=device)
    expect_close(solution.dropout_scale(weights, keep, 1.0), torch.zeros_like(weights), "p=1 (no inf, no NaN)")


@pytest.mark.exercise("dropout_scale")
@pytest.mark.parametrize("p", [-0.1, 1.5], ids=["p=-0.1", "p=1.5"])
def test_dropout_scale_rejects_bad_p(solution, p, dtype, device):
    weights = positive_weights(2, 3, seed=24, dtype=dtype, device=device)
    keep = torch.ones(2, 3, dtype=torch.bool, device=device)
    expect_raises(ValueError, f"p={p}", solution.dropout_scale, weights, keep, p)


@pytest.mark.exercise("attention_dropout")
@pytest.mark.parametrize(
    "case, p, training", [("eval, p=0.5", 0.5, False), ("training, p=0", 0.0, True)], ids=["eval", "p=0"]
)
def test_attention_dropout_off(solution, case, p, training, dtype, device):
    weights = positive_weights(2, 5, 5, seed=25, dtype=dtype, device=device)
    got = solution.attention_dropout(weights, p, training=training)
    expect_close(got, weights.clone(), case)


@pytest.mark.exercise("attention_dropout")
@pytest.mark.parametrize("p", [0.25, 0.6], ids=["p=0.25", "p=0.6"])
def test_attention_dropout_keeps_and_scales(solution, p, dtype, device):
    case = f"p={p}"
    weights = positive_weights(4, 32, 32, seed=26, dtype=dtype, device=device)  # 4096 entries
    gen = torch.Generator(device=device).manual_seed(0)
    got = solution.attention_dropout(weights, p, training=True, generator=gen)
    expect_shape(got, weights.shape, case)
    kept = f64(got) != 0
    # every entry is either dropped (0) or kept and scaled by 1/(1-p)
    expected = torch.where(kept, f64(weights) / (1.0 - p), torch.zeros(()).double())
    expect_close(got, like(expected, weights), f"{case}: each entry dropped (0) or kept and scaled up")
    # the kept share is 1-p, within 5 standard deviations of a binomial
    share, n = kept.double().mean().item(), kept.numel()
    bound = 5 * math.sqrt(p * (1 - p) / n)
    expect(abs(share - (1 - p)) <= bound, case, f"kept {share:.3f} of the entries, expected {1 - p:.3f} ± {bound:.3f}")


@pytest.mark.exercise("attention_dropout")
def test_attention_dropout_uses_generator(solution, dtype, device):
    case = "same generator, other global seed"
    weights = positive_weights(3, 8, 8, seed=27, dtype=dtype, device=device)
    outs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        gen = torch.Generator(device=device).manual_seed(42)
        outs.append(solution.attention_dropout(weights, 0.5, training=True, generator=gen))
    expect_shape(outs[0], weights.shape, case)
    expect_close(outs[1], outs[0], f"{case}: draw the mask with generator=")
    expect((outs[0] == 0).any(), case, "nothing was dropped at p=0.5")


@pytest.mark.exercise("attention_dropout")
def test_attention_dropout_p_one_is_zeros(solution, dtype, device):
    weights = positive_weights(2, 4, 4, seed=28, dtype=dtype, device=device)
    gen = torch.Generator(device=device).manual_seed(0)
    got = solution.attention_dropout(weights, 1.0, training=True, generator=gen)
    expect_close(got, torch.zeros_like(weights), "p=1 (no inf, no NaN)")
