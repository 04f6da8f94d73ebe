"""The reference's backward is right and finite: it will compute the gold VJPs of the hidden backward cases.

Every differentiable hook of the reference (and of the patterns group's reference) is checked against an
answer that does not come from its own backward:

- ``torch.autograd.gradcheck`` in float64 on small inputs (finite differences of the forward);
- the VJPs of ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` (the reference's weights loaded),
  ``torch.softmax`` and ``torch.special.entr``, with the same inputs and cotangent;
- the closed forms: masking passes the cotangent through where visible, dropout sends back
  ``cotangent * keep / (1 - p)`` with the keep mask drawn again from the same seed.

A query that sees no key (an all ``-inf`` row, a row with nothing before the diagonal, causal chunks with
``Tq > Tk``) must give a zero gradient, never NaN.  The last tests check the checks: the reference's old
``torch.where(total > 0, e / total, 0)`` softmax, a detached output and a wrong backward all fail them.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import gradcheck
from torch.func import functional_call

from solutions import patterns as pat
from solutions import reference as ref

INF = float("-inf")


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def weights(*shape, seed=0):
    """Row-normalised positive weights, like a softmax output."""
    w = torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) + 0.05
    return w / w.sum(dim=-1, keepdim=True)


def vjp(fn, inputs, cotangent=None, seed=99):
    """``(output, gradients)``: ``fn(*inputs)`` and its VJP with ``cotangent`` (random when None), one gradient per
    input.  Fails when the output is not tied to every input (a detached result, a gradient missing)."""
    xs = [x.detach().clone().requires_grad_() for x in inputs]
    out = fn(*xs)
    assert out.requires_grad, "the output is not tied to the inputs: no gradient at all"
    cot = randn(*out.shape, seed=seed) if cotangent is None else cotangent
    grads = torch.autograd.grad(out, xs, cot)  # allow_unused=False: an input the output ignores raises
    return out.detach(), grads


def assert_finite(grads):
    for i, g in enumerate(grads):
        assert torch.isfinite(g).all(), f"gradient {i} is not finite: {g}"


def assert_vjps_close(fn, expected_fn, inputs, **tolerances):
    """``fn`` and ``expected_fn`` agree in value and in VJP (the same random cotangent), every input."""
    out, grads = vjp(fn, inputs)
    want, want_grads = vjp(expected_fn, inputs)
    torch.testing.assert_close(out, want, **tolerances)
    for i, (g, w) in enumerate(zip(grads, want_grads)):
        torch.testing.assert_close(g, w, **tolerances, msg=lambda m, i=i: f"gradient {i}: {m}")


def leaves(*tensors):
    return tuple(t.detach().clone().requires_grad_() for t in tensors)


# --- gradcheck: finite differences of the forward, float64 -------------------------------------------------


def _masked_scores(*shape, seed=0):
    """Random scores with ``-inf`` entries, one row partly masked and one row masked entirely."""
    s = randn(*shape, seed=seed)
    s[..., 1, ::2] = INF
    s[..., 2, :] = INF
    return s


def _fresh_generator(weights_, p, training):
    return ref.attention_dropout(weights_, p, training, torch.Generator().manual_seed(7))  # the same mask each call


GRADCHECKS = {
    "dot_product_scores": (ref.dot_product_scores, (randn(2, 3, 4), randn(2, 5, 4, seed=1))),
    "scaled_dot_product_scores": (ref.scaled_dot_product_scores, (randn(2, 3, 4), randn(2, 5, 4, seed=1))),
    "softmax_weights": (ref.softmax_weights, (randn(3, 4, 5),)),
    "softmax_weights-masked": (ref.softmax_weights, (_masked_scores(2, 4, 5),)),
    "softmax_weights-dim0": (lambda s: ref.softmax_weights(s, dim=0), (_masked_scores(4, 5).T.contiguous(),)),
    "softmax_weights-dim1": (lambda s: ref.softmax_weights(s, dim=1), (randn(2, 4, 3),)),
    "softmax_with_temperature": (lambda s: ref.softmax_with_temperature(s, 0.4), (randn(3, 4, 5, seed=2),)),
    "softmax_with_temperature-masked": (
        lambda s: ref.softmax_with_temperature(s, 2.5),
        (_masked_scores(2, 4, 5, seed=3),),
    ),
    "context_vectors": (ref.context_vectors, (weights(2, 3, 4), randn(2, 4, 5, seed=1))),
    # exp: the masked entries are -inf, and finite differences of -inf are NaN; exp(-inf) = 0 is finite
    "apply_causal_mask": (lambda s: ref.apply_causal_mask(s).exp(), (randn(2, 4, 4),)),
    "renormalize_masked_weights": (ref.renormalize_masked_weights, (weights(2, 5, 5),)),
    "dropout_scale": (lambda w: ref.dropout_scale(w, randn(3, 4, 4) > 0, 0.3), (weights(3, 4, 4),)),
    "dropout_scale-float-keep": (
        lambda w: ref.dropout_scale(w, (randn(3, 4, 4) > 0).double(), 0.25),
        (weights(3, 4, 4),),
    ),
    "dropout_scale-p=0": (lambda w: ref.dropout_scale(w, randn(3, 4) > 0, 0.0), (weights(3, 4),)),
    "dropout_scale-p=1": (lambda w: ref.dropout_scale(w, randn(3, 4) > 0, 1.0), (weights(3, 4),)),
    "attention_dropout-eval": (lambda w: _fresh_generator(w, 0.4, False), (weights(2, 4, 4),)),
    "attention_dropout-train": (lambda w: _fresh_generator(w, 0.4, True), (weights(2, 4, 4),)),
    "attention_dropout-train-p=1": (lambda w: _fresh_generator(w, 1.0, True), (weights(2, 4, 4),)),
    "split_heads": (lambda x: ref.split_heads(x, 3), (randn(2, 4, 6),)),
    "split_heads-non-contiguous": (lambda x: ref.split_heads(x.transpose(1, 2), 2), (randn(2, 4, 3),)),
    "merge_heads": (ref.merge_heads, (randn(2, 3, 4, 2),)),
    "attention_entropy": (pat.attention_entropy, (weights(2, 3, 5),)),
}
GRADCHECKS |= {  # causal or not; Tq < Tk, Tq = Tk, Tq > Tk (causal: 2 queries see no key); chunks 1, mid, > Tk
    f"chunked_attention-{'causal' if causal else 'full'}-Tq{tq}-Tk{tk}-c{chunk}": (
        lambda q, k, v, chunk=chunk, causal=causal: ref.chunked_attention(q, k, v, chunk, causal),
        (randn(2, tq, 3, seed=tq), randn(2, tk, 3, seed=tk + 10), randn(2, tk, 2, seed=tk + 20)),
    )
    for causal in (False, True)
    for tq, tk in ((4, 6), (5, 5), (6, 4))
    for chunk in (1, 2, 7)
}


@pytest.mark.parametrize("name", list(GRADCHECKS))
def test_gradcheck(name):
    fn, inputs = GRADCHECKS[name]
    assert gradcheck(fn, leaves(*inputs))


MODULES = {
    "self": lambda bias: ref.make_self_attention(5, 4, qkv_bias=bias),
    "causal": lambda bias: ref.make_causal_attention(5, 4, 6, 0.3, qkv_bias=bias),
    "multihead": lambda bias: ref.make_multihead_attention(5, 6, 6, 0.3, 3, qkv_bias=bias),
}


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("kind", list(MODULES))
def test_gradcheck_module_wrt_input_and_every_parameter(kind, bias):
    torch.manual_seed(5)
    module = MODULES[kind](bias).double().eval()
    names = [name for name, _ in module.named_parameters()]
    assert len(names) == 3 * (1 + bias) + 2 * (kind == "multihead")

    def forward(x, *params):
        return functional_call(module, dict(zip(names, params)), (x,))

    params = [p.detach() for p in module.parameters()]
    assert gradcheck(forward, leaves(randn(2, 4, 5, seed=6), *params))


# --- against torch's own attention -----------------------------------------------------------------------


def chapter_attention(q, k, v, causal):
    """The reference composed the chapter's way: scaled scores -> causal mask -> softmax -> context."""
    scores = ref.scaled_dot_product_scores(q, k)
    if causal:
        scores = ref.apply_causal_mask(scores)
    return ref.context_vectors(ref.softmax_weights(scores), v)


