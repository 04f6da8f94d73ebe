"""The hidden cases: what the grader runs against every submission.

Instructor-only.  This module is their framework (:class:`Case`, :class:`Maker`, :func:`make_cases`); each exercise
group's own cases are built in the module its contract names as ``HIDDEN_CASES`` (:mod:`grader.instructor.groups`:
the chapter's in :mod:`grader.instructor.groups.chapter`).

A case's *shapes* belong to the suite: every size (tokens, widths, heads, context length, dropout p) is a constant of
its group's module or is drawn from a generator seeded with :data:`SHAPES_SEED`, so it is part of the suite's version.
Only *values* come from the run's seed (the input tensors, the seeds the reference's weights are built under, the
generator seeds), so a submission earns the same points under every seed.

Shapes avoid coincidences: the sizes a case speaks of (T, the keys' T, d_k, d_in, d_out, head_dim, num_heads,
context_length, …) are pairwise different and none is 6 (the chapter's token count, which a hard-coded mask would pass),
except the equalities a case needs and declares in ``Case.coincide`` (``"T=context_length"``), as
``tests/test_hidden_cases.py`` checks.  Inputs are made in float64 and cast to each dtype; gold answers come from the
reference, in float64 on the CPU, from the very values each dtype's inputs hold, once per case for the whole class.

A case is one call of one hook.  A module hook's case builds the learner's module with the case's config, loads the
reference's *parameters* into it (never its buffers: the learner's own mask is the learner's work), by name or else by
creation order and shape (:func:`grader.child.modules.map_parameters`), and runs forwards; structural cases check what
behaviour cannot show (the contract's parameter names, the ``mask`` buffer, the creation order under
``torch.manual_seed``).  :func:`build_suite` expands cases over dtypes and devices into :class:`Trial` s (one case on
one device in one dtype), grouped into one batch per hook and device.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from grader.instructor.case_words import case_id
from grader.instructor.messages import MESSAGES
from grader.instructor.said import said
from grader.packs import Group, groups
from grader.rules import figure_labels_problem, token_axes

FLOATS = ("float32", "float64")
HALF = ("float16", "bfloat16")

SHAPES_SEED = 20251203
"""The seed of the generator every drawn size comes from: a constant of the suite (so of its version)."""

CHAPTER_TOKENS = 6
"""The chapter's six tokens: no size is 6 unless a case declares it (a mask of a fixed size 6 passes there)."""


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
    """How to exercise a module hook: build, maybe load the reference's parameters, run forwards.

    ``state_seed``: the reference is built under this seed and its parameters (never its buffers) are sent and loaded
    into the learner's module; ``init_seed``: the learner's module is built under this seed and nothing is loaded.
    ``observable``: the sent parameters are set by :func:`observable_state`, so that the output shows the attention
    weights (the training-mode dropout cases).  The gold answers are always the reference's outputs in eval mode.  No
    ``forwards``: a structural case, judged on the module's facts alone.
    """

    forwards: list[torch.Tensor]
    state_seed: int | None = None
    init_seed: int | None = None
    train: bool = False
    observable: bool = False


Property = Callable[["Trial", list[torch.Tensor], dict[str, Any]], "str | None"]
"""A property of a passing answer beyond its values (exact zeros, a contiguous result, a mask that repeats …):
``(trial, received tensors, the reply's facts) -> what is wrong, or None``."""

Note = Callable[["Trial", dict[str, Any]], "str | None"]
"""Something worth telling the learner that costs no points: ``(trial, the reply) -> the note, or None``."""


