"""What the learner's code does to its own process that no reply can take back.

Every fact a reply carries is written by the learner's process, and code in that process can
rewrite it.  Rewriting it needs one of a few things, each an audit event: running code made
from text at run time (what hides it from the review scan), unpickling, reaching the
interpreter's frames or objects, tracing, ctypes, replacing a function's code.  An audit hook
(it cannot be removed) writes each kind of event the learner's code raises, once, to a pipe
whose reading end only the grader holds, before the event takes effect.  A written line
cannot be taken back; a write that fails (the pipe closed, replaced or full) refuses the event.
The grader turns the lines into review flags (``grader.instructor.witnessed``).

An event is the learner's when a frame of a submission's file is on the stack before any
library module's top level (a ``<module>`` a standard loader imports from outside the work
folder: a library imported lazily raises hundreds of these), and the caller is neither the
runtime nor one of the standard library's own users (``namedtuple``, ``dataclasses``, ``typing``,
``enum``, ``logging``, ``traceback``'s text, ``ast.parse``).  Code imported by a loader of the
learner's, or from a file its process wrote, is the learner's; and code made from text with no
library import on the stack is too: the runtime never makes any, a callback the learner's code
left behind does (``weakref.finalize``, a stream's ``flush``).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Callable
from typing import Any

KINDS: dict[str, str] = {
    "compile": "runs-code",
    "exec": "runs-code",  # exec and eval of a code object: one made from text elsewhere (typing's ForwardRef)
    "marshal.loads": "runs-code",
    "code.__new__": "runs-code",
    "function.__new__": "runs-code",
    "pickle.find_class": "unpickles",
    "sys._getframe": "reaches-frames",
    "sys._current_frames": "reaches-frames",
    "object.__getattr__": "reaches-frames",  # only a frame's way in: FRAME_ATTRIBUTES
    "gc.get_objects": "reaches-objects",
    "gc.get_referrers": "reaches-objects",
    "gc.get_referents": "reaches-objects",
    "sys.settrace": "traces",
    "sys.setprofile": "traces",
    "sys.monitoring.register_callback": "traces",
    "object.__setattr__": "replaces-code",  # only __code__
}
"""Each audit event witnessed, and the kind of line it writes (``<kind> <event>``); every ``ctypes.*`` event too."""

FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})

_STDLIB_CALLERS: dict[tuple[str, str], frozenset[str] | None] = {
    ("collections/__init__.py", "namedtuple"): None,
    ("dataclasses.py", "_create_fn"): None,
    ("typing.py", "_caller"): None,
    ("typing_extensions.py", "_caller"): None,
    ("typing.py", "__init__"): None,  # ForwardRef compiles its annotation
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
}
"""``(file's tail, function)`` of standard-library code that raises these events for its own use, on any input,
and where it hands what it reached to another function, the functions it must be handing it to (the caller's
caller: a generator's consumer) for the event not to count."""

_IMPORT_COMPILERS = frozenset({"source_to_code", "_compile_bytecode"})
CODE_EVENTS = frozenset({"compile", "exec", "marshal.loads", "code.__new__", "function.__new__", "pickle.find_class"})


def witness(fd: int, submission: str, files: list[str]) -> Callable[[str], None]:
    """From now on, write the learner's events to ``fd`` (child side, once its files are written, before they load).

    ``submission`` is the folder of the submission's files, ``files`` the paths the grader wrote
    there: any other file of the work folder imported is code the learner's process wrote.
    Everything the hook needs is bound here, none of it reachable from a module's globals.
    Returns ``tell``, which writes one line of the runtime's own (a banned call as it is recorded) the same way.
    """
    identity = _identity(fd)
    fstat, write, getframe = os.fstat, os.write, sys._getframe
    root = os.path.realpath(submission) + os.sep
    work = os.path.dirname(os.path.realpath(submission)) + os.sep
    written = frozenset(os.path.realpath(f) for f in files)
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this package: the child runtime
    told: set[str] = set()
    busy = [False]

    standard_loaders = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader)

    def imported_file(frame: Any) -> str | None:
        """The file a standard loader loads in this frame of importlib's (``self``), or None: a loader of the
        learner's (a subclass, an attribute of its own, a path that is not a plain string)."""
        loader = None if frame is None else frame.f_locals.get("self")
        if type(loader) not in standard_loaders or set(vars(loader)) - {"name", "path"}:
            return None
        path = vars(loader).get("path")
        return os.path.realpath(path) if type(path) is str else None

    def library_top_level(frame: Any) -> bool:
        """A library module's top level, imported now by a standard loader from outside the work folder."""
        if frame.f_code.co_name != "<module>" or frame.f_back is None:
            return False
        back = frame.f_back
        if back.f_code.co_name != "_call_with_frames_removed":
            return False
        path = imported_file(back.f_back)
        return path is not None and not path.startswith(work)

    def caller_is_stdlib(frame: Any) -> bool:
        code = frame.f_code
        tail = code.co_filename.replace(os.sep, "/")
        for (file, function), consumers in _STDLIB_CALLERS.items():
            if code.co_name == function and tail.endswith("/" + file):
                back = frame.f_back
                if consumers is None:
                    return True
                return back is not None and back.f_code.co_filename == code.co_filename and (
                    back.f_code.co_name in consumers
                )
        return False

    def theirs(event: str, frame: Any) -> bool:
        if frame is None:
            return False
        if frame.f_code.co_name == "_call_with_frames_removed" and frame.f_back is not None:
            if event == "exec":
                return False  # a module's code run by its loader: judged when it was compiled (or unmarshalled)
            frame = frame.f_back  # importlib calls compile and exec through it
        name = frame.f_code.co_name
        if frame.f_code.co_filename.startswith("<frozen importlib") and name in _IMPORT_COMPILERS:
            path = imported_file(frame if name == "source_to_code" else frame.f_back)
            return path is None or (path.startswith(work) and path not in written)  # the learner's loader, or file
        if caller_is_stdlib(frame) or frame.f_code.co_filename.startswith(ours):
            return False  # the runtime's own doing (a lie that wraps it is heard where it runs)
        while frame is not None:
            if frame.f_code.co_filename.startswith(root):
                return True
            if library_top_level(frame):
                return False  # a library imported now raises hundreds of these for its own use
            frame = frame.f_back
        # No file of the hand-in on the stack, and no library's import: the runtime never makes code from
        # text itself, so a callback the learner's code left behind did (weakref.finalize, a stream's flush ...)
        return event in CODE_EVENTS

    def tell(line: str) -> None:
        try:
            if _identity(fd, fstat) != identity or write(fd, (line + "\n").encode()) != len(line) + 1:
                raise RuntimeError("refused: the grader's witness of this process is gone")
        except OSError:
            raise RuntimeError("refused: the grader's witness of this process is gone") from None

    def hear(event: str, args: tuple[Any, ...]) -> None:
        kind = KINDS.get(event) or ("ctypes" if is_ctypes(event) else None)
        if kind is None or busy[0]:
            return
        if event == "object.__getattr__" and (len(args) < 2 or args[1] not in FRAME_ATTRIBUTES):
            return
        if event == "object.__setattr__" and (len(args) < 2 or args[1] != "__code__"):
            return
        line = f"{kind} {event}"
        if line in told:
            return
        busy[0] = True
        try:
            if not theirs(event, getframe(1)):
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
    return name != event and 0 < len(name) <= 40 and name.isascii() and name.replace("_", "a").isalpha()


def _identity(fd: int, fstat: Any = os.fstat) -> tuple[int, int]:
    st = fstat(fd)
    return st.st_dev, st.st_ino
