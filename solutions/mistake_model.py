"""The mistake model: the chapter's attention computations with one knob per known mistake.

The catalogue (:mod:`solutions.mistakes`) is a list of whole wrong programs.
Real code combines mistakes, and makes them inside modules, so the module
hooks (and a few function hooks) are also written here once, step by step,
with each step's settings: the first setting of a step is the chapter's, every
other one is a *knob*, named after the mistake it is (an id of the mistake
vocabulary, the ids of :mod:`solutions.mistakes`).  A *setting* is a set of
knobs, at most one per step; :func:`attend` computes a module's output under
any setting, from the module's own parameters and mask.

:mod:`grader.instructor.diagnosis` searches the settings for the one that
reproduces a learner's output; ``attnkit audit`` checks that the hidden suite
fails every single knob.  Knobs that compute the same function are one knob
(dividing by ``d_k`` is dividing by ``sqrt(d_k)`` twice: ``scale-by-d-k-not-sqrt``
covers both, and its hint says so).

Instructor-only, like the catalogue: nothing here ships in a learner's kit.
"""

from __future__ import annotations

import itertools
import math
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from grader.registry import Solution, adopt, hook_signature
from solutions import reference

SELF, CAUSAL, MHA = "make_self_attention", "make_causal_attention", "make_multihead_attention"
MODULE_HOOKS = (SELF, CAUSAL, MHA)
NEG_INF = float("-inf")


@dataclass(frozen=True)
class Knob:
    """One wrong setting of one step: the mistake ``id`` made at ``step`` (``value`` names the setting)."""

    id: str
    step: str
    value: str
    hooks: frozenset[str]

    @property
    def name(self) -> str:
        return f"{self.step}={self.value}"


