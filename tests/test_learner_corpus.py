"""The learners' corpus (tests/learners/): every label in expected.toml is true of the code it labels.

This tests the corpus, not the grader.  Each submission is our own trusted code, so it is loaded in-process
(``grader.registry.load_solution``; a notebook through ``grader.notebooks.notebook_to_source`` first), and
each (submission, hook) label is checked against an answer computed here, independently of the kit's
reference:

* functions: direct formulas (einsum, chunk/cat for heads, an arange mask, torch.softmax), in float64 and
  float32, on the meta device where tensors are built (a mask on the CPU fails there), with the contract's
  edge cases (ValueError, all -inf rows, non-contiguous input, inputs left unchanged);
* modules: the learner's own weights copied into ``F.scaled_dot_product_attention`` (``is_causal=True``
  for the causal modules; per head, then ``out_proj``, for multi-head attention), on several shapes with
  T < context_length and T == context_length, batched, in eval mode, in float64, float32 and on meta.

A hook labelled "correct" must agree with that answer everywhere.  A hook labelled with mistake ids must
be reproduced exactly by a small model of the computation with one knob per mistake (some variant of each
named mistake switched on, everything else right), must differ from the answer, and must need every id it
names (switching one off stops the reproduction), except ids the label marks hidden.  Dropout is judged by
what training mode shows: with the value projection set to a duplicated identity (and ``out_proj`` to the
identity) the outputs are the attention weights, twice, so dropped entries, their scale, whether the two
copies drop together (weights) or apart (context), and eval staying clean can all be read off.
"""

from __future__ import annotations

import ast
import itertools
import math
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.notebooks import notebook_to_source
from grader.registry import HOOK_NAMES, Solution, load_solution
from solutions.gradient_mistakes import ENTRIES as GRADIENT_ENTRIES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the kit's own fallback on 3.10
    import tomli as tomllib

CORPUS = Path(__file__).resolve().parent / "learners"
EXPECTED: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "expected.toml").read_text(encoding="utf-8"))

SELF, CAUSAL, MHA = "make_self_attention", "make_causal_attention", "make_multihead_attention"
MODULE_HOOKS = (SELF, CAUSAL, MHA)
CLASS_OF = {SELF: "SelfAttention", CAUSAL: "CausalAttention", MHA: "MultiHeadAttention"}
ROLES = ("W_query", "W_key", "W_value", "out_proj")
NEG_INF = float("-inf")
ASSERT_ID = "mha-assert-not-value-error"


def flag(entry: dict[str, Any], key: str, hook: str) -> list[str]:
    """``entry[key]`` for ``hook``: a list of hooks (renamed, structure) or a table hook -> ids."""
    value = entry.get(key, [] if key in ("renamed", "structure") else {})
    return value.get(hook, []) if isinstance(value, dict) else value


# --- loading ---------------------------------------------------------------------------------------------


_LOADED: dict[str, tuple[Solution, str]] = {}


def submission(name: str, tmp_dir: Path) -> tuple[Solution, str]:
    """The submission's hooks and its source text (a notebook's converted module), loaded once."""
    if name not in _LOADED:
        path = CORPUS / name
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if path.suffix == ".ipynb":
                source = notebook_to_source(path.read_text(encoding="utf-8"))
                converted = tmp_dir / f"{path.stem}.py"
                converted.write_text(source, encoding="utf-8")
                solution = load_solution(converted)
            else:
                files = [path] if path.is_file() else sorted(path.glob("*.py"))
                source = "\n".join(p.read_text(encoding="utf-8") for p in files)
                solution = load_solution(path)
        _LOADED[name] = (solution, source)
    return _LOADED[name]


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tensors here are tiny: one thread, or a busy machine's thread pool makes each op cost a millisecond."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --- running a call and comparing outcomes -------------------------------------------------------------------


@dataclass
class Outcome:
    value: Any = None
    error: type[BaseException] | None = None
    mutated: bool = False


def quietly(fn: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # keys.T on batched input warns; that is the learner's business
        return fn()


OUR_BUGS = (TypeError, KeyError, NameError, AttributeError)
"""Errors the models and answers here never raise on purpose: they surface instead of counting as an outcome."""


def run(fn: Callable[..., Any], kwargs: dict[str, Any], ours: bool = False) -> Outcome:
    """Call ``fn(**kwargs)``: its value or the type of its error, and whether it changed a tensor input.

    ``ours``: ``fn`` is a model or an answer of this file, whose programming errors must not pass for an outcome.
    """
    before = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor) and v.device.type != "meta"}
    try:
        value = quietly(lambda: fn(**kwargs))
    except OUR_BUGS:
        if ours:
            raise
        return Outcome(error=TypeError)
    except Exception as exc:  # noqa: BLE001 - an error is an outcome like any other
        return Outcome(error=type(exc))
    return Outcome(value=value, mutated=any(not torch.equal(kwargs[k], v) for k, v in before.items()))


def agree(got: Outcome, want: Outcome, contiguous: bool = False) -> bool:
    """Whether ``got`` is ``want``: the same error (ValueError where ValueError is wanted), or the same tensor."""
    if want.error is not None:
        if got.error is None:
            return False
        return issubclass(got.error, ValueError) if issubclass(want.error, ValueError) else True
    if isinstance(want.value, np.ndarray):  # a mask returned as a NumPy array (issue 25): the same array
        v = got.value
        return got.error is None and isinstance(v, np.ndarray) and v.dtype == want.value.dtype and (
            v.shape == want.value.shape and bool(np.array_equal(v, want.value))
        )
    if got.error is not None or got.mutated != want.mutated or not isinstance(got.value, torch.Tensor):
        return False
    a, b = got.value, want.value
    if a.shape != b.shape or a.dtype != b.dtype or a.device.type != b.device.type:
        return False
    if contiguous and a.is_contiguous() != b.is_contiguous():  # the same layout (a model may keep a view, too)
        return False
    if b.device.type == "meta":
        return True
    if b.dtype == torch.bool:
        return torch.equal(a, b)
    # float64 leaves room for a float32 constant a learner keeps in a buffer (1 / sqrt(d_k), say)
    rtol, atol = (1e-6, 1e-7) if b.dtype == torch.float64 else (1e-4, 1e-5)
    return torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol, equal_nan=True)


def variant_settings(variants: dict[str, list[dict[str, Any]]], ids: Iterable[str]) -> list[dict[str, Any]]:
    """Every consistent knob setting that switches on one variant of each id."""
    settings = []
    for combo in itertools.product(*(variants[i] for i in ids)):
        merged: dict[str, Any] = {}
        if all(merged.setdefault(k, v) == v for part in combo for k, v in part.items()):
            settings.append(merged)
    return settings


class BannedCalls(torch.overrides.TorchFunctionMode):
    """Notes the torch calls an exercise must not make (softmax in softmax_weights, say)."""

    def __init__(self, names: set[str]) -> None:
        super().__init__()
        self.names, self.seen = names, set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in self.names:
            self.seen.add(func.__name__)
        return func(*args, **(kwargs or {}))


BANNED = {
    "softmax_weights": {"softmax", "log_softmax", "_softmax"},
    "attention_dropout": {"dropout", "native_dropout", "feature_dropout"},
    SELF: {"scaled_dot_product_attention", "multi_head_attention_forward"},
    CAUSAL: {"scaled_dot_product_attention", "multi_head_attention_forward"},
    MHA: {"scaled_dot_product_attention", "multi_head_attention_forward"},
}


# --- the functions: cases, answers, and the model of their mistakes --------------------------------------------


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


