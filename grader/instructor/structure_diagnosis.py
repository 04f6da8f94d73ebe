"""The structural mistakes of a module, named from its reported parameters and buffers and the learner's own lines
where no output can be compared: the reference's weights do not load, load otherwise than by name, or the causal
mask is a buffer under another name (issue 25).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grader.instructor import learner_source as src
from grader.instructor.observations import HookRow

__all__ = ["CONTRACT_ROLE_ORDER", "QKV_WEIGHTS", "STRUCTURE_IDS", "drawn_otherwise", "structure_named"]


# --- structure: the mismatches the parameter mapping sees (issue 25) ------------------------------------------------

STRUCTURE_IDS = ("mha-per-head-module-list", "mha-without-out-proj", "fused-qkv-sized-by-d-in", "mask-buffer-misnamed",
                 "fused-qkv-projection")
"""Named from the module's reported structure and the learner's own lines, where no output can be compared: the
reference's weights do not load (the mapping found nothing), or the causal mask is a buffer under another name."""


def structure_named(hook: str, rows: Sequence[HookRow], code: Any) -> dict[int, frozenset[str]]:
    """``{row index: the structural mistake}`` on the rows that fail because of the module's structure.

    The learner's process reports its parameters' names and shapes and its buffers' names: they decide nothing
    here alone (each rule needs the learner's text, read with ``ast``, to show the same structure: an
    ``nn.ModuleList``, an ``nn.Linear`` sized ``3 *``, a ``register_buffer`` of a triangle, no ``nn.Linear`` whose
    name says out), and no word of theirs reaches the hint, whose text is the catalogue's own.  The verdicts stay
    what they are: this only names."""
    named = {}
    for i, row in enumerate(rows):
        found = _structure_of(hook, row, code) or _named_otherwise(hook, row, code)
        if found:
            named[i] = frozenset({found})
    return _one_fused_id(named)


def _structure_of(hook: str, row: HookRow, code: Any) -> str | None:
    from grader.child.modules import map_parameters, role_of
    from grader.instructor.verdict import contract_parameters

    facts = row.facts or {}
    if row.seen.kind == "property" and getattr(row.seen.message, "id", "") == "mask_buffer.missing":
        buffers = [str(b) for b in facts.get("buffers", [])]
        others = [b for b in buffers if b != "mask" and b in src.registered_buffers(code)]
        return "mask-buffer-misnamed" if any(src.triangle_buffer(code, b) for b in others) else None
    if facts.get("loaded_by") != "none" or row.seen.kind not in ("other", "values") or code is None:
        return None  # (a case with random outputs keeps its verdict's message as "values": here, the mapping's)
    learner = [(str(p["name"]), tuple(int(n) for n in p["shape"])) for p in facts.get("parameters", [])]
    contract = contract_parameters(row.trial)
    shapes = dict(contract)
    if not learner or "W_query.weight" not in shapes:
        return None
    if hook == "make_multihead_attention" and src.holds_module_list(code):
        if any(part.isdigit() for name, _ in learner for part in name.split(".")):
            return "mha-per-head-module-list"
    d_out, d_in = shapes["W_query.weight"]
    fused = [s for name, s in learner if len(s) == 2 and s[0] == 3 * s[1] and role_of(name)[0] is None]
    if fused and d_in != d_out and all(s[1] == d_in for s in fused) and src.fused_projection(code):
        return "fused-qkv-sized-by-d-in"
    linears = src.linear_attributes(code)
    if hook == "make_multihead_attention" and not any(role_of(n)[0] == "out" for n in [*linears, *dict(learner)]):
        without = [(name, shape) for name, shape in contract if not name.startswith("out_proj.")]
        if map_parameters(learner, without)[0] != "none":
            return "mha-without-out-proj"
    return None


CONTRACT_ROLE_ORDER = ("query", "key", "value", "out")


