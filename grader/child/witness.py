"""What the learner's code does to its own process that no reply can take back.

Every fact a reply carries is written by the learner's process, and code there can rewrite it, which needs one of a
few things, each an audit event: running code made from text (hidden from the review scan), unpickling, reaching the
interpreter's frames or objects, tracing, ctypes, replacing a function's code.  An audit hook (it cannot be removed)
writes each kind the learner's code raises, once, to a pipe only the grader reads, before the event takes effect; a
write that fails (the pipe closed, replaced or full) refuses the event.  The grader turns the lines into review flags.

An event is the learner's when a frame of a submission's file is on the stack before any library module's top level (a
lazily imported library raises hundreds), and the caller is neither the runtime nor one of the standard library's own
users (``namedtuple``, ``dataclasses``, ``typing``, ``enum``, ``logging``, ``traceback``, ``ast.parse``).  Code imported
by a loader of the learner's, or from a file its process wrote, is the learner's; so is code made from text with no
library import on the stack: the runtime never makes any, a callback the learner left does (``weakref.finalize``).
"""

from __future__ import annotations

import ast
import importlib.machinery
import keyword
import os
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

_MAKES_CODE = ("compile", "exec", "marshal.loads", "code.__new__", "function.__new__")
KINDS: dict[str, str] = {
    **dict.fromkeys(_MAKES_CODE, "runs-code"),  # exec and eval of a code object: one made from text elsewhere
    "pickle.find_class": "unpickles",
    # object.__getattr__: only a frame's way in (FRAME_ATTRIBUTES)
    **dict.fromkeys(("sys._getframe", "sys._current_frames", "object.__getattr__"), "reaches-frames"),
    **dict.fromkeys(("gc.get_objects", "gc.get_referrers", "gc.get_referents"), "reaches-objects"),
    **dict.fromkeys(("sys.settrace", "sys.setprofile", "sys.monitoring.register_callback"), "traces"),
    "object.__setattr__": "replaces-code",  # only __code__
}
"""Each audit event witnessed, and the kind of line it writes (``<kind> <event>``); every ``ctypes.*`` event too."""

FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})

_STDLIB_CALLERS: dict[tuple[str, str], frozenset[str] | None] = {
    ("collections/__init__.py", "namedtuple"): None,  # its names checked as identifiers before they are pasted
    ("dataclasses.py", "_create_fn"): None,  # ... these two only on plain field names: _plain_fields
    ("dataclasses.py", "add_fns_to_class"): None,  # (Python 3.13's)
    ("typing.py", "_caller"): None,
    ("typing_extensions.py", "_caller"): None,
    ("typing.py", "__init__"): None,  # ForwardRef compiles its annotation
    ("typing.py", "_evaluate"): None,  # ... and evaluates it: only a plain type expression, _plain_annotation
    ("enum.py", "_create_"): None,
    ("ast.py", "parse"): None,  # parsing runs nothing
    ("inspect.py", "_signature_fromstr"): None,
    ("logging/__init__.py", "<lambda>"): frozenset({"findCaller"}),  # currentframe, for a log record's line
    ("traceback.py", "extract_stack"): None,  # these give back text and line numbers, never a frame
    ("traceback.py", "format_stack"): None,
    ("traceback.py", "print_stack"): None,
    ("traceback.py", "_walk_tb_with_full_positions"): frozenset({"_extract_from_extended_frame_gen"}),
    ("traceback.py", "walk_tb"): frozenset({"_extract_from_extended_frame_gen", "extract"}),
    ("traceback.py", "walk_stack"): frozenset({"_extract_from_extended_frame_gen", "extract"}),
    ("matplotlib/_api/__init__.py", "warn_external"): None,  # a warning's stacklevel, outside matplotlib
    ("torch/library.py", "__init__"): None,  # where a library of operators is made (torch.vmap's, at first use)
}
"""``(file's tail, function)`` of standard-library (and torch's) code that raises these events for its own use on any
input; and, where it hands what it reached on, the functions (the caller's caller) it must hand it to."""

_PLAIN_ANNOTATION = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Load,
                     ast.BinOp, ast.BitOr, ast.Constant)  # fmt: skip