@pytest.mark.parametrize(
    ("tq", "tk", "causal"), [(5, 5, False), (3, 7, False), (7, 4, False), (5, 5, True), (1, 1, True)]
)
def test_composed_reference_vjp_matches_sdpa(tq, tk, causal):
    qkv = (randn(2, 3, tq, 4, seed=1), randn(2, 3, tk, 4, seed=2), randn(2, 3, tk, 5, seed=3))
    assert_vjps_close(
        lambda q, k, v: chapter_attention(q, k, v, causal),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
        qkv,
    )


def bottom_right(tq, tk):
    """True where query ``i`` may see key ``j``: ``j <= i + (Tk - Tq)``, built without the reference."""
    return torch.ones(tq, tk, dtype=torch.bool).tril(diagonal=tk - tq)


@pytest.mark.parametrize("chunk", [1, 3, 16])
@pytest.mark.parametrize(("tq", "tk", "causal"), [(6, 6, False), (4, 9, False), (9, 4, False), (6, 6, True),
                                                  (4, 9, True)])  # fmt: skip
def test_chunked_attention_vjp_matches_sdpa(tq, tk, causal, chunk):
    qkv = (randn(2, tq, 4, seed=1), randn(2, tk, 4, seed=2), randn(2, tk, 3, seed=3))
    mask = bottom_right(tq, tk) if causal else None
    assert_vjps_close(
        lambda q, k, v: ref.chunked_attention(q, k, v, chunk, causal),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        qkv,
    )