def weights(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.softmax(randn(g, *shape), dim=-1)


def transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values as a non-contiguous view (last two dims swapped twice)."""
    return t.transpose(-2, -1).contiguous().transpose(-2, -1)


@dataclass
class Case:
    name: str
    kwargs: dict[str, Any]
    meta: bool = False  # also run on the meta device (in float32)


def placed(kwargs: dict[str, Any], dtype: torch.dtype, device: str) -> dict[str, Any]:
    """Fresh copies of the case's arguments in ``dtype`` on ``device`` (meta: empty tensors of that shape)."""
    out: dict[str, Any] = {}
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            v = v.to(dtype) if v.is_floating_point() else v
            v = torch.empty(v.shape, dtype=v.dtype, device="meta") if device == "meta" else v.clone()
        elif isinstance(v, torch.device):
            v = torch.device(device) if v.type == "cpu" else v
        out[k] = v
    return out


def score_cases() -> list[Case]:
    g = _gen(1)
    return [
        Case("2d-Tq!=Tk", {"queries": randn(g, 4, 5), "keys": randn(g, 7, 5)}),
        Case("3d-batched", {"queries": randn(g, 2, 6, 3), "keys": randn(g, 2, 6, 3)}, meta=True),
        Case("3d-Tq!=Tk", {"queries": randn(g, 3, 4, 5), "keys": randn(g, 3, 6, 5)}),
        Case("4d-heads", {"queries": randn(g, 2, 3, 4, 6), "keys": randn(g, 2, 3, 5, 6)}),
        Case("T=1", {"queries": randn(g, 2, 1, 5), "keys": randn(g, 2, 1, 5)}),
        Case("d=1", {"queries": randn(g, 2, 5, 1), "keys": randn(g, 2, 3, 1)}),
        Case("non-contiguous", {"queries": transposed(randn(g, 2, 4, 5)), "keys": transposed(randn(g, 2, 6, 5))}),
    ]


def softmax_cases() -> list[Case]:
    g = _gen(2)
    masked = randn(g, 2, 6, 6).masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), NEG_INF)
    all_masked = randn(g, 3, 6)
    all_masked[1] = NEG_INF
    return [
        Case("2d", {"scores": randn(g, 5, 7), "dim": -1}),
        Case("3d", {"scores": randn(g, 3, 6, 8), "dim": -1}, meta=True),
        Case("dim=0", {"scores": randn(g, 4, 3, 5), "dim": 0}),
        Case("dim=1", {"scores": randn(g, 2, 5, 4), "dim": 1}),
        Case("dim=-2", {"scores": randn(g, 3, 4, 6), "dim": -2}),
        Case("4d", {"scores": randn(g, 2, 3, 5, 7), "dim": -1}),
        Case("large-logits", {"scores": randn(g, 2, 5, 5, scale=1e4), "dim": -1}),
        Case("masked", {"scores": masked, "dim": -1}),
        Case("all-masked-row", {"scores": all_masked, "dim": -1}),
    ]


def context_cases() -> list[Case]:
    g = _gen(3)
    return [
        Case("2d", {"weights": weights(g, 5, 5), "values": randn(g, 5, 7)}),
        Case("3d-Tq!=Tk", {"weights": weights(g, 2, 4, 6), "values": randn(g, 2, 6, 3)}, meta=True),
        Case("4d", {"weights": weights(g, 2, 3, 5, 5), "values": randn(g, 2, 3, 5, 4)}),
        Case("T=1", {"weights": weights(g, 2, 1, 1), "values": randn(g, 2, 1, 3)}),
    ]


def mask_cases() -> list[Case]:
    cpu = torch.device("cpu")
    cases = [Case(f"T={t}", {"num_tokens": t, "device": cpu}) for t in (1, 2, 5, 9)]
    cases.append(Case("T=4-no-device", {"num_tokens": 4, "device": None}))
    cases.append(Case("T=5-meta", {"num_tokens": 5, "device": torch.device("meta")}))
    cases += [Case(f"T={t}-raises", {"num_tokens": t, "device": cpu}) for t in (0, -3)]
    return cases


def apply_mask_cases() -> list[Case]:
    g = _gen(4)
    return [
        Case("2d", {"scores": randn(g, 5, 5)}),
        Case("3d", {"scores": randn(g, 2, 7, 7)}, meta=True),
        Case("3d-T=6", {"scores": randn(g, 2, 6, 6)}, meta=True),
        Case("4d", {"scores": randn(g, 2, 3, 5, 5)}),
        Case("T=1", {"scores": randn(g, 3, 1, 1)}),
        Case("T=11", {"scores": randn(g, 2, 11, 11)}),
        Case("non-square-raises", {"scores": randn(g, 2, 4, 5)}),
    ]


def renormalize_cases() -> list[Case]:
    g = _gen(5)
    return [
        Case("2d", {"weights": weights(g, 5, 5)}),
        Case("3d", {"weights": weights(g, 3, 7, 7)}, meta=True),
        Case("4d", {"weights": weights(g, 2, 3, 5, 5)}),
        Case("T=1", {"weights": weights(g, 2, 1, 1)}),
    ]


def dropout_scale_cases() -> list[Case]:
    g = _gen(6)

    def keep(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=g, dtype=torch.float64) >= 0.3

    cases = [
        Case(f"p={p}", {"weights": weights(g, 3, 5, 5), "keep_mask": keep(3, 5, 5), "p": p}, meta=p == 0.1)
        for p in (0.1, 0.2, 0.5, 0.0)
    ]
    cases.append(Case("p=1", {"weights": weights(g, 2, 4, 4), "keep_mask": keep(2, 4, 4), "p": 1.0}))
    cases.append(
        Case("float-keep", {"weights": weights(g, 4, 6), "keep_mask": keep(4, 6).double(), "p": 0.25}),
    )
    cases += [
        Case(f"p={p}-raises", {"weights": weights(g, 2, 3), "keep_mask": keep(2, 3), "p": p}) for p in (-0.1, 1.5)
    ]
    return cases


def split_cases() -> list[Case]:
    g = _gen(7)
    return [
        Case("H3-T5-hd4", {"x": randn(g, 2, 5, 12), "num_heads": 3}, meta=True),
        Case("H1", {"x": randn(g, 2, 4, 6), "num_heads": 1}),
        Case("hd1", {"x": randn(g, 1, 3, 5), "num_heads": 5}),
        Case("H4-T6-hd5", {"x": randn(g, 2, 6, 20), "num_heads": 4}),
        Case("non-contiguous", {"x": transposed(randn(g, 2, 7, 10)), "num_heads": 2}),
        Case("indivisible-raises", {"x": randn(g, 2, 3, 10), "num_heads": 4}),
    ]


def merge_cases() -> list[Case]:
    g = _gen(8)
    return [
        Case("H3-T5-hd4", {"x": randn(g, 2, 3, 5, 4)}, meta=True),
        Case("H1", {"x": randn(g, 2, 1, 4, 6)}),
        Case("H4-T7-hd3", {"x": randn(g, 2, 4, 7, 3)}),
        Case("non-contiguous", {"x": transposed(randn(g, 2, 3, 6, 5))}),
    ]


# the answers: direct formulas, written apart from the model below


def answer_dot(queries, keys):
    return torch.einsum("...qd,...kd->...qk", queries, keys)


def answer_scaled(queries, keys):
    return torch.einsum("...qd,...kd->...qk", queries, keys) / math.sqrt(keys.shape[-1])


def answer_softmax(scores, dim=-1):
    out = torch.softmax(scores, dim=dim)
    return torch.where(torch.isneginf(scores).all(dim=dim, keepdim=True), torch.zeros_like(out), out)


def answer_context(weights, values):
    return torch.einsum("...qk,...kv->...qv", weights, values)


def answer_causal_mask(num_tokens, device=None):
    if num_tokens < 1:
        raise ValueError(num_tokens)
    pos = torch.arange(num_tokens, device=device)
    return pos[None, :] > pos[:, None]


def answer_apply_mask(scores):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError(scores.shape)
    future = answer_causal_mask(scores.shape[-1], scores.device)
    return torch.where(future, torch.full_like(scores, NEG_INF), scores)


def answer_renormalize(weights):
    kept = torch.where(answer_causal_mask(weights.shape[-1], weights.device), torch.zeros_like(weights), weights)
    return kept / kept.sum(dim=-1, keepdim=True)


def answer_dropout_scale(weights, keep_mask, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(p)
    if p == 1.0:
        return torch.zeros_like(weights)
    return torch.where(keep_mask.bool(), weights / (1.0 - p), torch.zeros_like(weights))


def answer_split(x, num_heads):
    if x.shape[-1] % num_heads:
        raise ValueError(num_heads)
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)  # head h: the h-th block of columns


def answer_merge(x):
    return torch.cat(x.unbind(dim=1), dim=-1)


# the model: the same computations, one knob per mistake


def model_scores(queries, keys, product="qk", scale="none"):
    if product == "qk":
        s = queries @ keys.transpose(-2, -1)
    elif product == "qkT":  # `.T` reverses every dim
        s = queries @ keys.permute(*reversed(range(keys.dim())))
    elif product == "bmm":  # exactly 3-D: 2-D input has no dim 2 to transpose, 4-D is no batch of matrices
        s = torch.bmm(queries, keys.transpose(1, 2))
    else:  # keys @ queries^T
        s = keys @ queries.transpose(-2, -1)
    d_k = keys.shape[-1]
    divisor = {"none": 1.0, "sqrt_dk": math.sqrt(d_k), "dk": float(d_k)}
    divisor |= {"sqrt_Tq": math.sqrt(queries.shape[-2]), "sqrt_Tk": math.sqrt(keys.shape[-2])}
    return s / divisor[scale]


