"""What the witness in a learner's process wrote (:mod:`grader.child.witness`), as review flags.

The review scan reads a hand-in's text; the witness hears what its code did while it was graded,
code made from text at run time included.  Like the scan's, these findings change no points: the
status becomes ``review: …`` and the instructor looks.  A line the witness does not write (the
learner's process wrote to the pipe itself) is a finding of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from grader.child.witness import KINDS, is_ctypes
from grader.instructor.review_flags import Finding

WHERE = "(while graded)"  # The file of a witnessed finding: no line of the hand-in, its process.

CONSTRUCTS = {
    "runs-code": "code made from text at run time",
    "unpickles": "unpickling at run time",
    "reaches-frames": "frame inspection at run time",
    "reaches-objects": "gc's object lists at run time",
    "traces": "a trace or profile hook at run time",
    "ctypes": "ctypes at run time",
    "replaces-code": "a function's __code__ replaced at run time",
}
"""How each kind of line reads in a finding (the event follows in brackets)."""

FORGED = "lines the witness did not write, in the grader's witness pipe"
OVERFLOWED = "more lines in the grader's witness pipe than the witness writes (what it heard may be cut)"


def witnessed_findings(lines: Iterable[str]) -> list[str]:
    """``(while graded):0: <construct> (<event>)`` for each line the witness wrote; one finding for any other line."""
    found: dict[str, None] = {}
    lines = list(lines)
    if "runs-code compile" in lines:  # the code it then ran was made from text: said once
        lines = [line for line in lines if line != "runs-code exec"]
    for line in lines:
        if line == "overflowed":
            found[str(Finding(WHERE, 0, OVERFLOWED))] = None
            continue
        kind, _, event = line.partition(" ")
        known = KINDS.get(event) == kind or (kind == "ctypes" and is_ctypes(event))
        if kind in CONSTRUCTS and known:
            found[str(Finding(WHERE, 0, f"{CONSTRUCTS[kind]} ({event})"))] = None
        else:
            found[str(Finding(WHERE, 0, FORGED))] = None
    return list(found)