# (step, values, mistake id, hooks), one knob per value: the first setting of each step, not listed, is the chapter's
_C, _M = frozenset({CAUSAL, MHA}), frozenset({MHA})
_ALL = frozenset(MODULE_HOOKS)
_KNOBS: tuple[tuple[str, str, str, frozenset[str]], ...] = (
    ("product", "q_at_k_T", "q-at-k-t-batched", _ALL),
    ("product", "k_at_q", "keys-times-queries", _ALL),
    ("scale", "none", "no-scaling", _ALL),
    ("scale", "d_k", "scale-by-d-k-not-sqrt", _ALL),
    ("scale", "sqrt_T", "scale-by-num-tokens", _ALL),
    ("scale", "sqrt_d_in", "scale-by-d-in", _ALL),
    ("scale", "sqrt_d_out", "mha-scale-by-d-out", _M),  # one head: d_out is d_k
    ("scale", "after_softmax", "scale-after-softmax", _ALL),
    ("softmax_dim", "1", "softmax-over-dim-1", _ALL),
    ("softmax_dim", "0", "softmax-over-dim-0", _ALL),
    ("softmax_again", "masked_first unmasked_first", "softmax-twice", _C),
    ("mask", "not_applied", "mask-not-applied", _C),
    ("mask", "zero", "mask-with-zero", _C),
    ("mask", "after_softmax", "mask-without-renormalising", _C),
    ("mask_size", "context_length", "mask-not-sliced", _C),
    ("mask_size", "six six_sliced", "mask-of-size-6", _C),
    ("mask_shape", "triu_0", "triu-diagonal-0", _C),
    ("mask_shape", "tril_-1 tril_0 tril_1", "tril-instead-of-triu", _C),
    ("heads", "view", "mha-heads-without-transpose", _M),
    ("heads", "interleaved", "split-heads-interleaved", _M),
    ("heads", "merge_view", "merge-without-transpose", _M),
    ("out_proj", "missing", "no-out-proj", _M),
    ("bias", "always", "linear-bias-ignores-qkv-bias", _ALL),
    ("eval_dropout", "on", "module-dropout-in-eval", _C),
    ("dropout", "never", "dropout-never-applied", _C),
    ("dropout", "context", "dropout-on-context", _C),
    ("dropout", "scores", "dropout-on-scores", _C),
    ("dropout", "unscaled", "dropout-not-scaled", _C),
    ("dropout", "renormalised", "dropout-renormalises-rows", _C),
)
_DOT, _SCALED = frozenset({"dot_product_scores"}), frozenset({"scaled_dot_product_scores"})
_SCORES = _DOT | _SCALED
_SOFTMAX, _MASK, _APPLY = frozenset({"softmax_weights"}), frozenset({"causal_mask"}), frozenset({"apply_causal_mask"})
_DROPOUT = frozenset({"attention_dropout"})
_WINDOW = frozenset({"sliding_window_mask"})
_TEMPERATURE = frozenset({"softmax_with_temperature"})
_FUNCTION_KNOBS: tuple[tuple[str, str, str, frozenset[str]], ...] = (
    ("product", "q_at_k_T", "q-at-k-t-batched", _SCORES),
    ("product", "k_at_q", "keys-times-queries", _SCORES),
    ("scale", "none", "no-scaling", _SCALED),
    ("scale", "d_k", "scale-by-d-k-not-sqrt", _SCALED),
    ("scale", "sqrt_T", "scale-by-num-tokens", _SCALED),
    ("softmax_dim", "1", "softmax-over-dim-1", _SOFTMAX),
    ("softmax_dim", "0", "softmax-over-dim-0", _SOFTMAX),
    ("softmax_dim", "last", "softmax-ignores-dim", _SOFTMAX),
    ("stability", "no_max no_max_guarded", "softmax-without-max", _SOFTMAX),
    ("stability", "nan_rows", "softmax-nan-on-masked-rows", _SOFTMAX),
    ("stability", "where_nan", "softmax-where-nan-grad", _SOFTMAX | _TEMPERATURE),
    ("temperature", "after", "temperature-after-softmax", _TEMPERATURE),
    ("temperature", "times", "temperature-multiplied", _TEMPERATURE),
    ("temperature", "ignored", "temperature-ignored", _TEMPERATURE),
    ("softmax_dim", "all", "temperature-over-every-element", _TEMPERATURE),
    ("stability", "no_max no_max_guarded", "temperature-without-max", _TEMPERATURE),
    ("argument_check", "none", "temperature-unchecked", _TEMPERATURE),
    ("mask_shape", "triu_0", "triu-diagonal-0", _MASK | _APPLY),
    ("mask_shape", "tril_-1 tril_0 tril_1", "tril-instead-of-triu", _MASK | _APPLY),
    ("mask_dtype", "float", "causal-mask-float", _MASK),
    ("mask_device", "default", "causal-mask-ignores-device", _MASK),
    ("argument_check", "none", "causal-mask-unchecked", _MASK),
    ("mask", "zero", "mask-with-zero", _APPLY),
    ("mask_size", "six", "mask-of-size-6", _APPLY),
    ("mask_device", "cpu", "mask-built-on-cpu", _APPLY),
    ("in_place", "yes", "mask-in-place", _APPLY),
    ("eval", "active", "dropout-active-in-eval", _DROPOUT),
    ("generator", "global", "dropout-ignores-generator", _DROPOUT),
    ("scale", "inverse_p", "attention-dropout-scale-by-inverse-p", _DROPOUT),
    ("scale", "none", "dropout-not-scaled", _DROPOUT),
    ("rows", "renormalised", "dropout-renormalises-rows", _DROPOUT),
    ("keep", "with_p", "dropout-keeps-with-p", _DROPOUT),
    ("generator", "global_cpu", "dropout-global-rng-cpu-mask", _DROPOUT),
    ("in_place", "p_one always", "dropout-zeroes-input-in-place", _DROPOUT),
    ("window_back", "plus_one", "window-sees-one-too-many", _WINDOW),
    ("window_back", "minus_one", "window-sees-one-too-few", _WINDOW),
    ("window_future", "visible", "window-forgets-future", _WINDOW),
    ("window_check", "none", "window-unchecked", _WINDOW),
    # issue 25 (hidden): a mask returned with an extra leading dimension
    ("mask_rank", "batched", "causal-mask-extra-dim", _MASK),
)
KNOBS: tuple[Knob, ...] = tuple(Knob(i, s, v, h) for s, vs, i, h in _KNOBS + _FUNCTION_KNOBS for v in vs.split())
"""Every knob of the model: the module hooks' and the function hooks' it covers."""
FUNCTION_HOOKS = frozenset().union(*(h for *_, h in _FUNCTION_KNOBS))


def knobs_for(hook: str) -> tuple[Knob, ...]:
    return tuple(k for k in KNOBS if hook in k.hooks)


def ids_of(setting: Iterable[Knob]) -> frozenset[str]:
    return frozenset(k.id for k in setting)


def settings(hook: str, size: int) -> Iterator[frozenset[Knob]]:
    """Every setting of exactly ``size`` knobs of ``hook`` (at most one per step)."""
    mine = knobs_for(hook)
    for combo in itertools.combinations(mine, size):
        if len({k.step for k in combo}) == size:
            yield frozenset(combo)