@pytest.mark.parametrize("chunk", [1, 2, 16])
def test_chunked_attention_queries_that_see_no_key_give_zero_gradients(chunk):
    """Causal, Tq = 7 > Tk = 4: the first 3 queries see no key.  Their outputs and gradients are 0, and the
    others' VJP equals SDPA's on the queries that see a key."""
    tq, tk, dead = 7, 4, 3
    q, k, v = randn(2, tq, 4, seed=1), randn(2, tk, 4, seed=2), randn(2, tk, 3, seed=3)
    cot = randn(2, tq, 3, seed=4)
    out, (gq, gk, gv) = vjp(lambda q, k, v: ref.chunked_attention(q, k, v, chunk, True), (q, k, v), cot)
    assert_finite((gq, gk, gv))
    assert torch.equal(out[:, :dead], torch.zeros(2, dead, 3, dtype=torch.float64))
    assert torch.equal(gq[:, :dead], torch.zeros(2, dead, 4, dtype=torch.float64))
    mask = bottom_right(tq, tk)[dead:]
    want, (wq, wk, wv) = vjp(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q[:, dead:], k, v), cot[:, dead:]
    )
    torch.testing.assert_close(out[:, dead:], want)
    torch.testing.assert_close((gq[:, dead:], gk, gv), (wq, wk, wv))


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize(("num_tokens", "context_length"), [(5, 7), (7, 7), (1, 3)])
def test_multihead_attention_vjp_matches_nn_multiheadattention(num_tokens, context_length, bias):
    d, num_heads = 6, 3
    torch.manual_seed(11)
    module = ref.make_multihead_attention(d, d, context_length, 0.3, num_heads, qkv_bias=bias).double().eval()
    torch_mha = nn.MultiheadAttention(d, num_heads, dropout=0.0, bias=True, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([module.W_query.weight, module.W_key.weight, module.W_value.weight]))
        if bias:
            torch_mha.in_proj_bias.copy_(torch.cat([module.W_query.bias, module.W_key.bias, module.W_value.bias]))
        else:
            torch_mha.in_proj_bias.zero_()
        torch_mha.out_proj.weight.copy_(module.out_proj.weight)
        torch_mha.out_proj.bias.copy_(module.out_proj.bias)
    torch_mha.eval()
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)  # True: may not attend
    x, cot = randn(2, num_tokens, d, seed=12), randn(2, num_tokens, d, seed=13)

    x_ref, x_torch = leaves(x, x)
    out = module(x_ref)
    out.backward(cot)
    expected, _ = torch_mha(x_torch, x_torch, x_torch, attn_mask=future, need_weights=False)
    expected.backward(cot)

    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(x_ref.grad, x_torch.grad)
    in_w = torch_mha.in_proj_weight.grad.chunk(3)
    in_b = torch_mha.in_proj_bias.grad.chunk(3)
    want = {"W_query.weight": in_w[0], "W_key.weight": in_w[1], "W_value.weight": in_w[2]}
    if bias:
        want |= {"W_query.bias": in_b[0], "W_key.bias": in_b[1], "W_value.bias": in_b[2]}
    want |= {"out_proj.weight": torch_mha.out_proj.weight.grad, "out_proj.bias": torch_mha.out_proj.bias.grad}
    got = {name: p.grad for name, p in module.named_parameters()}
    assert sorted(got) == sorted(want)  # every parameter of the reference is checked
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("kind", ["self", "causal"])
def test_single_head_modules_vjp_matches_sdpa_of_their_projections(kind):
    """SelfAttention / CausalAttention against SDPA of the same projections, w.r.t. the input and every
    parameter (``torch.func.functional_call``: the parameters are inputs of both sides)."""
    torch.manual_seed(14)
    module = MODULES[kind](True).double().eval()
    names = [name for name, _ in module.named_parameters()]

    def reference(x, *params):
        return functional_call(module, dict(zip(names, params)), (x,))

    def expected(x, *params):
        w = dict(zip(names, params))
        q, k, v = (F.linear(x, w[f"{p}.weight"], w[f"{p}.bias"]) for p in ("W_query", "W_key", "W_value"))
        return F.scaled_dot_product_attention(q, k, v, is_causal=kind == "causal")

    assert_vjps_close(reference, expected, (randn(2, 5, 5, seed=15), *(p.detach() for p in module.parameters())))


