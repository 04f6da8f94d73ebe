"""Review flags: known evasion constructs in a submission's source, found with :mod:`ast`, never run.

The grader verifies values, dtypes, shapes and NaNs from the bytes a learner's process sends back; those cannot
be faked.  What that process *reports* about itself (the banned-call list, whether it changed its inputs, the
structure of the module it built, the device a mask lives on) can be, by code that reaches into the grader's
child runtime, torch's ``__torch_function__`` machinery or the interpreter itself.  Honest code for these
exercises never needs any of that, so :func:`scan_files` lists each such construct as ``file:line: construct``.
A finding never changes points: the status in ``grades.csv`` becomes ``review: <constructs>``.

Aliases, ``from … import …``, ``getattr``/``setattr`` with constant names, ``__import__``/``import_module`` and the
text handed to ``exec``/``eval``/``compile`` are followed.  Flagged:

- torch internals: private attributes or modules, ``DisableTorchFunction*``, ``torch.overrides``, ``torch.jit``,
  compiled code of one's own (:data:`NATIVE_PATHS`), torch's ``__dict__``, ``__torch_function__`` definitions;
- the interpreter: ``sys.modules``, ``__main__`` (except ``if __name__ == "__main__":``), ``ctypes``/``cffi``,
  ``gc``'s object walkers, frame inspection, :data:`EVASION_DUNDERS`, ``__builtins__``, trace and profile hooks,
  other private ``sys`` attributes, the grader's own :data:`GRADER_INTERNALS`;
- patching anything of torch (``torch.backends.*`` settings excepted) or of ``builtins``; listing every member of
  torch, ``sys`` … (:data:`MEMBER_LISTINGS`); asking for the meta device (:data:`META_CHECK`);
- module facts: a class that overrides what the grader asks a module (:data:`MODULE_FACT_METHODS`), touches
  ``nn.Module`` internals, or sets members by computed names in its body (``vars()[name] = …``);
- hidden access: a computed name on a sensitive module, a computed import, ``exec``/``eval``/``compile`` of
  anything but a constant string (scanned in turn), strings naming any of the above, a dotted path or a format
  field (``"{0._C}"``) reaching a private attribute;
- code the scan cannot read: unpickling, loading code from a file, a code file named in a string, an import of a
  module the hand-in does not hold and neither the standard library nor the environment has (written at run
  time); a string constant that parses as Python statements is scanned as code too.

The scan reads the text that is run: intake refuses a coding declaration other than UTF-8
(:func:`grader.instructor.handin_reading.coding_problem`).  Code that does not parse is not flagged (it cannot be
imported either); code that cannot be scanned (absurd nesting, over :data:`MAX_SCANNED_BYTES`) is flagged as such.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
import sys
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from grader.instructor.inert import inert_line

MAX_SCANNED_BYTES = 4 << 20
"""A submission's source is scanned up to this many bytes in all; the rest is flagged as not scanned."""
MAX_SCANNED_NODES = 500_000
"""A submission's syntax trees are scanned up to this many nodes in all (~50,000 lines of ordinary code)."""
MAX_FINDINGS = 100
"""A submission's scan stops after this many findings (it is flagged anyway); the last says so."""
MAX_NESTED_SOURCE = 3
"""How deep constant strings handed to ``exec``/``eval``/``compile`` are scanned in turn."""
MAX_PATHS_PER_NAME = 8
"""A name stands for at most this many dotted paths (``a = a.x1; a = a.x2 …`` would double them at each line);
one bound to more is flagged as too tangled to follow, so decoys cannot push a real alias out."""
MAX_PATH_PARTS = 12
"""Dotted paths longer than this are not followed (no construct needs more)."""