def by_step(setting: Iterable[Knob]) -> dict[str, str]:
    """``{step: value}`` of a setting (steps left out take the chapter's setting)."""
    return {k.step: k.value for k in setting}


# --- the module computation --------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleConfig:
    """A module hook's arguments, as the case gives them."""

    hook: str
    d_in: int
    d_out: int
    context_length: int = 0
    dropout: float = 0.0
    num_heads: int = 1
    qkv_bias: bool = False

    @classmethod
    def of(cls, hook: str, args: Mapping[str, Any]) -> ModuleConfig:
        return cls(
            hook,
            int(args["d_in"]),
            int(args["d_out"]),
            int(args.get("context_length", 0) or 0),
            float(args.get("dropout", 0.0) or 0.0),
            int(args.get("num_heads", 1) or 1),
            bool(args.get("qkv_bias", False)),
        )

    @property
    def causal(self) -> bool:
        return self.hook != SELF


class Raised(Exception):
    """The computation raised at ``step`` (the step whose setting made it raise)."""

    def __init__(self, step: str, error: BaseException) -> None:
        super().__init__(f"{step}: {type(error).__name__}: {error}")
        self.step, self.error = step, error


def own_mask(cfg: ModuleConfig, knobs: Mapping[str, str], device: Any = None) -> torch.Tensor:
    """The mask buffer a module with these knobs builds in ``__init__`` (True: hidden)."""
    return _triangle(6 if knobs.get("mask_size", "").startswith("six") else cfg.context_length, knobs, device)


def _dropout(t: torch.Tensor, p: float, generator: torch.Generator | None, scaled: bool = True) -> torch.Tensor:
    if p <= 0.0:
        return t
    keep = torch.rand(t.shape, generator=generator, dtype=t.dtype, device=t.device) >= p
    return t * keep / (1.0 - p) if scaled else t * keep


def attend(
    params: Mapping[str, torch.Tensor],
    x: torch.Tensor,
    cfg: ModuleConfig,
    knobs: Mapping[str, str] | Iterable[Knob] = (),
    mask: torch.Tensor | None = None,
    training: bool = False,
    generator: torch.Generator | None = None,
    trace: dict[str, Any] | None = None,
    in_place: bool = False,
) -> torch.Tensor:
    """The module's output for ``x`` under ``knobs``, from its parameters (``W_query.weight`` …) and mask.

    ``in_place``: mask as ``masked_fill_`` does, which cannot grow the scores to a
    larger mask's shape (the chapter's way; ``masked_fill`` broadcasts instead).
    That is style, not a mistake, but a mask of the wrong size fails differently.

    ``mask`` is the module's mask buffer (True or 1: hidden); None builds the one
    the knobs build.  ``trace``, when given, receives the attention weights before
    dropout (``weights``), the values, the scores before the mask and the softmax
    (``scores``), the mask used and how the heads are merged: what the dropout
    knobs are judged from (:func:`dropout_explains`).  Raises :class:`Raised`
    naming the step that raised.
    """
    k = dict(knobs) if isinstance(knobs, Mapping) else by_step(knobs)
    step = "projections"
    try:
        biased = cfg.qkv_bias or k.get("bias") == "always"
        q, key, v = (_linear(x, params, name, biased) for name in ("W_query", "W_key", "W_value"))
        heads = k.get("heads", "split")
        if cfg.hook == MHA:
            step = "heads"
            q, key, v = (_split(t, cfg.num_heads, heads) for t in (q, key, v))
        step = "product"
        scores = _product(q, key, k.get("product", "q_at_k"))
        step = "scale"
        d_k, num_tokens = key.shape[-1], x.shape[-2]
        scale = k.get("scale", "sqrt_d_k")
        divisor = {
            "sqrt_d_k": math.sqrt(d_k),
            "none": 1.0,
            "d_k": float(d_k),
            "sqrt_T": math.sqrt(num_tokens),
            "sqrt_d_in": math.sqrt(x.shape[-1]),
            "sqrt_d_out": math.sqrt(cfg.d_out),
            "after_softmax": 1.0,
        }[scale]
        scores = scores / divisor
        dropout = k.get("dropout", "weights") if training else "weights"
        p = cfg.dropout if (training or k.get("eval_dropout") == "on") else 0.0
        if dropout == "scores" and training:
            step = "dropout"
            scores = _dropout(scores, p, generator)
        m = None
        if cfg.causal:
            step = "mask_size"
            buffer = mask if mask is not None else own_mask(cfg, k, x.device)
            m = buffer.bool() if buffer.dtype != torch.bool else buffer
            if k.get("mask_size", "T") in ("T", "six_sliced"):
                m = m[:num_tokens, :num_tokens]
        step = "mask"
        how = k.get("mask", "fill") if m is not None else "not_applied"
        again = k.get("softmax_again", "once")
        pre = scores
        if how == "fill" and again != "unmasked_first":
            pre = _fill(scores, m, NEG_INF, in_place)
        elif how == "zero":
            pre = _fill(scores, m, 0.0, in_place)
        step = "softmax_dim"
        dim = {"last": -1, "1": 1, "0": 0}[k.get("softmax_dim", "last")]
        weights = torch.softmax(pre, dim=dim)
        if how == "after_softmax":
            step = "mask"
            weights = _fill(weights, m, 0.0, in_place)
        if again != "once":
            step = "softmax_again"
            weights = torch.softmax(_fill(weights, m, NEG_INF, in_place) if m is not None else weights, dim=-1)
        if scale == "after_softmax":
            weights = weights / math.sqrt(d_k)
        if trace is not None:
            trace.update(weights=weights, values=v, scores=scores, mask=m, heads=heads)
            trace["out_proj"] = k.get("out_proj", "applied")
        step = "dropout"
        if dropout in ("weights", "unscaled", "renormalised"):
            weights = _dropout(weights, p, generator, scaled=dropout != "unscaled")
        if dropout == "renormalised":
            weights = weights / weights.sum(dim=-1, keepdim=True)
        step = "context"
        context = weights @ v
        if dropout == "context":
            step = "dropout"
            context = _dropout(context, p, generator)
        if cfg.hook != MHA:
            return context
        step = "heads"
        context = _merge(context, heads)
        if k.get("out_proj", "applied") == "missing":
            return context
        step = "out_proj"
        return _linear(context, params, "out_proj", True)
    except Raised:
        raise
    except Exception as exc:  # noqa: BLE001 - which step raised is the point
        raise Raised(step, exc) from exc


