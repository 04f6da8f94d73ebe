"""The solution registry: find a solution and adapt it into its own plugin manager.

A *solution* implements some or all of the hooks (:mod:`grader.hookspecs`): the reference, a learner's
``exercises`` package, a ``.py`` file or a folder, or a plugin of the entry-point group ``attnkit.solutions``.
Plain functions named after a hook are adopted without a decorator; the chapter's class names stand in for the
module hooks when the ``make_*`` function is absent.  Each solution gets its own :class:`pluggy.PluginManager`,
so calling one's hook never calls another's.  Loading never raises for a bad hook: a missing function or a
wrong signature is a one-line entry in ``Solution.problems`` and the other hooks stay usable.  Discovery is
layered: the reference, entry points (``ATTNKIT_BLOCK_PLUGINS`` blocks some by name), explicit paths.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from grader import hookspecs
from grader.child.load import (
    Broken,
    LoadError,
    build,
    describe_parameters,
    find_callable,
    import_submission_parts,
    load_error_of,
    where_defined,
)
from grader.hook_table import CLASS_NAMES, TABLE
from grader.packs import blocked_plugins, groups, hookspec_of, instructor_part
from grader.rule_words import Say, english

__all__ = ["BLOCK_ENV_VAR", "ENTRY_POINT_GROUP", "HOOK_NAMES", "HookNotImplemented", "Solution", "SolutionError",
           "adopt", "blocked_plugins", "discover_solutions", "entry_points", "format_hook", "hook_signature",
           "load_solution", "make_plugin_manager", "signature_problem"]  # fmt: skip

ENTRY_POINT_GROUP = "attnkit.solutions"
BLOCK_ENV_VAR = "ATTNKIT_BLOCK_PLUGINS"  # read by grader.packs.blocked_plugins

HOOK_NAMES: tuple[str, ...] = tuple(r.hook for r in TABLE)
"""Every hook, group by group in the order the groups declare them (:data:`grader.hook_table.TABLE`)."""


class SolutionError(Exception):
    """A solution cannot be found or loaded at all (the message says why)."""


class HookNotImplemented(NotImplementedError):
    """The solution has no usable implementation of this hook."""


def hook_signature(hook: str) -> inspect.Signature:
    return inspect.signature(hookspec_of(hook))


def format_hook(hook: str) -> str:
    """``softmax_weights(scores, dim=-1)``: the signature a learner must write."""
    return f"{hook}{hook_signature(hook)}"


# --- signatures -----------------------------------------------------------------


def takes_positionally(hook: str, params: list[dict[str, Any]]) -> bool:
    """Whether a class with ``params`` is built by the hook's arguments in the contract's order
    (:func:`grader.child.load.build`): one positional parameter per argument, any others with defaults."""
    expected = list(hook_signature(hook).parameters)
    positional = [p for p in params if p["kind"] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    spread = any(p["kind"] == "VAR_POSITIONAL" for p in params)
    required = [p for p in params if not p["default"] and p["kind"] not in ("VAR_POSITIONAL", "VAR_KEYWORD")]
    return (len(positional) >= len(expected) or spread) and all(p in positional[: len(expected)] for p in required)


def signature_problem(
    hook: str, params: list[dict[str, Any]], say: Say = english, is_class: bool = False
) -> str | None:
    """Say what is wrong with a callable's parameters for ``hook``, or None.

    The names must be the hook's (the grader passes arguments by name); a catch-all ``**kwargs`` is accepted.
    An argument the hook passes but the function does not take, or a parameter without a default the hook
    never passes, is a problem.  A class (``is_class``) may name its parameters otherwise where it takes the
    hook's arguments in the contract's order (:func:`takes_positionally`).
    """
    expected = list(hook_signature(hook).parameters)
    named = [p for p in params if p["kind"] in ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY", "POSITIONAL_ONLY")]
    takes_var_kw = any(p["kind"] == "VAR_KEYWORD" for p in params)
    names = [p["name"] for p in named]
    problems = []
    positional_only = [p["name"] for p in named if p["kind"] == "POSITIONAL_ONLY"]
    if positional_only:
        problems.append(say("signature.positional_only", names=", ".join(positional_only)))
    unknown = [p["name"] for p in named if p["name"] not in expected and not p["default"]]
    if unknown:
        problems.append(say("signature.unknown", names=", ".join(repr(n) for n in unknown)))
    missing = [n for n in expected if n not in names]
    if missing and not takes_var_kw:
        problems.append(say("signature.missing", names=", ".join(repr(n) for n in missing)))
    if not problems or (is_class and takes_positionally(hook, params)):
        return None
    said = problems[-1]
    for problem in reversed(problems[:-1]):
        said = say("and_then", first=problem, then=said)
    return said


# --- the plugin manager ------------------------------------------------------------


def make_plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    for group in groups():
        pm.add_hookspecs(group.hookspecs)
    return pm


def _adapter(hook: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A hook implementation that calls ``fn`` by keyword (a class as :func:`~grader.child.load.build` does),
    whatever names and defaults ``fn`` declares.

    pluggy reads an implementation's parameter names through ``inspect.unwrap``, so the adapter wraps the
    hookspec (``__wrapped__``): pluggy sees the hook's own names and passes their values, which the adapter binds
    to the hook's signature and hands to ``fn`` by name.
    """
    spec = hookspec_of(hook)
    signature = inspect.signature(spec)

    def adapter(*args: Any, **kwargs: Any) -> Any:
        return build(fn, signature.bind(*args, **kwargs).arguments, list(signature.parameters))

    adapter.__name__ = adapter.__qualname__ = hook
    adapter.__wrapped__ = spec  # type: ignore[attr-defined]
    adapter.__wrapped_impl__ = fn  # type: ignore[attr-defined]
    return hookspecs.hookimpl(adapter)


