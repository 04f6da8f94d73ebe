"""The hook table: every group's rows together, and what the kit derives from them.

Each exercise group declares its hooks' rows (:class:`~grader.hook_row.HookRow`) in its own module
(:mod:`grader.groups`, or an installed pack found by :mod:`grader.packs`); this module gathers them and derives
the lists the registry, notebooks, hidden suite, verdict, heatmaps and rubric read.  The child runtime does not
import it: what it needs (the aliases, the banned names) travels in the wire messages.  It ships in a
learner's kit.
"""

from __future__ import annotations

from grader.hook_row import OUTPUT_KINDS, HookRow, OutputKind
from grader.packs import groups

__all__ = ["BANNED_NAMES", "CLASS_ALIASES", "CLASS_NAMES", "GROUPS", "HELPERS_OF_MODULES", "OUTPUT_KINDS", "ROWS",
           "TABLE", "HookRow", "OutputKind", "hooks_in", "row"]  # fmt: skip

TABLE: tuple[HookRow, ...] = tuple(r for group in groups() for r in group.rows)
"""Every hook's row, group by group in the groups' order (:func:`grader.packs.groups`), each group's in its order."""

ROWS: dict[str, HookRow] = {r.hook: r for r in TABLE}  # one row a hook: groups() refuses a hook declared twice

GROUPS: tuple[str, ...] = tuple(dict.fromkeys(r.group for r in TABLE))
"""The exercise groups, in the chapter's order: one module in ``exercises/`` and one notebook each."""

BANNED_NAMES: tuple[str, ...] = tuple(sorted({name for r in TABLE for name in r.banned}))
"""Every name a call may ban: the learner's process watches the kernels of them all before its code loads."""

CLASS_ALIASES: dict[str, str] = {r.hook: r.class_alias for r in TABLE if r.class_alias}
"""``{hook: the chapter's class name}`` for the module hooks."""

CLASS_NAMES: dict[str, tuple[str, ...]] = {r.hook: (r.class_alias, *r.class_variants) for r in TABLE if r.class_alias}
"""``{hook: every class name adopted for it, first preferred}`` for the module hooks."""

HELPERS_OF_MODULES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (group, hooks)
    for group in GROUPS
    if (hooks := tuple(r.hook for r in TABLE if r.group == group and r.reused_by_modules))
)
"""``((group, (hook, ...)), ...)``: what the module classes may reuse from each other group."""


def row(hook: str) -> HookRow:
    """The row of ``hook``; a KeyError naming this file when the hook has none."""
    try:
        return ROWS[hook]
    except KeyError:
        raise KeyError(f"hook {hook!r} has no row: no exercise group declares it") from None


def hooks_in(group: str) -> tuple[str, ...]:
    """The hooks of one exercise group, in the chapter's order."""
    if group not in GROUPS:
        raise ValueError(f"unknown exercise group {group!r}; the groups are: {', '.join(GROUPS)}")
    return tuple(r.hook for r in TABLE if r.group == group)