def _fill(t: torch.Tensor, mask: torch.Tensor, value: float, in_place: bool) -> torch.Tensor:
    if in_place and torch.broadcast_shapes(t.shape, mask.shape) != t.shape:
        grown = list(torch.broadcast_shapes(t.shape, mask.shape))
        raise RuntimeError(f"output with shape {list(t.shape)} doesn't match the broadcast shape {grown}")
    return t.masked_fill(mask, value)


def _linear(x: torch.Tensor, params: Mapping[str, torch.Tensor], name: str, bias: bool) -> torch.Tensor:
    y = x @ params[f"{name}.weight"].transpose(-2, -1)
    b = params.get(f"{name}.bias")
    return y + b if bias and b is not None else y


def _split(t: torch.Tensor, num_heads: int, heads: str) -> torch.Tensor:
    b, num_tokens, d = t.shape
    head_dim = d // num_heads
    if heads == "view":  # `view(b, H, T, hd)` straight from (b, T, d)
        return t.reshape(b, num_heads, num_tokens, head_dim)
    if heads == "interleaved":  # head h gets columns h, h+H, …
        return t.reshape(b, num_tokens, head_dim, num_heads).permute(0, 3, 1, 2)
    return t.reshape(b, num_tokens, num_heads, head_dim).transpose(1, 2)


def _merge(t: torch.Tensor, heads: str) -> torch.Tensor:
    b, num_heads, num_tokens, head_dim = t.shape
    if heads in ("view", "merge_view"):  # a bare reshape of (b, H, T, hd)
        return t.reshape(b, num_tokens, num_heads * head_dim)
    return t.transpose(1, 2).reshape(b, num_tokens, num_heads * head_dim)