def model_softmax(scores, dim=-1, axis="arg", stable="max"):
    d = {"arg": dim, "1": 1, "0": 0, "last": -1}[axis]
    if stable == "nomax":
        e = torch.exp(scores)
        return e / e.sum(dim=d, keepdim=True)
    top = scores.amax(dim=d, keepdim=True)
    if stable == "max":
        top = torch.where(torch.isneginf(top), torch.zeros_like(top), top)
    e = torch.exp(scores - top)  # "nanrows": -inf - (-inf) is NaN
    total = e.sum(dim=d, keepdim=True)
    return e / total if stable == "nanrows" else torch.where(total > 0, e / total, torch.zeros_like(e))


def model_context(weights, values, transposed=False, bmm=False):
    if bmm:
        return torch.bmm(weights, values)  # exactly 3-D
    return (weights.transpose(-2, -1) if transposed else weights) @ values


def _tri(n, device, tri="triu", diag=1, dtype=torch.bool):
    ones = torch.ones(n, n, dtype=dtype, device=device)
    return torch.triu(ones, diagonal=diag) if tri == "triu" else torch.tril(ones, diagonal=diag)


def model_causal_mask(num_tokens, device=None, tri="triu", diag=1, dtype="bool", honour_device=True, check=True,
                      rank="2d", container="tensor"):  # fmt: skip
    if check and num_tokens < 1:
        raise ValueError(num_tokens)
    kind = torch.bool if dtype == "bool" else None  # None: torch's default float dtype
    if container == "numpy":  # NumPy knows no device
        return _tri(num_tokens, None, tri, diag, kind).numpy()
    mask = _tri(num_tokens, device if honour_device else None, tri, diag, kind)
    return mask.unsqueeze(0) if rank == "batched" else mask


def temperature_cases() -> list[Case]:
    g = _gen(9)
    masked = randn(g, 2, 5, 5).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), NEG_INF)
    return [
        Case("T=1", {"scores": randn(g, 4, 6), "temperature": 1.0, "dim": -1}),
        Case("T=0.5-3d", {"scores": randn(g, 2, 4, 5), "temperature": 0.5, "dim": -1}, meta=True),
        Case("T=2-dim=0", {"scores": randn(g, 3, 4), "temperature": 2.0, "dim": 0}),
        Case("T=1e-4", {"scores": randn(g, 2, 3, 4), "temperature": 1e-4, "dim": -1}),
        Case("large-logits", {"scores": randn(g, 2, 5, scale=1e3), "temperature": 1.0, "dim": -1}),
        Case("masked", {"scores": masked, "temperature": 0.7, "dim": -1}),
        Case("T=0-raises", {"scores": randn(g, 2, 3), "temperature": 0.0, "dim": -1}),
        Case("T=-1-raises", {"scores": randn(g, 2, 3), "temperature": -1.0, "dim": -1}),
    ]


def answer_temperature(scores, temperature, dim=-1):
    if not temperature > 0:
        raise ValueError(temperature)
    return answer_softmax(scores / temperature, dim)


def model_temperature(scores, temperature, dim=-1, axis="arg", stable="max", where="divides", check=True):
    if check and not temperature > 0:
        raise ValueError(temperature)
    scaled = {"divides": scores / temperature, "times": scores * temperature}.get(where, scores)
    if axis == "all":  # one softmax of every element
        out = model_softmax(scaled.reshape(-1), 0, "arg", stable).reshape(scores.shape)
    else:
        out = model_softmax(scaled, dim, axis, stable)
    return out / temperature if where == "after" else out


def model_apply_mask(scores, size="T", fill="-inf", where="scores", inplace=False, tri="triu", diag=1):
    if scores.shape[-1] != scores.shape[-2]:
        raise ValueError(scores.shape)
    n = scores.shape[-1] if size == "T" else 6
    mask = _tri(n, scores.device if where == "scores" else "cpu", tri, diag)
    value = NEG_INF if fill == "-inf" else 0.0
    return scores.masked_fill_(mask, value) if inplace else scores.masked_fill(mask, value)


def model_renormalize(weights, renorm="rows"):
    kept = weights * _tri(weights.shape[-1], weights.device, "tril", 0, weights.dtype)
    if renorm == "none":
        return kept
    return kept / kept.sum(dim=-1 if renorm == "rows" else -2, keepdim=True)


def model_dropout_scale(weights, keep_mask, p, scale="1-p", guard_p1=True, guard_p0=True, check=True,
                        in_place_p1=False):  # fmt: skip
    if check and not 0.0 <= p <= 1.0:
        raise ValueError(p)
    if guard_p1 and p == 1.0:
        return weights.zero_() if in_place_p1 else torch.zeros_like(weights)
    kept = weights * keep_mask.to(weights.dtype)
    if scale == "1-p":
        return kept / (1.0 - p)
    if scale == "p":
        return kept if guard_p0 and p == 0.0 else kept / p
    return kept


def model_split(x, num_heads, mode="transpose", check=True):
    b, t, d = x.shape
    if check and d % num_heads:
        raise ValueError(num_heads)
    hd = d // num_heads
    if mode == "transpose":
        return x.reshape(b, t, num_heads, hd).transpose(1, 2)
    if mode == "no_transpose":
        return x.reshape(b, num_heads, t, hd)
    if mode == "no_permute":  # (b, T, H, hd): the heads never moved in front of the tokens
        return x.reshape(b, t, num_heads, hd)
    return x.reshape(b, t, hd, num_heads).permute(0, 3, 1, 2)  # interleaved columns


def model_merge(x, mode="transpose"):
    b, h, t, hd = x.shape
    if mode == "view":  # transposed, then viewed with no .contiguous(): raises unless the strides allow it
        return x.transpose(1, 2).view(b, t, h * hd)
    if mode == "transpose":
        x = x.transpose(1, 2)
    return x.reshape(b, t, h * hd).contiguous()


@dataclass
class FunctionSpec:
    cases: Callable[[], list[Case]]
    answer: Callable[..., Any]
    model: Callable[..., Any]
    defaults: dict[str, Any]
    mistakes: dict[str, list[dict[str, Any]]]  # id -> the knob settings it may mean (its variants)


BOTH = (True, False)
SCORE_MISTAKES = {"q-at-k-t-batched": [{"product": "qkT"}], "keys-times-queries": [{"product": "kq"}],
                  "scores-bmm-3d-only": [{"product": "bmm"}]}  # fmt: skip
FUNCTIONS: dict[str, FunctionSpec] = {
    "dot_product_scores": FunctionSpec(score_cases, answer_dot, model_scores, {}, SCORE_MISTAKES),
    "scaled_dot_product_scores": FunctionSpec(
        score_cases,
        answer_scaled,
        model_scores,
        {"scale": "sqrt_dk"},
        SCORE_MISTAKES
        | {
            "no-scaling": [{"scale": "none"}],
            "scale-twice": [{"scale": "dk"}],
            "scale-by-d-k-not-sqrt": [{"scale": "dk"}],
            "scale-by-num-tokens": [{"scale": "sqrt_Tq"}, {"scale": "sqrt_Tk"}],
        },
    ),
    "softmax_weights": FunctionSpec(
        softmax_cases,
        answer_softmax,
        model_softmax,
        {},
        {
            "softmax-over-dim-1": [{"axis": "1"}],
            "softmax-over-dim-0": [{"axis": "0"}],
            "softmax-ignores-dim": [{"axis": "last"}],
            "softmax-without-max": [{"stable": "nomax"}],
            "softmax-nan-on-masked-rows": [{"stable": "nanrows"}],
        },
    ),
    "context_vectors": FunctionSpec(
        context_cases, answer_context, model_context, {},
        {"weights-transposed": [{"transposed": True}], "context-bmm-3d-only": [{"bmm": True}]},
    ),
    "causal_mask": FunctionSpec(
        mask_cases,
        answer_causal_mask,
        model_causal_mask,
        {},
        {
            "triu-diagonal-0": [{"diag": 0}],
            "tril-instead-of-triu": [{"tri": "tril", "diag": d} for d in (-1, 0, 1)],
            "causal-mask-ignores-device": [{"honour_device": False}],
            "causal-mask-float": [{"dtype": "float"}],
            "causal-mask-unchecked": [{"check": False}],
            "causal-mask-extra-dim": [{"rank": "batched"}],
            "causal-mask-numpy": [{"container": "numpy"}],
        },
    ),
    "softmax_with_temperature": FunctionSpec(
        temperature_cases,
        answer_temperature,
        model_temperature,
        {},
        {
            "temperature-over-every-element": [{"axis": "all"}],
            "temperature-without-max": [{"stable": "nomax"}],
            "temperature-unchecked": [{"check": False}],
            "temperature-after-softmax": [{"where": "after"}],
            "temperature-multiplied": [{"where": "times"}],
            "temperature-ignored": [{"where": "ignored"}],
        },
    ),
    "apply_causal_mask": FunctionSpec(
        apply_mask_cases,
        answer_apply_mask,
        model_apply_mask,
        {},
        {
            "mask-of-size-6": [{"size": "6"}],
            "mask-with-zero": [{"fill": "0"}],
            "mask-built-on-cpu": [{"where": "cpu"}],
            "mask-in-place": [{"inplace": True}],
            "triu-diagonal-0": [{"diag": 0}],
            "tril-instead-of-triu": [{"tri": "tril", "diag": d} for d in (-1, 0, 1)],
        },
    ),
    "renormalize_masked_weights": FunctionSpec(
        renormalize_cases,
        answer_renormalize,
        model_renormalize,
        {},
        {"mask-without-renormalising": [{"renorm": "none"}], "renormalise-columns": [{"renorm": "cols"}]},
    ),
    "dropout_scale": FunctionSpec(
        dropout_scale_cases,
        answer_dropout_scale,
        model_dropout_scale,
        {},
        {
            "dropout-scale-by-inverse-p": [
                {"scale": "p", "guard_p1": a, "guard_p0": b} for a, b in itertools.product(BOTH, BOTH)
            ],
            "dropout-not-scaled": [{"scale": "none", "guard_p1": a} for a in BOTH],
            "dropout-divides-by-zero": [{"guard_p1": False}],
            "dropout-p-unchecked": [{"check": False}],
            "dropout-zeroes-input-in-place": [{"in_place_p1": True}],
        },
    ),
    "split_heads": FunctionSpec(
        split_cases,
        answer_split,
        model_split,
        {},
        {
            "split-heads-without-transpose": [{"mode": "no_transpose"}],
            "split-heads-interleaved": [{"mode": "interleaved"}],
            "split-heads-no-permute": [{"mode": "no_permute"}],
            "split-heads-unchecked": [{"check": False}],
        },
    ),
    "merge_heads": FunctionSpec(
        merge_cases,
        answer_merge,
        model_merge,
        {},
        {"merge-without-transpose": [{"mode": "no_transpose"}], "merge-view-after-transpose": [{"mode": "view"}]},
    ),
}

