"""The hidden cases: what the grader runs against every submission.

Instructor-only.  A case's *shapes* belong to the suite: every size (tokens, widths, heads, context length, dropout p)
is a constant here or is drawn from a generator seeded with :data:`SHAPES_SEED`, so it is part of the suite's version.
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
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from grader.child.modules import map_parameters
from grader.instructor.case_words import case_id
from grader.instructor.held_memory import held_problem
from grader.instructor.messages import MESSAGES
from grader.instructor.said import said
from grader.instructor.verdict import contract_parameters
from grader.packs import Group, groups
from grader.rules import (
    MEASURED_CALL_FACTOR,
    MemoryRule,
    contiguous_message,
    figure_labels_problem,
    memory_bound,
    memory_problem,
    token_axes,
)

FLOATS = ("float32", "float64")
HALF = ("float16", "bfloat16")

SHAPES_SEED = 20251203
"""The seed of the generator every drawn size comes from: a constant of the suite (so of its version)."""

CHAPTER_TOKENS = 6
"""The chapter's six tokens: no size is 6 unless a case declares it (a mask of a fixed size 6 passes there)."""

CONTRACT_BUFFERS: dict[str, tuple[str, ...]] = {
    "make_self_attention": (),
    "make_causal_attention": ("mask",),
    "make_multihead_attention": ("mask",),
}
"""The buffers the contract's modules hold; any other buffer of a learner's module is noted, never failed."""


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