def _unmerge(c: torch.Tensor, num_heads: int, heads: str) -> torch.Tensor:
    """The per-head context ``_merge`` made ``c`` from."""
    b, num_tokens, d = c.shape
    if heads in ("view", "merge_view"):
        return c.reshape(b, num_heads, num_tokens, d // num_heads)
    return c.reshape(b, num_tokens, num_heads, d // num_heads).transpose(1, 2)


# --- neutral knobs: where a knob computes exactly what the chapter does ----------------------------


def neutral(knob: Knob, cfg: ModuleConfig, x_shape: tuple[int, ...], training: bool, mask_given: bool) -> bool:
    """Whether ``knob`` changes nothing for this input (so a setting with it equals one without it).

    Exact by construction, never by numbers: dropout knobs in eval, ``sqrt(T)``
    where ``T == d_k``, a mask of size 6 for 6 tokens, heads knobs for one head …
    ``mask_given``: the module's mask is the one a case loaded (so the learner's
    own mask shape does not show).
    """
    num_tokens, d_in = x_shape[-2], x_shape[-1]
    d_k = cfg.d_out // cfg.num_heads if cfg.hook == MHA else cfg.d_out
    step, value = knob.step, knob.value
    if step == "dropout":
        return not training or cfg.dropout == 0.0
    if step == "eval_dropout":
        return training or cfg.dropout == 0.0
    if step == "scale":
        size = {"sqrt_T": num_tokens, "sqrt_d_in": d_in, "sqrt_d_out": cfg.d_out}.get(value)
        return size == d_k or (value == "d_k" and d_k == 1)
    if step == "mask_size":
        if mask_given and value.startswith("six"):
            return False
        return {"context_length": num_tokens == cfg.context_length, "six": num_tokens == 6}.get(value, num_tokens <= 6)
    if step == "mask_shape":
        return mask_given
    if step == "softmax_dim":
        return value == "1" and len(x_shape) == 2  # (T, T) scores: dim 1 is the last dim
    if step == "heads":
        return cfg.num_heads == 1
    if step == "product":
        return value == "q_at_k_T" and len(x_shape) == 2
    if step == "bias":
        return cfg.qkv_bias
    return False


def reduced(setting: Iterable[Knob], cfg: ModuleConfig, x_shape: tuple[int, ...], training: bool, mask_given: bool):
    """The setting without its knobs that are neutral for this input."""
    return frozenset(k for k in setting if not neutral(k, cfg, x_shape, training, mask_given))


# --- dropout: what a training-mode output can be -------------------------------------------------------


def dropout_explains(
    value: str, trace: Mapping[str, Any], outputs: list[torch.Tensor], cfg: ModuleConfig, params: Mapping[str, Any]
) -> bool | None:
    """Whether each training-mode output is the dropout ``value`` (a ``dropout`` setting) of the traced computation.

    ``trace`` is what :func:`attend` recorded in eval mode under the other knobs.
    The dropped weights are read back from an output by undoing ``out_proj`` and
    the values (least squares, checked); None where they cannot be read back
    (fewer value dimensions than tokens, a singular ``out_proj``): no verdict.
    """
    p = cfg.dropout
    if p <= 0.0 or not outputs:
        return None
    w, v = trace["weights"].double(), trace["values"].double()
    verdicts = []
    for y in outputs:
        context = _context_of(y.double(), cfg, params, trace)
        if context is None or context.shape != (w @ v).shape:
            return None
        if value == "context":
            eval_context = w @ v
            nan = torch.isnan(eval_context)
            if not torch.equal(torch.isnan(context), nan):
                return False
            context, eval_context = context[~nan], eval_context[~nan]
            kept = _close(context, eval_context / (1 - p))
            dropped = context.abs() <= _tol(eval_context)
            verdicts.append(bool((kept | dropped).all()) and bool((dropped & ~kept).any()))
            continue
        got = _weights_of(context, v)
        if got is None:
            return None
        if got is NOT_WEIGHTS:  # the context is no weights times these values: dropout acted on something else
            verdicts.append(False)
            continue
        verdicts.append(_weights_explained(value, got, w, trace, p))
    return all(verdicts)


def _tol(t: torch.Tensor) -> float:
    return 1e-4 * max(1.0, float(t.abs().max())) if t.numel() else 1e-4


def _close(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a - b).abs() <= 1e-4 * (1.0 + b.abs())


def _context_of(y: torch.Tensor, cfg: ModuleConfig, params: Mapping[str, Any], trace: Mapping[str, Any]):
    """The per-head context vectors behind an output (out_proj and the merge undone), or None."""
    if cfg.hook != MHA:
        return y
    context = y
    if "out_proj.weight" in params and trace.get("out_proj", "applied") != "missing":
        weight = params["out_proj.weight"].double()
        bias = params.get("out_proj.bias")
        shifted = y - (bias.double() if bias is not None else 0.0)
        if torch.linalg.cond(weight) > 1e6:
            return None
        context = torch.linalg.solve(weight, shifted.transpose(-2, -1)).transpose(-2, -1)
    return _unmerge(context, cfg.num_heads, trace.get("heads", "split"))


NOT_WEIGHTS = torch.empty(0)
"""What :func:`_weights_of` says of a context that no weights times the values give."""


def _weights_of(context: torch.Tensor, v: torch.Tensor) -> torch.Tensor | None:
    """The weights ``w`` with ``w @ v == context``, where the values determine them (rank T).

    None where they do not (fewer independent value rows than tokens);
    :data:`NOT_WEIGHTS` where no weights give this context.
    """
    num_tokens = v.shape[-2]
    if v.shape[-1] < num_tokens or torch.linalg.matrix_rank(v).min() < num_tokens:
        return None
    got = context @ torch.linalg.pinv(v)
    if not torch.allclose(got @ v, context, rtol=1e-4, atol=1e-5, equal_nan=True):
        return NOT_WEIGHTS
    return got


def _rows(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """Each tensor as rows ``(R, T)``, broadcast to the first one's shape."""
    shape = tensors[0].shape
    return [t.expand(shape).reshape(-1, shape[-1]) for t in tensors]


def _weights_explained(value: str, got: torch.Tensor, w: torch.Tensor, trace: Mapping[str, Any], p: float) -> bool:
    """Row by row: is each row of ``got`` what dropout ``value`` makes of that row of the weights ``w``?

    A row the computation leaves NaN (a query that sees no key) must be NaN in
    ``got`` too, and tells nothing else.
    """
    m = trace.get("mask")
    allowed = ~m if m is not None else torch.ones(w.shape[-2:], dtype=torch.bool)
    got, w, allowed, scores = _rows(got, w, allowed.to(w.device), trace["scores"].double())
    nan = torch.isnan(w).any(-1)
    if not torch.equal(torch.isnan(got).any(-1), nan):
        return False
    got, w, allowed, scores = got[~nan], w[~nan], allowed[~nan], scores[~nan]
    tol = 1e-4
    dropped = got.abs() <= tol
    if value in ("weights", "unscaled"):
        scale = 1 / (1 - p) if value == "weights" else 1.0
        kept = _close(got, w * scale)
        return bool((kept | dropped).all()) and bool((dropped & (w > tol)).any())
    if value == "renormalised":
        ratio = torch.where(dropped, torch.nan, got / w.clamp_min(1e-300))
        top = ratio.nan_to_num(-1.0).amax(-1, keepdim=True)
        low = ratio.nan_to_num(1e300).amin(-1, keepdim=True)
        rows_kept = (~dropped).any(-1, keepdim=True)
        constant = ((top - low).abs() <= 1e-4 * top.abs()) | ~rows_kept
        sums = torch.where(rows_kept.squeeze(-1), got.sum(-1), torch.ones_like(got.sum(-1)))
        some_dropped = bool((dropped & (w > tol)).any())
        return some_dropped and bool(constant.all()) and bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-4))
    if value == "scores":  # softmax over the allowed positions of D * scores / (1 - p)
        if bool((got[~allowed].abs() > tol).any()) or bool((got[allowed] <= 0).any()):
            return False
        logs = torch.where(allowed, got.clamp_min(1e-300).log(), torch.zeros_like(got))
        kept_value = torch.where(allowed, scores / (1 - p), torch.zeros_like(scores))
        # each row's constant c: log w_j + c is 0 (dropped) or s_j / (1 - p) (kept), for every allowed j
        candidates = torch.cat([-logs, kept_value - logs], dim=-1)  # (R, 2T)
        shifted = logs.unsqueeze(-1) + candidates.unsqueeze(-2)  # (R, T, 2T): key j, candidate c
        near_zero = shifted.abs() <= 1e-3
        fits = near_zero | ((shifted - kept_value.unsqueeze(-1)).abs() <= 1e-3) | ~allowed.unsqueeze(-1)
        some_dropped = (near_zero & allowed.unsqueeze(-1)).any(-2)
        return bool((fits.all(-2) & some_dropped).any(-1).any()) and bool((fits.all(-2)).any(-1).all())
    return False


# --- the function hooks it covers ----------------------------------------------------------------------


def _product(queries: torch.Tensor, keys: torch.Tensor, product: str) -> torch.Tensor:
    if product == "q_at_k_T":  # `.T` reverses every dim
        return queries @ keys.permute(*reversed(range(keys.dim())))
    if product == "k_at_q":
        return keys @ queries.transpose(-2, -1)
    return queries @ keys.transpose(-2, -1)


def _softmax(scores: torch.Tensor, dim: int, k: Mapping[str, str]) -> torch.Tensor:
    if k.get("softmax_dim") == "all":  # one softmax of every element: no slice sums to 1
        return _softmax(scores.reshape(-1), 0, {**k, "softmax_dim": "arg"}).reshape(scores.shape)
    d = {"arg": dim, "1": 1, "0": 0, "last": -1}[k.get("softmax_dim", "arg")]
    stability = k.get("stability", "guarded")
    if stability in ("no_max", "no_max_guarded"):
        e = torch.exp(scores)
        total = e.sum(dim=d, keepdim=True)
        if stability == "no_max":
            return e / total
        return e / torch.where(total > 0, total, torch.ones_like(total))  # a row of -inf sums to 0: zeros, not 0/0
    peak = scores.amax(dim=d, keepdim=True)
    if stability == "guarded":
        peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    e = torch.exp(scores - peak)
    total = e.sum(dim=d, keepdim=True)
    if stability == "nan_rows":
        return e / total
    if stability == "where_nan":  # the right zeros, but backward differentiates the untaken 0 / 0
        return torch.where(total > 0, e / total, 0.0)
    return e / torch.where(total > 0, total, torch.ones_like(total))  # a fully masked row: zeros, and zero gradients


def _triangle(size: int, k: Mapping[str, str], device: Any, dtype: torch.dtype = torch.bool) -> torch.Tensor:
    ones = torch.ones(size, size, dtype=dtype, device=device)
    kind, _, diagonal = k.get("mask_shape", "triu_1").partition("_")
    return torch.triu(ones, int(diagonal)) if kind == "triu" else torch.tril(ones, int(diagonal))


def _function_model(hook: str, k: Mapping[str, str]) -> Callable[..., Any]:
    """``hook`` under the knobs ``k`` (``{step: value}``): a plain function with the hook's signature."""
    checked = k.get("argument_check", "value_error") == "value_error"

    def dot_product_scores(queries, keys):
        return _product(queries, keys, k.get("product", "q_at_k"))

    def scaled_dot_product_scores(queries, keys):
        scores = _product(queries, keys, k.get("product", "q_at_k"))
        d_k, num_tokens = keys.shape[-1], queries.shape[-2]
        divisor = {"sqrt_d_k": math.sqrt(d_k), "none": 1.0, "d_k": float(d_k), "sqrt_T": math.sqrt(num_tokens)}
        return scores / divisor[k.get("scale", "sqrt_d_k")]

    def softmax_weights(scores, dim=-1):
        return _softmax(scores, dim, k)

    def softmax_with_temperature(scores, temperature, dim=-1):
        if checked and not temperature > 0:
            raise ValueError(f"softmax_with_temperature needs temperature > 0, got {temperature}")
        where = k.get("temperature", "divides")
        scaled = {"divides": scores / temperature, "times": scores * temperature, "after": scores, "ignored": scores}
        steps = {"stability": k.get("stability", "guarded"), "softmax_dim": k.get("softmax_dim", "arg")}
        weights = _softmax(scaled[where], dim, steps)
        return weights / temperature if where == "after" else weights

    def causal_mask(num_tokens, device=None):
        if checked and num_tokens < 1:
            raise ValueError(f"causal_mask needs num_tokens >= 1, got {num_tokens}")
        dtype = torch.get_default_dtype() if k.get("mask_dtype") == "float" else torch.bool
        mask = _triangle(num_tokens, k, None if k.get("mask_device") == "default" else device, dtype)
        return mask.unsqueeze(0) if k.get("mask_rank") == "batched" else mask

    def apply_causal_mask(scores):
        if scores.shape[-2] != scores.shape[-1]:
            raise ValueError(f"apply_causal_mask needs square (..., T, T) scores, got {tuple(scores.shape)}")
        size = 6 if k.get("mask_size") == "six" else scores.shape[-1]
        mask = _triangle(size, k, None if k.get("mask_device") == "cpu" else scores.device)
        fill = 0.0 if k.get("mask") == "zero" else NEG_INF
        if k.get("in_place") == "yes":
            return scores.masked_fill_(mask, fill)
        return scores.masked_fill(mask, fill)

    def sliding_window_mask(num_tokens, window, device=None):
        if k.get("window_check", "value_error") == "value_error" and (num_tokens < 1 or window < 1):
            raise ValueError(f"sliding_window_mask needs num_tokens >= 1 and window >= 1, got {num_tokens}, {window}")
        back = window - 1 + {"exact": 0, "plus_one": 1, "minus_one": -1}[k.get("window_back", "exact")]
        ones = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)
        too_far = torch.tril(ones, diagonal=-back - 1)  # keys more than `back` positions behind
        return too_far if k.get("window_future") == "visible" else torch.triu(ones, diagonal=1) | too_far

    def attention_dropout(weights, p, training=True, generator=None):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        rows = k.get("rows") == "renormalised"
        if not (training or k.get("eval") == "active") or p == 0.0:  # renormalised still: its backward shows it
            return weights / weights.sum(dim=-1, keepdim=True) if rows else weights.clone()
        if k.get("in_place") in ("p_one", "always") and p == 1.0:
            return weights.zero_()  # the right zeros, written into the caller's weights
        gen = None if k.get("generator") == "global" else generator
        if k.get("generator") == "global_cpu":  # d2l's dropout_layer: global RNG, on the CPU, a float32 mask
            draws = torch.rand(weights.shape)
            keep = ((draws < p) if k.get("keep") == "with_p" else (draws > p)).float()
        else:
            draws = torch.rand(weights.shape, generator=gen, device=weights.device, dtype=weights.dtype)
            keep = (draws < p) if k.get("keep") == "with_p" else (draws >= p)
        scale = k.get("scale", "1-p")
        if scale == "1-p" and p == 1.0:
            return torch.zeros_like(weights)  # the chapter's guard, kept by learners who renormalise after it
        factor = {"1-p": 1 / (1 - p) if p < 1 else 0.0, "inverse_p": 1 / p, "none": 1.0}[scale]
        if k.get("in_place") == "always":  # `weights.mul_(mask)`: every call drops (and scales) the caller's weights
            out = weights.mul_(keep).mul_(factor)
            return out.div_(out.sum(dim=-1, keepdim=True)) if rows else out
        out = weights * keep * factor
        return out / out.sum(dim=-1, keepdim=True) if rows else out

    if hook not in FUNCTION_HOOKS:
        raise KeyError(f"the mistake model has no function {hook}")
    return locals()[hook]


