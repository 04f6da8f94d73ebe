"""Text a learner wrote, made inert: it can be shown anywhere and is never read as an instruction or a line break.

Learner-derived text is everything a hand-in decides: its file names (and the
names inside a zip or folder), its manifest's fields, the strings in its code
that a finding quotes, what its process printed or raised.  Two forms:

- :func:`inert`: a block (``output.txt``, a feedback message), newlines and tabs
  kept, every other control character written as a visible escape;
- :func:`inert_line`: **one** line (an id, a file name, a note, a finding, a
  status, a console line): newlines, tabs and every other control escaped too,
  cut to a length.  Every learner-derived text that becomes a line is made one
  where it is created (a :class:`~grader.instructor.intake.Submission`'s error and
  notes, a review finding), so no later join, split or print can turn it into
  two lines or another row's.

Markup (rich's ``[red]``, HTML, Markdown) is escaped by each renderer at its
sink (``console_text``, the templates' autoescape and ``md`` filter), not here:
the text itself stays what the learner wrote, made visible.
"""

from __future__ import annotations

import re

__all__ = ["MAX_LINE_CHARS", "inert", "inert_line"]

MAX_LINE_CHARS = 400
"""An inert line is cut to this many characters unless told otherwise."""

_UNSAFE = (
    "\x0b-\x1f\x7f-\x9f"  # C0 but tab and newline (CR, ESC, VT, FF, FS-US …), DEL, C1 (NEL, CSI, OSC …)
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides and isolates
    "\u2028\u2029\ud800-\udfff\ufffe\uffff"  # line/paragraph separators, lone surrogates, non-characters
)
_CONTROL = re.compile(f"[\x00-\x08{_UNSAFE}]")
_LINE_CONTROL = re.compile(f"[\x00-\x0a{_UNSAFE}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: object) -> str:
    """Text a submission wrote, safe to show anywhere: control characters become visible escapes.

    C0 controls other than tab and newline (ESC, BEL, CR …), DEL, C1 controls,
    Unicode bidi controls, line/paragraph separators, lone surrogates and the
    non-characters U+FFFE/U+FFFF are written as ``\\x1b`` / ``\\u202e``, so an
    OSC 52 or clear-screen sequence is plain text, never an instruction to a
    terminal, and every output format (UTF-8, XML 1.0) can hold the result.
    ``\\r\\n`` counts as a newline.
    """
    return _CONTROL.sub(_escaped, str(text).replace("\r\n", "\n"))


def inert_line(text: object, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` as one inert line: :func:`inert`, and newlines and tabs escaped too (``\\x0a``), cut to ``limit``."""
    line = _LINE_CONTROL.sub(_escaped, str(text))
    return line if len(line) <= limit else line[: limit - 1] + "…"