def _exact_zeros_where_masked(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    masked = torch.isneginf(trial.inputs["scores"])
    return said("exact_zeros") if masked.any() and bool((outputs[0][masked] != 0).any()) else None


def _dropout_values(p: float) -> Property:
    """Every output is a dropout of the weights; the same generator state repeats it, another one does not.

    ``outputs`` are, in order: the call, the call again from the same generator state, then one call per other seed
    (``Case.reseeds``).  The dtype and shape were checked from the bytes before this runs.
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
                return said("dropout.scale", scale=f"{1 / keep:.4g}", p=str(p), ratio=f"{ratio:.4g}")
            fraction = kept.double().mean().item()
            if abs(fraction - keep) > bound:
                shown = {"fraction": f"{fraction:.3f}", "keep": f"{keep:.3f}", "bound": f"{bound:.3f}"}
                return said("dropout.fraction", p=str(p), **shown)
        if len(outputs) > 1 and not torch.equal(outputs[0], outputs[1]):
            return said("dropout.same_state")
        if any(torch.equal(outputs[0], other) for other in outputs[2:]):
            return said("dropout.other_seed")
        return None

    return holds


def _contiguous(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    contiguous = not facts.get("results") or facts["results"][0].get("contiguous", True)
    return None if contiguous else contiguous_message(trial.hook, said)


def _causal_prefix(t: int) -> Property:
    def holds(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
        changed = len(outputs) == 2 and not torch.allclose(outputs[0][:, :t], outputs[1][:, :t], rtol=1e-4, atol=1e-5)
        return said("causal_prefix", t=t) if changed else None

    return holds


def memory_rule(case: Case, itemsize: int) -> MemoryRule | None:
    """The memory rule of a chunked case given in a dtype of ``itemsize`` bytes (:func:`grader.rules.memory_bound`)."""
    args = case.args
    q, k, v = (tuple(args[name].shape) for name in ("queries", "keys", "values"))
    return memory_bound(q, k, v, args["chunk_size"], itemsize, args.get("causal") is True)


def _trial_rule(trial: Trial) -> tuple[MemoryRule, int]:
    """The memory rule of a measured trial and the byte size of its dtype's elements."""
    itemsize = torch.empty((), dtype=getattr(torch, trial.dtype)).element_size()
    rule = memory_rule(trial.case, itemsize)
    if rule is None:
        raise ValueError(f"{trial.hook}[{trial.case.name}]: its shapes cannot tell a chunked version apart")
    return rule, itemsize


def _bounded_memory(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The call never held as many elements at once as one batch-head's whole ``(Tq, Tk)`` scores, nor as many bytes
    in the trial's dtype, and took no values out of torch (:func:`grader.rules.memory_bound`,
    :func:`grader.rules.memory_problem`, the allocators' records among them; the child measures, in the calling
    thread: a call may start no other)."""
    rule, itemsize = _trial_rule(trial)
    memory = facts.get("memory")
    if not memory or memory.get("peak_elements") is None:
        return said("memory.unmeasured")
    return memory_problem(memory, rule, itemsize, said)


def _held_below(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The kernel's record of the call's process, read by the grader from outside it, shows no room for one
    batch-head's kept scores (:func:`grader.instructor.held_memory.held_problem`; where the grader could not read
    it, not Linux, it says nothing)."""
    rule, itemsize = _trial_rule(trial)
    return held_problem(facts["held"], rule, itemsize) if facts.get("held") is not None else None


def _zero_rows(rows: slice) -> Property:
    """The query rows ``rows`` see no key at all (causal, Tq > Tk): they must be exactly 0, never NaN."""

    def holds(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
        return said("zero_rows") if outputs and bool((outputs[0][..., rows, :] != 0).any()) else None

    return holds


def _learner_parameters(facts: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    module = facts.get("module") or {}
    return [(p["name"], tuple(p["shape"])) for p in module.get("parameters", [])]


def _named_like_contract(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The "names" case: the reference's parameters load into the learner's module by name."""
    how, pairs = map_parameters(_learner_parameters(facts), contract_parameters(trial))
    if how == "name":
        return None
    renamed = ", ".join(f"{mine} → {theirs}" + (f" ({layout})" if layout else "") for mine, theirs, layout in pairs)
    return said("names", renamed=renamed, how=said("names.role" if how == "role" else "names.order"))


def _mask_is_a_buffer(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The "mask-buffer" case: the causal mask is a buffer named ``mask``, saved in state_dict, moved by .to()."""
    module = facts.get("module") or {}
    buffers = module.get("buffers", [])
    if "mask" not in buffers:
        found = said("mask_buffer.found", buffers=", ".join(buffers)) if buffers else ""
        return said("mask_buffer.missing", found=found)
    if "mask" not in module.get("state_dict_keys", []):
        return said("mask_buffer.not_saved")
    where = str(module.get("mask_device") or trial.device).split(":")[0]
    return said("mask_buffer.device", where=where, device=trial.device) if where != trial.device else None


def _extras_noted(trial: Trial, reply: dict[str, Any]) -> str | None:
    """Parameters and buffers the contract's module does not have: a note, never a failure."""
    module = reply.get("module") or {}
    how, pairs = map_parameters(_learner_parameters(reply), contract_parameters(trial))
    loaded = {mine for mine, _, _ in pairs}
    # each shape as torch writes one: (12, 5), (12,), ()
    extra = [f"{name} {tuple(map(int, shape))}" for name, shape in _learner_parameters(reply) if name not in loaded]
    wanted = CONTRACT_BUFFERS.get(trial.hook, ())
    buffers = [b for b in module.get("buffers", []) if b not in wanted]
    if any(name not in module.get("buffers", []) for name in wanted):
        buffers = []  # not extras: the mask-buffer case names them where it asks for the contract's buffer
    parts = []
    if extra and how != "none":
        parts.append(said("extras.parameters" if len(extra) > 1 else "extras.parameter", names=", ".join(extra)))
    if buffers:
        parts.append(said("extras.buffers" if len(buffers) > 1 else "extras.buffer", names=", ".join(buffers)))
    if len(parts) == 2:
        return said("extras.both", first=parts[0], then=parts[1])
    return said("extras.one", first=parts[0]) if parts else None


def _prefer(error: str, why: str) -> Note:
    """A note where the raised exception is accepted but ``error`` is the better choice (``why``: an id of
    :data:`~grader.instructor.messages.MESSAGES`)."""

    def note(trial: Trial, reply: dict[str, Any]) -> str | None:
        raised = reply.get("error") or {}
        if raised and error not in raised.get("mro", []):
            kind = str(raised["type"]) if "type" in raised else said("an_exception")
            return said("prefer", kind=kind, why=said(why))
        return None

    return note


def reads_as_weights(output: torch.Tensor, num_heads: int, dtype: str) -> bool:
    """Whether a module's ``(b, T, d_out)`` output on :func:`observable_state` reads as causal attention weights
    (non-negative, nothing on the future, the sum column their sum).

    The training cases judge a dropout against the module's own eval-mode weights where this holds
    (:func:`_drops_attention_weights`); the diagnosis asks the same of its model.
    """
    b, t, d = output.shape
    heads = output.double().reshape(b, t, num_heads, d // num_heads).transpose(1, 2)  # (b, H, T, head_dim)
    rtol, atol = (1e-4, 1e-6) if dtype == "float32" else (1e-7, 1e-9)
    w, sums = heads[..., :t], heads[..., t]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    return (
        bool((w >= -atol).all())
        and bool((w[..., future].abs() <= atol).all())
        and bool(torch.allclose(sums, w.sum(dim=-1), rtol=rtol, atol=atol))
    )


def _drops_attention_weights(p: float, tokens: int, num_heads: int) -> Property:
    """A training-mode case: read each head's attention weights off the output and check they are a dropout.

    The state is :func:`observable_state` and the inputs :func:`one_hot_tokens`, so in each head's block of
    ``head_dim`` output columns, column ``j < tokens`` is the weight of token ``j`` and column ``tokens`` their sum;
    the gold (the reference in eval mode, float64) gives the weights ``w``.  In training mode every weight must be 0
    or ``w / (1 - p)``, the sum column must be the sum of the dropped weights (dropout on the weights, not on the
    context or the values), the kept fraction of the weights that can be seen (not in the future, not vanishing) must
    lie within six standard deviations of ``1 - p``, and the forwards must not all drop the same entries.  Which
    entries are dropped is the learner's own random draw: no check depends on it.

    The call's last output is the first forward again in eval mode: the module's own weights.  Where they differ from
    the reference's (a mistake the eval-mode cases already count) but still :func:`reads_as_weights`, a dropout that
    does not fit the reference's weights is judged against them, so a correct dropout behind another mistake passes
    here and a wrong one is named for what it is.
    """

    def heads(out: torch.Tensor) -> torch.Tensor:
        b, t, d = out.shape
        return out.double().reshape(b, t, num_heads, d // num_heads).transpose(1, 2)  # (b, H, T, head_dim)

    def holds(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
        rtol, atol = (1e-4, 1e-6) if trial.dtype == "float32" else (1e-7, 1e-9)
        gold, own = heads(trial.golds[0]), heads(outputs[-1])
        got = [heads(out) for out in outputs[:-1]]
        problem = judged(gold, got, rtol, atol)
        differs = not torch.allclose(own, gold, rtol=rtol, atol=atol)
        if problem and differs and reads_as_weights(outputs[-1], num_heads, trial.dtype):
            return judged(own, got, rtol, atol)
        return problem

    def judged(gold: torch.Tensor, got: list[torch.Tensor], rtol: float, atol: float) -> str | None:
        w = gold[..., :tokens]
        seen = torch.ones(tokens, tokens, dtype=torch.bool).tril() & (w > 1e-3)
        if all(torch.allclose(g, gold, rtol=rtol, atol=atol) for g in got):
            return said("training.none_dropped", p=str(p))
        kept = total = 0
        for g in got:
            weights, sums = g[..., :tokens], g[..., tokens]
            dropped = weights.abs() <= atol
            scaled = torch.isclose(weights, w / (1 - p), rtol=rtol, atol=atol)
            wrong = ~dropped & ~scaled
            if wrong.any():
                at = tuple(int(i) for i in wrong.nonzero()[0])
                seen_as = said("training.seen_as", at=str(at), got=f"{weights[at].item():.4g}", w=f"{w[at].item():.4g}")
                unscaled = torch.isclose(weights, w, rtol=rtol, atol=atol)
                if bool((unscaled | dropped)[seen].all()):
                    return said("training.unscaled", seen_as=seen_as, keep=f"{1 - p:g}")
                return said("training.not_dropout", p=str(p), seen_as=seen_as)
            if not torch.allclose(sums, weights.sum(dim=-1), rtol=rtol, atol=atol):
                return said("training.context")
            kept += int((~dropped & seen).sum())
            total += int(seen.expand_as(dropped).sum())
        fraction = kept / total
        bound = 6 * math.sqrt(p * (1 - p) / total)
        if abs(fraction - (1 - p)) > bound:
            shown = {"fraction": f"{fraction:.3f}", "keep": f"{1 - p:.3f}", "bound": f"{bound:.3f}"}
            return said("training.fraction", p=str(p), **shown)
        return said("training.same") if all(torch.equal(got[0], g) for g in got[1:]) else None

    return holds


def _maker(hook: str, *names: str, **defaults: Any) -> Callable[..., Case]:
    """``case(name, *values, what, **fields)``: a case of ``hook`` whose arguments ``names`` take ``values``, its
    fields ``defaults`` unless given."""

    def case(name: str, *values: Any, **kw: Any) -> Case:
        *args, what = values
        return Case(hook, name, dict(zip(names, args)), what, **{**defaults, **kw})

    return case


def _score_cases(hook: str, m: Maker) -> list[Case]:
    case = _maker(hook, "queries", "keys")
    tq, d, tk = m.distinct((3, 9), (3, 9), (3, 11))
    cases = [case("2d-Tq!=Tk", m.randn(tq, d), m.randn(tk, d), "2-D, Tq != Tk")]
    b, t = m.size(2, 4), m.size(4, 9)
    d = m.size(3, 11, avoid=(t,))
    square = ("T=T_k",)  # self-attention's square scores
    cases.append(case("3d-batched", m.randn(b, t, d), m.randn(b, t, d), "batched 3-D", meta=True, half=True,
                      coincide=square))  # fmt: skip
    b, h = m.size(2, 3), m.size(2, 5)
    tq, tk, d = m.distinct((3, 7), (3, 7), (3, 9))
    cases.append(case("4d-heads", m.randn(b, h, tq, d), m.randn(b, h, tk, d), "4-D heads", half=True))
    cases.append(case("T=1", m.randn(2, 1, 5), m.randn(2, 1, 5), "a single token", coincide=square))
    cases.append(case("Tq=1", m.randn(3, 1, 5), m.randn(3, 7, 5), "one query, many keys"))
    cases.append(case("d=1", m.randn(2, 5, 1), m.randn(2, 3, 1), "d_k = 1"))
    b = m.size(2, 3)
    t, tk, d = m.distinct((4, 7), (4, 8), (3, 9))
    cases.append(case("non-contiguous", m.randn(b, t, d), m.randn(b, tk, d), "non-contiguous (transposed view) inputs",
                      transposed=frozenset({"queries", "keys"})))  # fmt: skip
    for trial in range(3):
        rank = m.size(2, 4)
        lead = [m.size(1, 3) for _ in range(rank - 2)]
        tq, tk, d = m.distinct((1, 12), (1, 12), (1, 13))
        cases.append(case(f"random-{trial}", m.randn(*lead, tq, d), m.randn(*lead, tk, d), f"random {rank}-D shape"))
    return cases


def _softmax_cases(m: Maker) -> list[Case]:
    case = _maker("softmax_weights", "scores", "dim")
    b, t = m.size(2, 4), m.size(5, 9)
    scores = m.randn(b, t, t)
    masked = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    fully = m.randn(3, 7)
    fully[1] = float("-inf")
    exact = (_exact_zeros_where_masked,)
    return [
        case("2d-rows", m.randn(m.size(3, 7), m.size(4, 9)), -1, "2-D, last dim", half=True),
        case("3d-batched", m.randn(b, t, t + 2), -1, "batched 3-D, dim=-1", meta=True, half=True),
        case("dim=0", m.randn(m.size(3, 7), m.size(2, 5), 4), 0, "positive dim=0"),
        case("dim=1", m.randn(2, m.size(3, 7), 5), 1, "positive dim=1 on 3-D"),
        case("dim=-2", m.randn(3, 4, m.size(5, 8)), -2, "negative dim=-2"),
        case("4d", m.randn(2, 3, 5, 7), -1, "4-D heads"),
        case("large-logits", m.randn(b, t, t, scale=1e4), -1, "logits around ±1e4"),
        case("logits-20-to-100", _overflowing_logits(m, 3, 5, 7), -1,
             "logits from 20 to 100: exp overflows unless the max is subtracted (float16 above 11)", half=True),
        case("masked", masked, -1, "-inf entries (a causal mask)", properties=exact, half=True),
        case("all-masked-row", fully, -1, "a row that is all -inf", properties=exact),
    ] + [
        case(f"random-{i}", m.randn(m.size(1, 4), m.size(1, 9), m.size(1, 9), scale=3.0), -1, "random 3-D")
        for i in range(2)
    ]  # fmt: skip


def _overflowing_logits(m: Maker, *shape: int) -> torch.Tensor:
    """Logits in [20, 80] with one in [90, 100] per row: ``exp`` overflows in every dtype unless the row's max
    is subtracted first (float16 above 11, bfloat16 and float32 above 88), and every dtype holds them."""
    scores = 20.0 + 60.0 * m.rand(*shape)
    rows = scores.reshape(-1, shape[-1])
    rows[torch.arange(rows.shape[0]), torch.arange(rows.shape[0]) % shape[-1]] = 90.0 + 10.0 * m.rand(rows.shape[0])
    return scores


def _one_hot_rows(scores: torch.Tensor, gap: float = 0.05) -> torch.Tensor:
    """``scores`` with each row's largest raised ``gap`` over the rest: at temperature 1e-4 each row is one-hot to
    the last bit.  A near tie would not be: there ``scores / T`` is about 1e4, rounded to 1e-3 in float32, so dividing
    first (the chapter's way, as right as the reference's subtracting first) moves a weight by 1e-3 of itself."""
    top = scores.argmax(-1, keepdim=True)
    return scores.scatter_add(-1, top, torch.full_like(top, gap, dtype=scores.dtype))


def _temperature_cases(m: Maker) -> list[Case]:
    hook = "softmax_with_temperature"
    masked = m.randn(2, 7, 7).masked_fill(torch.triu(torch.ones(7, 7, dtype=torch.bool), 1), float("-inf"))
    fully = m.randn(4, 9)
    fully[2] = float("-inf")
    exact = (_exact_zeros_where_masked,)

    def case(name: str, scores: torch.Tensor, temperature: float, what: str, dim: int = -1, **kw: Any) -> Case:
        return Case(hook, name, {"scores": scores, "temperature": temperature, "dim": dim}, what, **kw)

    return [
        case("T=1", m.randn(3, 5, 7), 1.0, "temperature 1: the plain softmax", meta=True, half=True),
        case("T=0.4", m.randn(4, 9, scale=2.0), 0.4, "temperature 0.4 sharpens", half=True),
        case("T=2.5-4d", m.randn(2, 3, 5, 7, scale=2.0), 2.5, "temperature 2.5 flattens, 4-D heads", half=True),
        case("T=1e-4", _one_hot_rows(m.randn(3, 8, 11)), 1e-4, "temperature 1e-4: (near) one-hot rows, no NaN"),
        case("T=1e4", m.randn(3, 8, 11, scale=3.0), 1e4, "temperature 1e4: near-uniform rows"),
        case("dim=0", m.randn(7, 3, 4), 1.7, "temperature 1.7 along dim=0", dim=0),
        case("dim=-2", m.randn(3, 9, 5), 0.7, "temperature 0.7 along dim=-2", dim=-2),
        case("masked", masked, 0.6, "-inf entries (a causal mask) at temperature 0.6", properties=exact, half=True),
        case("all-masked-row", fully, 0.8, "a row that is all -inf, temperature 0.8", properties=exact),
        case("logits-20-to-100", _overflowing_logits(m, 3, 5, 7), 0.9,
             "logits from 20 to 100 at temperature 0.9: exp overflows unless the max is subtracted", half=True),
        case("T=0-raises", m.randn(3, 4), 0.0, "temperature 0 raises ValueError", expect_error="ValueError"),
        case("T=-1-raises", m.randn(3, 4), -1.0, "temperature -1 raises ValueError", expect_error="ValueError"),
    ] + [
        case(f"random-{i}", m.randn(2, tq, tk, scale=3.0), t, f"random 3-D, temperature {t}")
        for i, (tq, tk, t) in enumerate(((5, 11, 0.55), (9, 4, 3.2)))
    ]  # fmt: skip


def _context_cases(m: Maker) -> list[Case]:
    case = _maker("context_vectors", "weights", "values")
    t, dv = m.distinct((3, 7), (3, 11))
    cases = [case("2d", m.weights(t, t), m.randn(t, dv), "2-D, dv != T", coincide=("T=T_k",))]
    b = m.size(2, 4)
    tq, tk, dv = m.distinct((3, 8), (3, 8), (2, 9))
    cases.append(case("3d-batched", m.weights(b, tq, tk), m.randn(b, tk, dv), "batched, Tq != Tk", meta=True,
                      half=True))  # fmt: skip
    cases.append(case("4d", m.weights(2, 3, 5, 7), m.randn(2, 3, 7, 4), "4-D heads", half=True))
    cases.append(case("T=1", m.weights(2, 1, 1), m.randn(2, 1, 3), "a single token", coincide=("T=T_k",)))
    for i in range(2):
        tq, tk, dv = m.distinct((1, 9), (1, 9), (1, 9))
        cases.append(case(f"random-{i}", m.weights(3, tq, tk), m.randn(3, tk, dv), "random shapes"))
    return cases


def _mask_cases(m: Maker) -> list[Case]:
    case = _maker("causal_mask", "num_tokens", "device", dtypes=("bool",))
    cases = [case(f"T={t}", t, DEVICE, f"T = {t}", meta=(t == 5)) for t in (1, 2, 5, m.size(7, 13, avoid=(8,)))]
    return cases + [
        case(f"T={t}-raises", t, DEVICE, f"num_tokens = {t} raises ValueError", expect_error="ValueError")
        for t in (0, -3)
    ]


def _apply_mask_cases(m: Maker) -> list[Case]:
    case = _maker("apply_causal_mask", "scores")
    t, t3 = m.distinct((3, 9), (3, 10))
    cases = [
        case("2d", m.randn(t, t), f"2-D, T = {t}", half=True),
        case("3d-batched", m.randn(2, t3, t3), "batched 3-D", meta=True, half=True),
        case("4d-heads", m.randn(2, 3, 5, 5), "4-D heads"),
        case("T=1", m.randn(3, 1, 1), "a single token"),
        case("T=11", m.randn(2, 11, 11), "T larger than the chapter's 6"),
        case("non-square-raises", m.randn(2, 4, 5), "(…, 4, 5) scores raise ValueError", expect_error="ValueError"),
    ]
    sizes = (m.size(2, 13), m.size(2, 13))
    return cases + [case(f"random-{i}", m.randn(m.size(1, 3), tt, tt), "random T") for i, tt in enumerate(sizes)]


def _renormalize_cases(m: Maker) -> list[Case]:
    case = _maker("renormalize_masked_weights", "weights")
    t, t3 = m.distinct((4, 9), (4, 11))
    return [
        case("2d", m.weights(t, t), f"2-D, T = {t}", half=True),
        case("3d-batched", m.weights(3, t3, t3), "batched", meta=True),
        case("4d-heads", m.weights(2, 3, 5, 5), "4-D heads"),
        case("T=1", m.weights(2, 1, 1), "a single token"),
    ] + [case(f"random-{i}", m.weights(2, tt, tt), "random T") for i, tt in enumerate((m.size(2, 12), m.size(2, 12)))]


def _dropout_scale_cases(m: Maker) -> list[Case]:
    case = _maker("dropout_scale", "weights", "keep_mask", "p")

    def keep(*shape: int) -> torch.Tensor:
        return m.rand(*shape) >= 0.3

    # not p = 0.1 in half: unscaled dropout is 1/0.9 off, which on weights near 0.2 is within bfloat16's
    # 4 eps (its points would move with the seed); p = 0.5 is 2x off and holds the half pass
    cases = [
        case(f"p={p}", m.weights(3, 5, 5), keep(3, 5, 5), p, f"p = {p}", meta=(p == 0.1), half=(p != 0.1))
        for p in (0.1, 0.5, 0.0)
    ]
    cases.append(case("p=1", m.weights(2, 4, 4), keep(2, 4, 4), 1.0, "p = 1 gives zeros, never inf or NaN"))
    cases.append(case("float-keep-mask", m.weights(4, 7), keep(4, 7).double(), 0.25, "a 0/1 float keep mask"))
    return cases + [
        case(f"p={p}-raises", m.weights(2, 3), keep(2, 3), p, f"p = {p} raises ValueError", expect_error="ValueError")
        for p in (-0.1, 1.5)
    ]


def _attention_dropout_cases(m: Maker) -> list[Case]:
    case = _maker("attention_dropout", "weights", "p", "training", "generator")
    cases = [
        case("eval", m.weights(3, 7, 7), 0.3, False, None, "eval: dropout is off", meta=True),
        case("p=0", m.weights(2, 5, 5), 0.0, True, None, "p = 0 keeps everything"),
        case("p=1", m.weights(2, 5, 5), 1.0, True, None, "p = 1 drops everything"),
    ]
    for p, shape in ((0.2, (4, 40, 40)), (0.5, (2, 3, 30, 30))):
        seed = m.seed()
        what = f"training with p = {p}, twice from the same generator state and once from another"
        # the other seed is not drawn from `m`: the other cases' inputs stay as they were; meta in training too: a
        # mask drawn on the CPU whatever the weights' device fails there
        cases.append(case(f"train-p={p}", m.weights(*shape), p, True, GeneratorSeed(seed), what, compare_gold=False,
                          repeat=2, reseeds=((seed + 1) % (2**31 - 1),), properties=(_dropout_values(p),), half=True,
                          meta=p == 0.2))  # fmt: skip
    return cases


def _split_cases(m: Maker) -> list[Case]:
    case = _maker("split_heads", "x", "num_heads")
    h, t, hd = 3, 5, 4  # heads != tokens != head_dim
    cases = [
        case("H3-T5-hd4", m.randn(2, t, h * hd), h, "3 heads, 5 tokens, head_dim 4", meta=True, half=True),
        case("H1", m.randn(2, 4, 5), 1, "one head", coincide=("d_out=head_dim",)),
        case("hd1", m.randn(1, 3, 5), 5, "head_dim 1", coincide=("d_out=num_heads",)),
        case("non-contiguous", m.randn(2, 7, 10), 2, "non-contiguous input", transposed=frozenset({"x"})),
        case("indivisible-raises", m.randn(2, 3, 10), 4, "d % H != 0 raises ValueError", expect_error="ValueError"),
    ]
    for i in range(2):
        h = m.size(2, 5)
        hd = m.size(2, 7, avoid=(h, *((CHAPTER_TOKENS // h,) if CHAPTER_TOKENS % h == 0 else ())))
        t = m.size(2, 9, avoid=(h, hd, h * hd))
        cases.append(case(f"random-{i}", m.randn(m.size(1, 3), t, h * hd), h, "random"))
    return cases


def _merge_cases(m: Maker) -> list[Case]:
    case = _maker("merge_heads", "x", properties=(_contiguous,))
    cases = [
        case("H3-T5-hd4", m.randn(2, 3, 5, 4), "3 heads, 5 tokens, head_dim 4", meta=True, half=True),
        case("H1", m.randn(2, 1, 4, 5), "one head", coincide=("d_out=head_dim",)),
        case("non-contiguous", m.randn(2, 3, 7, 5), "non-contiguous input", transposed=frozenset({"x"})),
    ]
    for i in range(2):
        h, hd, t = m.distinct((2, 5), (2, 7), (2, 9))
        cases.append(case(f"random-{i}", m.randn(2, h, t, hd), "random"))
    return cases


def _sliding_window_cases(m: Maker) -> list[Case]:
    def mask(t: int, w: int, what: str, suffix: str = "", **kwargs: Any) -> Case:
        args = {"num_tokens": t, "window": w, "device": DEVICE}
        return Case("sliding_window_mask", f"T={t}-w={w}{suffix}", args, what, dtypes=("bool",), **kwargs)

    cases = [
        mask(9, 3, "T = 9, window 3: the future and more than 2 back are masked", meta=True),
        mask(7, 1, "window 1: each token sees only itself"),
        mask(5, 2, "window 2: itself and the token before"),
        mask(8, 8, "window = T equals the causal mask", coincide=("T=window",)),
        mask(4, 11, "window > T equals the causal mask"),
        mask(1, 3, "a single token"),
    ]
    for _ in range(2):
        t = m.size(10, 17)
        cases.append(mask(t, m.size(2, t - 1, avoid=(t,)), "random T and window"))
    return cases + [
        mask(t, w, f"{'window' if w < 1 else 'num_tokens'} = {min(t, w)} raises ValueError", "-raises",
             expect_error="ValueError")
        for t, w in ((5, 0), (5, -2), (0, 3), (-1, 3))
    ]  # fmt: skip


LONG = (1, 2, 2048, 16, 12, 8)
"""The long case's batch dims (1, 2), Tq = Tk = 2048, d = 16, dv = 12 and chunk_size = 8: one batch-head's scores are
(2048, 2048), four million elements, the memory rule's bound; a chunked version holds about a ninth of that
(:func:`grader.rules.memory_bound`: two batch-heads of narrow blocks and sums leave room for twice it even in float64
bytes, under the bytes of the float32 triangle a causal call keeps, so that triangle packed two scores to a float64
fails too (red team 12a: at dv = 24 it did not); at Tq = Tk = 1024 they did not, and a float64 version failed)."""

LONGEST = (1, 1, 2048, 16384, 16, 12, 32)
"""The case measured from outside the learner's process (:mod:`grader.instructor.held_memory`): batch dims (1, 1), Tq
= 2048 queries over Tk = 16384 keys, d = 16, dv = 12, chunk_size 32. Its scores are 33.6 million elements, 128 MiB in
float32, where an honest chunked version raises the peak by 36-47 MiB and adds 8-25 MiB of anonymous memory
(``benchmarks/held_memory.py``; the meter of the long case, which would weigh 100 MiB of its own, stays off). Not
causal: a causal call of as many kept scores computes twice the scores. Narrow blocks and values keep a version that
broadcasts (Tq, chunk, dv) in float64 small too; at the long case's size honest versions and the scores weigh the
same."""

LONGEST_CALL_FACTOR = 6
"""The longest case may take this many times the call limit: 512 blocks of 32 keys, some 0.5 s for the reference on
one loaded core, where a learner's plainer loop may take several times as long (no meter runs inside it)."""


def _chunked_cases(m: Maker) -> list[Case]:
    hook = "chunked_attention"

    def attend(name: str, what: str, sizes: tuple[Any, ...], causal: bool = False, scale: float = 1.0,
               **kwargs: Any) -> Case:  # fmt: skip
        lead, tq, tk, d, dv, chunk = sizes  # batch dims, Tq, Tk, d, dv, chunk_size
        q, k = m.randn(*lead, tq, d, scale=scale), m.randn(*lead, tk, d, scale=scale)
        args = {"queries": q, "keys": k, "values": m.randn(*lead, tk, dv), "chunk_size": chunk, "causal": causal}
        return Case(hook, name, args, what, **kwargs)

    cases = [
        attend("main", "batched, chunk_size 3 does not divide Tk = 11", ((2,), 9, 11, 5, 4, 3), meta=True, half=True),
        attend("chunk=1", "chunk_size 1: one key per block", ((2,), 5, 7, 4, 3, 1)),
        attend("chunk>Tk", "chunk_size > Tk: one block", ((3,), 4, 7, 5, 3, 16)),
        attend("chunk=Tk", "chunk_size = Tk: one block", ((2,), 5, 8, 3, 4, 8), coincide=("T_k=chunk_size",)),
        attend("causal", "causal, Tq = Tk", ((3,), 10, 10, 4, 7, 3), causal=True, coincide=("T=T_k",), half=True),
        attend("causal-Tq<Tk", "causal, 4 queries at the end of 9 keys", ((2,), 4, 9, 5, 3, 2), causal=True),
        attend("causal-Tq>Tk", "causal, 8 queries and 5 keys: the first 3 queries see no key and give zeros",
               ((2,), 8, 5, 3, 4, 2), causal=True, properties=(_zero_rows(slice(0, 3)),)),
        attend("unbatched", "no batch dims: (Tq, d) queries", ((), 7, 10, 3, 5, 4)),
        attend("4d-heads", "two batch dims (batch, heads)", ((2, 3), 5, 9, 4, 7, 2)),
        attend("large-logits", "scores in the hundreds: exp overflows without a running max", ((2,), 5, 9, 4, 3, 2),
               scale=12.0),  # fmt: skip
    ]
    q = (m.rand(2, 5, 4) + 0.5) * 40.0  # every score below -800: exp(score - 0) is 0 even in float64
    k, v = -(m.rand(2, 9, 4) + 0.5) * 40.0, m.randn(2, 9, 3)
    # float64 only: exp(-800) is 0 there too, and float32 scores of that size carry rounding errors of 1e-4 that say
    # nothing about the learner's algorithm
    cases.append(Case(hook, "negative-logits", {"queries": q, "keys": k, "values": v, "chunk_size": 2, "causal": False},
                      "every score far below zero: a running max that starts at 0 underflows", dtypes=("float64",)))
    batch, heads, tokens, d, dv, chunk = LONG
    what = (f"long sequences, Tq = Tk = {tokens}, d = {d}, chunk_size {chunk}, causal: never holding as much as "
            "one batch-head's (Tq, Tk) scores at once")
    # one dtype: the rule counts elements, whatever their dtype, and one dtype keeps the suite quick
    cases.append(attend("long", what, ((batch, heads), tokens, tokens, d, dv, chunk), causal=True, dtypes=("float32",),
                        coincide=("T=T_k",), measure_memory=True, call_factor=MEASURED_CALL_FACTOR,
                        properties=(_bounded_memory,)))
    batch, heads, tq, tk, d, dv, chunk = LONGEST
    what = (f"longer sequences, Tq = {tq}, Tk = {tk}, d = {d}, chunk_size {chunk}, measured from outside your "
            "process: never holding as much as its (Tq, Tk) scores at once")
    cases.append(attend("longest", what, ((batch, heads), tq, tk, d, dv, chunk), dtypes=("float32",), measure_held=True,
                        call_factor=LONGEST_CALL_FACTOR, properties=(_held_below,)))
    for i in range(2):
        lead = tuple(m.size(1, 3) for _ in range(m.size(0, 2)))
        tq, tk, d, dv = m.distinct((2, 12), (3, 14), (2, 9), (2, 9))
        chunk = m.size(2, tk - 1, avoid=(tq, tk, d, dv))
        cases.append(attend(f"random-{i}", f"random shapes, {len(lead)} batch dims", (lead, tq, tk, d, dv, chunk),
                            causal=bool(i)))  # fmt: skip
    return cases


PREFER_VALUE_ERROR = "prefer.value_error"
"""Why ``raise ValueError`` beats ``assert`` for a bad argument (an id of ``grader.instructor.messages.MESSAGES``)."""


def _module_cases(hook: str, m: Maker) -> list[Case]:
    """A module hook's cases: behaviour with the reference's parameters loaded, and the module's form.

    Sizes per case are written out (d_in, d_out, num_heads, head_dim, context_length, T): all different and none 6,
    but where a case says what it needs equal.  Self-attention has no context length, and its cases never mention one.
    """
    causal, heads = hook != "make_self_attention", hook == "make_multihead_attention"

    def config(d_in: int, d_out: int, ctx: int = 0, dropout: float = 0.0, h: int = 1, bias: bool = False) -> dict:
        args: dict[str, Any] = {"d_in": d_in, "d_out": d_out}
        if causal:
            args.update(context_length=ctx, dropout=dropout)
        if heads:
            args["num_heads"] = h
        args["qkv_bias"] = bias
        return args

    def sizes(d_in: int, d_out: int, t: int | None = None, ctx: int = 0, h: int = 1) -> str:
        text = f"d_in={d_in}, d_out={d_out}"
        if heads:
            text += f", {h} head{'s' if h > 1 else ''}" + (f" of {d_out // h}" if d_out % h == 0 else "")
        if t is not None:
            text += f", T={t}"
        if causal:
            text += f", context_length={ctx}"
        return text

    def behaviour(name: str, what: str, cfg: dict, xs: list[torch.Tensor], **kwargs: Any) -> Case:
        return Case(hook, name, cfg, what, module=ModuleSpec(xs, state_seed=m.seed()), **kwargs)

    d_in, h, hd, ctx, t = 5, 3, 4, 11, 7
    d_out = h * hd
    form: dict[str, Any] = {"dtypes": ("float32",), "structural": True}  # the module's form, in one dtype
    cases = [
        Case(hook, "names", config(d_in, d_out, ctx, h=h), "parameter names",
             module=ModuleSpec([], state_seed=m.seed()), properties=(_named_like_contract,), notes=(_extras_noted,),
             **form),
        behaviour("reference-weights", f"the reference's weights, {sizes(d_in, d_out, t, ctx, h)}",
                  config(d_in, d_out, ctx, h=h), [m.randn(2, t, d_in)], meta=True),
        behaviour("qkv-bias", f"qkv_bias=True, {sizes(4, 10, 3, 9, 2)}", config(4, 10, 9, h=2, bias=True),
                  [m.randn(3, 3, 4)]),
        Case(hook, "init-seed", config(3, 8 if heads else 2, 6, h=2),
             "built under torch.manual_seed, as the chapter does: W_query, W_key, W_value (then out_proj) in that "
             "order, as nn.Linear layers", module=ModuleSpec([m.randn(2, 6, 3)], init_seed=m.seed()),
             coincide=("T=6",) + (("T=context_length", "context_length=6") if causal else ()), structural=True),
        behaviour("T=1", f"a single token, {sizes(4, 10, 1, 9, 2)}", config(4, 10, 9, h=2), [m.randn(3, 1, 4)]),
    ]  # fmt: skip
    if not causal:
        cases.append(behaviour("unbatched", f"unbatched (T, d_in) input, {sizes(7, 4, 5)}", config(7, 4),
                               [m.randn(5, 7)]))  # fmt: skip
    else:
        cases.append(behaviour("T=context", f"T equal to context_length, {sizes(4, 15, 8, 8, 3)}",
                               config(4, 15, 8, h=3), [m.randn(2, 8, 4)], coincide=("T=context_length",)))
        x, t_change = m.randn(2, 9, 5), 4
        changed = torch.cat([x[:, :t_change], m.randn(2, 9 - t_change, 5)], dim=1)
        cases.append(behaviour("causality", f"changing token {t_change} leaves earlier outputs alone, "
                               f"{sizes(5, 8, 9, 10, 2)}", config(5, 8, 10, h=2), [x, changed],
                               properties=(_causal_prefix(t_change),)))
        x = m.randn(2, 7, 5)
        cases.append(behaviour("eval-dropout", f"eval with dropout=0.5 is deterministic, {sizes(5, 12, 7, 9, 3)}",
                               config(5, 12, 9, dropout=0.5, h=3), [x, x]))
        cases.append(_training_case(hook, m, config))
        cases.append(Case(hook, "mask-buffer", config(d_in, d_out, ctx, h=h),
                          "the causal mask is a buffer named mask (in state_dict, moved by .to(device))",
                          module=ModuleSpec([]), properties=(_mask_is_a_buffer,), **form))
    if heads:
        cases.append(behaviour("one-head", f"num_heads = 1, {sizes(4, 5, 3, 7, 1)}", config(4, 5, 7, h=1),
                               [m.randn(2, 3, 4)], coincide=("d_out=head_dim",)))
        cases.append(Case(hook, "indivisible-raises", config(5, 10, 7, h=4),
                          "d_out % num_heads != 0 raises an exception when the module is built "
                          "(ValueError recommended)",
                          module=ModuleSpec([]), expect_error="Exception",
                          notes=(_prefer("ValueError", PREFER_VALUE_ERROR),)))
    for i in range(2):
        hh = m.size(2, 4)
        hd = m.size(2, 5, avoid=(hh, *((CHAPTER_TOKENS // hh,) if CHAPTER_TOKENS % hh == 0 else ())))
        dd = hh * hd
        din, tt = m.distinct((2, 9), (2, 8), avoid=(hh, hd, dd))
        cc = m.size(tt + 1, tt + 5, avoid=(hh, hd, dd, din))
        batch = m.size(1, 3)
        cases.append(behaviour(f"random-{i}", f"random sizes, {sizes(din, dd, tt, cc, hh)}",
                               config(din, dd, cc, h=hh), [m.randn(batch, tt, din)]))  # fmt: skip
    return cases


TRAIN_SIZES = {
    # hook: (d_in, d_out, num_heads, T, context_length, dropout): d_in > T and head_dim > T, for observable_state
    "make_causal_attention": (8, 7, 1, 5, 9, 0.3),
    "make_multihead_attention": (7, 15, 3, 4, 9, 0.25),
}
TRAIN_BATCH, TRAIN_FORWARDS = 16, 4
"""Enough weights to count: the kept fraction's bound is six standard deviations over all of them."""


def _training_case(hook: str, m: Maker, config: Callable[..., dict]) -> Case:
    """Training mode: the dropped attention weights made observable (see :func:`_drops_attention_weights`)."""
    d_in, d_out, h, t, ctx, p = TRAIN_SIZES[hook]
    heads = f"{h} heads of {d_out // h}, " if hook == "make_multihead_attention" else ""
    what = (f"training mode with dropout={p} ({heads}T={t}, {TRAIN_FORWARDS} forwards): each attention weight is "
            "dropped or scaled by 1/(1-p), before the weights meet the values")
    x = one_hot_tokens(TRAIN_BATCH, t, d_in)
    spec = ModuleSpec([x] * TRAIN_FORWARDS, state_seed=m.seed(), train=True, observable=True)
    # meta: a dropout mask drawn on the CPU whatever the input's device fails there
    return Case(hook, "train-dropout", config(d_in, d_out, ctx, dropout=p, h=h), what, module=spec, meta=True,
                compare_gold=False, properties=(_drops_attention_weights(p, t, h),))


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


KEY_WORDS = ("Your", "journey", "starts", "with", "one", "step", "and", "then", "another", "stride", "ahead", "again")
QUERY_WORDS = ("A", "long", "road", "goes", "on", "from", "here", "to", "there", "and", "back", "home")
"""Tokens to label the axes with: the chapter's sentence for keys, other words for queries (so a swap shows)."""


def _drawn(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The figure's axis labels or tick labels and its colorbar, as the hookspec asks for the case's tokens."""
    results = facts.get("results") or [{}]
    figure = dict(results[0].get("figure") or {})
    weights = trial.inputs["weights"]
    return figure_labels_problem(figure, token_axes(trial.case.args.get("tokens"), *weights.shape[-2:]), said)


def _plot_cases(m: Maker) -> list[Case]:
    # one dtype: a figure drawn from float64 weights shows nothing float32's does not (issue 26: half the trials)
    case = _maker("plot_attention", "weights", "tokens", dtypes=("float32",))
    drawn = (_drawn,)
    t, tq, tk, t2 = m.distinct((3, 9), (2, 7), (3, 11), (3, 9))
    pair = (list(QUERY_WORDS[:tq]), list(KEY_WORDS[:tk]))
    square_pair = (list(QUERY_WORDS[:t2]), list(KEY_WORDS[:t2]))
    square, raises = ("T=T_k",), "ValueError"
    return [
        case("square", m.weights(t, t), None, f"({t}, {t}) weights, no tokens", properties=drawn, coincide=square),
        case("rectangular", m.weights(tq, tk), None, f"({tq}, {tk}) weights, Tq != Tk", properties=drawn),
        case("tokens", m.weights(t2, t2), list(KEY_WORDS[:t2]), f"({t2}, {t2}) weights and one sequence of {t2} tokens",
             properties=drawn, coincide=square),
        case("token-pair", m.weights(tq, tk), pair, f"({tq}, {tk}) weights, {tq} query and {tk} key tokens",
             properties=drawn),
        case("token-pair-square", m.weights(t2, t2), square_pair, f"({t2}, {t2}) weights, different query and key "
             "tokens", properties=drawn, coincide=square),
        case("requires-grad", m.weights(tq, tk), None, "weights that require grad (a model's)",
             requires_grad=frozenset({"weights"}), properties=drawn),
        case("batched-raises", m.weights(2, tq, tk), None, f"(2, {tq}, {tk}) batched weights raise ValueError",
             expect_error=raises),
        case("heads-raises", m.weights(2, 3, t, t), None, f"(2, 3, {t}, {t}) heads raise ValueError",
             expect_error=raises, coincide=square),
        case("wrong-token-count-raises", m.weights(tq, tk), (pair[0], pair[1][:-1]),
             f"{tk - 1} key tokens for {tk} keys raise ValueError", expect_error=raises),
    ] + [
        case(f"random-{i}", m.weights(a, b), None, "random shapes", properties=drawn)
        for i, (a, b) in enumerate(((m.size(1, 4), m.size(7, 12)), (m.size(8, 12), m.size(1, 4))))
    ]  # fmt: skip


def hidden_cases(m: Maker) -> dict[str, list[Case]]:
    """The chapter's hooks' own cases, drawn from ``m`` in this order (:func:`make_cases` checks and completes them)."""
    return {
        "dot_product_scores": _score_cases("dot_product_scores", m),
        "scaled_dot_product_scores": _score_cases("scaled_dot_product_scores", m),
        "softmax_weights": _softmax_cases(m),
        "softmax_with_temperature": _temperature_cases(m),
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
        "sliding_window_mask": _sliding_window_cases(m),
        "chunked_attention": _chunked_cases(m),
        "plot_attention": _plot_cases(m),
    }


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
