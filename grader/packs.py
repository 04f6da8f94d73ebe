"""Exercise packs: where the exercise groups come from.

A pack is a module that declares one group (see :mod:`grader.groups`), or a package whose every module declares
one, found through the entry-point group ``attnkit.exercises``; the kit's own (``grader.groups``) too (run from
a folder, a learner's kit, it is found by name).  ``ATTNKIT_BLOCK_PLUGINS`` blocks an entry point by name.
Only a group's module is read here, so a learner's kit can load every group it ships; the instructor's halves
(hidden cases, reference, mistakes) are imported by name where they are needed.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import pkgutil
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grader.hook_row import HookRow
from grader.hookspecs import PROJECT_NAME

__all__ = ["ENTRY_POINT_GROUP", "KIT_GROUPS", "Group", "PackError", "blocked_plugins", "groups", "hookspec_of",
           "instructor_part"]  # fmt: skip

ENTRY_POINT_GROUP = "attnkit.exercises"
KIT_GROUPS = "grader.groups"
"""The package of the kit's own groups, also named in the kit's pyproject under :data:`ENTRY_POINT_GROUP`."""


class PackError(Exception):
    """An exercise pack that cannot be used; the message names the pack, the group and what is wrong."""


@dataclass(frozen=True)
class Group:
    """One exercise group, as its module declares it."""

    module: types.ModuleType
    origin: str
    """Where it came from: ``the kit`` or ``entry point <name> = <value>``."""

    @property
    def name(self) -> str:
        return self.module.__name__

    @property
    def rows(self) -> tuple[HookRow, ...]:
        return tuple(self.module.ROWS)

    @property
    def position(self) -> int:
        return int(getattr(self.module, "POSITION", 100))

    @property
    def hookspecs(self) -> types.ModuleType:
        return getattr(self.module, "HOOKSPECS", self.module)

    def part(self, name: str) -> str | None:
        """The module name of a declared part (``HIDDEN_CASES``, ``REFERENCE``, ``MISTAKES``, ``STUB``,
        ``PUBLIC_TESTS``), None where the group declares none."""
        value = getattr(self.module, name, None)
        if value is None and name == "MISTAKES":
            value = getattr(self.module, "REFERENCE", None)
        return None if value is None else str(value)


def _checked(group: Group) -> Group:
    """``group``, or a :class:`PackError` naming it and the first thing its declaration gets wrong."""
    where = f"exercise group {group.name} ({group.origin})"
    rows = getattr(group.module, "ROWS", None)
    if not isinstance(rows, tuple) or not rows or not all(isinstance(r, HookRow) for r in rows):
        raise PackError(f"{where}: ROWS must be a non-empty tuple of grader.hook_row.HookRow")
    specs = group.hookspecs
    for r in rows:
        spec = getattr(specs, r.hook, None)
        if not (callable(spec) and hasattr(spec, f"{PROJECT_NAME}_spec")):
            raise PackError(
                f"{where}: the row of {r.hook!r} has no hookspec; declare it as "
                f"@hookspec(firstresult=True) def {r.hook}(...) in {specs.__name__}"
            )
    return group


def _modules_of(value: types.ModuleType) -> list[types.ModuleType]:
    """A package's modules (each declares a group), or the module itself."""
    if not hasattr(value, "__path__"):
        return [value]
    return [
        importlib.import_module(f"{value.__name__}.{info.name}")
        for info in sorted(pkgutil.iter_modules(value.__path__), key=lambda i: i.name)
        if not info.name.startswith("_")
    ]


def blocked_plugins() -> set[str]:
    """The entry-point names ``ATTNKIT_BLOCK_PLUGINS`` blocks (comma separated), for packs and solutions alike."""
    return {n.strip() for n in os.environ.get("ATTNKIT_BLOCK_PLUGINS", "").split(",") if n.strip()}


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    blocked = blocked_plugins()
    return [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name not in blocked]


@functools.lru_cache(maxsize=1)
def groups() -> tuple[Group, ...]:
    """Every exercise group, the kit's and every installed pack's, ordered by position then name.  A pack that does
    not import, or declares a group wrongly, is a :class:`PackError` (a grade without one of the course's groups
    would be wrong, so it is never skipped)."""
    found: dict[str, Group] = {}
    sources: list[tuple[str, Callable[[], Any]]] = [("the kit", lambda: importlib.import_module(KIT_GROUPS))]
    sources += [(f"entry point {ep.name} = {ep.value}", ep.load) for ep in _entry_points()]
    for origin, load in sources:
        try:
            modules = _modules_of(load())
        except PackError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of a pack's import is the pack's problem
            raise PackError(f"exercise pack ({origin}) does not import: {type(exc).__name__}: {exc}") from exc
        for module in modules:
            found.setdefault(module.__name__, _checked(Group(module, origin)))
    ordered = tuple(sorted(found.values(), key=lambda g: (g.position, g.name)))
    owner: dict[str, Group] = {}
    for group in ordered:
        for r in group.rows:
            if r.hook in owner:
                raise PackError(
                    f"hook {r.hook!r} is declared twice: by {owner[r.hook].name} ({owner[r.hook].origin}) "
                    f"and by {group.name} ({group.origin})"
                )
            owner[r.hook] = group
    return ordered


@functools.cache
def hookspec_of(hook: str) -> Callable[..., Any]:
    """The hookspec function of ``hook`` (a KeyError naming the hook when no group declares it); looked up once
    per hook, as every in-process call of a solution binds its arguments to it."""
    for group in groups():
        if any(r.hook == hook for r in group.rows):
            return getattr(group.hookspecs, hook)
    raise KeyError(f"no exercise group declares hook {hook!r}")


def instructor_part(part: str) -> list[types.ModuleType]:
    """The modules every group names as ``part`` (``HIDDEN_CASES``, ``REFERENCE``, ``MISTAKES``), imported, in
    group order, each once; an ImportError where one is not part of this kit (a learner's)."""
    names = [name for group in groups() if (name := group.part(part)) is not None]
    return [importlib.import_module(name) for name in dict.fromkeys(names)]
