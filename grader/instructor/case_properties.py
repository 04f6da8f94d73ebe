"""What a chapter case checks beyond its values: the properties of a passing answer, and the notes for no points.

Instructor-only.  A property (:data:`~grader.instructor.cases.Property`) is judged once a case's values match (exact
zeros where masked, a dropout that is one, the memory a chunked call held, the module's parameter names and its mask
buffer, …); a note (:data:`~grader.instructor.cases.Note`) tells the learner something that costs no points.  The
chapter's hidden cases (:mod:`grader.instructor.groups.chapter`) name them.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from grader.child.modules import map_parameters
from grader.instructor.cases import HALF, Case, Note, Property, Trial
from grader.instructor.held_memory import held_problem
from grader.instructor.said import said
from grader.instructor.verdict import contract_parameters
from grader.rules import MemoryRule, contiguous_message, memory_bound, memory_problem

CONTRACT_BUFFERS: dict[str, tuple[str, ...]] = {
    "make_self_attention": (),
    "make_causal_attention": ("mask",),
    "make_multihead_attention": ("mask",),
}
"""The buffers the contract's modules hold; any other buffer of a learner's module is noted, never failed."""


def exact_zeros_where_masked(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    masked = torch.isneginf(trial.inputs["scores"])
    return said("exact_zeros") if masked.any() and bool((outputs[0][masked] != 0).any()) else None


def dropout_values(p: float) -> Property:
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


def contiguous(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    contiguous = not facts.get("results") or facts["results"][0].get("contiguous", True)
    return None if contiguous else contiguous_message(trial.hook, said)


def causal_prefix(t: int) -> Property:
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


def bounded_memory(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The call never held as many elements at once as one batch-head's whole ``(Tq, Tk)`` scores, nor as many bytes
    in the trial's dtype, and took no values out of torch (:func:`grader.rules.memory_bound`,
    :func:`grader.rules.memory_problem`, the allocators' records among them; the child measures, in the calling
    thread: a call may start no other)."""
    rule, itemsize = _trial_rule(trial)
    memory = facts.get("memory")
    if not memory or memory.get("peak_elements") is None:
        return said("memory.unmeasured")
    return memory_problem(memory, rule, itemsize, said)


def held_below(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The kernel's record of the call's process, read by the grader from outside it, shows no room for one
    batch-head's kept scores (:func:`grader.instructor.held_memory.held_problem`; where the grader could not read
    it, not Linux, it says nothing)."""
    rule, itemsize = _trial_rule(trial)
    return held_problem(facts["held"], rule, itemsize) if facts.get("held") is not None else None


def zero_rows(rows: slice) -> Property:
    """The query rows ``rows`` see no key at all (causal, Tq > Tk): they must be exactly 0, never NaN."""

    def holds(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
        return said("zero_rows") if outputs and bool((outputs[0][..., rows, :] != 0).any()) else None

    return holds


def _learner_parameters(facts: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    module = facts.get("module") or {}
    return [(p["name"], tuple(p["shape"])) for p in module.get("parameters", [])]


def named_like_contract(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
    """The "names" case: the reference's parameters load into the learner's module by name."""
    how, pairs = map_parameters(_learner_parameters(facts), contract_parameters(trial))
    if how == "name":
        return None
    renamed = ", ".join(f"{mine} → {theirs}" + (f" ({layout})" if layout else "") for mine, theirs, layout in pairs)
    return said("names", renamed=renamed, how=said("names.role" if how == "role" else "names.order"))


def mask_is_a_buffer(trial: Trial, outputs: list[torch.Tensor], facts: dict[str, Any]) -> str | None:
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


def extras_noted(trial: Trial, reply: dict[str, Any]) -> str | None:
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


def prefer(error: str, why: str) -> Note:
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
    (:func:`drops_attention_weights`); the diagnosis asks the same of its model.
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


def drops_attention_weights(p: float, tokens: int, num_heads: int) -> Property:
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