UNPICKLERS = frozenset({"pickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "copyreg"})
"""Modules that rebuild objects, code included, from bytes the scan cannot read."""
CODE_LOADERS = tuple(
    "importlib.util.spec_from_file_location importlib.util.spec_from_loader importlib.util.module_from_spec"
    " importlib.machinery.SourceFileLoader importlib.machinery.SourcelessFileLoader importlib.machinery.FileFinder"
    " importlib.reload importlib.invalidate_caches".split()
)
"""Ways to import code from a file of one's choice (one written at run time)."""
LOADING_MODULES = frozenset({"runpy", "zipimport", "imp"})
SYS_IMPORT_STATE = frozenset({"path", "meta_path", "path_hooks", "path_importer_cache"})  # where import finds code
CODE_FILE_SUFFIXES = (".py", ".pyc", ".pyw", ".pth", ".so")

SENSITIVE_ROOTS = (
    frozenset({"torch", "sys", "gc", "inspect", "builtins", "importlib", "ctypes", "threading"}) | UNPICKLERS
)
"""Modules on which a ``getattr`` with a computed name hides what it reaches."""
PATCHED_ROOTS = frozenset({"torch", "builtins"})
PATCHABLE_BY_NAME = frozenset({"torch", "F", "nn", "builtins"})
"""Names flagged when assigned through even where the file does not import them (a helper module might)."""
TORCH_SETTINGS = ("torch.backends.",)
"""torch attributes that are settings, assigned by honest code (``torch.backends.cudnn.deterministic = True``)."""

TORCH_FLAGGED_MODULES = frozenset({"overrides", "jit"})
"""``torch.overrides`` (the machinery that records banned calls) and ``torch.jit`` (scripted code runs without it)."""
NATIVE_PATHS = tuple(
    "torch.utils.cpp_extension torch.library torch.ops.load_library importlib.machinery.ExtensionFileLoader".split()
)
"""Ways to run compiled code of one's own (which calls torch without ``__torch_function__``)."""
TORCH_FLAGGED_DUNDERS = frozenset(
    "__dict__ __getattribute__ __setattr__ __delattr__ __torch_function__ __torch_dispatch__".split()
)
SYS_HOOKS = frozenset({"settrace", "setprofile", "monitoring", "addaudithook"})
THREADING_HOOKS = frozenset({"settrace", "setprofile", "settrace_all_threads", "setprofile_all_threads"})
GC_WALKERS = frozenset({"get_objects", "get_referrers", "get_referents"})
INSPECT_FRAMES = frozenset({"currentframe", "stack", "getouterframes", "getinnerframes", "trace", "getframeinfo"})
NATIVE_CODE = frozenset({"ctypes", "_ctypes", "cffi"})
GRADER_INTERNALS = frozenset({"grader.child", "grader.instructor.sandbox"})

FRAME_ATTRIBUTES = frozenset(
    "f_back f_locals f_globals f_builtins f_code f_trace tb_frame gi_frame cr_frame ag_frame".split()
)
EVASION_DUNDERS = frozenset("__subclasses__ __globals__ __code__ __builtins__ __closure__ cell_contents".split())
MODULE_INTERNALS = frozenset(
    "_buffers _parameters _modules _non_persistent_buffers_set _state_dict_hooks _state_dict_pre_hooks"
    " _load_state_dict_pre_hooks _load_state_dict_post_hooks _forward_hooks _forward_pre_hooks".split()
)
STATE_DICT_HOOKS = frozenset(
    "register_state_dict_pre_hook register_state_dict_post_hook _register_state_dict_hook"
    " register_load_state_dict_pre_hook register_load_state_dict_post_hook _register_load_state_dict_pre_hook".split()
)
"""Hooks that change what ``state_dict``/``load_state_dict`` report: the module facts the grader reads."""
TORCH_FUNCTION_INTERNALS = frozenset(
    "_disabled_torch_function_impl _pop_torch_function_stack _push_on_torch_function_stack"
    " _len_torch_function_stack _get_function_stack_at _is_torch_function_mode_enabled".split()
)
MODULE_FACT_METHODS = frozenset(
    "state_dict named_buffers buffers named_parameters parameters named_modules load_state_dict register_buffer"
    " _load_from_state_dict _save_to_state_dict _apply to __getattr__ __getattribute__ __setattr__ __delattr__".split()
)
"""What the grader asks a learner's module (its state dict, its buffers, moving it): never redefined honestly."""
TORCH_HOOK_DEFINITIONS = frozenset({"__torch_function__", "__torch_dispatch__"})

META_CHECK = "asks whether a tensor is on the meta device (the grader's stand-in for a GPU)"
"""Code that branches on the meta device passes the pass that stands in for a GPU and fails on one (red team 12a:
a mask made on the CPU unless ``scores.is_meta``); honest code never needs to ask."""

SUSPICIOUS_STRINGS = frozenset({"_C", "_getframe", "_current_frames", "settrace", "setprofile", "sys.modules"}).union(
    FRAME_ATTRIBUTES, EVASION_DUNDERS, MODULE_INTERNALS, STATE_DICT_HOOKS, TORCH_FUNCTION_INTERNALS, GC_WALKERS
) | NATIVE_CODE  # strings that only ever serve to reach a construct by name

SETATTR_LIKE = frozenset(
    "builtins.setattr builtins.delattr builtins.object.__setattr__ builtins.object.__delattr__"
    " builtins.type.__setattr__ builtins.type.__delattr__".split()
)
GETATTR_LIKE = frozenset({"builtins.getattr", "builtins.hasattr", "builtins.object.__getattribute__"})
HANDED_ON = (GETATTR_LIKE | SETATTR_LIKE) - {"builtins.hasattr"}
"""Handed to ``functools.reduce``, ``map`` … a ``getattr`` reads a name the scan never sees at its call."""
ATTRGETTERS = frozenset({"operator.attrgetter", "operator.methodcaller", "inspect.getattr_static"})
MEMBER_LISTINGS = frozenset({"builtins.vars", "inspect.getmembers", "inspect.getmembers_static", "builtins.dir"})
"""Of torch, ``sys`` …: every member, by a name read at run time (red team 7's 1b found a private kernel so)."""
CLASS_NAMESPACES = frozenset({"builtins.vars", "builtins.locals"})
"""Called bare in a class body: the body's own namespace, where a key set by a computed name is a member."""
ATTRIBUTE_DUNDERS = frozenset({"__getattribute__", "__getattr__", "__setattr__", "__delattr__"})
"""Called as methods (``x.__getattribute__(name)``), the same as ``getattr``/``setattr`` on ``x``."""
IMPORTERS = frozenset({"builtins.__import__", "importlib.import_module", "importlib.__import__"})
RESOLVERS = frozenset({"pkgutil.resolve_name", "pydoc.locate", "importlib.util.resolve_name"})
"""Functions that import a module and walk attributes named in one string (``"torch:_C.DisableTorchFunction"``)."""
RUNNERS = frozenset({"builtins.exec", "builtins.eval", "builtins.compile"})

MAX_SHOWN_CHARS = 200
"""A finding's file and construct are each cut to this many characters (a learner's string can be any length)."""

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_ATTRIBUTE_PATH = re.compile(r"\w+(?:\.\w+)+")  # "autograd._disable_profiler", "0.utils._python_dispatch"
_PRIVATE_FIELD = re.compile(r"\{[^{}!:\s]*\._[^{}]*\}")  # a str.format field: "{0._C}", "{x.utils._internal}"
FIELD_READERS = frozenset({"get_field", "get_value", "vformat", "format_map"})
"""``string.Formatter``'s (and ``str.format_map``): each reads attributes named in a string it is handed."""
_BUILTIN_NAMES = frozenset(dir(builtins))


@dataclass(frozen=True, order=True)
class Finding:
    """One construct at one place: ``file:line: construct``."""

    file: str
    line: int
    construct: str

    def __str__(self) -> str:
        """One inert line (the file's and the construct's text is the learner's: a zip entry's name, a string
        constant used as an attribute name); the file's colons are escaped, so the first ``": "`` ends it."""
        file = inert_line(self.file, MAX_SHOWN_CHARS).replace(":", "\\x3a")
        return f"{file}:{self.line}: {inert_line(self.construct, MAX_SHOWN_CHARS)}"


def scan_files(files: dict[str, str]) -> list[str]:
    """``file:line: construct`` for every known evasion construct in ``files`` (``{relpath: source}``), sorted:
    at most :data:`MAX_FINDINGS` of them, the last saying the scan stopped there."""
    findings: set[Finding] = set()
    budget = _Budget()
    for rel in sorted(files):
        if budget.findings <= 0:
            break
        size = len(files[rel].encode("utf-8", "surrogatepass"))
        if size > budget.bytes:
            findings.add(Finding(rel, 1, f"not scanned (over {MAX_SCANNED_BYTES >> 20} MB of source in all)"))
            continue
        budget.bytes -= size
        found = _scan(files[rel], rel, 0, None, None, budget)
        budget.findings -= len(found)
        findings |= found
    findings |= _unheld_imports(files)
    listed = sorted(findings)
    if len(listed) > MAX_FINDINGS:
        last = listed[MAX_FINDINGS - 1]
        listed = listed[: MAX_FINDINGS - 1] + [Finding(last.file, last.line, "more findings, not listed")]
    return [str(f) for f in listed]


@functools.lru_cache(maxsize=1)
def _installed_modules() -> frozenset[str]:
    """The top-level modules a hand-in may import without holding them: the standard library's and the installed."""
    import importlib.metadata

    return frozenset({*sys.stdlib_module_names, *sys.builtin_module_names}) | frozenset(
        importlib.metadata.packages_distributions()
    )


def _unheld_imports(files: dict[str, str]) -> set[Finding]:
    """Each ``import`` of a module the hand-in does not hold and the grader's environment does not have: one the
    hand-in writes at run time (or a typo, which fails at import anyway)."""
    held = {part for rel in files for part in rel.removesuffix(".py").split("/")}
    unheld: set[Finding] = set()
    for rel in sorted(files):
        try:
            tree = ast.parse(files[rel])
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for top in {name.split(".")[0] for name in names} - held - _installed_modules():
                why = f"imports {top[:40]}, a module the hand-in does not hold (written at run time?)"
                unheld.add(Finding(rel, int(getattr(node, "lineno", 1)), why))
    return unheld


def scan_source(text: str, filename: str = "<source>") -> set[Finding]:
    """The findings of one module's source."""
    return _scan(text, filename, 0, None, None, _Budget())


class _Budget:
    """What is left to scan of one submission: bytes of source and syntax-tree nodes."""

    def __init__(self) -> None:
        self.bytes = MAX_SCANNED_BYTES
        self.nodes = MAX_SCANNED_NODES
        self.findings = MAX_FINDINGS + 1  # one more than listed, to know there were more


def _scan(
    text: str, filename: str, depth: int, at_line: int | None, bindings: dict[str, set[str]] | None, budget: _Budget
) -> set[Finding]:
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError:
        return set()  # cannot be imported either
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return {Finding(filename, at_line or 1, f"cannot be scanned ({type(exc).__name__})")}
    nodes = _walk(tree, budget.nodes)
    if nodes is None:
        return {Finding(filename, at_line or 1, f"not scanned (over {MAX_SCANNED_NODES} syntax nodes in all)")}
    budget.nodes -= len(nodes)
    scanner = _Scanner(filename, depth, at_line, bindings, budget)
    try:
        return scanner.scan(nodes)
    except _Enough:
        return scanner.findings
    except RecursionError:
        return {Finding(filename, at_line or 1, "cannot be scanned (RecursionError)")}


class _Enough(Exception):
    """Raised inside a scan once it has found as many constructs as will be listed."""


def _walk(tree: ast.AST, limit: int) -> list[ast.AST] | None:
    """Every node of ``tree`` but the ``Load``/``Store`` contexts (parents before children), or None past ``limit``."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    context = ast.expr_context
    while stack:
        node = stack.pop()
        out.append(node)
        if len(out) > limit:
            return None
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                stack.extend(v for v in reversed(value) if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST) and not isinstance(value, context):
                stack.append(value)
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


_PATH_ROOTS = SENSITIVE_ROOTS | NATIVE_CODE | LOADING_MODULES | {"__main__", "grader"}


_MEMBERS = {
    "threading": (THREADING_HOOKS, "threading.{}"),
    "gc": (GC_WALKERS, "gc.{}"),
    "inspect": (INSPECT_FRAMES, "frame inspection (inspect.{})"),
}
"""Modules some of whose members are constructs, and how each is worded."""


@functools.lru_cache(maxsize=65536)
def path_constructs(path: str) -> tuple[str, ...]:
    """The constructs a dotted path reaches (``torch._C.DisableTorchFunction`` → ``torch._C``, …)."""
    path = _through_modules(path)
    root, _, tail = path.partition(".")
    if _private(root) and root in sys.stdlib_module_names and root not in _PATH_ROOTS:
        return (f"private module {root}",)  # _thread, _io, _weakref …: the runtime's plumbing, never an exercise's
    if root not in _PATH_ROOTS:
        return ()
    rest = tail.split(".") if tail else []
    found: list[str] = []
    if rest[:1] == ["__dict__"]:
        found.append(f"{root}.__dict__")
    found += [native for native in NATIVE_PATHS if path == native or path.startswith(native + ".")]
    if root in UNPICKLERS:
        found.append(f"unpickling ({root})")
    elif root in LOADING_MODULES:
        found.append(f"code loaded from a file ({root})")
    elif root == "importlib":
        found += [f"code loaded from a file ({p})" for p in CODE_LOADERS if path == p or path.startswith(p + ".")]
    if root == "torch":
        if rest and rest[0] in TORCH_FLAGGED_MODULES:
            found.append(f"torch.{rest[0]}")
        for i, part in enumerate(rest):
            if part.startswith(("DisableTorchFunction", "_DisableTorch")):
                found.append("DisableTorchFunction")
            if part in TORCH_FUNCTION_INTERNALS:
                found.append(f"torch function internals ({part})")
            if _private(part) or part in TORCH_FLAGGED_DUNDERS:  # the first private part is the construct
                found.append(".".join(["torch", *rest[: i + 1]]))
                break
    elif root == "sys" and rest:
        if rest[0] in ("_getframe", "_current_frames"):
            found.append(f"frame inspection (sys.{rest[0]})")
        elif rest[0] in SYS_HOOKS | SYS_IMPORT_STATE | {"modules"} or _private(rest[0]):
            found.append(f"sys.{rest[0]}")
    elif root in _MEMBERS and rest and rest[0] in _MEMBERS[root][0]:
        found.append(_MEMBERS[root][1].format(rest[0]))
    elif root in NATIVE_CODE:
        found.append("ctypes")
    elif root == "__main__":
        found.append("__main__ module")
    elif root == "grader":
        found += [name for name in sorted(GRADER_INTERNALS) if path == name or path.startswith(name + ".")]
    return tuple(found)


LIBRARY_ROOTS = frozenset({"torch", "numpy", "os", "math", "functools", "typing", "collections", "warnings"})
"""Modules whose own imports the scan follows: ``torch.sys.modules`` is ``sys.modules``, ``os.sys`` is ``sys``."""


def _through_modules(path: str) -> str:
    """``path`` named from the module it reaches: each part that is a module another module imported
    (``torch.sys`` → ``sys``), read from the module's own dict (nothing of a learner's is run or imported)."""
    parts = path.split(".")
    if parts[0] not in LIBRARY_ROOTS:
        return path
    try:
        module = importlib.import_module(parts[0])
    except Exception:
        return path
    for i in range(1, len(parts)):
        attribute = vars(module).get(parts[i])
        if not isinstance(attribute, types.ModuleType):
            break
        name = getattr(attribute, "__name__", None)
        if isinstance(name, str) and name != ".".join(parts[: i + 1]):
            renamed = ".".join([name, *parts[i + 1 :]])
            return _through_modules(renamed) if name.split(".")[0] != parts[0] else renamed
        module = attribute
    return path


_NAMED = (
    (FRAME_ATTRIBUTES, "frame inspection ({})"),
    (EVASION_DUNDERS, "{}"),
    (MODULE_INTERNALS, "nn.Module internals ({})"),
    (STATE_DICT_HOOKS, "state-dict hook ({})"),
    (TORCH_FUNCTION_INTERNALS, "torch function internals ({})"),
)
"""Disjoint sets of names that give a construct away, and how each is worded."""


def _name_constructs(name: str) -> Iterator[str]:
    """Constructs an attribute name alone gives away, whatever object it is read from."""
    yield from [shown.format(name) for names, shown in _NAMED if name in names][:1]
    if name.startswith(("DisableTorchFunction", "_DisableTorch")):
        yield "DisableTorchFunction"
    if name == "is_meta":
        yield META_CHECK


def _string_constructs(text: str) -> Iterator[str]:
    if text == "meta":
        yield META_CHECK
    elif text in SUSPICIOUS_STRINGS or text.startswith(("DisableTorchFunction", "_DisableTorch")):
        yield f'"{text}" as a string'
    elif text.strip().lower().endswith(CODE_FILE_SUFFIXES) and len(text) < 1000 and "\n" not in text:
        yield "a code file named in a string"
    elif _DOTTED.fullmatch(text) and "." in text and text.split(".")[0] in SENSITIVE_ROOTS:
        for construct in path_constructs(text):
            yield f"{construct} (named in a string)"
    elif _ATTRIBUTE_PATH.fullmatch(text) and any(part.startswith("_") for part in text.split(".")[1:]):
        yield "a path to a private attribute in a string"  # for attrgetter, get_field … (red team 8)
    elif _PRIVATE_FIELD.search(text):
        yield "a format field that reads a private attribute"  # "{0.utils._python_dispatch…}".format(torch)


def _targets(node: ast.expr) -> Iterator[ast.expr]:
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def _assigned(node: ast.AST) -> list[ast.expr]:
    """What an assignment, a ``del`` or a walrus binds (before unpacking)."""
    return node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]  # type: ignore[attr-defined]


def _chain_root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _constant_str(node: ast.expr | None, depth: int = 0) -> str | None:
    """The text of a constant string, of constant strings added together (``"_" + "C"``), or None."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        if isinstance(node.value, bytes):
            return node.value.decode("utf-8", "replace")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and depth < 50:
        left, right = _constant_str(node.left, depth + 1), _constant_str(node.right, depth + 1)
        if left is not None and right is not None:
            return left + right
    if isinstance(node, ast.JoinedStr) and depth < 50:
        parts = [_formatted_str(v, depth + 1) for v in node.values]
        return None if None in parts else "".join(p for p in parts if p is not None)
    return None


def _formatted_str(node: ast.expr, depth: int) -> str | None:
    """One part of an f-string as text, where it is constant (``f"named{'_'}buffers"``: round 5's m2), or None."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if not isinstance(node, ast.FormattedValue) or (text := _constant_str(node.value, depth)) is None:
        return None
    text = {114: repr, 97: ascii}.get(node.conversion, str)(text)  # !r, !a; !s and none: the text itself
    spec = "" if node.format_spec is None else _constant_str(node.format_spec, depth)
    if spec is None:
        return None
    try:
        return format(text, spec)
    except (ValueError, TypeError):
        return None


class _Scanner:
    """One module's tree: first every name binding (imports, aliases), then every construct."""

    def __init__(
        self, filename: str, depth: int, at_line: int | None, bindings: dict[str, set[str]] | None, budget: _Budget
    ) -> None:
        self.budget = budget
        self.filename = filename
        self.depth = depth
        self.at_line = at_line  # nested source (exec("…")): every finding is reported at the exec's line
        self.bindings: dict[str, set[str]] = {k: set(v) for k, v in (bindings or {}).items()}
        self.defined: set[str] = set()  # names the module defines itself (they shadow builtins)
        self.tangled: dict[str, ast.AST] = {}  # names bound to too many paths, with their first binding too many
        self.findings: set[Finding] = set()
        self.run_texts: set[int] = set()
        self.values: dict[str, list[Any]] = {}  # name -> what is bound to it (_collect_values)
        self.calls: dict[str, list[tuple[ast.Call, bool]]] = {}  # function name -> its calls (by attribute?)

    def resolve(self, node: ast.expr) -> set[str]:
        """The dotted paths an expression may stand for (``F.softmax`` → ``torch.nn.functional.softmax``): at most
        :data:`MAX_PATHS_PER_NAME` of at most :data:`MAX_PATH_PARTS` parts, so no source can make the scan explode."""
        paths = self._resolve(node)
        if len(paths) > MAX_PATHS_PER_NAME:
            paths = set(sorted(paths)[:MAX_PATHS_PER_NAME])
        return {p for p in paths if p.count(".") < MAX_PATH_PARTS}

    def _resolve(self, node: ast.expr) -> set[str]:
        if isinstance(node, ast.Name):
            paths = set(self.bindings.get(node.id, ()))
            if not paths and node.id in _BUILTIN_NAMES and node.id not in self.defined:
                paths.add(f"builtins.{node.id}")
            return paths
        if isinstance(node, ast.Attribute):
            return {f"{p}.{node.attr}" for p in self.resolve(node.value)}
        if isinstance(node, ast.Call):
            funcs = self.resolve(node.func)
            first = _constant_str(node.args[0]) if node.args else None
            if first is not None and funcs & IMPORTERS:
                top = first if funcs & {"importlib.import_module"} else first.split(".")[0]
                return {first, top}
            second = _constant_str(node.args[1]) if len(node.args) > 1 else None
            if second is not None and funcs & {"builtins.getattr"}:
                return {f"{p}.{second}" for p in self.resolve(node.args[0])}
        return set()

    def _bind(self, name: str, paths: Iterable[str], node: ast.AST) -> bool:
        known = self.bindings.setdefault(name, set())
        before = len(known)
        for path in sorted(set(paths) - known):
            if len(known) >= MAX_PATHS_PER_NAME:
                self.tangled.setdefault(name, node)
                break
            known.add(path)
        return len(known) != before

    def _collect_bindings(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    self._bind(alias.asname or top, [alias.name if alias.asname else top], node)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in [alias for alias in node.names if alias.name != "*"]:
                    self._bind(alias.asname or alias.name, [f"{node.module}.{alias.name}"], node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined.add(node.name)
            elif isinstance(node, ast.arg):
                self.defined.add(node.arg)
        self._collect_values(nodes)
        assignments = [n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr))]
        for node in assignments:
            self.defined.update(t.id for top in _assigned(node) for t in _targets(top) if isinstance(t, ast.Name))
        for _ in range(8):  # aliases of aliases, to a fixed point
            changed = False
            for node in assignments:
                names = [t.id for t in _assigned(node) if isinstance(t, ast.Name) and t.id not in self.tangled]
                if node.value is None or not names:
                    continue
                paths = self.resolve(node.value)
                for name in names if paths else ():
                    changed |= self._bind(name, paths, node)
            if not changed:
                break

    def _collect_values(self, nodes: list[ast.AST]) -> None:
        """Each name's assigned values, for :meth:`_may_be_hidden`; None where the scan cannot say (a parameter)."""

        def bind(target: ast.AST | None, value: ast.expr | None) -> None:
            for t in _targets(target) if isinstance(target, ast.expr) else ():
                if isinstance(t, ast.Name):
                    self.values.setdefault(t.id, []).append(value)

        for node in nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target, node.value if isinstance(target, ast.Name) else None)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                bind(node.target, node.value)
            elif isinstance(node, (ast.AugAssign, ast.withitem)):
                bind(node.target if isinstance(node, ast.AugAssign) else node.optional_vars, None)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                items = node.iter.elts if isinstance(node.iter, (ast.Tuple, ast.List, ast.Set)) else None
                if isinstance(node.target, ast.Name) and items is not None:
                    for item in items:
                        bind(node.target, item)
                elif isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Name):
                    self.values.setdefault(node.target.id, []).append(("items", node.iter.id))
                else:
                    bind(node.target, None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                params = [*node.args.posonlyargs, *node.args.args]
                defaults = [None] * (len(params) - len(node.args.defaults)) + list(node.args.defaults)
                name = getattr(node, "name", None)
                for index, (arg, default) in enumerate(zip(params, defaults)):
                    marker = None if name is None else ("param", name, index, arg.arg, default)
                    self.values.setdefault(arg.arg, []).append(marker)
                for other in filter(None, [node.args.vararg, node.args.kwarg, *node.args.kwonlyargs]):
                    self.values.setdefault(other.arg, []).append(None)
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name):
                    self.calls.setdefault(node.func.id, []).append((node, False))
                elif isinstance(node.func, ast.Attribute):
                    self.calls.setdefault(node.func.attr, []).append((node, True))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    self.values.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.values.setdefault(node.name, []).append(None)

    def add(self, node: ast.AST, construct: str) -> None:
        line = self.at_line or int(getattr(node, "lineno", 1) or 1)
        self.findings.add(Finding(self.filename, line, construct))
        if len(self.findings) >= self.budget.findings:
            raise _Enough

    def scan(self, nodes: list[ast.AST]) -> set[Finding]:
        self._collect_bindings(nodes)
        for name, where in self.tangled.items():
            self.add(where, f"aliases too tangled to follow ({name})")
        idiom = self._main_idiom_constants(nodes)
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        self.run_texts = {  # exec's, eval's and compile's own text: scanned as theirs
            id(n.args[0]) for n in nodes if isinstance(n, ast.Call) and n.args and self.resolve(n.func) & RUNNERS
        }
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._path(node, alias.name)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                self._path(node, node.module)
                for alias in [alias for alias in node.names if alias.name != "*"]:
                    self._path(node, f"{node.module}.{alias.name}")
                    for construct in _name_constructs(alias.name):
                        self.add(node, construct)
            elif isinstance(node, ast.Attribute):
                for construct in _name_constructs(node.attr):
                    self.add(node, construct)
                for path in self.resolve(node):
                    self._path(node, path)
            elif isinstance(node, ast.Name):
                if node.id == "__builtins__":
                    self.add(node, "__builtins__")
                elif id(node) not in called and self.resolve(node) & HANDED_ON:
                    self.add(node, f"{node.id} handed on as a value (its name computed elsewhere)")
            elif isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr)):
                text = _constant_str(node)
                if text is None or (isinstance(node, ast.Constant) and not isinstance(node.value, str)):
                    continue
                if text == "__main__" and id(node) not in idiom:
                    self.add(node, '"__main__" as a string')
                for construct in _string_constructs(text):
                    self.add(node, construct)
                self._code_in_string(node, text)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._assignment(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in TORCH_HOOK_DEFINITIONS:
                self.add(node, f"defines {node.name}")
            elif isinstance(node, ast.ClassDef):
                self._class(node)
        return self.findings

    def _code_in_string(self, node: ast.AST, text: str) -> None:
        """A string that parses as Python statements (not one bare name or constant) is scanned as code."""
        if id(node) in self.run_texts or not any(mark in text for mark in ("\n", ";", "import", "=")):
            return
        if self.depth >= MAX_NESTED_SOURCE:
            return
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        if all(isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Constant, ast.Name)) for stmt in tree.body):
            return  # prose, a name, a number: no code
        line = self.at_line or int(getattr(node, "lineno", 1) or 1)
        for finding in _scan(text, self.filename, self.depth + 1, line, self.bindings, self.budget):
            self.add(node, f"{finding.construct} (in a string)")

    def _path(self, node: ast.AST, path: str) -> None:
        for construct in path_constructs(path):
            self.add(node, construct)

    @staticmethod
    def _main_idiom_constants(nodes: list[ast.AST]) -> set[int]:
        """The ``"__main__"`` constants of ``__name__ == "__main__"`` (and ``!=``) comparisons."""
        allowed: set[int] = set()
        for node in nodes:
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
                left, right = node.left, node.comparators[0]
                for a, b in ((left, right), (right, left)):
                    if isinstance(a, ast.Name) and a.id == "__name__" and isinstance(b, ast.Constant):
                        allowed.add(id(b))
        return allowed

    def _path_may_be_hidden(self, node: ast.expr) -> bool:
        """Whether a computed dotted name (``attrgetter``'s ``"autograd." + part``) may reach a private attribute:
        when its start may be private, or a part after a dot is computed."""
        if self._may_be_hidden(node):
            return True
        if isinstance(node, ast.BinOp):
            known = _constant_str(node.left)
        elif isinstance(node, ast.JoinedStr) and node.values:
            known = _constant_str(node.values[0])
        else:  # a name bound to constants: each is read by the string rules where it is written
            return False
        return known is None or "." in known

    def _may_be_hidden(self, node: ast.expr, depth: int = 0) -> bool:
        """Whether a computed attribute name may be a private or dunder one (``"__%s__" % "globals"``): not when it
        provably begins with a letter (``f"w_{i}"``, a name only ever bound to such values); else it may be anything."""
        text = _constant_str(node)
        if text is not None:
            return not text[:1].isalpha()
        if depth > 8:
            return True
        if isinstance(node, ast.JoinedStr):
            return not node.values or self._may_be_hidden(node.values[0], depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            return self._may_be_hidden(node.left, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
            return self._may_be_hidden(node.func.value, depth + 1)
        if isinstance(node, ast.Name):
            bound = self.values.get(node.id)
            return not bound or any(self._value_may_be_hidden(v, depth + 1) for v in bound)
        return True

    def _name_pattern(self, node: ast.expr, depth: int = 0) -> str:
        """A regular expression every text a computed name may take matches, at its widest: its constant parts,
        ``.*`` for what the scan cannot follow (``f"named{sep}buffers"`` → ``named.*buffers``)."""
        text = _constant_str(node)
        if text is not None:
            return re.escape(text)
        if isinstance(node, ast.FormattedValue):  # a part of an f-string: a conversion or a spec may make it anything
            plain = node.conversion == -1 and node.format_spec is None
            return self._name_pattern(node.value, depth) if plain else ".*"
        if depth > 8:
            return ".*"
        if isinstance(node, ast.JoinedStr):
            return "".join(self._name_pattern(v, depth + 1) for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._name_pattern(node.left, depth + 1) + self._name_pattern(node.right, depth + 1)
        if isinstance(node, ast.Name) and (bound := self.values.get(node.id)):
            if all(isinstance(v, ast.expr) for v in bound):
                return "(?:" + "|".join(self._name_pattern(v, depth + 1) for v in bound) + ")"
        return ".*"

    def _value_may_be_hidden(self, value: Any, depth: int) -> bool:
        """One value a name is bound to (:meth:`_collect_values`): an expression, the items of a sequence a loop
        walks, a parameter (what the file's calls of its function pass), or None (the scan cannot say)."""
        if value is None or depth > 8:
            return True
        if isinstance(value, ast.expr):
            return self._may_be_hidden(value, depth)
        if value[0] == "items":  # for name in SEQUENCE: each item of each sequence SEQUENCE is bound to
            sequences = self.values.get(value[1]) or [None]
            return any(
                not isinstance(seq, (ast.Tuple, ast.List, ast.Set))
                or any(self._may_be_hidden(item, depth + 1) for item in seq.elts)
                for seq in sequences
            )
        _, function, index, name, default = value  # a parameter
        passed = []
        for call, by_attribute in self.calls.get(function, []):
            position = index - 1 if by_attribute and index > 0 else index
            keyword = [k.value for k in call.keywords if k.arg == name]
            if keyword:
                passed.append(keyword[0])
            elif position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
                passed.append(call.args[position])
            elif any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return True
            elif default is not None:
                passed.append(default)
        return not passed or any(self._may_be_hidden(v, depth + 1) for v in passed)

    def _roots(self, node: ast.expr) -> set[str]:
        return {p.split(".")[0] for p in self.resolve(node)}

    def _call(self, node: ast.Call) -> None:
        funcs = self.resolve(node.func)
        args = node.args
        first = _constant_str(args[0]) if args else None
        attr = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if funcs & (GETATTR_LIKE | SETATTR_LIKE) and len(args) >= 2:
            target, name = args[0], _constant_str(args[1])
            verb = next(iter(sorted(funcs & (GETATTR_LIKE | SETATTR_LIKE)))).rsplit(".", 1)[-1].strip("_")
            patching = bool(funcs & SETATTR_LIKE)
            if name is None:
                sensitive = self._roots(target) & SENSITIVE_ROOTS
                pattern = self._name_pattern(args[1])  # a name that may be one of them, by four letters it holds
                facts = sorted(m for m in MODULE_FACT_METHODS if re.fullmatch(pattern, m))
                if patching and facts and sum(c.isalnum() for c in pattern) >= 4:
                    self.add(node, f"overrides Module.{' or '.join(facts[:3])} (a computed name that may be it)")
                if patching and (sensitive & PATCHED_ROOTS or _chain_root(target) in PATCHABLE_BY_NAME):
                    self.add(node, f"{verb} with a computed name on {_chain_root(target) or 'torch'}")
                elif sensitive:
                    self.add(node, f"{verb} with a computed name on {sorted(sensitive)[0]}")
                elif verb != "hasattr" and self._may_be_hidden(args[1]):
                    self.add(node, f"{verb} with a computed name that may be private")
                return
            if patching and name in MODULE_FACT_METHODS:
                self.add(node, f"overrides Module.{name}")
            for path in self.resolve(target):
                self._path(node, f"{path}.{name}")
                if patching and path.split(".")[0] in PATCHED_ROOTS and not path.startswith(TORCH_SETTINGS):
                    self.add(node, f"{'deletion' if 'del' in verb else 'assignment'} of {path}.{name}")
            if patching and not self.resolve(target) and _chain_root(target) in PATCHABLE_BY_NAME:
                self.add(node, f"assignment of {ast.unparse(target)}.{name}")
        elif funcs & ATTRGETTERS and any(_constant_str(a) is None and self._path_may_be_hidden(a) for a in args):
            self.add(node, f"{sorted(funcs & ATTRGETTERS)[0]} with a computed name that may be private")
        elif attr in FIELD_READERS and args and first is None and self._path_may_be_hidden(args[0]):
            self.add(node, f"{attr} with a computed field name that may be private")
        elif funcs & RESOLVERS:
            if first is None:
                self.add(node, f"{sorted(funcs & RESOLVERS)[0]} with a computed name")
            else:
                self._path(node, first.replace(":", "."))
        elif attr in ATTRIBUTE_DUNDERS and args and self._may_be_hidden(args[0]):
            self.add(node, f"{attr} with a computed name that may be private")
        elif "builtins.type" in funcs and len(args) == 3:
            self._made_class(node, args[2])
        elif funcs & IMPORTERS:
            if first is None:
                self.add(node, "__import__ with a computed name")
            else:
                self._path(node, first)
        elif funcs & RUNNERS:
            kind = sorted(funcs & RUNNERS)[0].rsplit(".", 1)[-1]
            if first is None:
                self.add(node, f"{kind} of a computed string")
            elif self.depth >= MAX_NESTED_SOURCE:
                self.add(node, f"{kind} of a string nested {MAX_NESTED_SOURCE} deep")
            else:
                line = self.at_line or node.lineno
                for finding in _scan(first, self.filename, self.depth + 1, line, self.bindings, self.budget):
                    self.add(node, finding.construct)
        elif "torch.load" in funcs and not any(
            k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in node.keywords
        ):
            self.add(node, "unpickling (torch.load without weights_only=True)")
        elif funcs & MEMBER_LISTINGS and args and self._roots(args[0]) & SENSITIVE_ROOTS:
            listing = sorted(funcs & MEMBER_LISTINGS)[0].split(".", 1)[1]
            self.add(node, f"{listing}({sorted(self._roots(args[0]) & SENSITIVE_ROOTS)[0]})")

    def _assignment(self, node: ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete) -> None:
        verb = "deletion" if isinstance(node, ast.Delete) else "assignment"
        for target in (t for top in _assigned(node) for t in _targets(top)):
            if isinstance(target, ast.Attribute) and target.attr in MODULE_FACT_METHODS and not (
                isinstance(target.value, ast.Name) and target.value.id == "self"
            ):
                self.add(node, f"overrides Module.{target.attr}")  # on the class, after its body (Cls.to = …)
            if not isinstance(target, (ast.Attribute, ast.Subscript)):
                continue
            where = target.value if isinstance(target, ast.Subscript) else target
            paths = self.resolve(where)
            patched = sorted(p for p in paths if p.split(".")[0] in PATCHED_ROOTS and not p.startswith(TORCH_SETTINGS))
            suffix = "[…]" if isinstance(target, ast.Subscript) else ""
            for path in patched:
                self.add(node, f"{verb} of {path}{suffix}")
            if not paths and _chain_root(target) in PATCHABLE_BY_NAME:
                self.add(node, f"{verb} of {ast.unparse(where)}{suffix}")

    def _made_class(self, node: ast.Call, members: ast.expr) -> None:
        """``type(name, bases, members)``: a class body by other means."""
        for key in members.keys if isinstance(members, ast.Dict) else [None]:
            name = _constant_str(key)
            if name is None:
                self.add(node, "a class made by type() with members the scan cannot read")
            elif name in MODULE_FACT_METHODS:
                self.add(node, f"overrides Module.{name}")
            elif name in TORCH_HOOK_DEFINITIONS:
                self.add(node, f"defines {name}")

    def _class(self, node: ast.ClassDef) -> None:
        if all(isinstance(b, ast.Name) and b.id == "object" for b in node.bases):
            return
        for call in _class_scope_calls(node):  # ``vars()[name] = f`` in the body: members by computed names
            if self.resolve(call.func) & CLASS_NAMESPACES and not call.args:
                self.add(call, f"{ast.unparse(call)} in a class body (members set by names the scan cannot read)")
        for item in node.body:
            names: list[str] = []
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [item.name]
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                names = [t.id for top in _assigned(item) for t in _targets(top) if isinstance(t, ast.Name)]
            for name in names:
                if name in MODULE_FACT_METHODS:
                    self.add(item, f"overrides Module.{name}")
                elif name in TORCH_HOOK_DEFINITIONS and not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.add(item, f"defines {name}")


def _class_scope_calls(node: ast.ClassDef) -> list[ast.Call]:
    """The calls a class body makes in its own scope (not in the functions or classes it defines)."""
    found: list[ast.Call] = []
    todo: list[ast.AST] = list(node.body)
    while todo:
        item = todo.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(item, ast.Call):
            found.append(item)
        todo.extend(ast.iter_child_nodes(item))
    return found