@dataclass
class Case:
    hook: str
    name: str
    args: dict[str, Any]
    what: str = ""
    what_zh: str = ""  # the Chinese of ``what``, for a group that brings its own words (the chapter's: case_words)
    dtypes: tuple[str, ...] = FLOATS
    half: bool = False  # also run in float16/bfloat16 (on the CPU and on a GPU)
    meta: bool = False  # also run on the meta device (catches tensors built on the CPU)
    transposed: frozenset[str] = frozenset()  # arguments passed as non-contiguous transposed views
    requires_grad: frozenset[str] = frozenset()  # arguments that require grad in the learner's process
    module: ModuleSpec | None = None
    expect_error: str | None = None  # the exception class (in the raised one's MRO); "Exception": any
    compare_gold: bool = True
    repeat: int = 1
    reseeds: tuple[int, ...] = ()  # then once more per seed, every generator argument seeded with it instead
    properties: tuple[Property, ...] = ()  # judged after the values match; the first problem fails the case
    notes: tuple[Note, ...] = ()  # judged on every case that ran; each note goes with the result, for no points
    coincide: tuple[str, ...] = ()  # the equal sizes this case needs: "T=context_length", "T=6" (see the docstring)
    structural: bool = False  # checks the module's form (names, buffers, creation order), not what it computes
    measure_memory: bool = False  # the child records the peak memory held (the memory rule of a chunked hook)
    measure_held: bool = False  # the grader reads what the kernel says the call's process held (alone in its batch)
    call_factor: int = 1  # the call may take this many times the call limit (a measured or a very large call)


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
    grad_golds: dict[str, torch.Tensor] = field(default_factory=dict)
    """The reference's VJPs in float64 (``grad.<name>``: :func:`grader.child.wire.gradient_keys`), where the call
    asks for a gradient pass; their values are compared only where :attr:`grad_values`, their shapes always."""
    grad_values: bool = False
    grad_atol: float | None = None  # the gradients' absolute tolerance where above the values' (suite._gradient)

    @property
    def hook(self) -> str:
        return self.case.hook


class Maker:
    """Sizes from the suite's own generator (:data:`SHAPES_SEED`), values from the run's seed."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.shapes = torch.Generator().manual_seed(SHAPES_SEED)

    def randn(self, *shape: int, scale: float = 1.0) -> torch.Tensor:
        return torch.randn(*shape, generator=self.gen, dtype=torch.float64) * scale

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen, dtype=torch.float64)

    def size(self, low: int, high: int, avoid: tuple[int, ...] = ()) -> int:
        """An int in ``[low, high]``, never 6 nor one of ``avoid`` (so sizes never coincide), from the suite's sizes."""
        choices = [v for v in range(low, high + 1) if v not in avoid and v != CHAPTER_TOKENS]
        return choices[int(torch.randint(len(choices), (1,), generator=self.shapes))]

    def distinct(self, *ranges: tuple[int, int], avoid: tuple[int, ...] = ()) -> list[int]:
        """:meth:`size` s in the ``(low, high)`` ranges, in order, each unlike ``avoid`` and the ones before it."""
        drawn = list(avoid)
        for low, high in ranges:
            drawn.append(self.size(low, high, avoid=tuple(drawn)))
        return drawn[len(avoid) :]

    def seed(self) -> int:
        return int(torch.randint(2**31 - 1, (1,), generator=self.gen))

    def weights(self, *shape: int) -> torch.Tensor:
        """Row-normalised positive weights, like a softmax output."""
        w = self.rand(*shape) + 0.05
        return w / w.sum(dim=-1, keepdim=True)


def one_hot_tokens(batch: int, tokens: int, d_in: int) -> torch.Tensor:
    """``(batch, tokens, d_in)`` inputs whose token ``t`` is the unit vector ``e_t`` (``d_in > tokens``)."""
    x = torch.zeros(batch, tokens, d_in, dtype=torch.float64)
    x[:, torch.arange(tokens), torch.arange(tokens)] = 1.0
    return x


def observable_state(
    params: dict[str, torch.Tensor], tokens: int, num_heads: int, seed: int
) -> dict[str, torch.Tensor]:
    """The reference's parameters, set so that a forward on :func:`one_hot_tokens` shows its attention weights.

    ``W_query`` and ``W_key`` are drawn from a normal distribution (varied weights, seeded by ``seed``); ``W_value``
    maps token ``j`` to ``e_j`` inside each head's block of ``head_dim`` columns and puts 1 in column ``tokens`` of
    every block, so that column holds the row's sum of weights; ``out_proj`` (where there is one) is the identity with
    zero bias.  Then the output's column ``h * head_dim + j`` is head ``h``'s weight of token ``j`` and column
    ``h * head_dim + tokens`` their sum: dropout on the weights changes both together, dropout on the context (or the
    values) does not.
    """
    gen = torch.Generator().manual_seed(seed)
    out = {name: value.detach().clone().double() for name, value in params.items()}
    d_out, d_in = out["W_value.weight"].shape
    head_dim = d_out // num_heads
    if d_in <= tokens or head_dim <= tokens:
        raise ValueError(f"observable weights need d_in and head_dim above T={tokens}, got {d_in} and {head_dim}")
    for name in ("W_query.weight", "W_key.weight"):
        out[name] = torch.randn(out[name].shape, generator=gen, dtype=torch.float64)
    value = torch.zeros(d_out, d_in, dtype=torch.float64)
    for h in range(num_heads):
        value[h * head_dim + torch.arange(tokens), torch.arange(tokens)] = 1.0
        value[h * head_dim + tokens, :tokens] = 1.0
    out["W_value.weight"] = value
    if "W_value.bias" in out:
        out["W_value.bias"] = torch.zeros_like(out["W_value.bias"])
    if "out_proj.weight" in out:
        out["out_proj.weight"] = torch.eye(d_out, dtype=torch.float64)
        out["out_proj.bias"] = torch.zeros(d_out, dtype=torch.float64)
    return out