@dataclass
class Solution:
    """One solution's hook implementations, callable in-process: ``solution.softmax_weights(scores, dim=0)``.

    Only trusted code should call a learner's solution in-process; the grader runs learners' code in a
    sandboxed child process instead.
    """

    name: str
    origin: str
    plugin_manager: pluggy.PluginManager
    implemented: tuple[str, ...]
    problems: list[str] = field(default_factory=list)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict, repr=False)

    def implements(self, hook: str) -> bool:
        return hook in self.implemented

    def call(self, hook: str, *args: Any, **kwargs: Any) -> Any:
        if hook not in HOOK_NAMES:
            raise AttributeError(f"{hook!r} is not an attnkit hook; the hooks are: {', '.join(HOOK_NAMES)}")
        if hook not in self.implemented:
            raise HookNotImplemented(
                f"{self.origin}: solution {self.name!r} has no usable {format_hook(hook)}"
                + (f" ({p})" if (p := self.problem_for(hook)) else "")
            )
        bound = hook_signature(hook).bind(*args, **kwargs)
        bound.apply_defaults()
        return getattr(self.plugin_manager.hook, hook)(**bound.arguments)

    def problem_for(self, hook: str) -> str | None:
        """The one-line problem that keeps ``hook`` from being usable (no function, a signature, a load error)."""
        return next((p for p in self.problems if f" {hook}" in p or p.startswith(hook)), None)

    def __getattr__(self, hook: str) -> Callable[..., Any]:
        if hook.startswith("_") or hook not in HOOK_NAMES:
            raise AttributeError(hook)

        def call_hook(*args: Any, **kwargs: Any) -> Any:
            return self.call(hook, *args, **kwargs)

        call_hook.__name__ = hook
        call_hook.__signature__ = hook_signature(hook)  # type: ignore[attr-defined]
        return call_hook


def adopt(name: str, origin: str, namespaces: list[Any], broken: list[Broken] | None = None) -> Solution:
    """Build a :class:`Solution` from the hook functions found in ``namespaces``.

    The first namespace holding a hook (or its class alias) wins; ``@hookimpl`` and plain functions alike.  A
    hook missing because the module defining it did not import (``broken``, from
    :func:`~grader.child.load.import_submission_parts`) gets that module's error as its problem.
    """
    chosen: dict[str, Callable[..., Any]] = {}
    problems: list[str] = []
    for hook in HOOK_NAMES:
        found = find_callable(namespaces, hook, CLASS_NAMES.get(hook))
        if found is None and (why := load_error_of(hook, CLASS_NAMES.get(hook), broken or [])):
            problems.append(why)
            continue
        if found is None:
            alias = f" (or a class {' or '.join(CLASS_NAMES[hook])})" if hook in CLASS_NAMES else ""
            problems.append(f"{origin}: no function {hook}{alias}; the hook is {format_hook(hook)}")
            continue
        try:
            problem = signature_problem(hook, describe_parameters(found), is_class=inspect.isclass(found))
        except (TypeError, ValueError) as exc:  # builtins without a signature
            problem = f"cannot read its signature ({exc})"
        if problem:
            label = getattr(found, "__name__", hook)
            problems.append(f"{where_defined(found, origin)}: {label}: {problem}; the hook is {format_hook(hook)}")
            continue
        chosen[hook] = found

    plugin = types.ModuleType(f"attnkit_solution_{name}")
    for hook, fn in chosen.items():
        setattr(plugin, hook, _adapter(hook, fn))
    pm = make_plugin_manager()
    pm.register(plugin, name=name)
    return Solution(name, origin, pm, tuple(chosen), problems, chosen)