def _input_checks() -> dict[tuple[str, str], Callable[[Any, tuple[Any, ...]], bool]]:
    """For a caller of :data:`_STDLIB_CALLERS` that makes code from what it is given, the check that it cannot be code:
    read from frames and the event's arguments, never by calling the learner's objects; every name bound now."""
    parse, walk, compile_, iskeyword = ast.parse, ast.walk, compile, keyword.iskeyword
    forward_ref = typing.ForwardRef
    forward_arg = vars(forward_ref)["__forward_arg__"]  # the slot itself: the class's attribute may be replaced
    plain_nodes, code_type, kind_of, is_a, length, every, text_type, mapping = (
        _PLAIN_ANNOTATION, types.CodeType, type, isinstance, len, all, str, dict)  # fmt: skip
    unreadable = (SyntaxError, ValueError, RecursionError, MemoryError, TypeError)

    def plain_fields(frame: Any, args: tuple[Any, ...]) -> bool:
        """dataclasses pastes field names into the source it compiles: a name from the learner's ``__annotations__``
        (``"x=print('run')) or (1"``) is the learner's code (round 5's f3).  Only dataclasses' own frames up to
        ``_process_class``, whose ``fields`` hold exact ``str`` identifiers."""
        file = frame.f_code.co_filename
        while frame is not None and frame.f_code.co_name != "_process_class":
            if frame.f_code.co_filename != file:
                return False
            frame = frame.f_back
        fields: Any = None if frame is None else frame.f_locals.get("fields")
        if kind_of(fields) is not mapping:
            return False
        return every(kind_of(n) is text_type and n.isidentifier() and not iskeyword(n) for n in fields)

    def plain_annotation(frame: Any, args: tuple[Any, ...]) -> bool:
        """The code typing evaluates is a plain type expression's (``"torch.Tensor"``, ``"list[int] | None"``: names,
        attributes, subscripts, ``|``, constants; no call), compiled from a ``ForwardRef``'s own text."""
        ref = frame.f_locals.get("self")
        text: Any = forward_arg.__get__(ref) if kind_of(ref) is forward_ref else None
        code: Any = args[0] if args else None
        if kind_of(text) is not text_type or length(text) > 500 or not is_a(code, code_type):
            return False
        try:
            tree: Any = parse(text, mode="eval")
            plain = every(is_a(node, plain_nodes) for node in walk(tree))
            again: Any = compile_(tree, "<string>", "eval")
        except unreadable:
            return False
        same = (again.co_code, again.co_names, again.co_consts) == (code.co_code, code.co_names, code.co_consts)
        return plain and same

    return {
        ("dataclasses.py", "_create_fn"): plain_fields,
        ("dataclasses.py", "add_fns_to_class"): plain_fields,  # Python 3.13's
        ("typing.py", "_evaluate"): plain_annotation,
    }


_RUNS_CODE = frozenset({"exec", "eval", "compile", "loads", "load", "Unpickler", "replace", "CodeType", "FunctionType"})
NAMED_BY: dict[str, frozenset[str]] = {
    **dict.fromkeys((*_MAKES_CODE, "pickle.find_class"), _RUNS_CODE),
    **{f"gc.{f}": frozenset({f}) for f in ("get_objects", "get_referrers", "get_referents")},
}
"""The names a library's own code holds where it raises these events at its import (``exec(code, ns)``,
``gc.get_objects()``): raised from a frame naming none, the event is not the library's."""

_IMPORT_COMPILERS = frozenset({"source_to_code", "_compile_bytecode"})
CODE_EVENTS = frozenset({*_MAKES_CODE, "pickle.find_class"})


