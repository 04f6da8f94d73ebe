"""The hidden cases: what the grader runs against every submission.

Instructor-only.  Every case is built from the run's seed, so a run can be
reproduced exactly, and shapes avoid coincidences (heads != tokens !=
head_dim, d_in != d_out, T < context_length, no powers of two where it
matters).  Inputs are made in float64 and cast to each dtype; gold answers
come from the reference, in float64 on the CPU, from the very values each
dtype's inputs hold, once per case for the whole class.

A case is one call of one hook (a module hook: build, load the reference's
``state_dict``, run forwards).  :func:`build_suite` expands cases over dtypes
and devices into :class:`Trial` s (one case on one device in one dtype), grouped into one batch per hook and device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from grader.registry import HOOK_NAMES

FLOATS = ("float32", "float64")
HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class GeneratorSeed:
    """An argument that becomes ``torch.Generator(device).manual_seed(seed)`` in the learner's process."""

    seed: int


class _Device:
    """An argument that becomes the device the case runs on."""

    def __repr__(self) -> str:
        return "DEVICE"


DEVICE = _Device()


@dataclass
class ModuleSpec:
    """How to exercise a module hook: build, maybe load the reference's weights, run forwards."""

    forwards: list[torch.Tensor]
    state_seed: int | None = None  # build the reference under this seed and send its state_dict
    init_seed: int | None = None  # build the learner's module under this seed, load nothing
    train: bool = False


Property = Callable[["Trial", list[torch.Tensor], dict[str, Any]], "str | None"]
"""A property of a passing answer beyond its values (exact zeros, a contiguous result, a mask that repeats …):
``(trial, received tensors, the reply's facts) -> what is wrong, or None``."""


@dataclass
class Case:
    hook: str
    name: str
    args: dict[str, Any]
    what: str = ""
    dtypes: tuple[str, ...] = FLOATS
    half: bool = False  # also run in float16/bfloat16 on a GPU
    meta: bool = False  # also run on the meta device (catches tensors built on the CPU)
    transposed: frozenset[str] = frozenset()  # arguments passed as non-contiguous transposed views
    module: ModuleSpec | None = None
    expect_error: str | None = None
    compare_gold: bool = True
    repeat: int = 1
    reseeds: tuple[int, ...] = ()  # then once more per seed, every generator argument seeded with it instead
    properties: tuple[Property, ...] = ()  # judged after the values match; the first problem fails the case


@dataclass
class Trial:
    """One case on one device in one dtype: the wire call, its tensors and its gold answers."""

    case: Case
    device: str
    dtype: str
    call: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    golds: list[torch.Tensor] = field(default_factory=list)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # float64 copies, for --reveal and the properties

    @property
    def hook(self) -> str:
        return self.case.hook


# --- building inputs -----------------------------------------------------------------