def drawn_otherwise(model: Any, row: HookRow) -> bool:
    """A case that builds the module under a seed, nothing loaded, where the learner's module creates its
    projections in another order than the contract's (Karpathy's ``Head`` makes ``key`` first): its random weights
    are other draws, so the model's values say nothing there (as of any module whose parameters it cannot know).
    Only where every weight's name says its role; the order is the module's reported ``named_parameters()``."""
    from grader.child.modules import role_of

    if model.init_seed is None:
        return False
    roles = [role_of(str(p.get("name", ""))) for p in (row.facts or {}).get("parameters", [])]
    weights = [role for role, kind in roles if kind == "weight"]
    if not weights or None in weights or len(set(weights)) != len(weights):
        return False
    return weights != sorted(weights, key=CONTRACT_ROLE_ORDER.index)


# --- structure: the names the parameter mapping tells apart (issue 25) ---------------------------------------------

QKV_WEIGHTS = ("W_query.weight", "W_key.weight", "W_value.weight")


def _named_otherwise(hook: str, row: HookRow, code: Any) -> str | None:
    """The mistake on the "names" case (the reference's weights load by name), where the weights were loaded
    otherwise (by role or by creation order): ``fused-qkv-projection`` where one parameter takes W_query, W_key and
    W_value stacked by rows, sized (3 * d_out, d_in) with d_in != d_out (not the d_in-sized variant), and the class
    assigns it an ``nn.Linear(..., 3 * ...)``; ``projections-named-differently`` where three distinct parameters take
    them whole (no transpose, no stacking), one at least under another name, each an ``nn.Linear`` the class assigns
    to ``self``.  The mapping is recomputed here from the reported names and shapes, and must agree with how the
    weights were loaded; those names reach no hint (the catalogue's own text)."""
    from grader.child.modules import map_parameters
    from grader.instructor.verdict import contract_parameters

    facts = row.facts or {}
    if row.seen.kind != "property" or getattr(row.seen.message, "id", "") != "names" or code is None:
        return None
    how = facts.get("loaded_by")
    if how not in ("role", "order"):
        return None
    learner = [(str(p["name"]), tuple(int(n) for n in p["shape"])) for p in facts.get("parameters", [])]
    contract = contract_parameters(row.trial)
    shapes = dict(contract)
    if not all(w in shapes for w in QKV_WEIGHTS):
        return None
    found, pairs = map_parameters(learner, contract)
    onto = {theirs: (mine, layout) for mine, theirs, layout in pairs}
    if found != how or not all(w in onto for w in QKV_WEIGHTS):
        return None
    mine = [onto[w][0] for w in QKV_WEIGHTS]
    layouts = [onto[w][1] for w in QKV_WEIGHTS]
    stems = [name.removesuffix(".weight") for name in mine]
    linears = src.linear_attributes(code)
    d_out, d_in = shapes["W_query.weight"]
    if len(set(mine)) == 1:
        stacked = [f"rows {j * d_out}:{(j + 1) * d_out}" for j in range(3)]
        fused = layouts == stacked and dict(learner).get(mine[0]) == (3 * d_out, d_in) and d_in != d_out
        return "fused-qkv-projection" if fused and stems[0] in linears and src.fused_projection(code) else None
    whole = len(set(mine)) == 3 and all(layout == "" for layout in layouts)
    renamed = any(name != theirs for name, theirs in zip(mine, QKV_WEIGHTS))
    return "projections-named-differently" if whole and renamed and set(stems) <= linears else None


def _one_fused_id(named: dict[int, frozenset[str]]) -> dict[int, frozenset[str]]:
    """One fused Linear is sized either by d_out (``fused-qkv-projection``) or by d_in (``fused-qkv-sized-by-d-in``);
    where the rows show the latter, the former is not named on the same module."""
    if not any("fused-qkv-sized-by-d-in" in ids for ids in named.values()):
        return named
    kept = {i: ids - {"fused-qkv-projection"} for i, ids in named.items()}
    return {i: ids for i, ids in kept.items() if ids}
