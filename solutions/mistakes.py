"""The catalogue of known mistakes: wrong implementations learners (and the seed texts) really write.

Each :class:`Mistake` overrides one or more hooks with a wrong implementation;
every other hook comes from :mod:`solutions.reference`.  The catalogue serves
two purposes:

* the audit: the hidden suite must fail every entry (``tests/test_mistakes.py``,
  ``attnkit audit``);
* diagnosis: when a learner's output on a failing case matches an entry's
  output on the same input, the feedback names the entry and shows its hint.

Hints say where to look, never the answer, in English and in Chinese (the seed
texts are Chinese, and so are many of the kit's learners).  Sources are a seed
text by file name, "the chapter", "classic" (a mistake learners make over and
over) or a public issue by URL.  Ids are stable: feedback and gradebooks quote
them, so rename nothing.

Instructor-only, like the reference: nothing here ships in a learner's kit.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from grader.packs import instructor_part
from grader.registry import Solution, adopt
from solutions.gradient_mistakes import ENTRIES as GRADIENT_ENTRIES
from solutions.mistake_model import hook_function
from solutions.reference import (
    CausalAttention,
    MultiHeadAttention,
    SelfAttention,
    attention_dropout,
    causal_mask,
    context_vectors,
    dot_product_scores,
    dropout_scale,
    merge_heads,
    scaled_dot_product_scores,
    softmax_weights,
    split_heads,
)

SEED_000 = "seed 000_1895a4942bad7209.txt"
SEED_002 = "seed 002_5796c8154c5408de.txt"
SEED_003 = "seed 003_a61a69d2ef97d9b0.txt"
CHAPTER = "the chapter"
CLASSIC = "classic"

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Mistake:
    """One known wrong implementation of an exercise."""

    id: str  # stable kebab-case
    exercise: str  # the hook it belongs to
    description: str  # one line, for instructors
    hint: str  # for a learner: what to look at, not the answer
    hint_zh: str  # the same hint in Chinese
    source: str  # a seed text, "the chapter", "classic" or a public issue
    overrides: Mapping[str, Callable] = field(hash=False)  # hook name -> wrong implementation


# --- small helpers shared by the wrong implementations --------------------------------


def _square(scores):
    """T of ``(..., T, T)`` scores, raising ValueError like the reference (so only the mistake differs)."""
    if scores.shape[-2] != scores.shape[-1]:
        raise ValueError(f"apply_causal_mask needs square (..., T, T) scores, got {tuple(scores.shape)}")
    return scores.shape[-1]


def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")


def _check_heads(d, num_heads):
    if d % num_heads != 0:
        raise ValueError(f"d={d} is not divisible by num_heads={num_heads}")


def _hook(hook, wrong, **how):
    """Overrides: ``hook`` as ``wrong(**arguments, **how)``, a plain function with the hook's signature (``how``
    names the step done wrong)."""
    return {hook: hook_function(hook, functools.partial(wrong, **how))}


# --- scores ---------------------------------------------------------------------------


def scale_by_num_tokens(queries, keys):
    return dot_product_scores(queries, keys) / math.sqrt(queries.shape[-2])


def scale_twice(queries, keys):
    d_k = keys.shape[-1]
    return dot_product_scores(queries, keys) / math.sqrt(d_k) / math.sqrt(d_k)


# --- softmax --------------------------------------------------------------------------


def _fixed_dim(scores, dim=-1, fixed=-1):
    return softmax_weights(scores, dim=fixed)  # whatever dim says


def softmax_without_max(scores, dim=-1):
    exp = torch.exp(scores)
    return exp / exp.sum(dim=dim, keepdim=True)


def softmax_nan_on_masked_rows(scores, dim=-1):
    exp = torch.exp(scores - scores.amax(dim=dim, keepdim=True))  # -inf - (-inf) is NaN
    return exp / exp.sum(dim=dim, keepdim=True)


# --- softmax with a temperature ----------------------------------------------------------


def _tempered(scores, temperature, dim=-1, weights_of=lambda s, t, d: softmax_weights(s / t, dim=d), checked=True):
    """softmax_with_temperature as ``weights_of(scores, temperature, dim)``; ``checked``: the reference's
    ValueError (unchecked, temperature 0 makes scores / 0 ±inf or NaN, no error)."""
    if checked and not temperature > 0:
        raise ValueError(f"softmax_with_temperature needs temperature > 0, got {temperature}")
    return weights_of(scores, temperature, dim)


def _over_every_element(scores, temperature, dim):
    return softmax_weights((scores / temperature).reshape(-1), dim=0).reshape(scores.shape)


# --- the causal mask ------------------------------------------------------------------


def _causal_mask(num_tokens, device=None, triangle=torch.triu, diagonal=1, checked=True, dtype=torch.bool,
                 on_device=True, batched=False):  # fmt: skip
    """causal_mask as ``triangle(ones, diagonal)`` of ``dtype`` (None: the float default), on the default device
    unless ``on_device``; ``checked``: the reference's ValueError; ``batched``: an extra leading dim, (1, T, T)."""
    if checked and num_tokens < 1:
        raise ValueError(f"causal_mask needs num_tokens >= 1, got {num_tokens}")
    ones = torch.ones(num_tokens, num_tokens, dtype=dtype, device=device if on_device else None)
    mask = triangle(ones, diagonal=diagonal)
    return mask.unsqueeze(0) if batched else mask


def numpy_causal_mask(num_tokens, device=None):
    """The right mask's values, as a NumPy array (``np.triu(np.ones((T, T)), k=1).astype(bool)``): no tensor."""
    import numpy as np

    if num_tokens < 1:
        raise ValueError(f"causal_mask needs num_tokens >= 1, got {num_tokens}")
    return np.triu(np.ones((num_tokens, num_tokens)), k=1).astype(bool)


def mask_of_size_6(scores):
    _square(scores)
    mask = torch.triu(torch.ones(6, 6), diagonal=1)
    return scores.masked_fill(mask.bool(), NEG_INF)


def mask_with_zero(scores):
    mask = causal_mask(_square(scores), device=scores.device)
    return scores.masked_fill(mask, 0.0)


def mask_built_on_cpu(scores):
    num_tokens = _square(scores)
    mask = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()
    return scores.masked_fill(mask, NEG_INF)


def mask_in_place(scores):
    mask = causal_mask(_square(scores), device=scores.device)
    scores.masked_fill_(mask, NEG_INF)
    return scores


def mask_without_renormalising(weights):
    num_tokens = weights.shape[-1]
    keep = torch.tril(torch.ones(num_tokens, num_tokens, dtype=weights.dtype, device=weights.device))
    return weights * keep


def renormalise_columns(weights):
    masked = weights * ~causal_mask(weights.shape[-1], device=weights.device)
    return masked / masked.sum(dim=-2, keepdim=True)


# --- dropout --------------------------------------------------------------------------


def scale_by_inverse_p(weights, keep_mask, p):
    _check_p(p)
    if p == 0.0:
        return weights * keep_mask.to(weights.dtype)
    return weights * keep_mask.to(weights.dtype) / p


def not_scaled(weights, keep_mask, p):
    _check_p(p)
    return weights * keep_mask.to(weights.dtype)


def divides_by_zero_at_p_1(weights, keep_mask, p):
    _check_p(p)
    return weights * keep_mask.to(weights.dtype) / (1.0 - p)


def p_not_checked(weights, keep_mask, p):
    if p == 1.0:
        return torch.zeros_like(weights)
    return weights * keep_mask.to(weights.dtype) / (1.0 - p)


def _attention_dropout(weights, p, training=True, generator=None, in_eval=False, keep_below=False, global_rng=False,
                       by_p=False, by_zero=False):  # fmt: skip
    """attention_dropout dropping in eval too, keeping with probability p, drawing from the global generator,
    scaling the survivors by 1/p, or dividing by 1 - p itself, unguarded at p == 1 (each keyword names its mistake)."""
    _check_p(p)
    if not (training or in_eval) or p == 0.0:
        return weights.clone()
    gen = None if global_rng else generator
    draws = torch.rand(weights.shape, generator=gen, device=weights.device, dtype=weights.dtype)
    keep = draws < p if keep_below else draws >= p
    if by_zero:
        return weights * keep.to(weights.dtype) / (1.0 - p)  # p == 1: every entry 0 / 0, NaN
    return weights * keep / p if by_p else dropout_scale(weights, keep, p)


def dropout_then_renormalise(weights, p, training=True, generator=None):
    dropped = attention_dropout(weights, p, training, generator)
    return dropped / dropped.sum(dim=-1, keepdim=True)


def dropout_global_rng_cpu_mask(weights, p, training=True, generator=None):
    """d2l's ``dropout_layer``: ``(torch.rand(X.shape) > p).float()``, a float32 mask from the global RNG, on the CPU
    (the generator, the weights' device and dtype all left out)."""
    _check_p(p)
    if not training or p == 0.0:
        return weights.clone()
    if p == 1.0:
        return torch.zeros_like(weights)
    mask = (torch.rand(weights.shape) > p).float()
    return weights * mask * (1.0 / (1.0 - p))