@pytest.mark.parametrize(
    "mask",
    [
        lambda t: pat.strided_mask(t, 3),
        lambda t: pat.dilated_window_mask(t, 2, 2),
        lambda t: ref.sliding_window_mask(t, 3),
    ],
    ids=["strided", "dilated", "sliding-window"],
)
def test_sparse_masks_then_softmax_vjp_matches_sdpa(mask):
    """The patterns group's masks (bool, not differentiable themselves) in the chapter's pipeline."""
    t = 7
    hidden = mask(t)

    def reference(q, k, v):
        scores = ref.scaled_dot_product_scores(q, k).masked_fill(hidden, INF)
        return ref.context_vectors(ref.softmax_weights(scores), v)

    qkv = (randn(2, t, 4, seed=1), randn(2, t, 4, seed=2), randn(2, t, 3, seed=3))
    assert_vjps_close(reference, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=~hidden), qkv)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_vjp_matches_torch_softmax(dim):
    scores = randn(4, 5, 6, seed=21) * 3
    scores[1, 2, ::2] = INF  # a partly masked row
    assert_vjps_close(lambda s: ref.softmax_weights(s, dim=dim), lambda s: torch.softmax(s, dim=dim), (scores,))
    assert_vjps_close(
        lambda s: ref.softmax_with_temperature(s, 0.3, dim=dim), lambda s: torch.softmax(s / 0.3, dim=dim), (scores,)
    )


def test_apply_causal_mask_passes_the_cotangent_where_visible():
    scores, cot = randn(2, 5, 5, seed=22), randn(2, 5, 5, seed=23)
    _, (grad,) = vjp(ref.apply_causal_mask, (scores,), cot)
    torch.testing.assert_close(grad, cot * torch.ones(5, 5, dtype=torch.float64).tril(), rtol=0, atol=0)


def test_renormalize_vjp_matches_the_masked_softmax_formula():
    """Positive weights: renormalising is ``w * keep / sum(w * keep)``, written here with torch ops."""
    keep = torch.ones(6, 6, dtype=torch.float64).tril()

    def expected(w):
        return w * keep / (w * keep).sum(dim=-1, keepdim=True)

    assert_vjps_close(ref.renormalize_masked_weights, expected, (weights(3, 6, 6, seed=24),))


def test_entropy_vjp_matches_torch_special_entr():
    w = weights(3, 4, 6, seed=25)
    assert_vjps_close(pat.attention_entropy, lambda w: torch.special.entr(w).sum(dim=-1), (w,))


# --- a query that sees nothing: zero gradients, never NaN -------------------------------------------------


