"""What the learner's code does to its own process that no reply can take back.

Every fact a reply carries is written by the learner's process, and code in that process can
rewrite it.  Rewriting it needs one of a few things, each an audit event: running code made
from text at run time (what hides it from the review scan), unpickling, reaching the
interpreter's frames or objects, tracing, ctypes, replacing a function's code.  An audit hook
(it cannot be removed) writes each kind of event the learner's code raises, once, to a pipe
whose reading end only the grader holds, before the event takes effect.  A written line
cannot be taken back; a write that fails (the pipe closed, replaced or full) refuses the event.
The grader turns the lines into review flags (``grader.instructor.review_flags.WITNESSED``).

An event is the learner's when a frame of its code (a file of the submission, or code compiled
from text) is on the stack before any library module's top level (a library imported lazily
raises hundreds of these), and the caller is not one of the standard library's own users
(``namedtuple``, ``dataclasses``, ``typing``, ``enum``, ``logging``, ``ast.parse``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

KINDS: dict[str, str] = {
    "compile": "runs-code",
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


def witness(fd: int, submission: str, files: list[str]) -> None:
    """From now on, write the learner's events to ``fd`` (child side, once its files are written, before they load).

    ``submission`` is the folder of the submission's files, ``files`` the paths the grader wrote
    there: any other file of the work folder imported is code the learner's process wrote.
    Everything the hook needs is bound here, none of it reachable from a module's globals.
    """
    identity = _identity(fd)
    fstat, write, getframe = os.fstat, os.write, sys._getframe
    root = os.path.realpath(submission) + os.sep
    work = os.path.dirname(os.path.realpath(submission)) + os.sep
    written = frozenset(os.path.realpath(f) for f in files)
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep  # this package: the child runtime
    told: set[str] = set()
    busy = [False]

    def learners(filename: str) -> bool:
        if filename.startswith("<"):
            return not filename.startswith("<frozen")  # code compiled from text
        return filename.startswith(root)

    def caller_is_stdlib(frame: Any) -> bool:
        code = frame.f_code
        tail = code.co_filename.replace(os.sep, "/")
        for (file, function), consumers in _STDLIB_CALLERS.items():
            if code.co_name == function and tail.endswith("/" + file):
                back = frame.f_back
                return consumers is None or (back is not None and back.f_code.co_name in consumers)
        return False

    def theirs(event: str, args: tuple[Any, ...], frame: Any) -> bool:
        if frame is None:
            return False
        if frame.f_code.co_name == "_call_with_frames_removed" and frame.f_back is not None:
            frame = frame.f_back  # importlib calls compile and exec through it
        name = frame.f_code.co_name
        if frame.f_code.co_filename.startswith("<frozen importlib") and name in _IMPORT_COMPILERS:
            path = args[1] if event == "compile" and len(args) > 1 else frame.f_locals.get("bytecode_path")
            real = os.path.realpath(str(path or ""))
            return real.startswith(work) and real not in written  # a file the learner's process wrote
        if caller_is_stdlib(frame) or frame.f_code.co_filename.startswith(ours):
            return False  # the runtime's own doing (a lie that wraps it is heard where it runs)
        while frame is not None:
            filename = frame.f_code.co_filename
            if learners(filename):
                return True
            if frame.f_code.co_name == "<module>" and not filename.startswith("<"):
                return False  # a library's top level, imported now
            frame = frame.f_back
        return False

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
            if not theirs(event, args, getframe(1)):
                return
            if _identity(fd, fstat) != identity or write(fd, (line + "\n").encode()) != len(line) + 1:
                raise RuntimeError("refused: the grader's witness of this process is gone")
            told.add(line)
        except OSError:
            raise RuntimeError("refused: the grader's witness of this process is gone") from None
        finally:
            busy[0] = False

    sys.addaudithook(hear)


def is_ctypes(event: str) -> bool:
    """``ctypes.<name>``: one of ctypes' audit events (``sys.audit`` can raise any name; only these are written)."""
    name = event.removeprefix("ctypes.")
    return name != event and 0 < len(name) <= 40 and name.isascii() and name.replace("_", "a").isalpha()


def _identity(fd: int, fstat: Any = os.fstat) -> tuple[int, int]:
    st = fstat(fd)
    return st.st_dev, st.st_ino
