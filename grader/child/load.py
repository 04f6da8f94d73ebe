"""Loading a submission: its modules imported from the folder the child wrote them to, its hooks found by name.

What the child must know of the exercises comes in the ``load`` message: the hooks to find and the
chapter's class names standing in for them (``aliases``).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import itertools
import os
import re
import sys
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def describe_parameters(fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """The parameters of ``fn`` as plain data: ``[{"name", "kind", "default"}]``."""
    sig = inspect.signature(fn)
    return [{"name": p.name, "kind": p.kind.name, "default": p.default is not p.empty} for p in sig.parameters.values()]


def build(fn: Callable[..., Any], args: dict[str, Any], order: list[str]) -> Any:
    """Call a hook's ``fn`` with ``args`` by name; but a class (adopted for a module hook) whose parameters are named
    otherwise (``n_heads``) is built positionally in the contract's ``order``, as the chapter builds it."""
    if not inspect.isclass(fn):
        return fn(**args)
    try:
        inspect.signature(fn).bind(**args)
        return fn(**args)
    except (TypeError, ValueError):
        pass
    named = list(itertools.takewhile(args.__contains__, order))
    positional = [args[name] for name in named]
    rest = {name: value for name, value in args.items() if name not in named}
    try:
        inspect.signature(fn).bind(*positional, **rest)
    except (TypeError, ValueError):
        return fn(**args)  # neither way: the error says what the contract passes
    return fn(*positional, **rest)


def find_callable(
    namespaces: list[Any], hook: str, alias: str | list[str] | tuple[str, ...] | None = None
) -> Callable[..., Any] | None:
    """The first function named ``hook`` in ``namespaces``, else the first class named one of ``alias`` (the chapter's
    class names for a module hook, first preferred, from :mod:`grader.hook_table`, passed by the trusted side)."""
    names = [alias] if isinstance(alias, str) else list(alias or ())
    for ns in namespaces:
        candidate = getattr(ns, hook, None)
        if candidate is None:
            candidate = next((c for c in (getattr(ns, name, None) for name in names) if inspect.isclass(c)), None)
        if callable(candidate):
            return candidate
    return None


def where_defined(fn: Callable[..., Any], fallback: str, root: str | None = None) -> str:
    """``file:line`` of a function or class, relative to ``root`` when inside it."""
    target = getattr(fn, "__init__", fn) if inspect.isclass(fn) else fn
    try:
        target = inspect.unwrap(target)
        path = inspect.getsourcefile(target) or fallback
        line = target.__code__.co_firstlineno
    except (TypeError, AttributeError, ValueError):
        return fallback
    return f"{_relative(path, root)}:{line}"


def _relative(path: str, root: str | None) -> str:
    if root:
        with contextlib.suppress(ValueError):
            rel = os.path.relpath(path, root)
            if not rel.startswith(".."):
                return rel
    with contextlib.suppress(ValueError):
        return os.path.relpath(path)
    return path


class LoadError(Exception):
    """The submission could not be imported; the message is one line naming file:line."""


def _is_test_file(path: Path) -> bool:
    """Test files (``test_*.py``, ``*_test.py``, ``conftest.py``) and hidden files are never a submission's code
    (a copy of :func:`grader.handin.is_skipped_file`: this file imports nothing of the kit; a test holds them equal)."""
    name = path.name
    return name.startswith(("test_", ".")) or name.endswith("_test.py") or name == "conftest.py"


@contextlib.contextmanager
def _on_path(folder: Path, *module_names: str, keep: bool = False) -> Iterator[None]:
    """Put ``folder`` first on ``sys.path`` and shadow ``module_names`` while importing.

    Stale ``sys.modules`` entries for the names are dropped while importing and come back afterwards.  With ``keep``
    (a learner's process) the submission's modules stay where they shadow nothing, as ``import`` leaves them:
    ``typing.get_type_hints`` and ``dataclasses`` look a class's module up there (round 6's F1).
    """
    inside = str(folder.resolve()) + os.sep

    def owned(key: str) -> bool:
        return any(key == n or key.startswith(n + ".") for n in module_names)

    def from_folder(module: Any) -> bool:
        return str(getattr(module, "__file__", None) or "").startswith(inside)

    saved = {key: mod for key, mod in sys.modules.items() if owned(key)}
    for key in saved:
        del sys.modules[key]
    before = set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))
        # the submission's own modules and any sibling it imported leave with it,
        # so the next submission's `import helper` finds its own helper
        for key in [k for k, mod in list(sys.modules.items()) if owned(k) or (k not in before and from_folder(mod))]:
            if not keep or key in saved:
                del sys.modules[key]
        sys.modules.update(saved)