RUNS_CPU = ((torch.float64, "cpu"), (torch.float32, "cpu"))
RUN_META = (torch.float32, "meta")


def function_runs(spec: FunctionSpec) -> list[tuple[str, dict[str, Any]]]:
    """Every (label, arguments) the hook is called with: each case in float64 and float32, and on meta."""
    runs = []
    for case in spec.cases():
        for dtype, device in RUNS_CPU + ((RUN_META,) if case.meta else ()):
            runs.append((f"{case.name}[{str(dtype)[6:]}/{device}]", placed(case.kwargs, dtype, device)))
    return runs


def function_outcomes(
    fn: Callable[..., Any], runs: list[tuple[str, dict[str, Any]]], ours: bool = False
) -> list[Outcome]:
    fresh = [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kw.items()} for _, kw in runs]
    return [run(fn, kwargs, ours) for kwargs in fresh]


# --- attention_dropout: judged by what it does -------------------------------------------------------------------


def attention_dropout_behaviour(call: Callable[..., Any]) -> set[str]:
    """The mistake ids attention_dropout shows (empty: it behaves as the contract says)."""
    shown: set[str] = set()
    g = _gen(9)
    small = weights(g, 3, 6, 6)

    def attempt(**kwargs: Any) -> Outcome:
        return run(call, kwargs)

    def same(o: Outcome, want: torch.Tensor) -> bool:
        return o.error is None and not o.mutated and isinstance(o.value, torch.Tensor) and torch.equal(o.value, want)

    if not same(attempt(weights=small.clone(), p=0.3, training=False, generator=None), small):
        shown.add("dropout-active-in-eval")
    if not same(attempt(weights=small.clone(), p=0.0, training=True, generator=None), small):
        shown.add("dropout-changes-at-p=0")
    at_one = attempt(weights=small.clone(), p=1.0, training=True, generator=None)
    if at_one.error is not None or not torch.isfinite(at_one.value).all():
        shown.add("dropout-divides-by-zero")
    elif at_one.value.count_nonzero():
        shown.add("dropout-keeps-at-p=1")
    if at_one.mutated:
        shown.add("dropout-zeroes-input-in-place")
    for p in (-0.1, 1.5):
        o = attempt(weights=small.clone(), p=p, training=True, generator=None)
        if o.error is None or not issubclass(o.error, ValueError):
            shown.add("dropout-p-unchecked")

    p = 0.2
    w = weights(g, 4, 40, 40)
    first = attempt(weights=w.clone(), p=p, training=True, generator=_gen(7))
    again = attempt(weights=w.clone(), p=p, training=True, generator=_gen(7))
    if first.error is not None or again.error is not None:
        return shown | {"dropout-raises-in-training"}
    y = first.value
    if not torch.equal(y, again.value):
        shown.add("dropout-ignores-generator")
    dropped = y.abs() <= 1e-300
    for ratio, mistake in (
        (1 / (1 - p), None),
        (1 / p, "attention-dropout-scale-by-inverse-p"),
        (1.0, "dropout-not-scaled"),
    ):
        if (dropped | torch.isclose(y, w * ratio, rtol=1e-9, atol=0)).all():
            if mistake:
                shown.add(mistake)
            break
    else:
        kept_ratio = torch.where(dropped, torch.nan, y / w)
        row_constant = (kept_ratio.nan_to_num(0).amax(-1) - kept_ratio.nan_to_num(1e9).amin(-1)).abs() < 1e-9
        if row_constant.all() and torch.allclose(y.sum(-1), torch.ones_like(y.sum(-1))):
            shown.add("dropout-renormalises-rows")
        else:
            shown.add("dropout-unrecognised")
    kept = (~dropped).double().mean().item()
    bound = 5 * math.sqrt(p * (1 - p) / y.numel())
    if abs(kept - (1 - p)) > bound:
        shown.add("dropout-keeps-with-p" if abs(kept - p) <= bound else "dropout-kept-fraction-off")
    as_float = attempt(weights=w.float(), p=p, training=True, generator=_gen(7))
    if as_float.error is not None or as_float.value.dtype != torch.float32:
        shown.add("dropout-changes-dtype")
    if "dropout-ignores-generator" in shown:  # d2l's dropout_layer: the mask on the CPU, or float32 on half weights
        on_meta = attempt(weights=w.float().to("meta"), p=p, training=True, generator=None)
        as_half = attempt(weights=w.half(), p=p, training=True, generator=None)
        if on_meta.error is not None or as_half.error is not None or as_half.value.dtype != torch.float16:
            shown = (shown - {"dropout-ignores-generator"}) | {"dropout-global-rng-cpu-mask"}
    return shown


# --- the modules: configurations, the answer (SDPA), and the model of their mistakes --------------------------------


@dataclass(frozen=True)
class Config:
    name: str
    d_in: int
    d_out: int
    x: tuple[int, ...]
    ctx: int = 0
    heads: int = 1
    qkv_bias: bool = False

    def args(self, hook: str, dropout: float = 0.0) -> dict[str, Any]:
        args: dict[str, Any] = {"d_in": self.d_in, "d_out": self.d_out}
        if hook != SELF:
            args |= {"context_length": self.ctx, "dropout": dropout}
        if hook == MHA:
            args["num_heads"] = self.heads
        return args | {"qkv_bias": self.qkv_bias}


# T, d_in, d_out, head_dim, heads and context_length kept apart where a case does not need them equal
CONFIGS = {
    SELF: [
        Config("unbatched", 6, 4, (5, 6)),
        Config("batched", 3, 5, (2, 4, 3)),
        Config("qkv-bias", 4, 7, (3, 5, 4), qkv_bias=True),
        Config("4d", 5, 3, (2, 2, 6, 5)),
    ],
    CAUSAL: [
        Config("T<ctx", 5, 7, (2, 4, 5), ctx=9),
        Config("T=ctx=6", 3, 4, (2, 6, 3), ctx=6),
        Config("T=6<ctx-bias", 4, 9, (3, 6, 4), ctx=8, qkv_bias=True),
        Config("T=1", 6, 5, (2, 1, 6), ctx=11),
    ],
    MHA: [
        Config("T<ctx", 5, 12, (2, 7, 5), ctx=9, heads=3),
        Config("T=ctx=6", 3, 6, (2, 6, 3), ctx=6, heads=2),
        Config("bias", 4, 10, (3, 6, 4), ctx=11, heads=2, qkv_bias=True),
        Config("one-head", 4, 5, (2, 5, 4), ctx=7, heads=1),
    ],
}
INDIVISIBLE = Config("indivisible", 4, 10, (1, 3, 4), ctx=7, heads=4)