def witness(fd: int, submission: str, files: list[str]) -> Callable[[str], None]:
    """From now on, write the learner's events to ``fd`` (child side, once its files are written, before they load).

    ``files``: the paths the grader wrote in ``submission``; any other file of the work folder imported is the learner's
    process's.  Everything the hook needs is bound here, none of it reachable from a module's globals.  Returns
    ``tell``, which writes one line of the runtime's own (a banned call as it is recorded) the same way.
    """
    identity_of, identity = _identity, _identity(fd)
    fstat, write, getframe, realpath, sep = os.fstat, os.write, sys._getframe, os.path.realpath, os.sep
    # What the hook reads, bound here: this module's globals are reachable (a function's __globals__) and
    # rewritable by code that reaches one of its functions, and so are the builtins
    kinds, frame_attributes, code_events, compilers = dict(KINDS), FRAME_ATTRIBUTES, CODE_EVENTS, _IMPORT_COMPILERS
    callers, checks, ctypes_event, named_events = dict(_STDLIB_CALLERS), _input_checks(), is_ctypes, dict(NAMED_BY)
    kind_of, members, length, names, failure, text_type, os_error = type, vars, len, set, RuntimeError, str, OSError
    root = os.path.realpath(submission) + os.sep
    work = os.path.dirname(os.path.realpath(submission)) + os.sep
    written = frozenset(realpath(f) for f in files)
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this package: the child runtime
    told: set[str] = set()
    busy = [False]

    standard_loaders = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader)

    def imported_file(frame: Any) -> str | None:
        """The file a standard loader loads in this frame of importlib's, or None for the learner's loader."""
        loader = None if frame is None else frame.f_locals.get("self")
        if kind_of(loader) not in standard_loaders or names(members(loader)) - {"name", "path"}:
            return None
        path: Any = members(loader).get("path")
        return realpath(path) if kind_of(path) is text_type else None

    def library_top_level(frame: Any) -> bool:
        """A library module's top level, imported now by a standard loader from outside the work folder."""
        back = frame.f_back
        if frame.f_code.co_name != "<module>" or back is None or back.f_code.co_name != "_call_with_frames_removed":
            return False
        path = imported_file(back.f_back)
        return path is not None and not path.startswith(work)

    def caller_is_stdlib(frame: Any, args: tuple[Any, ...]) -> bool:
        code = frame.f_code
        if code.co_filename.startswith(work):
            return False  # a file of the work folder is the learner's, whatever its name
        tail = code.co_filename.replace(sep, "/")
        for (file, function), consumers in callers.items():
            if code.co_name == function and tail.endswith("/" + file):
                check = checks.get((file, function))
                if check is not None and not check(frame, args):
                    return False  # code pasted from the learner's text: theirs
                back = frame.f_back
                if consumers is None:
                    return True
                return back is not None and back.f_code.co_filename == code.co_filename and (
                    back.f_code.co_name in consumers
                )
        return False

    def theirs(event: str, frame: Any, args: tuple[Any, ...]) -> bool:
        if frame is None:
            return False
        if frame.f_code.co_name == "_call_with_frames_removed" and frame.f_back is not None:
            if event == "exec":
                return False  # a module's code run by its loader: judged when it was compiled (or unmarshalled)
            frame = frame.f_back  # importlib calls compile and exec through it
        name = frame.f_code.co_name
        if frame.f_code.co_filename.startswith("<frozen importlib") and name in compilers:
            path = imported_file(frame if name == "source_to_code" else frame.f_back)
            return path is None or (path.startswith(work) and path not in written)  # the learner's loader, or file
        if frame.f_code.co_filename.startswith(ours) or caller_is_stdlib(frame, args):
            return False  # the runtime's own doing (a lie that wraps it is heard where it runs)
        # a library imported now raises hundreds of these for its own use, from code that names what it calls;
        # code or gc's lists reached from a frame that names no such call were reached by a callable the
        # learner left where the import runs it (a __del__ that is functools.partial(exec, …): round 6's a2)
        named = event not in named_events or not named_events[event].isdisjoint(frame.f_code.co_names)
        while frame is not None:
            if frame.f_code.co_filename.startswith(root):
                return True
            if named and library_top_level(frame):
                return False
            frame = frame.f_back
        # No file of the hand-in on the stack, and no library's import: the runtime never makes code from
        # text itself, so a callback the learner's code left behind did (weakref.finalize, a stream's flush ...)
        return event in code_events

    def tell(line: str) -> None:
        try:
            if identity_of(fd, fstat) != identity or write(fd, (line + "\n").encode()) != length(line) + 1:
                raise failure("refused: the grader's witness of this process is gone")
        except os_error:
            raise failure("refused: the grader's witness of this process is gone") from None

    def hear(event: str, args: tuple[Any, ...]) -> None:
        kind = kinds.get(event) or ("ctypes" if ctypes_event(event) else None)
        if kind is None or busy[0]:
            return
        if event == "object.__getattr__" and (length(args) < 2 or args[1] not in frame_attributes):
            return
        if event == "object.__setattr__" and (length(args) < 2 or args[1] != "__code__"):
            return
        line = f"{kind} {event}"
        if line in told:
            return
        busy[0] = True
        try:
            if not theirs(event, getframe(1), args):
                return
            tell(line)
            told.add(line)
        finally:
            busy[0] = False

    sys.addaudithook(hear)
    return tell


def is_ctypes(event: str) -> bool:
    """``ctypes.<name>``: one of ctypes' audit events (``sys.audit`` can raise any name; only these are written)."""
    name = event.removeprefix("ctypes.")
    return name != event and name != "" and name[40:] == "" and name.isascii() and name.replace("_", "a").isalpha()


def _identity(fd: int, fstat: Any = os.fstat) -> tuple[int, int]:
    st = fstat(fd)
    return st.st_dev, st.st_ino