SOFTMAXES = {  # the hook, and torch's softmax that it should equal where a row sees a key
    "softmax": (ref.softmax_weights, lambda s: torch.softmax(s, dim=-1)),
    "softmax-dim0": (lambda s: ref.softmax_weights(s.T, dim=0).T, lambda s: torch.softmax(s.T, dim=0).T),
    "temperature-0.7": (lambda s: ref.softmax_with_temperature(s, 0.7), lambda s: torch.softmax(s / 0.7, dim=-1)),
    "temperature-1e-4": (lambda s: ref.softmax_with_temperature(s, 1e-4), lambda s: torch.softmax(s / 1e-4, dim=-1)),
}


@pytest.mark.parametrize("name", list(SOFTMAXES))
def test_an_all_minus_inf_row_gives_zero_gradient(name):
    hook, expected = SOFTMAXES[name]
    scores, cot = randn(4, 5, seed=31), randn(4, 5, seed=32)
    scores[2] = INF
    scores[0, 1:] = INF  # one finite entry: weight 1, a constant
    out, (grad,) = vjp(hook, (scores,), cot)
    assert_finite([grad])
    assert torch.equal(out[2], torch.zeros(5, dtype=torch.float64))
    assert torch.equal(grad[2], torch.zeros(5, dtype=torch.float64))
    live = [0, 1, 3]  # torch's softmax of the rows that see a key (its all -inf row would be NaN)
    want, (want_grad,) = vjp(expected, (scores[live],), cot[live])
    torch.testing.assert_close(out[live], want)
    torch.testing.assert_close(grad[live], want_grad)


def test_causal_mask_then_softmax_with_a_fully_masked_first_row():
    """Row 0 sees only itself; with its own score -inf as well, it sees nothing."""
    scores, cot = randn(2, 5, 5, seed=32), randn(2, 5, 5, seed=33)
    scores[:, 0, 0] = INF
    out, (grad,) = vjp(lambda s: ref.softmax_weights(ref.apply_causal_mask(s)), (scores,), cot)
    assert_finite([grad])
    assert torch.equal(out[:, 0], torch.zeros(2, 5, dtype=torch.float64))
    assert torch.equal(grad[:, 0], torch.zeros(2, 5, dtype=torch.float64))
    future = torch.ones(4, 5, dtype=torch.bool).triu(2)  # rows 1..4 of the causal mask, built here
    want, (want_grad,) = vjp(lambda s: torch.softmax(s.masked_fill(future, INF), dim=-1), (scores[:, 1:],), cot[:, 1:])
    torch.testing.assert_close(out[:, 1:], want)
    torch.testing.assert_close(grad[:, 1:], want_grad)


def test_renormalize_a_row_with_nothing_left_gives_zeros_and_zero_gradient():
    w = weights(2, 5, 5, seed=33)
    w[:, 0, 0] = 0.0  # the first row keeps only [0, 0]: nothing left
    w[:, 3] = 0.0  # an all-zero row
    out, (grad,) = vjp(ref.renormalize_masked_weights, (w,))
    assert_finite([grad])
    for row in (0, 3):
        assert torch.equal(out[:, row], torch.zeros(2, 5, dtype=torch.float64))
        assert torch.equal(grad[:, row], torch.zeros(2, 5, dtype=torch.float64))
    torch.testing.assert_close(out[:, (1, 2, 4)].sum(dim=-1), torch.ones(2, 3, dtype=torch.float64))


def test_entropy_of_exact_zeros_gives_zero_gradient():
    """``-p ln p`` at an exact 0 (a masked key) adds 0 and sends back 0: the key is a constant 0, never NaN."""
    w = weights(2, 3, 6, seed=34)
    w[0, 1, ::2] = 0.0
    w[1, 2] = 0.0  # a query that sees no key: a row of zeros
    zero = w == 0
    _, (grad,) = vjp(pat.attention_entropy, (w,), torch.ones(2, 3, dtype=torch.float64))
    assert_finite([grad])
    assert torch.equal(grad[zero], torch.zeros(int(zero.sum()), dtype=torch.float64))
    torch.testing.assert_close(grad[~zero], -(w[~zero].log() + 1))  # d(-p ln p)/dp


def test_softmax_then_entropy_of_masked_keys_is_finite():
    scores = randn(2, 4, 5, seed=35)
    scores[0, 1, 2:] = INF
    scores[1, 3] = INF
    _, (grad,) = vjp(lambda s: pat.attention_entropy(ref.softmax_weights(s)), (scores,))
    assert_finite([grad])
    assert torch.equal(grad[1, 3], torch.zeros(5, dtype=torch.float64))