def layer_names(entry: dict[str, Any], hook: str) -> dict[str, str]:
    return {role: role for role in ROLES} | entry.get("layers", {}).get(hook, {})


def roles_of(hook: str) -> tuple[str, ...]:
    return ROLES if hook == MHA else ROLES[:3]


def params(module: nn.Module, hook: str, names: dict[str, str]) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
    """Each role's (weight as (out, in), bias or None): an nn.Linear, or a chapter-v1 (in, out) Parameter."""
    found = {}
    for role in roles_of(hook):
        layer = getattr(module, names[role], None)
        if layer is None and role == "out_proj":
            continue  # no output projection at all (mha-without-out-proj)
        if isinstance(layer, nn.Linear):
            found[role] = (layer.weight.detach(), None if layer.bias is None else layer.bias.detach())
        elif isinstance(layer, torch.Tensor) and layer.dim() == 2:
            found[role] = (layer.detach().T, None)  # used as x @ W
        else:
            raise TypeError(f"{names[role]} is neither an nn.Linear nor a weight matrix")
    return found


def project(x, weight_bias, use_bias: bool):
    w, b = weight_bias
    y = x @ w.transpose(-2, -1)
    return y + b if use_bias and b is not None else y


def answer_module(x, p, cfg: Config, hook: str):
    """The right output for these weights: F.scaled_dot_product_attention, per head for multi-head attention."""
    q, k, v = (project(x, p[r], cfg.qkv_bias) for r in ROLES[:3])
    if hook != MHA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=hook == CAUSAL)
    if "out_proj" not in p:
        raise ValueError("no out_proj: the contract's answer needs one")  # an outcome no module's output agrees with
    b, t, d_out = q.shape

    def heads(z):
        return z.view(b, t, cfg.heads, d_out // cfg.heads).transpose(1, 2)

    per_head = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
    return project(per_head.transpose(1, 2).reshape(b, t, d_out), p["out_proj"], True)


MODULE_DEFAULTS: dict[str, Any] = {
    "scores": "qk", "scale": "sqrt_dk", "after_softmax": False, "dim": -1, "twice": None, "second_divide": False,
    "mask": "fill", "mask_size": "T", "tri": "triu", "diag": 1, "mask_device": "x",
    "split": "transpose", "merge": "transpose", "out_proj": True, "bias": "contract",
}  # fmt: skip
MODULE_MISTAKES: dict[str, list[dict[str, Any]]] = {
    "q-at-k-t-batched": [{"scores": "qkT"}],
    "keys-times-queries": [{"scores": "kq"}],
    "no-scaling": [{"scale": "none"}],
    "scale-twice": [{"scale": "dk"}, {"second_divide": True}],
    "scale-by-num-tokens": [{"scale": "sqrt_T"}],
    "scale-by-d-in": [{"scale": "sqrt_din"}],
    "mha-scale-by-d-out": [{"scale": "sqrt_dout"}],
    "scale-by-d-k-not-sqrt": [{"scale": "dk"}],
    "scale-after-softmax": [{"after_softmax": True}],
    "softmax-over-dim-1": [{"dim": 1}],
    "softmax-over-dim-0": [{"dim": 0}],
    "softmax-twice": [{"twice": "masked_first"}, {"twice": "unmasked_first"}],
    "mask-not-applied": [{"mask": "none"}],
    "mask-result-discarded": [{"mask": "none"}],
    "mask-not-sliced": [{"mask_size": "ctx"}],
    "mask-of-size-6": [{"mask_size": "6"}],
    "triu-diagonal-0": [{"diag": 0}],
    "tril-instead-of-triu": [{"tri": "tril", "diag": d} for d in (-1, 0, 1)],
    "mask-with-zero": [{"mask": "zero"}],
    "mask-without-renormalising": [{"mask": "after"}],
    "mask-plain-attribute": [{"mask_device": "cpu"}],
    "mask-made-in-forward-on-cpu": [{"mask_device": "cpu"}],
    "mha-heads-without-transpose": [{"split": "no_transpose", "merge": "no_transpose"}],
    "split-heads-interleaved": [{"split": "interleaved"}],
    "merge-without-transpose": [{"merge": "no_transpose"}],
    "no-out-proj": [{"out_proj": False}],
    "linear-bias-ignores-qkv-bias": [{"bias": "always"}],
}
MODULE_DROPOUT_MISTAKES = {
    "dropout-never-applied",
    "dropout-on-context",
    "dropout-on-scores",
    "dropout-not-scaled",
    "dropout-renormalises-rows",
    "module-dropout-in-eval",
}
MASK_BUFFER_MISTAKES = {"mask-plain-attribute", "mask-made-in-forward-on-cpu"}


def model_module(x, p, cfg: Config, hook: str, knobs: dict[str, Any]):
    """The attention computation with the mistakes ``knobs`` switch on (MODULE_DEFAULTS: none)."""
    k = MODULE_DEFAULTS | knobs
    use_bias = cfg.qkv_bias or k["bias"] == "always"
    q, key, v = (project(x, p[r], use_bias) for r in ROLES[:3])
    t, d_in, d_out = x.shape[-2], x.shape[-1], q.shape[-1]
    if hook == MHA:
        b, h = x.shape[0], cfg.heads
        hd = d_out // h
        split = {
            "transpose": lambda z: z.reshape(b, t, h, hd).transpose(1, 2),
            "no_transpose": lambda z: z.reshape(b, h, t, hd),
            "interleaved": lambda z: z.reshape(b, t, hd, h).permute(0, 3, 1, 2),
        }[k["split"]]
        q, key, v = split(q), split(key), split(v)
    if k["scores"] == "qk":
        scores = q @ key.transpose(-2, -1)
    elif k["scores"] == "qkT":
        scores = q @ key.permute(*reversed(range(key.dim())))
    else:
        scores = key @ q.transpose(-2, -1)
    d_k = key.shape[-1]
    divisor = {"sqrt_dk": math.sqrt(d_k), "none": 1.0, "dk": float(d_k), "sqrt_T": math.sqrt(t)}
    divisor |= {"sqrt_din": math.sqrt(d_in), "sqrt_dout": math.sqrt(d_out)}
    scale = divisor[k["scale"]]
    mask = None
    if hook != SELF and k["mask"] != "none":
        n = {"T": t, "ctx": cfg.ctx, "6": 6}[k["mask_size"]]
        mask = _tri(n, x.device if k["mask_device"] == "x" else "cpu", k["tri"], k["diag"])
    pre = scores if k["after_softmax"] else scores / scale
    if mask is not None and k["mask"] in ("fill", "zero") and k["twice"] != "unmasked_first":
        pre = pre.masked_fill(mask, NEG_INF if k["mask"] == "fill" else 0.0)
    w = torch.softmax(pre, dim=k["dim"])
    if mask is not None and k["mask"] == "after":
        w = w.masked_fill(mask, 0.0)
    if k["twice"]:
        again = w.masked_fill(mask, NEG_INF)
        w = torch.softmax(again / scale if k["second_divide"] else again, dim=-1)
    if k["after_softmax"]:
        w = w / math.sqrt(d_k)
    context = w @ v
    if hook == MHA:
        if k["merge"] == "transpose":
            context = context.transpose(1, 2)
        context = context.reshape(x.shape[0], t, d_out)
        if k["out_proj"]:
            if "out_proj" not in p:
                raise ValueError("no out_proj to apply")  # a module without one: only out_proj=False reproduces it
            context = project(context, p["out_proj"], True)
    return context


@dataclass
class ModuleRun:
    label: str
    cfg: Config
    x: torch.Tensor
    p: dict[str, tuple[torch.Tensor, torch.Tensor | None]]
    got: Outcome


def seed_cpu(seed: int) -> None:
    """torch.manual_seed without its lazy CUDA seeding, which records a stack trace on every call."""
    torch.random.default_generator.manual_seed(seed)


def build(solution: Solution, hook: str, cfg: Config, dropout: float = 0.0, seed: int = 0) -> nn.Module:
    seed_cpu(seed)
    return quietly(lambda: solution.call(hook, **cfg.args(hook, dropout)))


META_CONFIG = 1
"""The configuration also run on the meta device (T == context_length: even a mask of the wrong size runs)."""


def module_runs(solution: Solution, hook: str, names: dict[str, str]) -> list[ModuleRun]:
    """The learner's module on every configuration in float64 and float32, one also on meta; eval, dropout 0."""
    runs = []
    for i, cfg in enumerate(CONFIGS[hook]):

        def same(i=i, cfg=cfg):  # the same weights again: built under the same seed
            return build(solution, hook, cfg, seed=100 + i).eval()

        x64 = randn(_gen(200 + i), *cfg.x)
        variants = [("float64", same().double(), x64), ("float32", same(), x64.float())]
        if i == META_CONFIG:
            variants.append(("meta", quietly(lambda: same().to("meta")), torch.empty(cfg.x, device="meta")))
        for kind, mod, x in variants:
            got = run(lambda x, m=mod: m(x), {"x": x})  # positionally: a learner may call it `inputs`
            runs.append(ModuleRun(f"{cfg.name}[{kind}]", cfg, x, params(mod, hook, names), got))
    return runs


def model_reproduces(runs: list[ModuleRun], hook: str, ids: Iterable[str]) -> bool:
    ids = [i for i in ids if i not in MODULE_DROPOUT_MISTAKES]
    for knobs in variant_settings(MODULE_MISTAKES, ids):
        fn = lambda x, p, cfg: model_module(x, p, cfg, hook, knobs)  # noqa: B023 - used at once
        if all(agree(r.got, run(fn, {"x": r.x, "p": r.p, "cfg": r.cfg}, ours=True)) for r in runs):
            return True
    return False


def answer_agrees(runs: list[ModuleRun], hook: str) -> list[str]:
    """The runs where the learner's module differs from SDPA with its own weights."""
    fn = lambda x, p, cfg: answer_module(x, p, cfg, hook)  # noqa: E731
    return [r.label for r in runs if not agree(r.got, run(fn, {"x": r.x, "p": r.p, "cfg": r.cfg}, ours=True))]


def contract_problems(solution: Solution, hook: str, names: dict[str, str]) -> set[str]:
    """The module rules a built module breaks: names, layout, bias, order, mask-buffer (extras are fine)."""
    problems: set[str] = set()
    for i, cfg in enumerate(CONFIGS[hook][:3]):
        module = build(solution, hook, cfg, seed=300 + i)
        order = [id(p) for p in module.parameters()]
        positions = []
        for role in roles_of(hook):
            layer = getattr(module, names[role], None)
            if layer is None:  # no such layer at all (mha-without-out-proj)
                problems.add("layout")
                continue
            if getattr(module, role, None) is not layer:
                problems.add("names")
            fan_in = cfg.d_out if role == "out_proj" else cfg.d_in
            if not isinstance(layer, nn.Linear) or (layer.in_features, layer.out_features) != (fan_in, cfg.d_out):
                problems.add("layout")
            has_bias = isinstance(layer, nn.Linear) and layer.bias is not None
            if has_bias != (cfg.qkv_bias or role == "out_proj"):
                problems.add("bias")
            weight = layer.weight if isinstance(layer, nn.Linear) else layer
            positions.append(order.index(id(weight)))
        if positions != sorted(positions):
            problems.add("order")
        if hook != SELF:
            mask = dict(module.named_buffers()).get("mask")
            if mask is None or tuple(mask.shape) != (cfg.ctx, cfg.ctx):
                problems.add("mask-buffer")
    return problems


# dropout in modules: outputs that are the attention weights, twice

# One head: how a module splits and merges heads (rightly or not) then changes nothing, and T == context_length
# == 6: a mask of the wrong size still runs.  head_dim = 2T leaves room for the two copies.
OBSERVE = {CAUSAL: Config("observe", 7, 12, (8, 6, 7), ctx=6), MHA: Config("observe", 7, 12, (8, 6, 7), ctx=6, heads=1)}
P_OBSERVE = 0.4


def observable(module: nn.Module, hook: str, names: dict[str, str], cfg: Config) -> None:
    """Value projection: token t -> columns t and T + t of its head; out_proj: the identity."""
    t = cfg.x[1]
    hd = cfg.d_out // cfg.heads
    value = torch.zeros(cfg.d_out, cfg.d_in)
    for h in range(cfg.heads):
        for tok in range(t):
            value[h * hd + tok, tok] = value[h * hd + t + tok, tok] = 1.0
    with torch.no_grad():
        layer = getattr(module, names["W_value"])
        if isinstance(layer, nn.Linear):
            layer.weight.copy_(value)
            if layer.bias is not None:
                layer.bias.zero_()
        else:
            layer.copy_(value.T)
        out = getattr(module, names["out_proj"], None) if hook == MHA else None
        if out is not None:
            out.weight.copy_(torch.eye(cfg.d_out))
            out.bias.zero_()


def module_dropout_behaviour(solution: Solution, hook: str, names: dict[str, str]) -> set[str]:
    """The dropout mistake ids a module shows in training and eval (empty: dropout as the contract says)."""
    cfg = OBSERVE[hook]
    module = build(solution, hook, cfg, dropout=P_OBSERVE, seed=400)
    observable(module, hook, names, cfg)
    clean = build(solution, hook, cfg, dropout=0.0, seed=400)
    clean.load_state_dict(module.state_dict())
    module.double()
    clean.double().eval()
    scale = 1.0 + 0.3 * torch.arange(cfg.x[0], dtype=torch.float64)  # a different scale per batch row
    x = torch.zeros(cfg.x, dtype=torch.float64)
    x[:, range(cfg.x[1]), range(cfg.x[1])] = 1.0
    x = x * scale[:, None, None]
    with torch.no_grad():
        want = quietly(lambda: clean(x))
        shown: set[str] = set()
        module.eval()
        seed_cpu(1)
        evals = [quietly(lambda: module(x)) for _ in range(2)]
        if not all(torch.allclose(e, want, rtol=1e-9, atol=1e-12, equal_nan=True) for e in evals):
            shown.add("module-dropout-in-eval")
        module.train()
        seed_cpu(2)
        y = quietly(lambda: module(x))
    seen = torch.isfinite(want) & (want.abs() > 1e-12)
    w, got = want[seen], y[seen]
    if torch.allclose(got, w, rtol=1e-9, atol=0):
        return shown | {"dropout-never-applied"}
    dropped = got.abs() <= 1e-12
    scaled = torch.isclose(got, w / (1 - P_OBSERVE), rtol=1e-9, atol=0)
    if (dropped | scaled).all():
        _, group, counts = torch.unique(w, return_inverse=True, return_counts=True)  # equal values: one weight's copies
        drops = torch.bincount(group, weights=dropped.double(), minlength=len(counts))
        if ((counts == 2) & (drops == 1)).any():
            shown.add("dropout-on-context")  # the two copies of one weight dropped apart
        kept = (~dropped).double().mean().item()
        if abs(kept - (1 - P_OBSERVE)) > 5 * math.sqrt(P_OBSERVE * (1 - P_OBSERVE) / (w.numel() / 2)):
            shown.add("dropout-kept-fraction-off")
    elif (dropped | torch.isclose(got, w, rtol=1e-9, atol=0)).all():
        shown.add("dropout-not-scaled")
    elif not dropped.any():
        shown.add("dropout-on-scores")  # nothing exactly 0, yet every weight moved: the softmax saw the drops
    else:
        shown.add("dropout-unrecognised")
    return shown


# --- which pairs there are -------------------------------------------------------------------------------------

PAIRS = [(sub, hook) for sub, entry in EXPECTED.items() for hook in entry["hooks"]]
GRADIENT_IDS = frozenset(entry[0] for entry in GRADIENT_ENTRIES)
"""Mistakes of backward only (issue 23): right values, a gradient that does not train."""


def gradient_breaks(solution: Solution, hook: str) -> set[str]:
    """What an independent look at the softmax's backward finds: a result cut from the graph, or NaN in the gradient
    of a row that is all -inf (whose weights are all 0, a constant: its gradient is 0)."""
    if hook != "softmax_weights":
        return set()
    scores = torch.randn(3, 4, dtype=torch.float64, generator=_gen(0))
    scores[1] = NEG_INF
    leaf = scores.requires_grad_()
    out = quietly(lambda: solution.softmax_weights(leaf.clone()))
    if not out.requires_grad:
        return {"softmax-detached"}
    if not torch.equal(out[1], torch.zeros_like(out[1])):  # the values are already wrong there (NaN): not backward's
        return set()
    (grad,) = torch.autograd.grad(out, leaf, torch.randn(out.shape, dtype=out.dtype, generator=_gen(1)))
    return set() if torch.isfinite(grad).all() else {"softmax-where-nan-grad"}


KNOWN_IDS = (
    {i for spec in FUNCTIONS.values() for i in spec.mistakes}
    | set(MODULE_MISTAKES)
    | MODULE_DROPOUT_MISTAKES
    | {"attention-dropout-scale-by-inverse-p", "dropout-active-in-eval", "dropout-renormalises-rows"}
    | {"dropout-keeps-with-p", "dropout-ignores-generator", "dropout-not-scaled", "dropout-divides-by-zero"}
    | {"dropout-p-unchecked"}
    | {"dropout-global-rng-cpu-mask", "dropout-zeroes-input-in-place"}
    | GRADIENT_IDS
)


def ids_of(label: str | list[str]) -> list[str]:
    return [] if label == "correct" else list(label)


# --- tests ------------------------------------------------------------------------------------------------------


def test_the_corpus_has_the_mix_the_issue_asks_for():
    formats = [entry["format"] for entry in EXPECTED.values()]
    fully_correct = [s for s, e in EXPECTED.items() if all(v == "correct" for v in e["hooks"].values())]
    defective = [s for s, e in EXPECTED.items() if any(v != "correct" for v in e["hooks"].values())]
    assert len(EXPECTED) >= 36
    assert formats.count("ipynb") >= 3 and formats.count("package") + formats.count("folder") >= 2
    assert len(fully_correct) >= 12 and len(defective) >= 20
    on_disk = {
        p.name
        for p in CORPUS.iterdir()
        if (p.suffix in (".py", ".ipynb") or p.is_dir()) and p.name != "__pycache__" and not p.name.startswith(".")
    }
    assert on_disk == set(EXPECTED), "every submission in tests/learners/ has an entry, and every entry a file"


@pytest.mark.parametrize("sub", list(EXPECTED), ids=list(EXPECTED))
def test_the_entry_names_exactly_the_hooks_the_grader_adopts(sub, tmp_dir):
    entry = EXPECTED[sub]
    solution, _ = submission(sub, tmp_dir)
    assert set(solution.implemented) == set(entry["hooks"]), solution.problems
    assert entry["format"] == {".py": "py", ".ipynb": "ipynb"}.get(
        Path(sub).suffix, "package" if (CORPUS / sub / "__init__.py").exists() else "folder"
    )
    allowed = {"format", "hooks", "renamed", "layers", "structure", "accepted", "hidden", "note"}
    assert set(entry) <= allowed
    for hook, label in entry["hooks"].items():
        assert hook in HOOK_NAMES
        assert label == "correct" or (isinstance(label, list) and label and set(label) <= KNOWN_IDS), label
        assert set(flag(entry, "hidden", hook)) <= set(ids_of(label))
        assert set(flag(entry, "accepted", hook)) <= {ASSERT_ID}
    for key in ("renamed", "structure", "layers", "accepted", "hidden"):
        modules_only = set(MODULE_HOOKS) | ({"merge_heads"} if key == "structure" else set())
        assert set(entry.get(key, [])) <= set(entry["hooks"]) & modules_only, key
    assert set(entry.get("layers", {})) == set(entry.get("renamed", [])), "a renamed hook names its layers"


@pytest.mark.slow
def test_the_models_without_mistakes_are_the_answers():
    """The mistake model is only a witness if, with every knob off, it computes the independent answer."""
    for hook, spec in FUNCTIONS.items():
        runs = function_runs(spec)
        answer = function_outcomes(spec.answer, runs, ours=True)
        model = function_outcomes(lambda spec=spec, **kw: spec.model(**kw, **spec.defaults), runs, ours=True)
        for (label, _), a, m in zip(runs, answer, model):
            assert agree(m, a, contiguous=hook == "merge_heads"), f"{hook} {label}"
    for hook, configs in CONFIGS.items():
        for cfg in configs:
            seed_cpu(0)
            layers = {r: nn.Linear(cfg.d_out if r == "out_proj" else cfg.d_in, cfg.d_out).double() for r in ROLES}
            p = {r: (layer.weight.detach(), layer.bias.detach()) for r, layer in layers.items()}
            x = randn(_gen(0), *cfg.x)
            want = answer_module(x, p, cfg, hook)
            assert torch.allclose(model_module(x, p, cfg, hook, {}), want, rtol=1e-9, atol=1e-12), (hook, cfg.name)


@pytest.mark.parametrize(("sub", "hook"), PAIRS, ids=[f"{s}/{h}" for s, h in PAIRS])
def test_label(sub, hook, tmp_dir):
    entry = EXPECTED[sub]
    label = entry["hooks"][hook]
    solution, source = submission(sub, tmp_dir)
    if hook in MODULE_HOOKS:
        check_module(solution, source, entry, hook, ids_of(label))
    elif hook == "attention_dropout":
        assert attention_dropout_behaviour(solution.attention_dropout) == set(ids_of(label))
        if label == "correct":
            assert_no_banned_calls(solution, hook, weights=weights(_gen(0), 2, 5, 5), p=0.5, training=True)
    else:
        check_function(solution, entry, hook, ids_of(label))


def assert_no_banned_calls(solution: Solution, hook: str, **kwargs: Any) -> None:
    with BannedCalls(BANNED[hook]) as recorder:
        quietly(lambda: solution.call(hook, **kwargs))
    assert not recorder.seen, f"{hook} calls {sorted(recorder.seen)}, which the exercise does not allow"


def check_function(solution: Solution, entry: dict[str, Any], hook: str, ids: list[str]) -> None:
    assert gradient_breaks(solution, hook) == {i for i in ids if i in GRADIENT_IDS}, "the label's gradient mistakes"
    ids = [i for i in ids if i not in GRADIENT_IDS]
    spec = FUNCTIONS[hook]
    runs = function_runs(spec)
    got = function_outcomes(getattr(solution, hook), runs)
    contiguous = hook == "merge_heads"

    def reproduced_by(mistakes: list[str]) -> bool:
        for knobs in variant_settings(spec.mistakes, mistakes):
            model = function_outcomes(lambda **kw: spec.model(**kw, **(spec.defaults | knobs)), runs, ours=True)  # noqa: B023
            if all(agree(g, m, contiguous) for g, m in zip(got, model)):
                return True
        return False

    answer = function_outcomes(spec.answer, runs, ours=True)
    differs = [label for (label, _), g, a in zip(runs, got, answer) if not agree(g, a, contiguous)]
    if hook in entry.get("structure", []):  # the values are right; a rule about the result is not kept
        assert ids == [] and contiguous and differs, "structure on a function: right values, a contract rule broken"
        assert all(agree(g, a) for g, a in zip(got, answer)), "structure, but the values differ"
        return
    if not ids:
        assert not differs, f"labelled correct, but differs from the answer on {differs}"
        if hook in BANNED:
            assert_no_banned_calls(solution, hook, **runs[0][1])
        return
    assert differs, "labelled with mistakes, but agrees with the answer everywhere"
    assert reproduced_by(ids), f"the learner's outputs are not those of {ids}"
    hidden = set(flag(entry, "hidden", hook))
    for i in sorted(ids):
        rest = [j for j in ids if j != i]
        if i in hidden:
            assert reproduced_by(rest), f"{i} is marked hidden, yet the outputs need it"
        else:
            assert not reproduced_by(rest), f"{i} is not needed: {rest or 'no mistake'} already gives these outputs"


def class_source(source: str, hook: str) -> ast.ClassDef:
    return next(
        node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ClassDef) and node.name == CLASS_OF[hook]
    )