def _again(case: Case, m: Maker) -> list[Case]:
    """The same case with fresh values of the same shapes (a submission that caches by shape fails it), or none where
    it has no values to refresh."""
    args = dict(case.args)
    for name, value in case.args.items():
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            if isinstance(value, torch.Tensor) and value.dtype == torch.bool and name == "keep_mask":
                args[name] = m.rand(*value.shape) >= 0.3
            continue
        if torch.isinf(value).any():
            return []
        args[name] = m.weights(*value.shape) if name == "weights" else m.randn(*value.shape)
    spec = case.module
    module = None if spec is None else replace(
        spec, forwards=spec.forwards if spec.observable else [m.randn(*x.shape) for x in spec.forwards],
        state_seed=m.seed() if spec.state_seed is not None else None,
    )  # fmt: skip
    if all(args[k] is case.args[k] for k in args) and module is None:
        return []  # nothing to refresh (e.g. causal_mask takes no tensors)
    what = said("case.again", what=case.what)
    return [replace(case, name=f"{case.name}-again", what=what, args=args, module=module, meta=False)]


def figure_labelled(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """A figure case's property, any group's: the figure's (the first head's) axis labels or tick labels and its
    colorbar, as the hookspec asks for the case's tokens."""
    results = facts.get("results") or [{}]
    figure = dict(results[0].get("figure") or {})
    weights = trial.inputs["weights"]
    return figure_labels_problem(figure, token_axes(trial.case.args.get("tokens"), *weights.shape[-2:]), said)


KEY_WORDS = ("Your", "journey", "starts", "with", "one", "step", "and", "then", "another", "stride", "ahead", "again")
QUERY_WORDS = ("A", "long", "road", "goes", "on", "from", "here", "to", "there", "and", "back", "home")
"""Tokens to label the axes with: the chapter's sentence for keys, other words for queries (so a swap shows)."""


def described(case: Case) -> str:
    """The case's description said by the case's id (``case.<hook>[<name>]``), so a report says it in its language;
    its English as it is where the table of messages has no words for the case.  A case that brings its own
    Chinese (``what_zh``, a group's of :mod:`grader.groups`) adds its words to the table first."""
    key = case_id(case.hook, case.name)
    if case.what_zh and key not in MESSAGES:
        MESSAGES[key] = {"en": "{what}", "zh": case.what_zh}
    return said(key, what=case.what) if key in MESSAGES else case.what


def _group_cases(group: Group, seed: int) -> dict[str, list[Case]]:
    """One group's cases for ``seed``, drawn from a :class:`Maker` of its own, each hook's main case once more."""
    hooks = [r.hook for r in group.rows]
    m = Maker(seed)
    by_hook = importlib.import_module(str(group.part("HIDDEN_CASES"))).hidden_cases(m)
    if list(by_hook) != hooks:
        raise RuntimeError(
            f"exercise group {group.name}: the hidden cases are for {list(by_hook)}, its rows declare {hooks}: "
            "every hook needs hidden cases, in the rows' order"
        )
    for case in (case for hook in hooks for case in by_hook[hook]):
        case.what = described(case)
    for hook in hooks:  # each hook's main case once more, fresh values, same shapes
        main = next((c for c in by_hook[hook] if c.meta), by_hook[hook][0])  # a figure has no meta case
        by_hook[hook] += _again(main, m)
    return by_hook


def make_cases(seed: int) -> list[Case]:
    """Every hidden case for ``seed``, group by group in hook order: the same shapes for every seed, the seed's
    values; each group draws from its own :class:`Maker`, so another group never changes a group's cases."""
    missing = [g.name for g in groups() if g.part("HIDDEN_CASES") is None]
    if missing:
        raise RuntimeError(f"exercise groups without hidden cases (HIDDEN_CASES): {', '.join(missing)}")
    return [case for group in groups() for cases in _group_cases(group, seed).values() for case in cases]
