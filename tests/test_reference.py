"""The reference solution agrees with independent computations.

Every expected value here is computed without the reference: with ``torch``'s
own ops (``torch.softmax``, ``F.scaled_dot_product_attention``,
``nn.MultiheadAttention``), with ``einsum`` or explicit loops in float64, or
with the numbers printed in the chapter.  Shapes avoid coincidences: heads,
tokens and head_dim differ, ``d_in != d_out``, ``T < context_length``, and
sizes are not powers of two.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from grader.registry import HOOK_NAMES, load_solution

DTYPES = [torch.float32, torch.float64]
DTYPE_IDS = ["float32", "float64"]
FAST = settings(max_examples=30, deadline=None)

dtypes = st.sampled_from(DTYPES)
seeds = st.integers(min_value=0, max_value=2**31 - 1)
sizes = st.integers(min_value=1, max_value=7)
leading_dims = st.lists(st.integers(min_value=1, max_value=3), min_size=0, max_size=2)


@pytest.fixture(scope="module")
def ref():
    solution = load_solution("reference")
    assert solution.problems == []
    assert solution.implemented == HOOK_NAMES
    return solution


def randn(*shape, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def upper_minus_inf(num_tokens, dtype=torch.float64):
    """``-inf`` strictly above the diagonal, 0 elsewhere, built without the reference."""
    return torch.full((num_tokens, num_tokens), float("-inf"), dtype=dtype).triu(1)


def loop_scores(queries, keys):
    """Dot products with explicit Python loops, in float64."""
    q, k = queries.double(), keys.double()
    *lead, tq, d = q.shape
    tk = k.shape[-2]
    out = torch.zeros(*lead, tq, tk, dtype=torch.float64)
    for idx in itertools.product(*(range(n) for n in lead)):
        for i in range(tq):
            for j in range(tk):
                out[idx + (i, j)] = sum(float(q[idx + (i, c)]) * float(k[idx + (j, c)]) for c in range(d))
    return out


# --- dot_product_scores / scaled_dot_product_scores -------------------------------

SCORE_SHAPES = [
    ((5, 3), (4, 3)),
    ((2, 5, 3), (2, 6, 3)),
    ((2, 3, 4, 5), (2, 3, 7, 5)),
    ((1, 3), (1, 3)),
    ((2, 1, 4), (2, 1, 4)),
    ((2, 5, 1), (2, 3, 1)),
]
SCORE_IDS = ["2d", "3d-Tq!=Tk", "4d", "T=1-2d", "T=1-3d", "d=1"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(("q_shape", "k_shape"), SCORE_SHAPES, ids=SCORE_IDS)
def test_dot_product_scores_match_explicit_loops(ref, q_shape, k_shape, dtype):
    queries, keys = randn(*q_shape, dtype=dtype, seed=1), randn(*k_shape, dtype=dtype, seed=2)
    before = (queries.clone(), keys.clone())
    out = ref.dot_product_scores(queries, keys)
    torch.testing.assert_close(out, loop_scores(queries, keys).to(dtype))
    torch.testing.assert_close((queries, keys), before, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(("q_shape", "k_shape"), SCORE_SHAPES, ids=SCORE_IDS)
def test_scaled_scores_match_explicit_loops_over_sqrt_dk(ref, q_shape, k_shape, dtype):
    queries, keys = randn(*q_shape, dtype=dtype, seed=3), randn(*k_shape, dtype=dtype, seed=4)
    out = ref.scaled_dot_product_scores(queries, keys)
    expected = loop_scores(queries, keys) / math.sqrt(k_shape[-1])
    torch.testing.assert_close(out, expected.to(dtype))


def test_scaled_scores_with_d_k_one_are_unscaled(ref):
    queries = torch.tensor([[2.0], [-3.0]], dtype=torch.float64)
    keys = torch.tensor([[5.0], [0.5], [-1.0]], dtype=torch.float64)
    expected = torch.tensor([[10.0, 1.0, -2.0], [-15.0, -1.5, 3.0]], dtype=torch.float64)
    torch.testing.assert_close(ref.scaled_dot_product_scores(queries, keys), expected, rtol=0, atol=0)


def test_scaled_scores_scale_by_key_dim_not_by_tokens(ref):
    # d_k = 9, T = 4: the scale is 1/3, never 1/2 (sqrt T) or 1/9 (scaled twice)
    queries = torch.ones(4, 9, dtype=torch.float64)
    keys = torch.ones(4, 9, dtype=torch.float64)
    torch.testing.assert_close(
        ref.scaled_dot_product_scores(queries, keys), torch.full((4, 4), 3.0, dtype=torch.float64)
    )


@FAST
@given(dtype=dtypes, lead=leading_dims, tq=sizes, tk=sizes, d=sizes, seed=seeds, transposed=st.booleans())
def test_dot_product_scores_match_einsum(ref, dtype, lead, tq, tk, d, seed, transposed):
    if transposed:  # non-contiguous views of (..., d, T)
        queries = randn(*lead, d, tq, dtype=dtype, seed=seed).transpose(-2, -1)
        keys = randn(*lead, d, tk, dtype=dtype, seed=seed + 1).transpose(-2, -1)
        assert queries.shape[-2:] == (tq, d)
    else:
        queries = randn(*lead, tq, d, dtype=dtype, seed=seed)
        keys = randn(*lead, tk, d, dtype=dtype, seed=seed + 1)
    expected = torch.einsum("...id,...jd->...ij", queries.double(), keys.double())
    torch.testing.assert_close(ref.dot_product_scores(queries, keys), expected.to(dtype))
    torch.testing.assert_close(ref.scaled_dot_product_scores(queries, keys), (expected / math.sqrt(d)).to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dot_product_scores_on_non_contiguous_inputs(ref, dtype):
    queries = randn(2, 3, 5, dtype=dtype, seed=5).transpose(-2, -1)  # (2, 5, 3)
    keys = randn(2, 3, 7, dtype=dtype, seed=6).transpose(-2, -1)  # (2, 7, 3)
    assert not queries.is_contiguous() and not keys.is_contiguous()
    torch.testing.assert_close(ref.dot_product_scores(queries, keys), loop_scores(queries, keys).to(dtype))


# --- softmax_weights -------------------------------------------------------------------


@FAST
@given(
    dtype=dtypes,
    shape=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4),
    data=st.data(),
    seed=seeds,
    offset=st.sampled_from([0.0, 1e4, -1e4]),
)
def test_softmax_weights_match_torch_softmax(ref, dtype, shape, data, seed, offset):
    dim = data.draw(st.integers(min_value=-len(shape), max_value=len(shape) - 1), label="dim")
    scores = (randn(*shape, seed=seed) * 3 + offset).to(dtype)
    before = scores.clone()
    out = ref.softmax_weights(scores, dim=dim)
    torch.testing.assert_close(out, torch.softmax(scores.double(), dim=dim).to(dtype))
    assert not out.isnan().any()
    sums = out.double().sum(dim=dim)  # to 1 within the output dtype's own tolerance (float32: a few ulps, CI's 2.4e-7)
    torch.testing.assert_close(sums.to(dtype), torch.ones(sums.shape, dtype=dtype))
    torch.testing.assert_close(scores, before, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3], ids=lambda d: f"dim={d}")
def test_softmax_weights_positive_and_negative_dim(ref, dim, dtype):
    scores = randn(3, 4, 5, dtype=dtype, seed=7)
    torch.testing.assert_close(ref.softmax_weights(scores, dim=dim), torch.softmax(scores, dim=dim))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_softmax_weights_default_dim_is_last(ref, dtype):
    scores = randn(4, 5, dtype=dtype, seed=8)
    torch.testing.assert_close(ref.softmax_weights(scores), torch.softmax(scores, dim=-1))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("offset", [1e4, -1e4, 3e4], ids=["+1e4", "-1e4", "+3e4"])
def test_softmax_weights_large_logits_do_not_overflow(ref, offset, dtype):
    scores = torch.tensor([[0.0, 1.0, 2.0], [-1.0, 0.5, 0.25]], dtype=torch.float64) + offset
    scores = scores.to(dtype)
    expected = torch.softmax(torch.tensor([[0.0, 1.0, 2.0], [-1.0, 0.5, 0.25]], dtype=torch.float64), dim=-1)
    out = ref.softmax_weights(scores)
    assert out.isfinite().all()
    torch.testing.assert_close(out, torch.softmax(scores, dim=-1))
    if dtype == torch.float64:  # float32 cannot hold 1e4 + 0.25 exactly enough for this
        torch.testing.assert_close(out, expected)


@FAST
@given(dtype=dtypes, rows=sizes, cols=st.integers(min_value=2, max_value=8), seed=seeds)
def test_softmax_weights_minus_inf_gives_exact_zero(ref, dtype, rows, cols, seed):
    scores = randn(rows, cols, dtype=dtype, seed=seed)
    masked = torch.rand(rows, cols, generator=torch.Generator().manual_seed(seed)) < 0.5
    masked[:, seed % cols] = False  # at least one finite entry per row
    scores = scores.masked_fill(masked, float("-inf"))
    out = ref.softmax_weights(scores, dim=-1)
    assert (out[masked] == 0).all()
    assert (out[~masked] > 0).all()
    torch.testing.assert_close(out, torch.softmax(scores.double(), dim=-1).to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("dim", [-1, 0], ids=["rows", "columns"])
def test_softmax_weights_all_minus_inf_slice_gives_zeros(ref, dim, dtype):
    scores = randn(4, 5, dtype=dtype, seed=9)
    dead = (slice(None), 2) if dim == 0 else (2, slice(None))  # column 2 or row 2
    scores[dead] = float("-inf")
    out = ref.softmax_weights(scores, dim=dim)
    assert not out.isnan().any()
    assert (out[dead] == 0).all()
    alive = torch.softmax(scores, dim=dim)
    alive[dead] = 0.0  # torch.softmax gives NaN there
    torch.testing.assert_close(out, alive)


# --- softmax_with_temperature ---------------------------------------------------------------


@FAST
@given(
    dtype=dtypes,
    shape=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=4),
    data=st.data(),
    seed=seeds,
    temperature=st.sampled_from([1e-4, 0.05, 0.3, 1.0, 2.5, 1e4]),
)
def test_softmax_with_temperature_matches_torch_softmax_of_the_divided_scores(
    ref, dtype, shape, data, seed, temperature
):
    dim = data.draw(st.integers(min_value=-len(shape), max_value=len(shape) - 1), label="dim")
    scores = (randn(*shape, seed=seed) * 3).to(dtype)
    before = scores.clone()
    out = ref.softmax_with_temperature(scores, temperature, dim=dim)
    torch.testing.assert_close(out, torch.softmax(scores.double() / temperature, dim=dim).to(dtype))
    assert not out.isnan().any()
    torch.testing.assert_close(scores, before, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_softmax_with_temperature_limits(ref, dtype):
    scores = randn(3, 8, dtype=dtype, seed=12)
    torch.testing.assert_close(ref.softmax_with_temperature(scores, 1.0), torch.softmax(scores, dim=-1))
    one_hot = F.one_hot(scores.argmax(dim=-1), 8).to(dtype)
    torch.testing.assert_close(ref.softmax_with_temperature(scores, 1e-4), one_hot)
    uniform = torch.full_like(scores, 1 / 8)
    torch.testing.assert_close(ref.softmax_with_temperature(scores, 1e6), uniform, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_softmax_with_temperature_in_half_precision_at_a_tiny_temperature(ref, dtype):
    """scores / 1e-4 overflows float16; the reference subtracts the max first, so it never forms them."""
    scores = randn(3, 8, seed=13).to(dtype)
    out = ref.softmax_with_temperature(scores, 1e-4)
    assert out.dtype == dtype and out.isfinite().all()
    torch.testing.assert_close(out, F.one_hot(scores.argmax(dim=-1), 8).to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_softmax_with_temperature_masked_and_all_masked_rows(ref, dtype):
    scores = randn(4, 5, dtype=dtype, seed=14).masked_fill(upper_minus_inf(5)[:4].isinf(), float("-inf"))
    scores[1] = float("-inf")
    out = ref.softmax_with_temperature(scores, 0.6)
    expected = torch.softmax(scores.double() / 0.6, dim=-1)
    expected[1] = 0.0
    torch.testing.assert_close(out, expected.to(dtype))
    assert (out[scores.isinf()] == 0).all()


@pytest.mark.parametrize("temperature", [0.0, -0.5, float("nan")], ids=["0", "-0.5", "nan"])
def test_softmax_with_temperature_refuses_a_temperature_not_above_zero(ref, temperature):
    with pytest.raises(ValueError, match="temperature"):
        ref.softmax_with_temperature(torch.zeros(2, 3), temperature)


# --- context_vectors ----------------------------------------------------------------------


@FAST
@given(dtype=dtypes, lead=leading_dims, tq=sizes, tk=sizes, dv=sizes, seed=seeds)
def test_context_vectors_match_einsum(ref, dtype, lead, tq, tk, dv, seed):
    weights = torch.softmax(randn(*lead, tq, tk, seed=seed), dim=-1).to(dtype)
    values = randn(*lead, tk, dv, dtype=dtype, seed=seed + 1)
    expected = torch.einsum("...qk,...kd->...qd", weights.double(), values.double())
    torch.testing.assert_close(ref.context_vectors(weights, values), expected.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_context_vectors_dv_differs_from_tk(ref, dtype):
    weights = torch.softmax(randn(2, 3, 5, seed=10), dim=-1).to(dtype)  # Tq=3, Tk=5
    values = randn(2, 5, 7, dtype=dtype, seed=11)  # dv=7
    expected = torch.zeros(2, 3, 7, dtype=torch.float64)
    for b, i, j in itertools.product(range(2), range(3), range(5)):
        expected[b, i] += weights[b, i, j].double() * values[b, j].double()
    out = ref.context_vectors(weights, values)
    assert out.shape == (2, 3, 7)
    torch.testing.assert_close(out, expected.to(dtype))


# --- causal_mask / apply_causal_mask / renormalize_masked_weights ---------------------


@pytest.mark.parametrize("num_tokens", [1, 2, 5, 7, 11], ids=lambda t: f"T={t}")
def test_causal_mask_is_true_strictly_above_the_diagonal(ref, num_tokens):
    expected = torch.tensor([[j > i for j in range(num_tokens)] for i in range(num_tokens)], dtype=torch.bool)
    out = ref.causal_mask(num_tokens)
    assert out.dtype == torch.bool
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    assert not out.diagonal().any()


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "meta"], ids=["str-cpu", "device-cpu", "meta"])
def test_causal_mask_is_built_on_the_device(ref, device):
    out = ref.causal_mask(4, device=device)
    assert out.device == torch.device(device)
    assert out.dtype == torch.bool
    assert out.shape == (4, 4)
    if out.device.type == "cpu":
        torch.testing.assert_close(out, torch.ones(4, 4, dtype=torch.bool).triu(1), rtol=0, atol=0)


@pytest.mark.parametrize("num_tokens", [0, -1, -7], ids=["zero", "minus1", "minus7"])
def test_causal_mask_rejects_fewer_than_one_token(ref, num_tokens):
    with pytest.raises(ValueError, match="num_tokens"):
        ref.causal_mask(num_tokens)


@FAST
@given(dtype=dtypes, lead=leading_dims, num_tokens=st.integers(min_value=1, max_value=9), seed=seeds)
def test_apply_causal_mask_matches_triu_of_minus_inf(ref, dtype, lead, num_tokens, seed):
    scores = randn(*lead, num_tokens, num_tokens, dtype=dtype, seed=seed)
    before = scores.clone()
    out = ref.apply_causal_mask(scores)
    expected = scores + upper_minus_inf(num_tokens, dtype)  # -inf above the diagonal, the rest unchanged
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(scores, before, rtol=0, atol=0)
    assert out.data_ptr() != scores.data_ptr()


@pytest.mark.parametrize("shape", [(3, 4), (2, 5, 3), (2, 1, 4, 6)], ids=["2d", "3d", "4d"])
def test_apply_causal_mask_rejects_non_square_scores(ref, shape):
    with pytest.raises(ValueError):
        ref.apply_causal_mask(torch.zeros(shape))


def test_apply_causal_mask_keeps_the_device(ref):
    out = ref.apply_causal_mask(torch.zeros(2, 5, 5, device="meta"))
    assert out.device.type == "meta"
    assert out.shape == (2, 5, 5)


@FAST
@given(dtype=dtypes, lead=leading_dims, num_tokens=st.integers(min_value=1, max_value=9), seed=seeds)
def test_renormalize_masked_weights_equals_softmax_of_masked_scores(ref, dtype, lead, num_tokens, seed):
    scores = randn(*lead, num_tokens, num_tokens, seed=seed)
    weights = torch.softmax(scores, dim=-1).to(dtype)
    before = weights.clone()
    out = ref.renormalize_masked_weights(weights)
    expected = torch.softmax(scores + upper_minus_inf(num_tokens), dim=-1)
    torch.testing.assert_close(out, expected.to(dtype))
    first_row = torch.zeros(num_tokens, dtype=dtype)
    first_row[0] = 1
    torch.testing.assert_close(out[..., 0, :], first_row.expand_as(out[..., 0, :]))
    torch.testing.assert_close(weights, before, rtol=0, atol=0)


def test_renormalize_masked_weights_on_the_chapters_example(ref):
    weights = torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.2, 0.6], [0.1, 0.3, 0.6]], dtype=torch.float64)
    expected = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.1, 0.3, 0.6]], dtype=torch.float64)
    torch.testing.assert_close(ref.renormalize_masked_weights(weights), expected)


# --- dropout_scale / attention_dropout ----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.75], ids=["p=0", "p=0.1", "p=0.5", "p=0.75"])
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_dropout_scale_keeps_and_scales(ref, p, dtype, mask_kind):
    weights = torch.rand(4, 6, generator=torch.Generator().manual_seed(12), dtype=torch.float64).to(dtype) + 0.1
    keep = torch.rand(4, 6, generator=torch.Generator().manual_seed(13)) < 0.6
    assert keep.any() and not keep.all()
    keep_mask = keep if mask_kind == "bool" else keep.to(dtype)
    before = weights.clone()
    expected = torch.where(keep, weights.double() / (1 - p), torch.zeros((), dtype=torch.float64))
    torch.testing.assert_close(ref.dropout_scale(weights, keep_mask, p), expected.to(dtype))
    torch.testing.assert_close(weights, before, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dropout_scale_p0_is_identity_and_p01_scales_by_1_1111(ref, dtype):
    weights = torch.tensor([[0.9, 0.45], [0.18, 0.09]], dtype=dtype)
    all_kept = torch.ones(2, 2, dtype=torch.bool)
    torch.testing.assert_close(ref.dropout_scale(weights, all_kept, 0.0), weights, rtol=0, atol=0)
    out = ref.dropout_scale(weights, all_kept, 0.1)
    torch.testing.assert_close(out, torch.tensor([[1.0, 0.5], [0.2, 0.1]], dtype=dtype))
    torch.testing.assert_close(out / weights, torch.full((2, 2), 1.1111, dtype=dtype), atol=1e-4, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dropout_scale_p1_gives_zeros(ref, dtype):
    weights = torch.rand(3, 4, dtype=dtype) + 0.1
    for keep in (torch.ones(3, 4, dtype=torch.bool), torch.zeros(3, 4, dtype=torch.bool)):
        out = ref.dropout_scale(weights, keep, 1.0)
        assert out.isfinite().all()
        torch.testing.assert_close(out, torch.zeros(3, 4, dtype=dtype), rtol=0, atol=0)


@pytest.mark.parametrize("p", [-0.1, 1.01, 2.0, float("nan")], ids=["-0.1", "1.01", "2", "nan"])
def test_dropout_scale_rejects_p_outside_0_1(ref, p):
    with pytest.raises(ValueError):
        ref.dropout_scale(torch.ones(2, 2), torch.ones(2, 2, dtype=torch.bool), p)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(("p", "training"), [(0.5, False), (1.0, False), (0.0, True)], ids=["eval", "eval-p1", "p0"])
def test_attention_dropout_is_off_in_eval_and_at_p0(ref, p, training, dtype):
    weights = torch.softmax(randn(2, 5, 5, seed=14), dim=-1).to(dtype)
    before = weights.clone()
    out = ref.attention_dropout(weights, p, training=training)
    torch.testing.assert_close(out, before, rtol=0, atol=0)
    torch.testing.assert_close(weights, before, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8], ids=["p=0.1", "p=0.5", "p=0.8"])
def test_attention_dropout_keeps_a_binomial_fraction_scaled_by_1_over_1_minus_p(ref, p, dtype):
    weights = torch.rand(40, 50, generator=torch.Generator().manual_seed(15), dtype=torch.float64).to(dtype) + 0.5
    out = ref.attention_dropout(weights, p, training=True, generator=torch.Generator().manual_seed(16))
    assert out.dtype == dtype and out.shape == weights.shape
    kept = out != 0
    # every entry is either dropped (0) or w / (1 - p)
    torch.testing.assert_close(out[kept], (weights[kept].double() / (1 - p)).to(dtype))
    n = weights.numel()
    mean, sigma = n * (1 - p), math.sqrt(n * p * (1 - p))
    assert abs(int(kept.sum()) - mean) <= 5 * sigma, (int(kept.sum()), mean, sigma)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_attention_dropout_same_generator_state_same_output(ref, dtype):
    weights = torch.rand(6, 7, dtype=dtype) + 0.5
    torch.manual_seed(0)
    first = ref.attention_dropout(weights, 0.5, generator=torch.Generator().manual_seed(17))
    torch.manual_seed(1)  # the global RNG must not matter when a generator is given
    second = ref.attention_dropout(weights, 0.5, generator=torch.Generator().manual_seed(17))
    other = ref.attention_dropout(weights, 0.5, generator=torch.Generator().manual_seed(18))
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert not torch.equal(first != 0, other != 0)  # 42 coin flips agreeing: p = 2**-42


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_attention_dropout_p1_gives_zeros(ref, dtype):
    out = ref.attention_dropout(torch.rand(5, 5, dtype=dtype), 1.0, training=True)
    assert out.isfinite().all()
    torch.testing.assert_close(out, torch.zeros(5, 5, dtype=dtype), rtol=0, atol=0)


# --- split_heads / merge_heads -----------------------------------------------------------------


def slice_heads(x, num_heads):
    head_dim = x.shape[-1] // num_heads
    return torch.stack([x[:, :, h * head_dim : (h + 1) * head_dim] for h in range(num_heads)], dim=1)


@FAST
@given(
    dtype=dtypes,
    batch=st.integers(min_value=1, max_value=3),
    num_tokens=sizes,
    num_heads=st.integers(min_value=1, max_value=5),
    head_dim=st.integers(min_value=1, max_value=5),
    seed=seeds,
    transposed=st.booleans(),
)
def test_split_and_merge_heads_match_column_slicing(
    ref, dtype, batch, num_tokens, num_heads, head_dim, seed, transposed
):
    d = num_heads * head_dim
    if transposed:
        x = randn(batch, d, num_tokens, dtype=dtype, seed=seed).transpose(1, 2)
    else:
        x = randn(batch, num_tokens, d, dtype=dtype, seed=seed)
    before = x.clone()
    heads = ref.split_heads(x, num_heads)
    torch.testing.assert_close(heads, slice_heads(x, num_heads), rtol=0, atol=0)
    merged = ref.merge_heads(heads)
    assert merged.is_contiguous()
    torch.testing.assert_close(merged, x, rtol=0, atol=0)
    torch.testing.assert_close(x, before, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "transposed-view"])
def test_split_heads_on_distinct_sizes(ref, contiguous, dtype):
    batch, num_tokens, num_heads, head_dim = 2, 5, 3, 4  # heads != tokens != head_dim
    d = num_heads * head_dim
    x = randn(batch, num_tokens, d, dtype=dtype, seed=19)
    if not contiguous:
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
        assert not x.is_contiguous()
    heads = ref.split_heads(x, num_heads)
    assert heads.shape == (batch, num_heads, num_tokens, head_dim)
    for h in range(num_heads):
        torch.testing.assert_close(heads[:, h], x[:, :, h * head_dim : (h + 1) * head_dim], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_merge_heads_concatenates_heads_in_order(ref, dtype):
    x = randn(2, 3, 5, 4, dtype=dtype, seed=20)  # (b, H, T, hd)
    expected = torch.cat([x[:, h] for h in range(3)], dim=-1)  # (b, T, H*hd)
    out = ref.merge_heads(x)
    assert out.is_contiguous()
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@pytest.mark.parametrize(("d", "num_heads"), [(10, 3), (7, 2), (6, 4)], ids=["10/3", "7/2", "6/4"])
def test_split_heads_rejects_indivisible_width(ref, d, num_heads):
    with pytest.raises(ValueError):
        ref.split_heads(torch.zeros(2, 5, d), num_heads)


# --- the modules -------------------------------------------------------------------------------

CHAPTER_INPUTS = torch.tensor(
    [
        [0.43, 0.15, 0.89],  # Your
        [0.55, 0.87, 0.66],  # journey
        [0.57, 0.85, 0.64],  # starts
        [0.22, 0.58, 0.33],  # with
        [0.77, 0.25, 0.10],  # one
        [0.05, 0.80, 0.55],  # step
    ]
)


def project(layer, x):
    return F.linear(x, layer.weight, layer.bias)


MODULE_SHAPES = [(3, 2, 6), (5, 7, 4), (6, 9, 1)]
MODULE_IDS = ["d_in=3,d_out=2,T=6", "d_in=5,d_out=7,T=4", "d_in=6,d_out=9,T=1"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize(("d_in", "d_out", "num_tokens"), MODULE_SHAPES, ids=MODULE_IDS)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_self_attention_matches_sdpa(ref, d_in, d_out, num_tokens, qkv_bias, dtype, batched):
    torch.manual_seed(21)
    module = ref.make_self_attention(d_in, d_out, qkv_bias=qkv_bias).to(dtype)
    assert [type(getattr(module, n)) for n in ("W_query", "W_key", "W_value")] == [nn.Linear] * 3
    x = randn(*((3,) if batched else ()), num_tokens, d_in, dtype=dtype, seed=22)
    with torch.no_grad():
        out = module(x)
        q, k, v = (project(getattr(module, n), x) for n in ("W_query", "W_key", "W_value"))
        expected = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == x.shape[:-1] + (d_out,)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize(("d_in", "d_out", "num_tokens"), MODULE_SHAPES, ids=MODULE_IDS)
@pytest.mark.parametrize("dropout", [0.0, 0.5], ids=["dropout=0", "dropout=0.5"])
def test_causal_attention_matches_sdpa_is_causal_in_eval(ref, d_in, d_out, num_tokens, qkv_bias, dtype, dropout):
    context_length = num_tokens + 3  # T < context_length
    torch.manual_seed(23)
    module = ref.make_causal_attention(d_in, d_out, context_length, dropout, qkv_bias=qkv_bias).to(dtype).eval()
    x = randn(2, num_tokens, d_in, dtype=dtype, seed=24)
    with torch.no_grad():
        out, again = module(x), module(x)
        q, k, v = (project(getattr(module, n), x) for n in ("W_query", "W_key", "W_value"))
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(again, out, rtol=0, atol=0)  # eval is deterministic


def test_causal_attention_in_training_without_dropout_equals_eval(ref):
    torch.manual_seed(25)
    module = ref.make_causal_attention(5, 7, 9, 0.0)
    x = randn(2, 6, 5, dtype=torch.float32, seed=26)
    with torch.no_grad():
        trained = module.train()(x)
        evaluated = module.eval()(x)
    torch.testing.assert_close(trained, evaluated, rtol=0, atol=0)


def test_causal_attention_changing_a_token_leaves_earlier_outputs(ref):
    torch.manual_seed(27)
    module = ref.make_causal_attention(5, 7, 8, 0.0).double().eval()
    x = randn(1, 6, 5, seed=28)
    changed = x.clone()
    changed[:, 3] += 10.0
    with torch.no_grad():
        out, out_changed = module(x), module(changed)
    torch.testing.assert_close(out_changed[:, :3], out[:, :3], rtol=0, atol=0)
    assert not torch.allclose(out_changed[:, 3:], out[:, 3:])


@pytest.mark.parametrize("factory", ["causal", "multihead"])
def test_mask_is_a_buffer_in_the_state_dict(ref, factory):
    context_length = 7
    if factory == "causal":
        module = ref.make_causal_attention(5, 6, context_length, 0.1)
    else:
        module = ref.make_multihead_attention(5, 6, context_length, 0.1, num_heads=3)
    state = module.state_dict()
    assert "mask" in state
    assert "mask" not in dict(module.named_parameters())
    expected = torch.ones(context_length, context_length).triu(1).bool()
    torch.testing.assert_close(state["mask"].bool(), expected, rtol=0, atol=0)
    moved = module.to("meta")
    assert moved.mask.device.type == "meta"


MHA_SHAPES = [
    # d, num_heads, num_tokens, context_length: heads != tokens != head_dim
    (12, 3, 5, 7),
    (10, 2, 3, 6),
    (15, 5, 7, 9),
]
MHA_IDS = ["d=12,H=3,T=5", "d=10,H=2,T=3", "d=15,H=5,T=7"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize(("d", "num_heads", "num_tokens", "context_length"), MHA_SHAPES, ids=MHA_IDS)
def test_multihead_attention_matches_nn_multiheadattention(
    ref, d, num_heads, num_tokens, context_length, qkv_bias, dtype
):
    torch.manual_seed(29)
    module = ref.make_multihead_attention(d, d, context_length, 0.3, num_heads, qkv_bias=qkv_bias).to(dtype).eval()
    torch_mha = nn.MultiheadAttention(d, num_heads, dropout=0.3, bias=True, batch_first=True, dtype=dtype).eval()
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([module.W_query.weight, module.W_key.weight, module.W_value.weight]))
        if qkv_bias:
            torch_mha.in_proj_bias.copy_(torch.cat([module.W_query.bias, module.W_key.bias, module.W_value.bias]))
        else:
            torch_mha.in_proj_bias.zero_()
        torch_mha.out_proj.weight.copy_(module.out_proj.weight)
        torch_mha.out_proj.bias.copy_(module.out_proj.bias)
        x = randn(2, num_tokens, d, dtype=dtype, seed=30)
        future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)
        expected, _ = torch_mha(x, x, x, attn_mask=future, need_weights=False)
        out = module(x)
    assert out.shape == (2, num_tokens, d)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize(
    ("d_in", "d_out", "num_heads", "num_tokens", "context_length"),
    [(5, 12, 3, 7, 9), (7, 10, 2, 3, 5), (3, 2, 2, 6, 6), (4, 15, 5, 1, 3)],
    ids=["5->12,H=3,T=7", "7->10,H=2,T=3", "chapter-3->2,H=2,T=6", "4->15,H=5,T=1"],
)
def test_multihead_attention_equals_per_head_sdpa_concatenated_then_projected(
    ref, d_in, d_out, num_heads, num_tokens, context_length, qkv_bias, dtype
):
    torch.manual_seed(31)
    module = ref.make_multihead_attention(d_in, d_out, context_length, 0.2, num_heads, qkv_bias=qkv_bias)
    module = module.to(dtype).eval()
    x = randn(2, num_tokens, d_in, dtype=dtype, seed=32)
    head_dim = d_out // num_heads
    with torch.no_grad():
        q, k, v = (project(getattr(module, n), x) for n in ("W_query", "W_key", "W_value"))
        heads = [
            F.scaled_dot_product_attention(
                *(t[..., h * head_dim : (h + 1) * head_dim] for t in (q, k, v)), is_causal=True
            )
            for h in range(num_heads)
        ]
        expected = project(module.out_proj, torch.cat(heads, dim=-1))
        out = module(x)
    assert out.shape == (2, num_tokens, d_out)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize(("d_out", "num_heads"), [(10, 3), (7, 2), (6, 4)], ids=["10/3", "7/2", "6/4"])
def test_multihead_attention_rejects_indivisible_d_out(ref, d_out, num_heads):
    with pytest.raises(ValueError):
        ref.make_multihead_attention(5, d_out, 8, 0.0, num_heads)


@pytest.mark.parametrize("qkv_bias", [False, True], ids=["no-bias", "bias"])
def test_parameter_counts(ref, qkv_bias):
    d_in, d_out = 5, 12
    qkv = 3 * (d_in * d_out + (d_out if qkv_bias else 0))

    def count(module):
        return sum(p.numel() for p in module.parameters())

    assert count(ref.make_self_attention(d_in, d_out, qkv_bias=qkv_bias)) == qkv
    assert count(ref.make_causal_attention(d_in, d_out, 9, 0.1, qkv_bias=qkv_bias)) == qkv
    multihead = ref.make_multihead_attention(d_in, d_out, 9, 0.1, num_heads=3, qkv_bias=qkv_bias)
    assert count(multihead) == qkv + d_out * d_out + d_out


def test_modules_accept_fewer_tokens_than_context_length(ref):
    torch.manual_seed(33)
    causal = ref.make_causal_attention(3, 4, 10, 0.0).eval()
    multihead = ref.make_multihead_attention(3, 4, 10, 0.0, num_heads=2).eval()
    x = randn(1, 10, 3, dtype=torch.float32, seed=34)
    with torch.no_grad():
        for module in (causal, multihead):
            full = module(x)
            # with a causal mask the first 4 outputs only see the first 4 tokens
            torch.testing.assert_close(module(x[:, :4]), full[:, :4])


def test_chapter_self_attention_v2_numbers(ref):
    torch.manual_seed(789)
    module = ref.make_self_attention(3, 2)
    expected = torch.tensor(
        [
            [-0.0739, 0.0713],
            [-0.0748, 0.0703],
            [-0.0749, 0.0702],
            [-0.0760, 0.0685],
            [-0.0763, 0.0679],
            [-0.0754, 0.0693],
        ]
    )
    with torch.no_grad():
        torch.testing.assert_close(module(CHAPTER_INPUTS), expected, atol=1e-4, rtol=0)


def test_chapter_causal_attention_numbers(ref):
    batch = torch.stack((CHAPTER_INPUTS, CHAPTER_INPUTS))
    torch.manual_seed(123)
    module = ref.make_causal_attention(3, 2, batch.shape[1], 0.0)
    expected = torch.tensor(
        [
            [-0.4519, 0.2216],
            [-0.5874, 0.0058],
            [-0.6300, -0.0632],
            [-0.5675, -0.0843],
            [-0.5526, -0.0981],
            [-0.5299, -0.1081],
        ]
    )
    with torch.no_grad():
        out = module(batch)
    assert out.shape == (2, 6, 2)
    torch.testing.assert_close(out[:, 0], torch.tensor([[-0.4519, 0.2216]] * 2), atol=1e-4, rtol=0)
    torch.testing.assert_close(out, expected.expand(2, 6, 2), atol=1e-4, rtol=0)


def test_chapter_multihead_attention_numbers(ref):
    batch = torch.stack((CHAPTER_INPUTS, CHAPTER_INPUTS))
    torch.manual_seed(123)
    module = ref.make_multihead_attention(3, 2, batch.shape[1], 0.0, num_heads=2)
    expected = torch.tensor(
        [
            [0.3190, 0.4858],
            [0.2943, 0.3897],
            [0.2856, 0.3593],
            [0.2693, 0.3873],
            [0.2639, 0.3928],
            [0.2575, 0.4028],
        ]
    )
    with torch.no_grad():
        out = module(batch)
    assert out.shape == (2, 6, 2)
    torch.testing.assert_close(out[:, 0], torch.tensor([[0.3190, 0.4858]] * 2), atol=1e-4, rtol=0)
    torch.testing.assert_close(out, expected.expand(2, 6, 2), atol=1e-4, rtol=0)


# --- long sequences -----------------------------------------------------------------------------------


def window_mask_by_loops(num_tokens, window):
    """True where key j is in the future of query i or more than ``window - 1`` positions behind it."""
    return torch.tensor([[j > i or i - j >= window for j in range(num_tokens)] for i in range(num_tokens)])


@FAST
@given(num_tokens=st.integers(min_value=1, max_value=12), window=st.integers(min_value=1, max_value=14))
def test_sliding_window_mask_matches_explicit_loops(ref, num_tokens, window):
    got = ref.sliding_window_mask(num_tokens, window)
    assert got.dtype == torch.bool and torch.equal(got, window_mask_by_loops(num_tokens, window))
    assert torch.equal((~got).sum(dim=-1), torch.arange(num_tokens).clamp(max=window - 1) + 1)  # keys seen per row


@pytest.mark.parametrize("window", [7, 8, 30], ids=["w=T", "w=T+1", "w>>T"])
def test_sliding_window_mask_covering_the_sequence_is_the_causal_mask(ref, window):
    assert torch.equal(ref.sliding_window_mask(7, window), torch.ones(7, 7, dtype=torch.bool).triu(1))


def test_sliding_window_mask_of_one_sees_only_the_diagonal(ref):
    assert torch.equal(~ref.sliding_window_mask(5, 1), torch.eye(5, dtype=torch.bool))


@pytest.mark.parametrize("num_tokens, window", [(4, 0), (4, -1), (0, 2), (-3, 2)], ids=["w=0", "w=-1", "T=0", "T=-3"])
def test_sliding_window_mask_rejects_bad_sizes(ref, num_tokens, window):
    with pytest.raises(ValueError):
        ref.sliding_window_mask(num_tokens, window)


def test_sliding_window_mask_is_built_on_the_device(ref):
    assert ref.sliding_window_mask(4, 2, device="meta").device.type == "meta"


def full_attention(queries, keys, values, causal):
    """Softmax attention over every score at once, in float64; explicit masks; a row with nothing to see is 0."""
    q, k, v = queries.double(), keys.double(), values.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    tq, tk = scores.shape[-2], scores.shape[-1]
    if causal:  # query i is position i + (Tk - Tq)
        hidden = torch.tensor([[j > i + tk - tq for j in range(tk)] for i in range(tq)], dtype=torch.bool)
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v


@FAST
@given(
    dtype=dtypes,
    lead=leading_dims,
    tq=st.integers(min_value=1, max_value=9),
    tk=st.integers(min_value=1, max_value=13),
    d=sizes,
    dv=sizes,
    chunk=st.integers(min_value=1, max_value=15),
    causal=st.booleans(),
    seed=seeds,
)
def test_chunked_attention_matches_full_softmax_attention(ref, dtype, lead, tq, tk, d, dv, chunk, causal, seed):
    q = randn(*lead, tq, d, dtype=dtype, seed=seed)
    k = randn(*lead, tk, d, dtype=dtype, seed=seed + 1)
    v = randn(*lead, tk, dv, dtype=dtype, seed=seed + 2)
    got = ref.chunked_attention(q, k, v, chunk, causal)
    assert got.dtype == dtype and got.shape == (*lead, tq, dv)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got.double(), full_attention(q, k, v, causal), rtol=tol, atol=tol)


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_chunked_attention_matches_torch_sdpa_on_a_long_sequence(ref, causal):
    q, k = randn(2, 3, 300, 16, seed=1), randn(2, 3, 300, 16, seed=2)
    v = randn(2, 3, 300, 24, seed=3)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # Tq == Tk: torch's own causal mask
    torch.testing.assert_close(ref.chunked_attention(q, k, v, 64, causal), expected, rtol=1e-10, atol=1e-10)


def test_chunked_attention_of_a_query_that_sees_no_key_is_exactly_zero(ref):
    q, k, v = randn(7, 3, seed=4), randn(4, 3, seed=5), randn(4, 2, seed=6)
    got = ref.chunked_attention(q, k, v, 3, True)
    assert torch.equal(got[:3], torch.zeros(3, 2)) and not got.isnan().any()  # queries 0-2 come before every key


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["huge", "all-very-negative"])
def test_chunked_attention_is_stable_for_extreme_scores(ref, sign):
    q = (torch.rand(2, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(7)) + 0.5) * 40
    k = sign * (torch.rand(2, 9, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(8)) + 0.5) * 40
    v = randn(2, 9, 3, seed=9)
    torch.testing.assert_close(ref.chunked_attention(q, k, v, 2, False), full_attention(q, k, v, False))


# --- plot_attention: the figure, against matplotlib's own image data ---------------------------------------


@pytest.fixture
def pyplot():
    plt = pytest.importorskip("matplotlib.pyplot", reason="plot_attention needs matplotlib")
    yield plt
    plt.close("all")


def _the_image(fig):
    images = [(ax, image) for ax in fig.axes for image in ax.images]
    assert len(images) == 1, f"{len(images)} images"
    return images[0]


@pytest.mark.parametrize("shape", [(4, 4), (3, 7), (9, 2)], ids=["4x4", "3x7", "9x2"])
def test_plot_attention_pixels_show_weight_i_j_at_row_i_column_j(ref, pyplot, shape):
    """Rendered with Agg: the pixel at the centre of cell (i, j) has the colour the colormap gives weights[i, j]."""
    import numpy as np

    weights = torch.rand(*shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    fig = ref.plot_attention(weights)
    ax, image = _the_image(fig)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())  # (height, width, 4), row 0 at the top
    height = pixels.shape[0]
    low, high = float(weights.min()), float(weights.max())
    for i, j in itertools.product(range(shape[0]), range(shape[1])):
        x, y = ax.transData.transform((j, i))  # imshow puts column j at x = j and row i at y = i
        got = pixels[int(round(height - y)), int(round(x)), :3] / 255.0
        want = np.asarray(image.get_cmap()((float(weights[i, j]) - low) / (high - low)))[:3]
        assert np.allclose(got, want, atol=2.5 / 255), (i, j, got, want)


@FAST
@given(dtype=dtypes, tq=sizes, tk=sizes, seed=seeds, named=st.booleans())
def test_plot_attention_image_is_the_weights_with_labels_and_colorbar(ref, dtype, tq, tk, seed, named):
    plt = pytest.importorskip("matplotlib.pyplot", reason="plot_attention needs matplotlib")
    weights = torch.rand(tq, tk, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)
    queries, keys = [f"q{i}" for i in range(tq)], [f"k{j}" for j in range(tk)]
    fig = ref.plot_attention(weights.requires_grad_(), (queries, keys) if named else None)
    try:
        ax, image = _the_image(fig)
        torch.testing.assert_close(torch.from_numpy(image.get_array().filled(float("nan"))), weights.detach())
        assert image.colorbar is not None
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("Key positions", "Query positions")
        if named:
            assert [t.get_text() for t in ax.get_xticklabels()] == keys
            assert [t.get_text() for t in ax.get_yticklabels()] == queries
            assert list(ax.get_xticks()) == list(range(tk)) and list(ax.get_yticks()) == list(range(tq))
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    ("shape", "tokens"),
    [((2, 3, 4), None), ((2, 2, 3, 3), None), ((5,), None), ((3, 4), ["a", "b", "c"]),
     ((3, 3), ["a", "b"]), ((3, 4), (["a", "b", "c"], ["w", "x", "y"]))],
    ids=["batched", "heads", "vector", "one-sequence-non-square", "too-few-tokens", "too-few-key-tokens"],
)  # fmt: skip
def test_plot_attention_rejects_what_is_not_one_matrix_or_its_tokens(ref, pyplot, shape, tokens):
    with pytest.raises(ValueError):
        ref.plot_attention(torch.rand(*shape), tokens)