# --- the model as solutions: for the audit, and to check it against the catalogue ------------------------


class KnobModule(nn.Module):
    """The chapter's module of a hook with a setting switched on, its parameters made as the reference makes them."""

    def __init__(self, cfg: ModuleConfig, setting: Iterable[Knob] = ()) -> None:
        super().__init__()
        self.cfg, self.knobs = cfg, by_step(setting)
        if cfg.hook == MHA and cfg.d_out % cfg.num_heads:
            raise ValueError(f"d_out={cfg.d_out} is not divisible by num_heads={cfg.num_heads}")
        biased = cfg.qkv_bias or self.knobs.get("bias") == "always"
        self.W_query = nn.Linear(cfg.d_in, cfg.d_out, bias=biased)
        self.W_key = nn.Linear(cfg.d_in, cfg.d_out, bias=biased)
        self.W_value = nn.Linear(cfg.d_in, cfg.d_out, bias=biased)
        if cfg.hook == MHA:
            self.out_proj = nn.Linear(cfg.d_out, cfg.d_out)
        if cfg.causal:
            self.register_buffer("mask", own_mask(cfg, self.knobs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        params = dict(self.named_parameters())
        mask = getattr(self, "mask", None)
        try:
            return attend(params, x, self.cfg, self.knobs, mask, training=self.training)
        except Raised as raised:
            raise raised.error from None


def hook_function(hook: str, build: Callable[..., Any]) -> Callable[..., Any]:
    """A plain function with ``hook``'s signature that hands ``build`` every argument (defaults filled in) by name."""
    signature = hook_signature(hook)

    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return build(**bound.arguments)

    call.__name__ = call.__qualname__ = hook
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


def model_function(hook: str, setting: Iterable[Knob]) -> Callable[..., Any]:
    """``hook`` as the model computes it under ``setting``: a plain function with the hook's signature."""
    setting = frozenset(setting)
    if any(hook not in knob.hooks for knob in setting):
        raise ValueError(f"{', '.join(sorted(k.name for k in setting))}: not all knobs of {hook}")
    if hook in MODULE_HOOKS:
        return hook_function(hook, lambda **args: KnobModule(ModuleConfig.of(hook, args), setting))
    return _function_model(hook, by_step(setting))


def knob_solution(hook: str, setting: Iterable[Knob]) -> Solution:
    """A solution with ``hook`` as the model computes it under ``setting``, the reference for every other hook."""
    setting = frozenset(setting)
    name = "+".join(sorted(k.name for k in setting)) or "chapter"
    fn = model_function(hook, setting)
    return adopt(f"model-{name}", f"mistake model: {hook} {name}", [types.SimpleNamespace(**{hook: fn}), reference])