class Maker:
    """Random inputs and shapes from one generator: the run's seed decides everything."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen, dtype=torch.float64) * scale

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen, dtype=torch.float64)

    def size(self, low: int, high: int, avoid: tuple[int, ...] = ()) -> int:
        """An int in ``[low, high]`` not in ``avoid`` (so sizes never coincide)."""
        choices = [v for v in range(low, high + 1) if v not in avoid]
        return choices[int(torch.randint(len(choices), (1,), generator=self.gen))]

    def seed(self) -> int:
        return int(torch.randint(2**31 - 1, (1,), generator=self.gen))

    def weights(self, *shape: int) -> torch.Tensor:
        """Row-normalised positive weights, like a softmax output."""
        w = self.rand(*shape) + 0.05
        return w / w.sum(dim=-1, keepdim=True)


# --- properties beyond the gold comparison---------------------------------------------------


def _exact_zeros_where_masked(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    scores = trial.inputs["scores"]
    out = outputs[0]
    masked = torch.isneginf(scores)
    if masked.any() and bool((out[masked] != 0).any()):
        return "-inf scores must give exactly 0 weight, got small non-zero values"
    return None


def _dropout_values(p: float) -> Property:
    """Every output is a dropout of the weights; the same generator state repeats it, another one does not.

    ``outputs`` are, in order: the call, the call again from the same generator
    state, then one call per other seed (``Case.reseeds``).  The dtype and shape
    were checked from the bytes before this runs.
    """

    def holds(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
        w = trial.inputs["weights"]
        keep = 1.0 - p
        rtol, atol = (1e-2, 1e-2) if trial.dtype in HALF else (1e-5, 1e-6)
        bound = 5 * math.sqrt(keep * (1 - keep) / w.numel())
        for out in outputs:
            got = out.to(torch.float64)
            kept = got != 0
            if not torch.allclose(got[kept], (w / keep)[kept], rtol=rtol, atol=atol):
                ratio = (got[kept] / w[kept]).median().item() if kept.any() else float("nan")
                return f"kept entries must be w/(1-p) = w*{1 / keep:.4g} for p={p}, got about w*{ratio:.4g}"
            fraction = kept.double().mean().item()
            if abs(fraction - keep) > bound:
                return f"kept {fraction:.3f} of the entries; with p={p} expect {keep:.3f} ± {bound:.3f} (keep with 1-p)"
        if len(outputs) > 1 and not torch.equal(outputs[0], outputs[1]):
            return "two calls with the same generator state gave different masks: draw from `generator`"
        if any(torch.equal(outputs[0], other) for other in outputs[2:]):
            return "a generator seeded differently gave the same mask: draw the mask from `generator`, not a fixed one"
        return None

    return holds


def _contiguous(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    if facts.get("results") and not facts["results"][0].get("contiguous", True):
        return "merge_heads must return a contiguous tensor (call .contiguous() before .view)"
    return None


def _state_dict_like_chapter(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    module = facts.get("module") or {}
    problems = []
    if "mask" not in module.get("state_dict_keys", ["mask"]) and trial.hook != "make_self_attention":
        problems.append("the mask is not in state_dict: hold it with self.register_buffer('mask', ...)")
    if module.get("missing_keys"):
        problems.append(f"missing from your module: {', '.join(module['missing_keys'])}")
    unexpected = [k for k in module.get("unexpected_keys", []) if k != "mask"]
    if unexpected:
        problems.append(f"your module has no {', '.join(unexpected)}")
    return "; ".join(problems) or None


def _causal_prefix(t: int) -> Property:
    def holds(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
        if len(outputs) == 2 and not torch.allclose(outputs[0][:, :t], outputs[1][:, :t], rtol=1e-4, atol=1e-5):
            return f"changing token {t} changed the outputs before it: the future leaks through the mask"
        return None

    return holds


# --- the cases, hook by hook -------------------------------------------------------------------


def _score_cases(hook: str, m: Maker) -> list[Case]:
    cases = []
    tq, tk, d = m.size(3, 9), m.size(3, 9), m.size(3, 9)
    tk = m.size(3, 11, avoid=(tq, d))
    cases.append(Case(hook, "2d-Tq!=Tk", {"queries": m.randn(tq, d), "keys": m.randn(tk, d)}, "2-D, Tq != Tk"))
    b, t, d = m.size(2, 4), m.size(4, 9), m.size(3, 11)
    cases.append(
        Case(
            hook,
            "3d-batched",
            {"queries": m.randn(b, t, d), "keys": m.randn(b, t, d)},
            "batched 3-D",
            meta=True,
            half=True,
        )
    )
    b, h, tq, tk, d = m.size(2, 3), m.size(2, 5), m.size(3, 7), m.size(3, 7), m.size(3, 9)
    cases.append(
        Case(hook, "4d-heads", {"queries": m.randn(b, h, tq, d), "keys": m.randn(b, h, tk, d)}, "4-D heads", half=True)
    )
    cases.append(Case(hook, "T=1", {"queries": m.randn(2, 1, 5), "keys": m.randn(2, 1, 5)}, "a single token"))
    cases.append(Case(hook, "Tq=1", {"queries": m.randn(3, 1, 6), "keys": m.randn(3, 7, 6)}, "one query, many keys"))
    cases.append(Case(hook, "d=1", {"queries": m.randn(2, 5, 1), "keys": m.randn(2, 3, 1)}, "d_k = 1"))
    b, t, d = m.size(2, 3), m.size(4, 7), m.size(3, 9)
    cases.append(
        Case(
            hook,
            "non-contiguous",
            {"queries": m.randn(b, t, d), "keys": m.randn(b, t + 1, d)},
            "non-contiguous (transposed view) inputs",
            transposed=frozenset({"queries", "keys"}),
        )
    )
    for trial in range(3):
        rank = m.size(2, 4)
        lead = [m.size(1, 3) for _ in range(rank - 2)]
        tq, tk, d = m.size(1, 12), m.size(1, 12), m.size(1, 13)
        cases.append(
            Case(
                hook,
                f"random-{trial}",
                {"queries": m.randn(*lead, tq, d), "keys": m.randn(*lead, tk, d)},
                f"random {rank}-D shape",
            )
        )
    return cases


def _softmax_cases(m: Maker) -> list[Case]:
    hook = "softmax_weights"
    b, t = m.size(2, 4), m.size(5, 9)
    neg_inf = float("-inf")
    scores = m.randn(b, t, t)
    masked = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), neg_inf)
    fully = m.randn(3, 6)
    fully[1] = neg_inf
    exact = (_exact_zeros_where_masked,)
    return [
        Case(hook, "2d-rows", {"scores": m.randn(m.size(3, 7), m.size(4, 9)), "dim": -1}, "2-D, last dim", half=True),
        Case(
            hook, "3d-batched", {"scores": m.randn(b, t, t + 2), "dim": -1}, "batched 3-D, dim=-1", meta=True, half=True
        ),
        Case(hook, "dim=0", {"scores": m.randn(m.size(3, 6), m.size(2, 5), 4), "dim": 0}, "positive dim=0"),
        Case(hook, "dim=1", {"scores": m.randn(2, m.size(3, 6), 5), "dim": 1}, "positive dim=1 on 3-D"),
        Case(hook, "dim=-2", {"scores": m.randn(3, 4, m.size(5, 8)), "dim": -2}, "negative dim=-2"),
        Case(hook, "4d", {"scores": m.randn(2, 3, 5, 7), "dim": -1}, "4-D heads"),
        Case(hook, "large-logits", {"scores": m.randn(b, t, t, scale=1e4), "dim": -1}, "logits around ±1e4"),
        Case(
            hook, "masked", {"scores": masked, "dim": -1}, "-inf entries (a causal mask)", properties=exact, half=True
        ),
        Case(hook, "all-masked-row", {"scores": fully, "dim": -1}, "a row that is all -inf", properties=exact),
    ] + [
        Case(
            hook,
            f"random-{i}",
            {"scores": m.randn(m.size(1, 4), m.size(1, 9), m.size(1, 9), scale=3.0), "dim": -1},
            "random 3-D",
        )
        for i in range(2)
    ]


def _context_cases(m: Maker) -> list[Case]:
    hook = "context_vectors"
    cases = []
    t, dv = m.size(3, 7), m.size(3, 11)
    dv = m.size(3, 11, avoid=(t,))
    cases.append(Case(hook, "2d", {"weights": m.weights(t, t), "values": m.randn(t, dv)}, "2-D, dv != T"))
    b, tq, tk = m.size(2, 4), m.size(3, 8), m.size(3, 8)
    dv = m.size(2, 9, avoid=(tk,))
    cases.append(
        Case(
            hook,
            "3d-batched",
            {"weights": m.weights(b, tq, tk), "values": m.randn(b, tk, dv)},
            "batched, Tq != Tk",
            meta=True,
            half=True,
        )
    )
    cases.append(
        Case(hook, "4d", {"weights": m.weights(2, 3, 5, 5), "values": m.randn(2, 3, 5, 4)}, "4-D heads", half=True)
    )
    cases.append(Case(hook, "T=1", {"weights": m.weights(2, 1, 1), "values": m.randn(2, 1, 3)}, "a single token"))
    for i in range(2):
        tq, tk, dv = m.size(1, 9), m.size(1, 9), m.size(1, 9)
        cases.append(
            Case(hook, f"random-{i}", {"weights": m.weights(3, tq, tk), "values": m.randn(3, tk, dv)}, "random shapes")
        )
    return cases


def _mask_cases(m: Maker) -> list[Case]:
    hook = "causal_mask"
    cases = [
        Case(hook, f"T={t}", {"num_tokens": t, "device": DEVICE}, f"T = {t}", dtypes=("bool",), meta=(t == 5))
        for t in (1, 2, 5, m.size(7, 13, avoid=(8,)))
    ]
    cases += [
        Case(
            hook,
            f"T={t}-raises",
            {"num_tokens": t, "device": DEVICE},
            f"num_tokens = {t} raises ValueError",
            dtypes=("bool",),
            expect_error="ValueError",
        )
        for t in (0, -3)
    ]
    return cases


def _apply_mask_cases(m: Maker) -> list[Case]:
    hook = "apply_causal_mask"
    t = m.size(3, 9, avoid=(6,))
    cases = [
        Case(hook, "2d", {"scores": m.randn(t, t)}, f"2-D, T = {t}", half=True),
        Case(hook, "3d-batched", {"scores": m.randn(2, t + 1, t + 1)}, "batched 3-D", meta=True, half=True),
        Case(hook, "4d-heads", {"scores": m.randn(2, 3, 5, 5)}, "4-D heads"),
        Case(hook, "T=1", {"scores": m.randn(3, 1, 1)}, "a single token"),
        Case(hook, "T=11", {"scores": m.randn(2, 11, 11)}, "T larger than the chapter's 6"),
        Case(
            hook,
            "non-square-raises",
            {"scores": m.randn(2, 4, 5)},
            "(…, 4, 5) scores raise ValueError",
            expect_error="ValueError",
        ),
    ]
    cases += [
        Case(hook, f"random-{i}", {"scores": m.randn(m.size(1, 3), tt, tt)}, "random T")
        for i, tt in enumerate((m.size(2, 13), m.size(2, 13)))
    ]
    return cases


def _renormalize_cases(m: Maker) -> list[Case]:
    hook = "renormalize_masked_weights"
    t = m.size(4, 9, avoid=(6,))
    return [
        Case(hook, "2d", {"weights": m.weights(t, t)}, f"2-D, T = {t}", half=True),
        Case(hook, "3d-batched", {"weights": m.weights(3, t + 2, t + 2)}, "batched", meta=True),
        Case(hook, "4d-heads", {"weights": m.weights(2, 3, 5, 5)}, "4-D heads"),
        Case(hook, "T=1", {"weights": m.weights(2, 1, 1)}, "a single token"),
    ] + [
        Case(hook, f"random-{i}", {"weights": m.weights(2, tt, tt)}, "random T")
        for i, tt in enumerate((m.size(2, 12), m.size(2, 12)))
    ]


def _dropout_scale_cases(m: Maker) -> list[Case]:
    hook = "dropout_scale"

    def keep(*shape: int) -> torch.Tensor:
        return m.rand(*shape) >= 0.3

    cases = [
        Case(
            hook,
            f"p={p}",
            {"weights": m.weights(3, 5, 5), "keep_mask": keep(3, 5, 5), "p": p},
            f"p = {p}",
            meta=(p == 0.1),
            half=True,
        )
        for p in (0.1, 0.5, 0.0)
    ]
    cases.append(
        Case(
            hook,
            "p=1",
            {"weights": m.weights(2, 4, 4), "keep_mask": keep(2, 4, 4), "p": 1.0},
            "p = 1 gives zeros, never inf or NaN",
        )
    )
    cases.append(
        Case(
            hook,
            "float-keep-mask",
            {"weights": m.weights(4, 6), "keep_mask": keep(4, 6).double(), "p": 0.25},
            "a 0/1 float keep mask",
        )
    )
    cases += [
        Case(
            hook,
            f"p={p}-raises",
            {"weights": m.weights(2, 3), "keep_mask": keep(2, 3), "p": p},
            f"p = {p} raises ValueError",
            expect_error="ValueError",
        )
        for p in (-0.1, 1.5)
    ]
    return cases


def _attention_dropout_cases(m: Maker) -> list[Case]:
    hook = "attention_dropout"
    cases = [
        Case(
            hook,
            "eval",
            {"weights": m.weights(3, 6, 6), "p": 0.3, "training": False, "generator": None},
            "eval: dropout is off",
            meta=True,
        ),
        Case(
            hook,
            "p=0",
            {"weights": m.weights(2, 5, 5), "p": 0.0, "training": True, "generator": None},
            "p = 0 keeps everything",
        ),
        Case(
            hook,
            "p=1",
            {"weights": m.weights(2, 5, 5), "p": 1.0, "training": True, "generator": None},
            "p = 1 drops everything",
        ),
    ]
    for p, shape in ((0.2, (4, 40, 40)), (0.5, (2, 3, 30, 30))):
        seed = m.seed()
        cases.append(
            Case(
                hook,
                f"train-p={p}",
                {"weights": m.weights(*shape), "p": p, "training": True, "generator": GeneratorSeed(seed)},
                f"training with p = {p}, twice from the same generator state and once from another",
                compare_gold=False,
                repeat=2,
                reseeds=((seed + 1) % (2**31 - 1),),  # not drawn from `m`: the other cases' inputs stay as they were
                properties=(_dropout_values(p),),
                half=True,
            )
        )
    return cases


def _split_cases(m: Maker) -> list[Case]:
    hook = "split_heads"
    h, t, hd = 3, 5, 4  # heads != tokens != head_dim
    cases = [
        Case(
            hook,
            "H3-T5-hd4",
            {"x": m.randn(2, t, h * hd), "num_heads": h},
            "3 heads, 5 tokens, head_dim 4",
            meta=True,
            half=True,
        ),
        Case(hook, "H1", {"x": m.randn(2, 4, 6), "num_heads": 1}, "one head"),
        Case(hook, "hd1", {"x": m.randn(1, 3, 5), "num_heads": 5}, "head_dim 1"),
        Case(
            hook,
            "non-contiguous",
            {"x": m.randn(2, 7, 10), "num_heads": 2},
            "non-contiguous input",
            transposed=frozenset({"x"}),
        ),
        Case(
            hook,
            "indivisible-raises",
            {"x": m.randn(2, 3, 10), "num_heads": 4},
            "d % H != 0 raises ValueError",
            expect_error="ValueError",
        ),
    ]
    for i in range(2):
        h = m.size(2, 5)
        hd = m.size(2, 6, avoid=(h,))
        t = m.size(2, 9, avoid=(h, hd))
        cases.append(Case(hook, f"random-{i}", {"x": m.randn(m.size(1, 3), t, h * hd), "num_heads": h}, "random"))
    return cases


def _merge_cases(m: Maker) -> list[Case]:
    hook = "merge_heads"
    contiguous = (_contiguous,)
    cases = [
        Case(
            hook,
            "H3-T5-hd4",
            {"x": m.randn(2, 3, 5, 4)},
            "3 heads, 5 tokens, head_dim 4",
            meta=True,
            properties=contiguous,
            half=True,
        ),
        Case(hook, "H1", {"x": m.randn(2, 1, 4, 6)}, "one head", properties=contiguous),
        Case(
            hook,
            "non-contiguous",
            {"x": m.randn(2, 3, 6, 5)},
            "non-contiguous input",
            transposed=frozenset({"x"}),
            properties=contiguous,
        ),
    ]
    for i in range(2):
        h = m.size(2, 5)
        hd = m.size(2, 6, avoid=(h,))
        t = m.size(2, 9, avoid=(h, hd))
        cases.append(Case(hook, f"random-{i}", {"x": m.randn(2, h, t, hd)}, "random", properties=contiguous))
    return cases


def _module_cases(hook: str, m: Maker) -> list[Case]:
    causal = hook != "make_self_attention"
    heads = hook == "make_multihead_attention"
    like_chapter = (_state_dict_like_chapter,)

    def config(d_in: int, d_out: int, ctx: int, dropout: float = 0.0, h: int = 1, bias: bool = False) -> dict:
        args: dict[str, Any] = {"d_in": d_in, "d_out": d_out}
        if causal:
            args.update(context_length=ctx, dropout=dropout)
        if heads:
            args["num_heads"] = h
        args["qkv_bias"] = bias
        return args

    d_in, h, hd = 5, 3, 4  # d_in != d_out, heads != tokens != head_dim
    d_out = h * hd
    ctx, t = 11, 7  # T < context_length
    cases = [
        Case(
            hook,
            "state-dict",
            config(d_in, d_out, ctx, h=h),
            f"d_in={d_in}, d_out={d_out}, T={t} < context {ctx}",
            module=ModuleSpec([m.randn(2, t, d_in)], state_seed=m.seed()),
            meta=True,
            properties=like_chapter,
        ),
        Case(
            hook,
            "qkv-bias",
            config(4, 6, 9, h=2, bias=True),
            "qkv_bias=True",
            module=ModuleSpec([m.randn(3, 5, 4)], state_seed=m.seed()),
            properties=like_chapter,
        ),
        Case(
            hook,
            "init-seed",
            config(3, 2 if not heads else 4, 6, h=2),
            "built under torch.manual_seed, as the chapter does: W_query, W_key, W_value (then out_proj) in that order",
            module=ModuleSpec([m.randn(2, 6, 3)], init_seed=m.seed()),
        ),
        Case(
            hook,
            "T=context",
            config(4, 6, 8, h=3),
            "T equal to context_length",
            module=ModuleSpec([m.randn(2, 8, 4)], state_seed=m.seed()),
        ),
    ]
    if not causal:
        cases.append(
            Case(
                hook,
                "unbatched",
                config(6, 4, 0),
                "unbatched (T, d_in) input",
                module=ModuleSpec([m.randn(5, 6)], state_seed=m.seed()),
            )
        )
    if causal:
        x = m.randn(2, 9, 5)
        changed = x.clone()
        t_change = 4
        changed[:, t_change:] = m.randn(2, 9 - t_change, 5)
        cases.append(
            Case(
                hook,
                "causality",
                config(5, 6, 10, h=2),
                f"changing token {t_change} leaves earlier outputs alone",
                module=ModuleSpec([x, changed], state_seed=m.seed()),
                properties=(_causal_prefix(t_change),),
            )
        )
        x = m.randn(2, 6, 5)
        cases.append(
            Case(
                hook,
                "eval-dropout",
                config(5, 6, 8, dropout=0.5, h=3),
                "eval with dropout=0.5 is deterministic",
                module=ModuleSpec([x, x], state_seed=m.seed()),
            )
        )
    if heads:
        cases.append(
            Case(
                hook,
                "one-head",
                config(4, 5, 7, h=1),
                "num_heads = 1",
                module=ModuleSpec([m.randn(2, 6, 4)], state_seed=m.seed()),
            )
        )
        cases.append(
            Case(
                hook,
                "indivisible-raises",
                config(4, 10, 7, h=4),
                "d_out % num_heads != 0 raises ValueError",
                module=ModuleSpec([m.randn(1, 3, 4)]),
                expect_error="ValueError",
            )
        )
    for i in range(2):
        hh = m.size(2, 4)
        dd = hh * m.size(2, 5, avoid=(hh,))
        din = m.size(2, 9, avoid=(dd,))
        tt = m.size(2, 8, avoid=(hh,))
        cases.append(
            Case(
                hook,
                f"random-{i}",
                config(din, dd, tt + m.size(0, 3), h=hh),
                "random sizes",
                module=ModuleSpec([m.randn(m.size(1, 3), tt, din)], state_seed=m.seed()),
            )
        )
    return cases


def _again(case: Case, m: Maker) -> Case | None:
    """The same case with fresh values of the same shapes: a submission that caches by shape fails it."""
    args = dict(case.args)
    for name, value in case.args.items():
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            if isinstance(value, torch.Tensor) and value.dtype == torch.bool and name == "keep_mask":
                args[name] = m.rand(*value.shape) >= 0.3
            continue
        if torch.isinf(value).any():
            return None
        args[name] = m.weights(*value.shape) if name == "weights" else m.randn(*value.shape)
    module = None
    if case.module is not None:
        module = ModuleSpec(
            [m.randn(*x.shape) for x in case.module.forwards],
            state_seed=m.seed() if case.module.state_seed is not None else None,
            init_seed=case.module.init_seed,
            train=case.module.train,
        )
    if all(args[k] is case.args[k] for k in args) and module is None:
        return None  # nothing to refresh (e.g. causal_mask takes no tensors)
    return replace(
        case,
        name=f"{case.name}-again",
        what=f"{case.what}, again with fresh values of the same shapes",
        args=args,
        module=module,
        meta=False,
    )


def cases_by_hook(m: Maker) -> dict[str, list[Case]]:
    """Each hook's own cases, drawn from ``m`` in this order (:func:`make_cases` checks and completes them)."""
    return {
        "dot_product_scores": _score_cases("dot_product_scores", m),
        "scaled_dot_product_scores": _score_cases("scaled_dot_product_scores", m),
        "softmax_weights": _softmax_cases(m),
        "context_vectors": _context_cases(m),
        "causal_mask": _mask_cases(m),
        "apply_causal_mask": _apply_mask_cases(m),
        "renormalize_masked_weights": _renormalize_cases(m),
        "dropout_scale": _dropout_scale_cases(m),
        "attention_dropout": _attention_dropout_cases(m),
        "split_heads": _split_cases(m),
        "merge_heads": _merge_cases(m),
        "make_self_attention": _module_cases("make_self_attention", m),
        "make_causal_attention": _module_cases("make_causal_attention", m),
        "make_multihead_attention": _module_cases("make_multihead_attention", m),
    }


def make_cases(seed: int) -> list[Case]:
    """Every hidden case for ``seed``, in hookspec order."""
    m = Maker(seed)
    by_hook = cases_by_hook(m)
    if list(by_hook) != list(HOOK_NAMES):
        raise RuntimeError(
            f"the hidden cases are for {list(by_hook)}, the hookspecs declare {list(HOOK_NAMES)}: "
            "every hook needs hidden cases, in hookspec order"
        )
    for hook in HOOK_NAMES:  # each hook's main case once more, fresh values, same shapes
        main = next(c for c in by_hook[hook] if c.meta)
        again = _again(main, m)
        if again is not None:
            by_hook[hook].append(again)
    return [case for hook in HOOK_NAMES for case in by_hook[hook]]