def discarded_masked_fill(cls: ast.ClassDef) -> bool:
    """``scores.masked_fill(...)`` as a statement: its result thrown away."""
    return any(
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "masked_fill"
        for node in ast.walk(cls)
    )


def check_module(solution: Solution, source: str, entry: dict[str, Any], hook: str, ids: list[str]) -> None:
    if set(ids) & UNLOADABLE_STRUCTURE:
        assert len(ids) == 1 and hook == MHA, "a module the weights cannot load into: its structure, and only that"
        check_unloadable_structure(solution, source, ids[0])
        return
    if set(ids) & FUSED_SIZED_RIGHT:  # fused-names: right values in another layout; the layout, and only that
        assert ids == ["fused-qkv-projection"] and hook == MHA, ids
        check_fused_sized_right(solution, source)
        return
    names = layer_names(entry, hook)
    runs = module_runs(solution, hook, names)
    differs = answer_agrees(runs, hook)
    value_ids = [i for i in ids if i not in MODULE_DROPOUT_MISTAKES and i not in STRUCTURE_ONLY]
    dropout_ids = {i for i in ids if i in MODULE_DROPOUT_MISTAKES}

    # values, eval mode: right, or exactly the labelled mistakes, each of them needed
    if not value_ids:
        assert not differs, f"the module differs from SDPA with its own weights on {differs}"
    else:
        assert differs, "labelled with mistakes, but agrees with SDPA everywhere"
        assert model_reproduces(runs, hook, value_ids), f"the module's outputs are not those of {value_ids}"
        hidden = set(flag(entry, "hidden", hook))
        for i in sorted(value_ids):
            rest = [j for j in value_ids if j != i]
            if i in hidden:
                assert model_reproduces(runs, hook, rest), f"{i} is marked hidden, yet the outputs need it"
            else:
                assert not model_reproduces(runs, hook, rest), f"{i} is not needed: {rest or 'nothing'} gives these"

    # dropout, as training and eval show it
    if hook != SELF:
        assert module_dropout_behaviour(solution, hook, names) == dropout_ids

    # the source says what the outputs cannot (the mask thrown away vs never computed)
    cls = class_source(source, hook)
    if "mask-result-discarded" in ids:
        assert discarded_masked_fill(cls)
    if "mask-not-applied" in ids:
        assert not discarded_masked_fill(cls) and "masked_fill" not in ast.unparse(cls)

    # the contract's rules about the module itself
    problems = contract_problems(solution, hook, names)
    assert ("names" in problems) == (hook in entry.get("renamed", [])), problems
    if hook in entry.get("structure", []):
        assert problems - {"names"}, "flagged structure, but the module keeps every rule checked here"
    elif not ids:
        assert problems <= {"names"}, f"labelled correct, but breaks {problems - {'names'}}"
    if set(ids) & MASK_BUFFER_MISTAKES:
        assert "mask-buffer" in problems
    if "linear-bias-ignores-qkv-bias" in ids:
        assert "bias" in problems
    if "mask-buffer-misnamed" in ids:
        assert "mask-buffer" in problems and misnamed_triangle(solution, hook), "a triangle buffer under another name"
    if "mha-without-out-proj" in ids:
        assert "layout" in problems and not any(p == "out_proj" or "out" in p for p in out_like(solution)), problems
    if not ids:
        module = build(solution, hook, CONFIGS[hook][0]).eval()
        x = randn(_gen(0), *CONFIGS[hook][0].x).float()
        with BannedCalls(BANNED[hook]) as recorder:
            quietly(lambda: module(x))
        assert not recorder.seen, f"the module calls {sorted(recorder.seen)}"

    # d_out % num_heads != 0: ValueError, or the chapter's assert where the entry accepts it
    if hook == MHA:
        error = run(lambda: build(solution, hook, INDIVISIBLE), {}).error
        wanted = AssertionError if ASSERT_ID in flag(entry, "accepted", hook) else ValueError
        assert error is not None and issubclass(error, wanted), f"{error} for d_out % num_heads != 0"