# --- loading ------------------------------------------------------------------------


def _load_path(path: Path) -> Solution:
    """A file or folder; a folder's module that does not import costs only the hooks it defines."""
    try:
        namespaces, broken = import_submission_parts(path)
    except LoadError as exc:
        raise SolutionError(str(exc)) from None
    name = path.stem if path.is_file() else path.name
    return adopt(name, os.path.relpath(path) if not path.is_absolute() else str(path), namespaces, broken)


def _load_exercises_folder() -> Solution:
    """The learner's ``exercises`` package, module by module from its folder (its ``__init__`` first)."""
    spec = importlib.util.find_spec("exercises")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        raise SolutionError("cannot find the exercises package")
    folder = Path(folders[0])
    try:
        namespaces, broken = import_submission_parts(folder, keep=True)  # as `import exercises` would
    except LoadError as exc:
        raise SolutionError(f"cannot import the exercises package: {exc}") from None
    return adopt("exercises", "exercises/", namespaces, broken)


def entry_points() -> list[importlib.metadata.EntryPoint]:
    """Entry points in the ``attnkit.solutions`` group, blocked ones left out."""
    blocked = blocked_plugins()
    return [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name not in blocked]


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> Solution:
    try:
        plugin = ep.load()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit included: a plugin must not stop the caller
        raise SolutionError(f"entry point {ep.name} = {ep.value}: {type(exc).__name__}: {exc}") from exc
    return adopt(ep.name, f"entry point {ep.name} = {ep.value}", [plugin])


def load_solution(spec: str | os.PathLike[str]) -> Solution:
    """Load one solution: ``"reference"``, ``"exercises"`` (the learner's package), a ``.py`` file or a folder,
    else an entry point of ``attnkit.solutions``; a one-line :class:`SolutionError` when it cannot load at all."""
    text = os.fspath(spec)
    if text == "reference":
        try:
            references = instructor_part("REFERENCE")
        except ImportError:
            raise SolutionError("the reference solution is not part of this kit (it is the instructor's)") from None
        return adopt("reference", "solutions/reference.py", references)
    if text == "exercises":  # module by module: the package need not export them, and one broken module costs its own
        return _load_exercises_folder()
    path = Path(text)
    if path.suffix == ".py" or path.exists():
        if not path.exists():
            raise SolutionError(f"{text}: no such file")
        if path.is_file() and path.suffix != ".py":
            raise SolutionError(f"{text}: in-process loading takes a .py file or a folder")
        return _load_path(path)
    if text in blocked_plugins():
        raise SolutionError(f"entry point {text!r} is blocked by {BLOCK_ENV_VAR}")
    for ep in entry_points():
        if ep.name == text:
            return _load_entry_point(ep)
    known = ["reference", "exercises"] + [ep.name for ep in entry_points()]
    raise SolutionError(f"no solution named {text!r}: not a path, and not one of {', '.join(known)}")


def discover_solutions(paths: list[str] | tuple[str, ...] = ()) -> tuple[list[Solution], list[str]]:
    """Every solution in layers: the reference, then entry points, then ``paths``; returns those that loaded and a
    one-line problem for each that did not (one bad plugin or path never hides the rest)."""
    found = [load_solution("reference")]
    problems: list[str] = []
    for ep in entry_points():
        try:
            found.append(_load_entry_point(ep))
        except SolutionError as exc:
            problems.append(str(exc))
    for p in paths:
        try:
            found.append(load_solution(p))
        except SolutionError as exc:
            problems.append(str(exc))
    return found, problems