def _error_line(root: Path, exc: BaseException) -> str:
    inside = str(root if root.is_dir() else root.parent)
    if isinstance(exc, SyntaxError):
        return f"{_relative(exc.filename or str(root), inside)}:{exc.lineno}: {type(exc).__name__}: {exc.msg}"
    where = None
    tb = exc.__traceback__
    while tb is not None:  # the deepest frame inside the submission
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(inside):
            where = f"{_relative(filename, inside)}:{tb.tb_lineno}"
        tb = tb.tb_next
    text = f"{where or root.name}: {type(exc).__name__}: {exc}"
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def import_submission(path: Path, keep_modules: bool = False) -> list[Any]:
    """Import a ``.py`` file or a folder (a package with ``__init__.py``, else loose modules; never test files) and
    return its module namespaces.  Any exception at import, ``SystemExit`` included, is a :class:`LoadError` naming
    the file and line.  :func:`import_submission_parts` is the lenient form."""
    namespaces, broken = import_submission_parts(path)
    if broken:
        raise LoadError(broken[0][0])
    return namespaces


def defined_names(path: Path) -> tuple[str, ...]:
    """The names a module's top level defines (functions, classes, plain assignments), read with :mod:`ast` without
    running it; where the source does not parse, the ``def`` and ``class`` lines at column 0."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return tuple(re.findall(r"^(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_]\w*)", text, re.MULTILINE))
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return tuple(names)


Broken = tuple[str, tuple[str, ...]]
"""A module of a folder that did not import: ``(the one-line error, the names it defines)``."""


def import_submission_parts(path: Path, keep: bool = False) -> tuple[list[Any], list[Broken]]:
    """Like :func:`import_submission`, but a folder's module that fails to import costs only what it defines.

    Returns the namespaces that imported and, for each module that did not, its error line and :func:`defined_names`.
    A package whose ``__init__`` fails is imported module by module under a bare package.  Raises :class:`LoadError`
    when nothing imports (an ``__init__`` that defines nothing does not count), or a single file does not.
    """
    path = path.resolve()
    broken: list[Broken] = []
    try:
        if path.is_file():
            name = f"attnkit_submission_{uuid.uuid4().hex[:12]}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise LoadError(f"{path.name}: not an importable Python file")
            module = importlib.util.module_from_spec(spec)
            with _on_path(path.parent, name, keep=keep):
                sys.modules[name] = module  # as `import` does: dataclasses and typing look the module up by name
                spec.loader.exec_module(module)
            return [module], []
        if (path / "__init__.py").exists():
            modules = [p for p in sorted(path.glob("*.py")) if p.stem != "__init__" and not _is_test_file(p)]
            with _on_path(path.parent, path.name, keep=keep):
                loaded = _import_each([path.name], [path / "__init__.py"], path.parent, broken)
                if not loaded:  # the package without its __init__: each module on its own
                    for key in [k for k in sys.modules if k == path.name or k.startswith(path.name + ".")]:
                        del sys.modules[key]
                    bare = types.ModuleType(path.name)
                    bare.__path__ = [str(path)]
                    bare.__package__ = path.name
                    sys.modules[path.name] = bare
                loaded += _import_each([f"{path.name}.{p.stem}" for p in modules], modules, path.parent, broken)
        else:
            files = [p for p in sorted(path.glob("*.py")) if not _is_test_file(p)]
            if not files:
                raise LoadError(f"{path.name}: no .py files to load")
            with _on_path(path, *[p.stem for p in files], keep=keep):
                loaded = _import_each([p.stem for p in files], files, path, broken)
    except (LoadError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # a learner's import may raise anything, SystemExit included
        raise LoadError(_error_line(path, exc)) from None
    if broken and not [m for m in loaded if m.__name__ != path.name or defined_names(path / "__init__.py")]:
        raise LoadError(broken[0][0])  # nothing but an __init__ that defines nothing imported
    return loaded, broken


def load_error_of(hook: str, alias: str | list[str] | tuple[str, ...] | None, broken: list[Broken]) -> str | None:
    """``exercise <hook>: could not load <file:line: error>`` where a module that did not import defines the hook
    (or one of its class names, ``alias``), else None."""
    names = {hook, *([alias] if isinstance(alias, str) else list(alias or ()))}
    error = next((error for error, defined in broken if names & set(defined)), None)
    return f"exercise {hook}: could not load {error}" if error else None


def _import_each(names: list[str], files: list[Path], root: Path, broken: list[Broken]) -> list[Any]:
    """Import each module by name; one that fails is noted in ``broken`` and the others go on."""
    loaded = []
    for name, file in zip(names, files, strict=True):
        try:
            loaded.append(importlib.import_module(name))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a learner's import may raise anything, SystemExit included
            broken.append((_error_line(root, exc), defined_names(file)))
    return loaded


def _torch():
    import torch

    return torch


def on_device(value: Any, device: str) -> Any:
    """A tensor sent by the grader on ``device``; on the meta device an empty tensor of its shape and dtype."""
    return _torch().empty(value.shape, dtype=value.dtype, device="meta") if device == "meta" else value.to(device)


def tensor_facts(value: Any) -> dict[str, Any]:
    """A tensor's dtype, shape and device, as a reply describes them."""
    return {"dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape), "device": str(value.device)}