# --- structure the parameter mapping sees (issue 25) -------------------------------------------------------------

STRUCTURE_ONLY = frozenset({"mask-buffer-misnamed"})
"""Structural ids with no effect on the values: proved from the module itself."""
UNLOADABLE_STRUCTURE = frozenset({"mha-per-head-module-list", "fused-qkv-sized-by-d-in"})
"""Structures the contract's weights cannot be mapped onto: proved from the module's layers, and its values from
those layers recombined into the contract's."""
MODULE_MISTAKES["mha-without-out-proj"] = [{"out_proj": False}]
KNOWN_IDS |= STRUCTURE_ONLY | UNLOADABLE_STRUCTURE | {"mha-without-out-proj"}
SQUARE = Config("d_in=d_out", 6, 6, (2, 5, 6), ctx=7, heads=2)


def out_like(solution: Solution) -> list[str]:
    """The learner's parameter names that hold "out" or "proj" on a built multi-head module."""
    module = build(solution, MHA, CONFIGS[MHA][0])
    return [n for n, _ in module.named_parameters() if "out" in n.lower() or "proj" in n.lower()]


def misnamed_triangle(solution: Solution, hook: str) -> bool:
    """A (context_length, context_length) buffer other than ``mask`` holding a triangle of ones."""
    cfg = CONFIGS[hook][0]
    ones = torch.ones(cfg.ctx, cfg.ctx)
    triangles = [ones.tril(), ones.triu(1), ones.tril().bool(), ones.triu(1).bool()]
    return any(
        name != "mask" and any(t.dtype == b.dtype and torch.equal(b, t) for t in triangles)
        for name, b in build(solution, hook, cfg).named_buffers()
    )