def dropout_scale_zeroes_input_at_p_1(weights, keep_mask, p):
    """dropout_scale guarding p == 1 with ``weights.zero_()``: right zeros, the caller's weights zeroed too."""
    _check_p(p)
    if p == 1.0:
        return weights.zero_()
    return dropout_scale(weights, keep_mask, p)


def attention_dropout_zeroes_input_at_p_1(weights, p, training=True, generator=None):
    """attention_dropout guarding p == 1 with ``weights.zero_()``: right zeros, the caller's weights zeroed too."""
    _check_p(p)
    if training and p == 1.0:
        return weights.zero_()
    return attention_dropout(weights, p, training, generator)


# --- heads ----------------------------------------------------------------------------


def split_without_transpose(x, num_heads):
    b, num_tokens, d = x.shape
    _check_heads(d, num_heads)
    return x.reshape(b, num_heads, num_tokens, d // num_heads)


def split_without_permute(x, num_heads):
    b, num_tokens, d = x.shape
    _check_heads(d, num_heads)
    return x.view(b, num_tokens, num_heads, d // num_heads)  # (b, T, H, hd): the heads never moved in front


def split_interleaved(x, num_heads):
    b, num_tokens, d = x.shape
    _check_heads(d, num_heads)
    return x.reshape(b, num_tokens, d // num_heads, num_heads).permute(0, 3, 1, 2)


def split_unchecked(x, num_heads):
    b, num_tokens, d = x.shape
    head_dim = d // num_heads  # silently rounds down when d % num_heads != 0
    return x.reshape(b, -1, num_heads, head_dim).transpose(1, 2)


def merge_without_transpose(x):
    b, num_heads, num_tokens, head_dim = x.shape
    return x.reshape(b, num_tokens, num_heads * head_dim)


def merge_view_after_transpose(x):
    """The heads moved back behind the tokens, then ``view`` with no ``.contiguous()``: the transposed tensor's
    strides do not allow the view, so it raises (except where the input's own layout happens to allow it)."""
    b, num_heads, num_tokens, head_dim = x.shape
    return x.transpose(1, 2).view(b, num_tokens, num_heads * head_dim)


def merge_not_contiguous(x):
    """``permute`` then ``reshape`` with no ``.contiguous()``: the right values, but where the input's layout lets
    reshape return a view (a non-contiguous input), the result is that non-contiguous view."""
    b, num_heads, num_tokens, head_dim = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, num_tokens, num_heads * head_dim)


# --- attention modules ------------------------------------------------------------------


def _qkv(module, d_in, d_out, bias, names=("W_query", "W_key", "W_value")):
    """The three projections, made in ``names``' order (the seed's draws go to them in that order)."""
    for name in names:
        module.add_module(name, nn.Linear(d_in, d_out, bias=bias))


def _made(**classes):
    """Overrides: each module hook named (``make_causal_attention=SoftmaxTwice``) builds its class from every
    argument, in the hook's order."""
    return {hook: hook_function(hook, lambda cls=cls, **args: cls(*args.values())) for hook, cls in classes.items()}


class ScaledByDIn(SelfAttention):
    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = dot_product_scores(queries, keys) / math.sqrt(x.shape[-1])  # d_in, not d_k
        return context_vectors(softmax_weights(scores), values)


class ScaledAfterSoftmax(SelfAttention):
    def forward(self, x):
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        weights = softmax_weights(dot_product_scores(queries, keys)) / math.sqrt(keys.shape[-1])
        return context_vectors(weights, values)


class KeyFirst(SelfAttention):
    def __init__(self, d_in, d_out, qkv_bias=False):
        nn.Module.__init__(self)
        _qkv(self, d_in, d_out, qkv_bias, ("W_key", "W_query", "W_value"))


class ForwardMisspelled(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        _qkv(self, d_in, d_out, qkv_bias)

    def foward(self, x):  # nn.Module never calls this
        return SelfAttention.forward(self, x)


class MatrixNames(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        _qkv(self, d_in, d_out, qkv_bias, ("Wq_matrix", "Wk_matrix", "Wv_matrix"))

    def forward(self, x):
        queries, keys, values = self.Wq_matrix(x), self.Wk_matrix(x), self.Wv_matrix(x)
        weights = softmax_weights(scaled_dot_product_scores(queries, keys))
        return context_vectors(weights, values)


class AssertsDivisible(MultiHeadAttention):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


def _forward(module, x, dropout_at="weights", mask="sliced", training=None, twice=False, by_d_out=False,
             project=True, split=split_heads, merge=merge_heads):  # fmt: skip
    """The chapter's causal forward (multi-head where the module has ``num_heads``) with one step done otherwise.

    ``dropout_at``: weights, nowhere, context or scores (before the mask and the softmax); ``mask``: "sliced"
    to T, "whole" (ctx, ctx), "cpu" (made in forward, on the CPU whatever x's device) or None (never
    applied); ``training``: what dropout is told (None: the module's mode); ``twice``: a second softmax, of the
    masked weights; ``by_d_out``: scores scaled by sqrt(d_out), not sqrt(head_dim); ``project``: out_proj
    applied; ``split``, ``merge``: how the heads are split and merged.  T is read first where the chapter reads
    it first (so a bad input fails the same way).
    """
    heads = getattr(module, "num_heads", None)
    num_tokens = x.shape[-2] if heads or mask == "sliced" else None
    queries, keys, values = module.W_query(x), module.W_key(x), module.W_value(x)
    if heads:
        queries, keys, values = (split(t, heads) for t in (queries, keys, values))
    p = module.dropout
    training = module.training if training is None else training
    d_k = module.W_key.out_features if by_d_out else keys.shape[-1]
    scores = dot_product_scores(queries, keys) / math.sqrt(d_k)
    if dropout_at == "scores":
        scores = attention_dropout(scores, p, training)
    if mask == "sliced":
        mask = module.mask[:num_tokens, :num_tokens]
    elif mask == "whole":
        mask = module.mask
    elif mask == "cpu":
        mask = torch.triu(torch.ones(scores.shape[-2:]), diagonal=1).bool()
    weights = softmax_weights(scores if mask is None else scores.masked_fill(mask, NEG_INF))
    if twice:  # softmax of the weights, not of the scores
        weights = softmax_weights(weights.masked_fill(mask, NEG_INF))
    if dropout_at == "weights":
        weights = attention_dropout(weights, p, training)
    context = context_vectors(weights, values)
    if dropout_at == "context":
        context = attention_dropout(context, p, training)
    if not heads:
        return context
    context = merge(context)
    return module.out_proj(context) if project else context  # no out_proj: the heads concatenated


def _variant(base, name, biased=False, held="buffer", **how):
    """A subclass ``name`` of ``base``, built from every argument in order: its forward :func:`_forward` with
    ``how`` (where given); ``biased``: `nn.Linear(d_in, d_out)`, bias=True whatever qkv_bias says; ``held``: the
    mask as a plain attribute ("attribute": not in state_dict, .to() leaves it) or not at all (None)."""

    class Variant(base):
        def __init__(self, *args):
            base.__init__(self, *args[:-1], True if biased else args[-1])
            if held != "buffer":
                del self.mask
            if held == "attribute":
                self.mask = causal_mask(args[2])

        if how:
            def forward(self, x):
                return _forward(self, x, **how)

    Variant.__name__ = Variant.__qualname__ = name
    return Variant


BiasedSelfAttention = _variant(SelfAttention, "BiasedSelfAttention", biased=True)
SoftmaxTwice = _variant(CausalAttention, "SoftmaxTwice", twice=True)
MaskNotSliced = _variant(CausalAttention, "MaskNotSliced", mask="whole")
MaskNotApplied = _variant(CausalAttention, "MaskNotApplied", mask=None)
DropoutNeverApplied = _variant(CausalAttention, "DropoutNeverApplied", dropout_at="nowhere")  # held, never used
DropoutOnContext = _variant(CausalAttention, "DropoutOnContext", dropout_at="context")
DropoutOnScores = _variant(CausalAttention, "DropoutOnScores", dropout_at="scores")
DropoutInEval = _variant(CausalAttention, "DropoutInEval", training=True)  # training left at its default
MaskAttribute = _variant(CausalAttention, "MaskAttribute", held="attribute")
MaskMadeInForward = _variant(CausalAttention, "MaskMadeInForward", held=None, mask="cpu")
AlwaysBiased = _variant(CausalAttention, "AlwaysBiased", biased=True)
NoOutProj = _variant(MultiHeadAttention, "NoOutProj", project=False)  # out_proj made, as the chapter makes it
HeadsDropoutNeverApplied = _variant(MultiHeadAttention, "HeadsDropoutNeverApplied", dropout_at="nowhere")
HeadsDropoutOnContext = _variant(MultiHeadAttention, "HeadsDropoutOnContext", dropout_at="context")
HeadsDropoutOnScores = _variant(MultiHeadAttention, "HeadsDropoutOnScores", dropout_at="scores")
ScaledByDOut = _variant(MultiHeadAttention, "ScaledByDOut", by_d_out=True)
HeadsWithoutTranspose = _variant(  # `view(b, H, T, hd)`: no transpose, either way
    MultiHeadAttention, "HeadsWithoutTranspose", split=split_without_transpose, merge=merge_without_transpose
)
HeadsMaskAttribute = _variant(MultiHeadAttention, "HeadsMaskAttribute", held="attribute")
HeadsMaskMadeInForward = _variant(MultiHeadAttention, "HeadsMaskMadeInForward", held=None, mask="cpu")
HeadsAlwaysBiased = _variant(MultiHeadAttention, "HeadsAlwaysBiased", biased=True)


# --- long sequences -------------------------------------------------------------------


def _window_mask(num_tokens, window, device=None, checked=True, back=0, future=True):
    """sliding_window_mask hiding the keys more than ``window - 1 + back`` behind each query, and the future
    unless ``future`` is False; ``checked``: the reference's ValueErrors."""
    if checked and num_tokens < 1:
        raise ValueError(f"sliding_window_mask needs num_tokens >= 1, got {num_tokens}")
    if checked and window < 1:
        raise ValueError(f"sliding_window_mask needs window >= 1, got {window}")
    ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
    too_far = torch.tril(ones, diagonal=-(window + back))
    return torch.triu(ones, diagonal=1) | too_far if future else too_far


def _online(queries, keys, values, chunk_size, causal, *, rescale=True, first_peak=NEG_INF, scaled=True,
            local_positions=False, whole_chunks_only=False):  # fmt: skip
    """chunked_attention: the reference's online softmax with one step done wrong (each keyword names the step)."""
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    q = queries / math.sqrt(queries.shape[-1]) if scaled else queries
    stats = (*queries.shape[:-1], 1)
    peak = torch.full(stats, first_peak, dtype=queries.dtype, device=queries.device)
    total = torch.zeros(stats, dtype=queries.dtype, device=queries.device)
    mixed = torch.zeros((*queries.shape[:-1], values.shape[-1]), dtype=queries.dtype, device=queries.device)
    last_seen = torch.arange(num_queries, device=queries.device).unsqueeze(-1) + (num_keys - num_queries)
    end = num_keys - num_keys % chunk_size if whole_chunks_only else num_keys
    for start in range(0, end, chunk_size):
        block = q @ keys[..., start : start + chunk_size, :].transpose(-2, -1)
        if causal:
            first = 0 if local_positions else start
            positions = torch.arange(first, first + block.shape[-1], device=queries.device)
            block = block.masked_fill(positions > last_seen, NEG_INF)
        new_peak = torch.maximum(peak, block.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isfinite(new_peak), new_peak, torch.zeros_like(new_peak))
        factor = torch.exp(peak - shift) if rescale else torch.ones_like(peak)
        exp = torch.exp(block - shift)
        total = total * factor + exp.sum(dim=-1, keepdim=True)
        mixed = mixed * factor + exp @ values[..., start : start + chunk_size, :]
        peak = new_peak
    return mixed / torch.where(total > 0, total, torch.ones_like(total))  # a query that sees nothing: zero gradients


def full_attention_sliced(queries, keys, values, chunk_size, causal=False):
    scores = scaled_dot_product_scores(queries, keys)  # (..., Tq, Tk): the whole thing, at once
    if causal:
        num_queries, num_keys = scores.shape[-2], scores.shape[-1]
        future = torch.ones(num_queries, num_keys, dtype=torch.bool, device=scores.device)
        scores = scores.masked_fill(future.triu(1 + num_keys - num_queries), NEG_INF)
    weights = softmax_weights(scores)
    out = torch.zeros((*queries.shape[:-1], values.shape[-1]), dtype=queries.dtype, device=queries.device)
    for start in range(0, keys.shape[-2], chunk_size):  # "chunked": the weights, sliced after the fact
        out = out + weights[..., start : start + chunk_size] @ values[..., start : start + chunk_size, :]
    return out


# --- plotting -------------------------------------------------------------------------------------------


def _token_names(tokens, num_queries, num_keys):
    """``(query_tokens, key_tokens)`` as strings: one sequence names both axes (square weights); a pair is
    (queries, keys).  ValueError where they do not fit the weights."""
    items = list(tokens)
    pair = len(items) == 2 and not any(isinstance(t, str) for t in items)
    queries, keys = (list(items[0]), list(items[1])) if pair else (items, items)
    if (len(queries), len(keys)) != (num_queries, num_keys):
        raise ValueError(f"{len(queries)} query and {len(keys)} key tokens for ({num_queries}, {num_keys}) weights")
    return [str(t) for t in queries], [str(t) for t in keys]


def _drawn_wrong(weights, tokens, transpose=False, colorbar=True, swap_labels=False, swap_ticks=False,
                 detach=True, show=False, axes=False):  # fmt: skip
    """plot_attention: the reference's plot with one thing changed (each mistake below names which)."""
    import matplotlib.pyplot as plt

    if weights.dim() != 2:
        raise ValueError(f"plot_attention draws one (Tq, Tk) matrix, got shape {tuple(weights.shape)}")
    num_queries, num_keys = weights.shape
    names = None if tokens is None else _token_names(tokens, num_queries, num_keys)
    data = weights.detach().cpu() if detach else weights.cpu()
    data = data.numpy()
    fig, ax = plt.subplots()
    image = ax.imshow(data.T if transpose else data)
    if colorbar:
        fig.colorbar(image, ax=ax)
    x, y = ("Query positions", "Key positions") if swap_labels else ("Key positions", "Query positions")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if names is not None:
        across, down = (names[0], names[1]) if swap_ticks else (names[1], names[0])
        ax.set_xticks(range(len(across)), across)
        ax.set_yticks(range(len(down)), down)
    if show:
        plt.show()
    return ax if axes else fig


def plot_any_shape(weights, tokens=None):
    """No check of the shape: a batch reaches imshow, which refuses it with a TypeError, not a ValueError."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    fig.colorbar(ax.imshow(weights.detach().cpu().numpy()), ax=ax)
    ax.set_xlabel("Key positions")
    ax.set_ylabel("Query positions")
    if tokens is not None:
        queries, keys = _token_names(tokens, *weights.shape[-2:])
        ax.set_xticks(range(len(keys)), keys)
        ax.set_yticks(range(len(queries)), queries)
    return fig


# --- the catalogue --------------------------------------------------------------------


def _m(mistake_id, description, hint, hint_zh, overrides, source=CLASSIC, exercise=None):
    """An entry whose exercise is the first hook it overrides (named only where it overrides none)."""
    exercise = exercise or next(iter(overrides))
    return Mistake(mistake_id, exercise, description, hint, hint_zh, source, types.MappingProxyType(overrides))


CATALOGUE: tuple[Mistake, ...] = (
    _m(
        "scores-bmm-3d-only",
        "`torch.bmm(queries, keys.transpose(1, 2))`: right on (b, T, d) input, an error on 2-D and 4-D input",
        "Which shapes does torch.bmm accept? Your scores must work with no batch dims, and with (b, H, T, d) too.",
        "torch.bmm 接受哪些形状？你的得分函数必须在没有批次维度、以及 (b, H, T, d) 的输入上也能工作。",
        {"dot_product_scores": lambda queries, keys: torch.bmm(queries, keys.transpose(1, 2))},
    ),
    _m(
        "context-bmm-3d-only",
        "`torch.bmm(weights, values)`: right on (b, Tq, Tk) weights, an error on 2-D and 4-D input",
        "Which shapes does torch.bmm accept? The context vectors must work with no batch dims, and with heads too.",
        "torch.bmm 接受哪些形状？上下文向量必须在没有批次维度、以及带多个头的输入上也能工作。",
        {"context_vectors": lambda weights, values: torch.bmm(weights, values)},
    ),
    _m(
        "q-at-k-t-batched",
        "`queries @ keys.T`: right for 2-D input, but on batched input .T reverses every dimension",
        "On a 3-D or 4-D tensor, which dimensions does `.T` swap? Only the last two should change places.",
        "对三维或四维张量来说，`.T` 交换的是哪些维度？应当只交换最后两个维度。",
        {"dot_product_scores": lambda queries, keys: queries @ keys.permute(*reversed(range(keys.dim())))},
        SEED_003,
    ),
    _m(
        "keys-times-queries",
        "`keys @ queries.T`: the scores come out transposed, (Tk, Tq) instead of (Tq, Tk)",
        "Which operand comes first in your product? Row i of the scores belongs to query i.",
        "矩阵乘法中哪个操作数在前？注意力分数的第 i 行应当属于第 i 个查询（query）。",
        {"dot_product_scores": lambda queries, keys: keys @ queries.transpose(-2, -1)},
    ),
    _m(
        "no-scaling",
        "returns the plain dot products, never divided by sqrt(d_k)",
        "Compare your scores with the plain dot products: what should they be divided by?",
        "把你的分数和普通点积比较一下：它们应当除以什么？",
        {"scaled_dot_product_scores": lambda queries, keys: dot_product_scores(queries, keys)},
    ),
    _m(
        "scale-by-d-k-not-sqrt",
        "divides by d_k instead of sqrt(d_k), or by sqrt(d_k) twice (the seed's second softmax over `masked / "
        "sqrt(d_k)`): the same numbers",
        "Is the scale the square root of d_k, and is it applied once? Dividing by d_k, or twice by sqrt(d_k), "
        "shrinks the scores too much.",
        "缩放因子是 d_k 的平方根吗？只除了一次吗？除以 d_k，或者除以两次 sqrt(d_k)，都会把分数缩得太小。",
        {"scaled_dot_product_scores": scale_twice},
        SEED_003,
    ),
    _m(
        "scale-by-num-tokens",
        "divides by sqrt(T) (queries.shape[-2]) instead of sqrt(d_k)",
        "Which size do you take the square root of? Look at which axis of `keys` holds d_k.",
        "你对哪个尺寸开平方根？看看 d_k 位于 `keys` 的哪一个维度。",
        {"scaled_dot_product_scores": scale_by_num_tokens},
    ),
    _m(
        "softmax-over-dim-1",
        "normalises dim=1 whatever `dim` says (`torch.softmax(x, dim=1)`): right for 2-D scores only",
        "Which dimension does your softmax normalise when the scores have a batch dimension? Normalise over the "
        "keys: the last dimension, or the dim you are given.",
        "当 scores 带有批次维度时，你的 softmax 在哪个维度上归一化？请在键所在的维度上归一化：最后一维，或传入的 dim。",
        _hook("softmax_weights", _fixed_dim, fixed=1),
        f"{SEED_000}, {SEED_002}, {SEED_003}",
    ),
    _m(
        "softmax-over-dim-0",
        "normalises dim=0, the batch dimension, whatever `dim` says",
        "Which dimension does your softmax normalise? Dimension 0 mixes different examples of the batch.",
        "你的 softmax 在哪个维度上归一化？第 0 维会把批次中不同的样本混在一起。",
        _hook("softmax_weights", _fixed_dim, fixed=0),
    ),
    _m(
        "softmax-ignores-dim",
        "always normalises the last dimension, ignoring the `dim` argument",
        "Does your function read its `dim` argument? Try it with dim=0 and check which slices sum to 1.",
        "你的函数用到 `dim` 参数了吗？用 dim=0 试一试，看看是哪些切片的和为 1。",
        _hook("softmax_weights", _fixed_dim, fixed=-1),
    ),
    _m(
        "softmax-without-max",
        "exponentiates the raw scores: overflows to inf/NaN on logits around ±1e4",
        "What does exp(10000) give in floating point? Softmax does not change if you shift a slice by a constant.",
        "在浮点数里 exp(10000) 等于多少？对同一切片整体平移一个常数，softmax 的结果不变。",
        {"softmax_weights": softmax_without_max},
    ),
    _m(
        "softmax-nan-on-masked-rows",
        "subtracts the max even when it is -inf, so a fully masked slice becomes NaN",
        "What is -inf minus -inf? Think about a row where every entry is masked: it should come out all zeros.",
        "-inf 减去 -inf 等于多少？想一想所有元素都被遮蔽的一行：它的结果应当全是 0。",
        {"softmax_weights": softmax_nan_on_masked_rows},
    ),
    _m(
        "temperature-after-softmax",
        "divides the softmax's weights by the temperature instead of the scores: the rows no longer sum to 1",
        "Where does the temperature go: into the softmax or after it? Check that each row of your weights still "
        "sums to 1 at temperature 2.",
        "温度应该放在哪里：softmax 之内还是之后？检查一下温度为 2 时，你的权重每一行的和是否仍为 1。",
        _hook("softmax_with_temperature", _tempered, weights_of=lambda s, t, d: softmax_weights(s, dim=d) / t),
    ),
    _m(
        "temperature-multiplied",
        "multiplies the scores by the temperature instead of dividing: a small temperature flattens the weights",
        "Does a temperature below 1 make your weights sharper (closer to one-hot) or flatter? Divide or multiply?",
        "温度小于 1 时，你的权重是变得更尖锐（更接近 one-hot）还是更平坦？应该除还是乘？",
        _hook("softmax_with_temperature", _tempered, weights_of=lambda s, t, d: softmax_weights(s * t, dim=d)),
    ),
    _m(
        "temperature-ignored",
        "never uses the temperature: the plain softmax of the scores whatever the temperature",
        "Does your result change when the temperature changes? Compare temperature 1 with temperature 2.",
        "改变温度时，你的结果会变化吗？比较一下温度为 1 和温度为 2 的结果。",
        _hook("softmax_with_temperature", _tempered, weights_of=lambda s, t, d: softmax_weights(s, dim=d)),
    ),
    _m(
        "temperature-without-max",
        "exponentiates scores / temperature without subtracting the max: inf/NaN at temperature 1e-4",
        "What is scores / 0.0001 for a score of 3, and what is exp of that in floating point? Shift each slice "
        "by its maximum before exponentiating.",
        "分数为 3 时，scores / 0.0001 是多少？它的 exp 在浮点数里又是多少？在取指数之前，先把每个切片减去它的最大值。",
        _hook("softmax_with_temperature", _tempered, weights_of=lambda s, t, d: softmax_without_max(s / t, d)),
    ),
    _m(
        "temperature-over-every-element",
        "normalises over every element of the scores at once (one sum of the whole tensor), not over `dim`",
        "Which elements does your denominator add up? Check that each slice along `dim` (each row, for dim=-1) of "
        "your weights sums to 1, not the whole tensor.",
        "你的分母把哪些元素加在了一起？检查一下你的权重沿 `dim` 的每个切片（dim=-1 时即每一行）之和是否为 1，而不是整个"
        "张量之和为 1。",
        _hook("softmax_with_temperature", _tempered, weights_of=_over_every_element),
    ),
    _m(
        "temperature-unchecked",
        "no ValueError for temperature <= 0: divides by zero or flips the scores' sign",
        "What should happen when someone passes temperature 0 or -1? Check the argument and raise ValueError "
        "(an assert is stripped by python -O and raises the wrong type).",
        "如果有人传入温度 0 或 -1，应该怎样？先检查参数并抛出 ValueError"
        "（assert 会被 python -O 去掉，而且抛出的异常类型不对）。",
        _hook("softmax_with_temperature", _tempered, checked=False),
    ),
    _m(
        "weights-transposed",
        "`weights.T @ values`: mixes the values by columns of the weights instead of rows",
        "Each context vector is one row of the weights times the values. Are you using rows or columns?",
        "每个上下文向量等于权重的一行乘以 values。你用的是行还是列？",
        {"context_vectors": lambda weights, values: weights.transpose(-2, -1) @ values},
    ),
    _m(
        "triu-diagonal-0",
        "`torch.triu(ones)` with diagonal 0: masks the diagonal too, so a token cannot attend to itself",
        "Should a token be allowed to attend to itself? Check what your mask holds on the diagonal.",
        "一个词元能否关注它自己？检查一下你的掩码在对角线上的值。",
        _hook("causal_mask", _causal_mask, diagonal=0),
    ),
    _m(
        "tril-instead-of-triu",
        "`torch.tril(ones)`: the keep mask of the first approach used as the mask, so it hides the past",
        "True means 'hide this entry'. Which entries are the future: above or below the diagonal?",
        "True 表示“遮住这个位置”。哪些位置代表未来：对角线上方还是下方？",
        _hook("causal_mask", _causal_mask, triangle=torch.tril, diagonal=0),
    ),
    _m(
        "causal-mask-ignores-device",
        "builds the mask on the default device whatever `device` says",
        "Where does your mask live when you are asked for one on a GPU? Pass the device you are given along.",
        "当要求在 GPU 上生成掩码时，你的掩码在哪个设备上？请把传入的 device 用上。",
        _hook("causal_mask", _causal_mask, on_device=False),
    ),
    _m(
        "causal-mask-float",
        "returns the seeds' float 0/1 `torch.triu(torch.ones(T, T), 1)` as is, not a bool mask",
        "What dtype is your mask? masked_fill wants a boolean tensor.",
        "你的掩码是什么数据类型？masked_fill 需要布尔类型的张量。",
        _hook("causal_mask", _causal_mask, dtype=None),
        f"{SEED_000}, {SEED_003}",
    ),
    _m(
        "causal-mask-unchecked",
        "no ValueError for num_tokens < 1: returns an empty mask or fails inside torch",
        "What should happen when someone asks for a mask of 0 tokens? Check the argument before building anything.",
        "如果有人要求生成 0 个词元的掩码，应该怎样？在构建之前先检查参数。",
        _hook("causal_mask", _causal_mask, checked=False),
    ),
    _m(
        "mask-of-size-6",
        "`torch.triu(torch.ones(6, 6), 1)`: a mask of the chapter's fixed size, wrong for any other T",
        "Where does the size of your mask come from? Inputs can have any number of tokens, not just 6.",
        "你的掩码大小从哪里来？输入可以有任意数量的词元，不只是 6 个。",
        {"apply_causal_mask": mask_of_size_6},
        SEED_003,
    ),
    _m(
        "mask-with-zero",
        "fills the future with 0 instead of -inf, so after softmax it still gets weight",
        "After the softmax, how much weight does a score of 0 get? The future must end up with none.",
        "经过 softmax 之后，分数为 0 的位置会得到多少权重？未来的位置最终应当完全没有权重。",
        {"apply_causal_mask": mask_with_zero},
    ),
    _m(
        "mask-built-on-cpu",
        "`torch.triu(torch.ones(T, T), 1)` with no device: the mask is on the CPU whatever the scores' device",
        "On which device is the mask you create? Build it where the scores are.",
        "你创建的掩码在哪个设备上？请在 scores 所在的设备上构建它。",
        {"apply_causal_mask": mask_built_on_cpu},
        f"{SEED_000}, {SEED_002}",
    ),
    _m(
        "mask-in-place",
        "`scores.masked_fill_(...)`: overwrites the caller's scores instead of returning a new tensor",
        "Look for a method ending in an underscore: it changes its input. The caller's scores must stay as they were.",
        "找找以下划线结尾的方法：它会修改输入本身。调用者传入的 scores 必须保持不变。",
        {"apply_causal_mask": mask_in_place},
        SEED_003,
    ),
    _m(
        "mask-without-renormalising",
        "`attn_weights * tril`: zeroes the future but never divides, so rows no longer sum to 1",
        "After zeroing the future, what does each row sum to? Attention weights in a row must sum to 1.",
        "把未来的位置置零之后，每一行的和是多少？每一行的注意力权重之和必须为 1。",
        {"renormalize_masked_weights": mask_without_renormalising},
        SEED_000,
    ),
    _m(
        "renormalise-columns",
        "divides by the column sums (dim=-2) instead of each row's sum",
        "Which dimension do you sum over before dividing? It is each row that must sum to 1.",
        "除法之前你在哪个维度上求和？必须是每一行的和为 1。",
        {"renormalize_masked_weights": renormalise_columns},
    ),
    _m(
        "dropout-scale-by-inverse-p",
        "scales the kept entries by 1/p instead of 1/(1-p)",
        "With p=0.1, 90% of the entries survive. By how much must they grow to keep the expected value?",
        "当 p=0.1 时，90% 的元素被保留。它们要放大多少倍，期望值才保持不变？",
        {"dropout_scale": scale_by_inverse_p},
    ),
    _m(
        "dropout-not-scaled",
        "zeroes the dropped entries but leaves the kept ones unscaled",
        "Without dropout in eval, the weights keep their full size. What must happen to the survivors in training?",
        "评估时没有 dropout，权重保持原来的大小。那么训练时被保留下来的元素应当怎样处理？",
        {"dropout_scale": not_scaled},
    ),
    _m(
        "dropout-divides-by-zero",
        "divides by 1-p even when p == 1: inf and NaN instead of zeros",
        "What is 1 - p when p = 1? Decide what dropping everything should return before you divide.",
        "当 p = 1 时，1 - p 等于多少？在做除法之前，先想清楚全部丢弃时应当返回什么。",
        {"dropout_scale": divides_by_zero_at_p_1},
    ),
    _m(
        "attention-dropout-divides-by-zero",
        "attention_dropout scales by 1/(1-p) itself, unguarded: at p == 1 every entry is 0 / 0, NaN instead of zeros",
        "What is 1 - p when p = 1? Decide what dropping everything should return before you divide.",
        "当 p = 1 时，1 - p 等于多少？在做除法之前，先想清楚全部丢弃时应当返回什么。",
        _hook("attention_dropout", _attention_dropout, by_zero=True),
    ),
    _m(
        "dropout-p-unchecked",
        "accepts p outside [0, 1] instead of raising ValueError",
        "Is p = 1.5 a probability? Check the argument before using it.",
        "p = 1.5 是一个概率吗？在使用参数之前先检查它。",
        {"dropout_scale": p_not_checked},
    ),
    _m(
        "attention-dropout-scale-by-inverse-p",
        "keeps each entry with probability 1-p but scales the survivors by 1/p",
        "With p=0.2, how much must the surviving 80% grow so the expected weight stays the same?",
        "当 p=0.2 时，被保留的 80% 元素要放大多少倍，期望权重才保持不变？",
        _hook("attention_dropout", _attention_dropout, by_p=True),
    ),
    _m(
        "dropout-active-in-eval",
        "drops entries even when training=False",
        "What should dropout do when the model is being evaluated? Look at the `training` argument.",
        "模型在评估时 dropout 应当做什么？看看 `training` 参数。",
        _hook("attention_dropout", _attention_dropout, in_eval=True),
    ),
    _m(
        "dropout-renormalises-rows",
        "divides each row by its sum after dropout, undoing the 1/(1-p) scaling",
        "After dropout, should a row still sum to 1? Compare each surviving entry with w/(1-p).",
        "dropout 之后，每一行的和还应当是 1 吗？把每个被保留的元素和 w/(1-p) 比较一下。",
        {"attention_dropout": dropout_then_renormalise},
    ),
    _m(
        "dropout-keeps-with-p",
        "keeps each entry with probability p instead of 1-p",
        "p is the probability of dropping an entry. With p=0.2, about what share of the entries should survive?",
        "p 是丢弃一个元素的概率。当 p=0.2 时，大约应当有多少比例的元素被保留？",
        _hook("attention_dropout", _attention_dropout, keep_below=True),
    ),
    _m(
        "dropout-ignores-generator",
        "draws the keep mask from the global RNG, ignoring `generator`",
        "Where do your random numbers come from? The same generator state must give the same mask.",
        "你的随机数来自哪里？相同的 generator 状态必须得到相同的掩码。",
        _hook("attention_dropout", _attention_dropout, global_rng=True),
    ),
    _m(
        "dropout-global-rng-cpu-mask",
        "d2l's `(torch.rand(X.shape) > p).float()`: the mask comes from the global RNG, not `generator`, and is made "
        "on the CPU (float32 in d2l), whatever the weights' device and dtype",
        "Which random generator does your mask come from: the one you are given, or torch's global one? And on "
        "which device, with which dtype, is the mask made, compared with the weights?",
        "你的掩码来自哪个随机数生成器：传给你的 generator，还是 torch 的全局随机数生成器？"
        "再比较一下：掩码是在哪个设备上、以什么数据类型创建的？权重又是怎样的？",
        {"attention_dropout": dropout_global_rng_cpu_mask},
    ),
    _m(
        "dropout-zeroes-input-in-place",
        "at p == 1 returns `weights.zero_()` (or multiplies in place): the caller's weights are zeroed too",
        "After your function returns with p = 1, what is left in the tensor the caller passed in? Look for a method "
        "ending in an underscore, or an `*=`.",
        "当 p = 1 时函数返回之后，调用者传入的那个张量里还剩下什么？找找以下划线结尾的方法，或者 `*=` 这样的写法。",
        {
            "attention_dropout": attention_dropout_zeroes_input_at_p_1,
            "dropout_scale": dropout_scale_zeroes_input_at_p_1,
        },
    ),
    _m(
        "split-heads-without-transpose",
        "`x.view(b, H, T, hd)` straight from (b, T, d): mixes tokens into heads",
        "Does head h hold columns of every token, or whole rows of the first few tokens? Check the order of dims.",
        "第 h 个头拿到的是每个词元的若干列，还是前几个词元的整行？检查一下维度的顺序。",
        {"split_heads": split_without_transpose},
    ),
    _m(
        "split-heads-no-permute",
        "`x.view(b, T, H, hd)` and no transpose: returns (b, T, H, hd) where the contract is (b, H, T, hd)",
        "In the tensor you return, which axis holds the heads? The contract puts them before the tokens: "
        "(b, H, T, hd).",
        "你返回的张量里，哪一个维度是头？约定要求头在词元之前：(b, H, T, hd)。",
        {"split_heads": split_without_permute},
    ),
    _m(
        "split-heads-interleaved",
        "`x.view(b, T, hd, H).permute(0, 3, 1, 2)`: head h gets columns h, h+H, h+2H, ... instead of a block",
        "Which columns end up in head 0? Each head should own one contiguous block of d/H columns.",
        "第 0 个头拿到了哪些列？每个头应当拥有连续的一段 d/H 列。",
        {"split_heads": split_interleaved},
    ),
    _m(
        "split-heads-unchecked",
        "`head_dim = d // num_heads` with no check: no ValueError when d is not divisible by the number of heads",
        "What happens when d is not a multiple of num_heads? Check it and say so with a ValueError.",
        "当 d 不是 num_heads 的整数倍时会怎样？请检查这一点，并抛出 ValueError。",
        {"split_heads": split_unchecked},
        SEED_002,
    ),
    _m(
        "merge-without-transpose",
        "`x.reshape(b, T, H*hd)` straight from (b, H, T, hd): tokens and heads are scrambled",
        "Undo split_heads step by step, in reverse order: where are the heads and the tokens before you flatten?",
        "按相反的顺序一步步撤销 split_heads：在展平之前，头和词元分别在哪个维度？",
        {"merge_heads": merge_without_transpose},
    ),
    _m(
        "scale-by-d-in",
        "divides the scores by sqrt(d_in), the input width, instead of sqrt(d_k) of the keys",
        "When d_in and d_out differ, which one is the key dimension? Scale by the width of the keys.",
        "当 d_in 和 d_out 不同时，哪一个才是键（key）的维度？请按 keys 的宽度来缩放。",
        _made(make_self_attention=ScaledByDIn),
        SEED_002,
    ),
    _m(
        "scale-after-softmax",
        "divides the attention weights by sqrt(d_k) after the softmax instead of the scores before it",
        "Do your attention weights still sum to 1 per row? The scaling belongs before the softmax.",
        "你的注意力权重每一行的和还是 1 吗？缩放应当放在 softmax 之前。",
        _made(make_self_attention=ScaledAfterSoftmax),
    ),
    _m(
        "projections-in-wrong-order",
        "creates W_key before W_query, so torch.manual_seed gives different weights than the chapter",
        "With the same seed your numbers differ from the chapter's: in what order do you create the three layers?",
        "在相同的随机种子下你的数值和书中不同：你创建三个线性层的顺序是什么？",
        _made(make_self_attention=KeyFirst),
    ),
    _m(
        "forward-misspelled",
        "the method is named `foward`, so nn.Module has no forward to call",
        "Is the method nn.Module calls spelled exactly right? Check its name letter by letter.",
        "nn.Module 会调用的那个方法名字拼写正确吗？逐个字母检查一下。",
        _made(make_self_attention=ForwardMisspelled),
        SEED_003,
    ),
    _m(
        "projections-named-differently",
        "names the layers Wq_matrix/Wk_matrix/Wv_matrix, so the chapter's state_dict does not load",
        "Compare the keys of your state_dict with the chapter's: what are the three layers called?",
        "把你的 state_dict 的键和书中的比较一下：这三个线性层应当叫什么名字？",
        _made(make_self_attention=MatrixNames),
        SEED_003,
    ),
    _m(
        "softmax-twice",
        "applies softmax to the scores, masks the weights, then applies softmax again",
        "How many times does your forward call softmax? The mask goes on the scores, before the only softmax.",
        "你的 forward 调用了几次 softmax？掩码应当作用在分数上，然后只做一次 softmax。",
        _made(make_causal_attention=SoftmaxTwice),
        SEED_003,
    ),
    _m(
        "mask-plain-attribute",
        "`self.mask = torch.triu(...)`: a plain attribute, so not in state_dict and left behind by .to(device)",
        "Is your mask in the module's state_dict, and does .to(device) move it? Look at how you store it.",
        "你的掩码在模块的 state_dict 里吗？.to(device) 会移动它吗？看看你是怎样保存它的。",
        _made(make_causal_attention=MaskAttribute, make_multihead_attention=HeadsMaskAttribute),
    ),
    _m(
        "mask-made-in-forward-on-cpu",
        "builds `torch.triu(torch.ones(T, T))` in forward with no device, so on the CPU whatever x's device",
        "On which device is the mask you build in forward? Build it where x is (device=x.device), or hold it as a "
        "buffer.",
        "你在 forward 里构建的掩码在哪个设备上？请在 x 所在的设备上构建它（device=x.device），"
        "或者把它作为 buffer 保存。",
        _made(make_causal_attention=MaskMadeInForward, make_multihead_attention=HeadsMaskMadeInForward),
        SEED_000,
    ),
    _m(
        "mask-not-sliced",
        "uses the whole (context_length, context_length) mask, which fails for T < context_length",
        "Your input can be shorter than context_length. What size must the mask be for T tokens?",
        "输入可能比 context_length 短。对于 T 个词元，掩码应当是多大？",
        _made(make_causal_attention=MaskNotSliced),
    ),
    _m(
        "mask-not-applied",
        "registers the mask buffer but never applies it: every token sees the future",
        "Change a later token: do the earlier outputs change? Follow your mask through forward.",
        "改变后面的一个词元：前面的输出变了吗？在 forward 中跟踪一下你的掩码。",
        _made(make_causal_attention=MaskNotApplied),
    ),
    _m(
        "linear-bias-ignores-qkv-bias",
        "`nn.Linear(d_in, d_out)`: bias=True always, ignoring qkv_bias (the chapter has no bias)",
        "Does your module use its qkv_bias argument? Look at what nn.Linear does by default.",
        "你的模块用到 qkv_bias 参数了吗？看看 nn.Linear 默认会做什么。",
        _made(
            make_causal_attention=AlwaysBiased,
            make_self_attention=BiasedSelfAttention,
            make_multihead_attention=HeadsAlwaysBiased,
        ),
        SEED_000,
    ),
    _m(
        "module-dropout-in-eval",
        "calls attention dropout without passing self.training, so dropout stays on in eval",
        "Is your module deterministic after .eval()? Check what tells your dropout the module's mode.",
        "调用 .eval() 之后你的模块输出是确定的吗？看看是什么把模块的模式告诉了 dropout。",
        _made(make_causal_attention=DropoutInEval),
    ),
    _m(
        "dropout-never-applied",
        "holds the dropout (nn.Dropout or the rate) but never applies it in forward",
        "Where in forward does your dropout act? In training mode some attention weights must be dropped.",
        "你的 dropout 在 forward 的哪里起作用？在训练模式下，应当有一部分注意力权重被丢弃。",
        _made(make_causal_attention=DropoutNeverApplied, make_multihead_attention=HeadsDropoutNeverApplied),
    ),
    _m(
        "dropout-on-context",
        "applies dropout to the context vectors instead of the attention weights",
        "What does your dropout drop: attention weights, or the context vectors made from them? It belongs right "
        "after the softmax.",
        "你的 dropout 丢弃的是什么：注意力权重，还是由它们得到的上下文向量？它应当紧跟在 softmax 之后。",
        _made(make_causal_attention=DropoutOnContext, make_multihead_attention=HeadsDropoutOnContext),
    ),
    _m(
        "dropout-on-scores",
        "applies dropout to the scores before the mask and the softmax instead of to the weights after it",
        "A dropped score becomes 0, and the softmax still gives it weight. Should dropout come before or after "
        "the softmax?",
        "被丢弃的分数变成 0，softmax 之后它仍然会得到权重。dropout 应当放在 softmax 之前还是之后？",
        _made(make_causal_attention=DropoutOnScores, make_multihead_attention=HeadsDropoutOnScores),
    ),
    _m(
        "no-out-proj",
        "makes out_proj but returns the concatenated heads without applying it",
        "After the heads are merged, is there one more layer in the chapter's MultiHeadAttention?",
        "把各个头合并之后，书中的 MultiHeadAttention 还有一层什么？",
        _made(make_multihead_attention=NoOutProj),
        SEED_002,
    ),
    _m(
        "mha-heads-without-transpose",
        "splits (and merges) heads with a bare view to (b, H, T, hd), without transpose",
        "Inside forward, does each head see every token? Check how you move heads in front of tokens and back.",
        "在 forward 中，每个头都看到了所有词元吗？检查你是怎样把头移到词元前面、再移回来的。",
        _made(make_multihead_attention=HeadsWithoutTranspose),
    ),
    _m(
        "mha-scale-by-d-out",
        "divides each head's scores by sqrt(d_out) instead of sqrt(head_dim)",
        "What is d_k for one head? Each head's keys are narrower than d_out.",
        "对单个头来说 d_k 是多少？每个头的 keys 比 d_out 窄。",
        _made(make_multihead_attention=ScaledByDOut),
    ),
    _m(
        "window-sees-one-too-many",
        "masks keys with `j < i - window`: each query sees window + 1 keys",
        "Count the keys row i may see, itself included: there should be exactly `window` of them.",
        "数一数第 i 行能看到几个键（包括它自己）：应当正好是 `window` 个。",
        _hook("sliding_window_mask", _window_mask, back=1),
    ),
    _m(
        "window-sees-one-too-few",
        "masks keys with `j <= i - window + 1`: each query sees only window - 1 keys (window 1 sees nothing)",
        "With window = 1, what may token i still see? Count the keys of one row, itself included.",
        "当 window = 1 时，第 i 个词元还能看到什么？数一数一行里能看到的键（包括它自己）。",
        _hook("sliding_window_mask", _window_mask, back=-1),
    ),
    _m(
        "window-forgets-future",
        "masks only the keys too far back: the future stays visible",
        "A sliding window is still causal. Which entries above the diagonal does your mask hide?",
        "滑动窗口仍然是因果的。你的掩码遮住对角线上方的元素了吗？",
        _hook("sliding_window_mask", _window_mask, future=False),
        SEED_002,
    ),
    _m(
        "window-unchecked",
        "accepts window < 1 (or num_tokens < 1) instead of raising ValueError",
        "What should window = 0 mean? A row that sees nothing is not a mask anyone wants: raise ValueError.",
        "window = 0 应当是什么意思？一行什么也看不到的掩码没有用处：请抛出 ValueError。",
        _hook("sliding_window_mask", _window_mask, checked=False),
    ),
    _m(
        "chunks-not-rescaled",
        "adds each block's exp(score - new max) to sums kept relative to the old max, never rescaling them",
        "When a block raises the running max, the sums so far were computed against the old max. What factor "
        "brings them to the new one?",
        "当某个块提高了运行最大值时，之前的累加和是相对旧的最大值算的。用什么因子把它们换算到新的最大值？",
        _hook("chunked_attention", _online, rescale=False),
        SEED_002,
    ),
    _m(
        "running-max-from-zero",
        "starts the running max at 0 instead of -inf: when every score is far below zero, exp underflows to 0",
        "What is the max of an empty set of scores? Try keys that make every score very negative.",
        "空集合的最大值是多少？试试让所有分数都非常负的键。",
        _hook("chunked_attention", _online, first_peak=0.0),
    ),
    _m(
        "chunked-no-scaling",
        "never divides the scores by sqrt(d)",
        "Is this still *scaled* dot-product attention? Compare one block of your scores with q k^T / sqrt(d).",
        "这还是*缩放*点积注意力吗？把你的某一块分数和 q k^T / sqrt(d) 比较一下。",
        _hook("chunked_attention", _online, scaled=False),
    ),
    _m(
        "causal-offset-per-chunk",
        "masks with the key's index inside its block instead of its position in the sequence",
        "In the block that starts at key s, where is its first key in the whole sequence? Compare positions, "
        "not indices within the block.",
        "从第 s 个键开始的那一块里，第一个键在整个序列中的位置是多少？请比较全局位置，而不是块内下标。",
        _hook("chunked_attention", _online, local_positions=True),
    ),
    _m(
        "last-partial-chunk-dropped",
        "walks only whole blocks, so the last Tk % chunk_size keys are never seen",
        "When chunk_size does not divide Tk, is the last, shorter block part of your loop?",
        "当 chunk_size 不能整除 Tk 时，最后那个较短的块在你的循环里吗？",
        _hook("chunked_attention", _online, whole_chunks_only=True),
    ),
    _m(
        "full-attention-sliced",
        "computes the whole (..., Tq, Tk) weights, then mixes the values block by block: right values, full memory",
        "How large is the largest tensor you build? Chunking only saves memory if no step ever holds every "
        "score at once.",
        "你构建的最大张量有多大？只有当任何一步都不同时持有全部分数时，分块才能节省内存。",
        {"chunked_attention": full_attention_sliced},
        SEED_002,
    ),
    _m(
        "plot-transposed",
        "draws `weights.T`: keys down the side and queries across, the transpose of the chapter's heatmap",
        "Which axis of the image holds the queries? imshow puts the rows of its array down the side, and row i "
        "of the weights is query i.",
        "图像的哪一个轴对应查询（query）？imshow 把数组的行画在纵轴上，而权重的第 i 行属于第 i 个查询。",
        _hook("plot_attention", _drawn_wrong, transpose=True),
    ),
    _m(
        "plot-without-colorbar",
        "draws the image but no colorbar, so the colours cannot be read as weights",
        "How would a reader tell a weight of 0.2 from 0.8 in your picture? Something on the figure must say "
        "which colour means which value.",
        "读者怎样从你的图中分辨 0.2 和 0.8 的权重？图上需要有东西说明每种颜色代表多大的数值。",
        _hook("plot_attention", _drawn_wrong, colorbar=False),
        SEED_002,
    ),
    _m(
        "plot-labels-swapped",
        'labels the x axis "Query positions" and the y axis "Key positions", the other way round',
        "Which positions run across the image, and which down its side? Check your labels against the rows "
        "and columns of the weights.",
        "横轴上排列的是哪种位置，纵轴上又是哪种？请对照权重矩阵的行和列检查你的坐标轴标签。",
        _hook("plot_attention", _drawn_wrong, swap_labels=True),
    ),
    _m(
        "plot-tokens-on-wrong-axes",
        "labels the x ticks with the query tokens and the y ticks with the key tokens",
        "With different query and key tokens, which ones belong under the columns? The columns are the keys.",
        "当查询和键的词元不同时，哪一组应该标在列的下方？列对应的是键（key）。",
        _hook("plot_attention", _drawn_wrong, swap_ticks=True),
    ),
    _m(
        "plot-without-detach",
        "calls `.numpy()` on weights that require grad (a model's), which raises, instead of detaching first",
        "Try your function on weights computed by a module, which require grad. What must happen to such a "
        "tensor before numpy (and matplotlib) may read it?",
        "用模块算出来的权重（需要梯度的张量）试一试你的函数。这样的张量在交给 numpy（以及 matplotlib）"
        "之前需要先做什么？",
        _hook("plot_attention", _drawn_wrong, detach=False),
    ),
    _m(
        "plot-shows-figure",
        "calls `plt.show()` inside the function instead of returning the figure for the caller to show",
        "Who decides when a figure is shown: the function that draws it, or the code that calls it? Return the "
        "figure and leave showing to the caller.",
        "图什么时候显示，应该由画图的函数决定，还是由调用它的代码决定？把 Figure 返回，让调用者去显示。",
        _hook("plot_attention", _drawn_wrong, show=True),
    ),
    _m(
        "plot-returns-axes",
        "returns the Axes it drew on (`ax`) instead of the Figure",
        "What does `plt.subplots()` give you, and which of the two does the exercise ask you to return?",
        "`plt.subplots()` 返回了哪两样东西？这个练习要求你返回的是其中哪一个？",
        _hook("plot_attention", _drawn_wrong, axes=True),
    ),
    _m(
        "plot-any-shape",
        "never checks the shape: a batch of weights reaches imshow, which raises TypeError instead of ValueError",
        "What should happen when someone passes a whole batch (b, Tq, Tk) or the heads (b, H, Tq, Tk)? Check "
        "the number of dimensions before drawing.",
        "如果有人传入整个批次 (b, Tq, Tk) 或多头的权重 (b, H, Tq, Tk)，应当怎样处理？画图之前先检查维度数。",
        {"plot_attention": plot_any_shape},
    ),
    *(_m(*entry) for entry in GRADIENT_ENTRIES),  # right values, cannot train (solutions.gradient_mistakes)
    # issue 25 (hidden): a mask whose container hides its values
    _m(
        "causal-mask-extra-dim",
        "returns the mask with an extra leading dimension, (1, T, T) instead of (T, T) (`.unsqueeze(0)`, "
        "`[None]`)",
        "What shape does your mask have for 5 tokens? Broadcasting is the caller's business: the exercise asks "
        "for one (num_tokens, num_tokens) matrix.",
        "5 个词元时，你的掩码是什么形状？广播交给调用者去做：这个练习要求的是一个 (num_tokens, num_tokens) 的矩阵。",
        _hook("causal_mask", _causal_mask, batched=True),
    ),
    _m(
        "causal-mask-numpy",
        "builds the mask with NumPy (`np.triu(...)`) and returns the NumPy array, not a torch tensor",
        "What type does your function return? masked_fill wants a torch tensor, on the device it was given; "
        "can you build the mask with torch itself?",
        "你的函数返回的是什么类型？masked_fill 需要 torch 张量，而且要在传入的 device 上；能否直接用 torch 构建掩码？",
        {"causal_mask": numpy_causal_mask},
    ),
    # issue 25 (hidden): heads merged back without .contiguous()
    _m(
        "merge-view-after-transpose",
        "`x.transpose(1, 2).view(b, T, H*hd)` without `.contiguous()`: view raises on the transposed tensor "
        "(\"view size is not compatible with input tensor's size and stride\")",
        "After you move the heads back behind the tokens, is the tensor still laid out in memory in the order its "
        "shape says? What does view need of its input, and how could you give it that before you flatten the heads?",
        "把头移回到词元后面之后，这个张量在内存中的存放顺序还和它的形状一致吗？view 对输入有什么要求？"
        "在展平各个头之前，你怎样才能满足这个要求？",
        {"merge_heads": merge_view_after_transpose},
        CHAPTER,
    ),
    _m(
        "merge-not-contiguous",
        "`x.permute(0, 2, 1, 3).reshape(b, T, H*hd)` (or transpose, flatten) without `.contiguous()`: right values, "
        "but on a non-contiguous input reshape returns a non-contiguous view",
        "Is your result contiguous for every input, a non-contiguous one too? When can reshape (or flatten) "
        "return a view instead of a copy, and what does the exercise promise about the result's layout?",
        "对每一种输入（包括不连续的输入），你的结果都是连续（contiguous）的吗？reshape（或 flatten）在什么情况下"
        "会返回视图而不是副本？这个练习对结果的内存布局有什么要求？",
        {"merge_heads": merge_not_contiguous},
    ),
)

READ_FROM_SOURCE: tuple[Mistake, ...] = (
    _m(
        "mask-result-discarded",
        "`scores.masked_fill(mask, -inf)` as a statement: masked_fill returns a new tensor, which is thrown away",
        "masked_fill returns a new tensor and leaves its input alone. What happens to the value your line returns?",
        "masked_fill 返回一个新的张量，并不修改它的输入。你那一行返回的结果去哪儿了？",
        {},
        exercise="make_causal_attention",
    ),
    # structure the parameter mapping sees (issue 25): named from the module's reported structure and its lines
    _m(
        "mha-per-head-module-list",
        "the chapter's MultiHeadAttentionWrapper: an nn.ModuleList of single-head attention modules whose outputs "
        "are concatenated, instead of one W_query / W_key / W_value of (d_out, d_in) split into heads, and out_proj",
        "Your module keeps one attention module per head in a list. The exercise's contract expects one W_query, "
        "W_key and W_value, each an nn.Linear(d_in, d_out) whose output is split into heads, and an out_proj "
        "(d_out, d_out) after the heads are merged. How does the chapter's MultiHeadAttention differ from its "
        "wrapper?",
        "你的模块把每个头做成一个单独的注意力模块，放在一个列表里。本练习的约定要求：一个 W_query、一个 W_key、一个 "
        "W_value，各自是 nn.Linear(d_in, d_out)，其输出再拆分成多个头；各头合并之后还有一个 out_proj (d_out, "
        "d_out)。书中的 MultiHeadAttention 和它的 wrapper 有什么不同？",
        {},
        CHAPTER,
        exercise="make_multihead_attention",
    ),
    _m(
        "mha-without-out-proj",
        "a multi-head module with no out_proj at all: the merged heads are returned as they are",
        "Your module's parameters cover the query, key and value projections, but none is the output projection. "
        "The exercise's contract expects an out_proj of (d_out, d_out), with a bias, applied after the heads are "
        "merged. Which layer of the chapter's MultiHeadAttention is missing from your __init__?",
        "你的模块的参数包含 query、key、value 三个投影，但没有输出投影。本练习的约定要求在各头合并之后再应用一个 "
        "out_proj（形状 (d_out, d_out)，带偏置）。书中 MultiHeadAttention 的哪一层没有出现在你的 __init__ 里？",
        {},
        exercise="make_multihead_attention",
    ),
    _m(
        "fused-qkv-sized-by-d-in",
        "nanoGPT's fused `c_attn = nn.Linear(d, 3 * d)` sized by the input width: it only works when d_in == d_out",
        "Your module makes the queries, keys and values with one projection whose size comes from the input width. "
        "The exercise's contract expects W_query, W_key and W_value of (d_out, d_in) each, and d_in and d_out may "
        "differ. Which width should each projection's output have, and which your output projection?",
        "你的模块用一个投影同时算出 queries、keys 和 values，而它的尺寸是由输入宽度决定的。本练习的约定要求 "
        "W_query、W_key、W_value 各自的形状为 (d_out, d_in)，而 d_in 和 d_out 可以不相等。每个投影的输出应当是多宽？"
        "你的输出投影呢？",
        {},
        exercise="make_multihead_attention",
    ),
    _m(
        "mask-buffer-misnamed",
        "the causal mask is registered as a buffer under another name (Karpathy's `tril`), not `mask`",
        "Your module registers its triangular mask as a buffer, but under another name. The exercise's contract "
        "expects that buffer to be called `mask` (so state_dict and the chapter's code find it). Which name did you "
        "give it in register_buffer?",
        "你的模块把三角掩码注册成了 buffer，但用的是另一个名字。本练习的约定要求这个 buffer 叫做 `mask`（这样 "
        "state_dict 和书中的代码才能找到它）。你在 register_buffer 里给它起了什么名字？",
        {},
        exercise="make_causal_attention",
    ),
    # fused-names (issue 25): the fused layout sized right, which loses only the parameter-names case
    _m(
        "fused-qkv-projection",
        "nanoGPT's layout sized right: one fused `c_attn = nn.Linear(d_in, 3 * d_out)` split into queries, keys "
        "and values (and `c_proj`), instead of W_query / W_key / W_value (and out_proj)",
        "Your module makes the queries, keys and values with one fused projection of 3 * d_out outputs and splits "
        "them afterwards. The exercise's contract expects three separate layers, W_query, W_key and W_value, each an "
        "nn.Linear(d_in, d_out), so that the chapter's state_dict loads into your module. Which rows of your fused "
        "weight belong to each of the three?",
        "你的模块用一个融合的投影（输出宽度为 3 * d_out）同时算出 queries、keys 和 values，然后再拆分。本练习的约定要求"
        "三个独立的层 W_query、W_key、W_value，各自是 nn.Linear(d_in, d_out)，这样本章的 state_dict 才能加载到你的模块"
        "中。你的融合权重中哪些行分别属于这三个层？",
        {},
        exercise="make_multihead_attention",
    ),
)
"""Mistakes no output tells apart from a catalogued one, named from the learner's source instead.

``mask-result-discarded`` computes what ``mask-not-applied`` does; the
diagnosis names it when the learner's code holds a ``masked_fill`` call whose
result is thrown away (:mod:`grader.instructor.learner_source`).  No overrides:
nothing to run.
"""

ACCEPTED: tuple[Mistake, ...] = (
    _m(
        "mha-assert-not-value-error",
        "`assert d_out % num_heads == 0` raises AssertionError (and vanishes under python -O) instead of ValueError",
        "Which exception does a bad argument deserve? An assert is for bugs, and python -O removes it.",
        "参数不合法时应当抛出哪种异常？assert 用于检查程序错误，而且 python -O 会把它去掉。",
        _made(make_multihead_attention=AssertsDivisible),
        SEED_003,
    ),
)
"""Deviations the hidden suite accepts (full marks, a note): never a diagnosis, never required to fail."""

RENAMED: Mapping[str, str] = types.MappingProxyType(
    {"scale-twice": "scale-by-d-k-not-sqrt", "mask-made-in-forward": "mask-made-in-forward-on-cpu"}
)
"""Ids an earlier catalogue used, and what they are called now: a gradebook may still quote them.

``scale-twice`` and ``scale-by-d-k-not-sqrt`` compute the same numbers, so
they are one mistake; ``mask-made-in-forward`` took the vocabulary's name.
"""


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[Mistake, ...]:
    """Every group's catalogue of known mistakes: the chapter's (:data:`CATALOGUE`), then each other group's, in
    the groups' order (:func:`grader.packs.groups`); a ValueError naming an id two entries share."""
    entries = tuple(m for module in instructor_part("MISTAKES") for m in module.CATALOGUE)
    seen: set[str] = set()
    for m in entries + READ_FROM_SOURCE + ACCEPTED:
        if m.id in seen:
            raise ValueError(f"catalogued mistake id {m.id!r} is used twice (ids are unique across every group)")
        seen.add(m.id)
    return entries


def by_id(mistake_id: str) -> Mistake:
    """The entry with this id or an earlier name of it (KeyError names the known ids)."""
    known = {m.id: m for m in catalogue() + READ_FROM_SOURCE + ACCEPTED}
    try:
        return known[RENAMED.get(mistake_id, mistake_id)]
    except KeyError:
        raise KeyError(f"no catalogued mistake {mistake_id!r}; known: {', '.join(known)}") from None


def mistake_solution(mistake: Mistake) -> Solution:
    """A solution with the mistake's wrong hooks and the reference for every other hook."""
    overrides = types.SimpleNamespace(**mistake.overrides)
    return adopt(mistake.id, f"catalogue: {mistake.id}", [overrides, *instructor_part("REFERENCE")])