# --- dropout in training mode ----------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.2, 0.5, 1.0])
def test_attention_dropout_gradient_is_cotangent_times_keep_over_one_minus_p(p):
    w, cot, seed = weights(3, 6, 6, seed=41), randn(3, 6, 6, seed=42), 1234
    out, (grad,) = vjp(lambda w: ref.attention_dropout(w, p, True, torch.Generator().manual_seed(seed)), (w,), cot)
    draws = torch.rand(w.shape, generator=torch.Generator().manual_seed(seed), dtype=w.dtype)
    keep = draws >= p  # the same generator seed: the same mask
    assert torch.equal(keep, out != 0)  # the weights are positive: a kept entry is never 0
    if p < 1:
        assert 0 < int(keep.sum()) < keep.numel()  # some kept, some dropped: the mask is seen
        torch.testing.assert_close(grad, cot * keep / (1 - p), rtol=0, atol=1e-15)
    else:
        assert torch.equal(grad, torch.zeros_like(w))


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_scale_gradient_is_cotangent_times_keep_over_one_minus_p(p):
    w, cot = weights(4, 5, seed=43), randn(4, 5, seed=44)
    keep = randn(4, 5, seed=45) > 0
    _, (grad,) = vjp(lambda w: ref.dropout_scale(w, keep, p), (w,), cot)
    want = torch.zeros_like(w) if p == 1 else cot * keep / (1 - p)
    torch.testing.assert_close(grad, want, rtol=0, atol=1e-15)


def test_attention_dropout_in_eval_passes_the_cotangent():
    cot = randn(2, 4, 4, seed=46)
    _, (grad,) = vjp(lambda w: ref.attention_dropout(w, 0.5, False, None), (weights(2, 4, 4, seed=47),), cot)
    assert torch.equal(grad, cot)


# --- the checks can fail --------------------------------------------------------------------------------------


def nan_softmax(scores, dim=-1):
    """The reference's softmax before the fix: the untaken branch's 0/0 sends NaN back."""
    peak = scores.amax(dim=dim, keepdim=True)
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    exp = torch.exp(scores - peak)
    total = exp.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, exp / total, torch.zeros_like(exp))


def test_the_nan_check_catches_the_unsafe_divide():
    scores = randn(3, 4, seed=51)
    scores[1] = INF
    out, grads = vjp(nan_softmax, (scores,))
    assert torch.isfinite(out).all()  # the forward hides it
    with pytest.raises(AssertionError, match="not finite"):
        assert_finite(grads)
    assert_finite(vjp(ref.softmax_weights, (scores,))[1])


def test_the_gradient_checks_catch_a_detached_output():
    with pytest.raises(AssertionError, match="not tied"):
        vjp(lambda s: ref.softmax_weights(s).detach(), (randn(3, 4),))
    with pytest.raises(AssertionError, match="not tied"):
        vjp(lambda w: torch.zeros_like(w), (weights(3, 4),))  # the reference's old dropout_scale at p = 1
    with pytest.raises(RuntimeError):  # one input cut off: its gradient is missing
        vjp(lambda q, k: ref.dot_product_scores(q, k.detach()), (randn(2, 3), randn(4, 3)))


def wrong_backward(fn, factor=1.5):
    """``fn`` with the right forward and a backward ``factor`` times too large."""

    def wrapped(*xs):
        out = fn(*xs)
        return out + (factor - 1) * (out - out.detach())

    return wrapped


def test_the_gradient_checks_catch_a_wrong_backward():
    scores = randn(3, 4, seed=52)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):  # GradcheckError
        gradcheck(wrong_backward(ref.softmax_weights), leaves(scores))
    with pytest.raises(AssertionError, match="gradient 0"):
        assert_vjps_close(wrong_backward(ref.softmax_weights), lambda s: torch.softmax(s, dim=-1), (scores,))
    qkv = (randn(2, 4, 3, seed=1), randn(2, 5, 3, seed=2), randn(2, 5, 2, seed=3))
    wrong_scale = lambda q, k, v: ref.chunked_attention(q * math.sqrt(3) / 2, k, v, 2)  # forward wrong too
    with pytest.raises(AssertionError):
        assert_vjps_close(wrong_scale, lambda q, k, v: F.scaled_dot_product_attention(q, k, v), qkv)