def check_unloadable_structure(solution: Solution, source: str, mistake: str) -> None:
    cls = ast.unparse(class_source(source, MHA))
    if mistake == "mha-per-head-module-list":
        assert "ModuleList" in cls
        for i, cfg in enumerate(CONFIGS[MHA]):
            module = build(solution, MHA, cfg, seed=500 + i).double().eval()
            (heads,) = [m for m in module.children() if isinstance(m, nn.ModuleList)]
            hd = cfg.d_out // cfg.heads
            assert len(heads) == cfg.heads and not out_like(solution)
            p = {}
            for role in ROLES[:3]:
                layers = [getattr(h, role) for h in heads]
                assert all(tuple(layer.weight.shape) == (hd, cfg.d_in) for layer in layers)
                bias = torch.cat([layer.bias.detach() for layer in layers]) if cfg.qkv_bias else None
                p[role] = (torch.cat([layer.weight.detach() for layer in layers]), bias)
            x = randn(_gen(600 + i), *cfg.x)
            want = run(lambda x, p=p, cfg=cfg: model_module(x, p, cfg, MHA, {"out_proj": False}), {"x": x}, ours=True)
            assert agree(run(lambda x, m=module: m(x), {"x": x}), want), cfg.name
        return
    assert mistake == "fused-qkv-sized-by-d-in" and "3 *" in cls
    for i, cfg in enumerate([*CONFIGS[MHA], SQUARE]):
        module = build(solution, MHA, cfg, seed=700 + i).double().eval()
        linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
        (fused,) = [m for m in linears if m.out_features == 3 * m.in_features]
        (proj,) = [m for m in linears if m is not fused]
        assert fused.in_features == cfg.d_in and proj.out_features == cfg.d_in
        x = randn(_gen(800 + i), *cfg.x)
        got = run(lambda x, m=module: m(x), {"x": x})
        if cfg.d_in != cfg.d_out:
            assert got.error is not None or got.value.shape[-1] == cfg.d_in != cfg.d_out, cfg.name
            continue
        w, b = fused.weight.detach(), None if fused.bias is None else fused.bias.detach()
        p = {role: (w[j * cfg.d_in : (j + 1) * cfg.d_in], None if b is None else b[j * cfg.d_in : (j + 1) * cfg.d_in])
             for j, role in enumerate(ROLES[:3])}  # fmt: skip
        p["out_proj"] = (proj.weight.detach(), proj.bias.detach())
        assert agree(got, run(lambda x, p=p, cfg=cfg: answer_module(x, p, cfg, MHA), {"x": x}, ours=True)), cfg.name


# --- fused-names (issue 25): the fused qkv layout sized right ------------------------------------------------------

FUSED_SIZED_RIGHT = frozenset({"fused-qkv-projection"})
"""A layout the contract's weights map onto only stacked by rows (one nn.Linear(d_in, 3 * d_out)): right values."""
KNOWN_IDS |= FUSED_SIZED_RIGHT


def check_fused_sized_right(solution: Solution, source: str) -> None:
    """One fused ``nn.Linear(d_in, 3 * d_out)`` and one (d_out, d_out) projection, nothing else; its rows split in
    three as W_query, W_key, W_value give the independent answer, for d_in != d_out too; no ``mask`` rule broken."""
    cls = ast.unparse(class_source(source, MHA))
    assert "3 *" in cls
    for i, cfg in enumerate([*CONFIGS[MHA], SQUARE]):
        module = build(solution, MHA, cfg, seed=900 + i).double().eval()
        linears = [m for m in module.modules() if isinstance(m, nn.Linear)]
        (fused,) = [m for m in linears if (m.in_features, m.out_features) == (cfg.d_in, 3 * cfg.d_out)]
        (proj,) = [m for m in linears if m is not fused]
        assert (proj.in_features, proj.out_features) == (cfg.d_out, cfg.d_out) and proj.bias is not None
        assert (fused.bias is not None) == cfg.qkv_bias, cfg.name
        assert tuple(dict(module.named_buffers())["mask"].shape) == (cfg.ctx, cfg.ctx)
        w, b, d = fused.weight.detach(), None if fused.bias is None else fused.bias.detach(), cfg.d_out
        p = {role: (w[j * d : (j + 1) * d], None if b is None else b[j * d : (j + 1) * d])
             for j, role in enumerate(ROLES[:3])}  # fmt: skip
        p["out_proj"] = (proj.weight.detach(), proj.bias.detach())
        x = randn(_gen(1000 + i), *cfg.x)
        got = run(lambda x, m=module: m(x), {"x": x})
        assert agree(got, run(lambda x, p=p, cfg=cfg: answer_module(x, p, cfg, MHA), {"x": x}, ours=True)), cfg.name
