"""Text a learner wrote, made inert: it can be shown anywhere and is never read as an instruction or a line break.

Learner-derived text is everything a hand-in decides: its file names (and those inside a zip or folder), its
manifest's fields, the strings in its code a finding quotes, what its process printed or raised.  Two forms:

- :func:`inert`: a block (``output.txt``, a feedback message), newlines and tabs kept, every other control
  character written as a visible escape;
- :func:`inert_line`: **one** line (an id, a file name, a note, a finding, a status, a console line): newlines, tabs
  and controls escaped, every run of spaces (any Unicode space) folded to one, every character that shows as
  nothing or as blank escaped, cut to a length.  Learner-derived text that becomes a line is made one where it is
  created (a :class:`~grader.instructor.intake_model.Submission`'s error and notes, a review finding), so no later join,
  split or print can turn it into two lines or another row's.

Blank space is where a line can be made to look like two: a terminal or rich wraps a long line at its spaces, and a
run of fillers (U+2800 braille blanks, Hangul fillers) pads a line to the width with nothing visible, so that what
follows seems to start a line of its own.  So no space is ever more than one, and a filler is its escape.  (The
console also never wraps a learner's line: ``console_summary.print_line``.)  Markup (rich's ``[red]``, HTML,
Markdown) is escaped by each renderer at its sink (``console_text``, the templates' autoescape and ``md`` filter),
not here: the text stays what the learner wrote, made visible.
"""

from __future__ import annotations

import re
import unicodedata

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


BLANKS = "\u115f\u1160\u2800\u3164\uffa0"
"""Letters and symbols that show as blank: the Hangul choseong and jungseong fillers, the braille blank, the Hangul
filler and its halfwidth form."""

_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")
_SPACES = re.compile(" {2,}")


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _escaped(match: re.Match[str]) -> str:
    return _escape(ord(match.group()))


def _unmeasured(ch: str, kind: str) -> bool:
    """A character whose width terminals and rich disagree on, so that a line cut at the width is not: unassigned
    and private-use code points (Cn, Co), emoji skin-tone modifiers, regional indicators, variation selectors."""
    code = ord(ch)
    return (
        kind in ("Cn", "Co")
        or 0x1F3FB <= code <= 0x1F3FF
        or 0x1F1E6 <= code <= 0x1F1FF
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
    )


def _shown(match: re.Match[str]) -> str:
    """Characters outside ASCII as a line shows them: a Unicode space (Zs) a plain one; a format character (Cf:
    zero width spaces and joiners, the soft hyphen, tags …), a blank (:data:`BLANKS`) or a character of no agreed
    width (:func:`_unmeasured`; red team meta4 d1) its escape."""
    out = []
    for ch in match.group():
        kind = unicodedata.category(ch)
        hidden = kind == "Cf" or ch in BLANKS or _unmeasured(ch, kind)
        out.append(" " if kind == "Zs" else _escape(ord(ch)) if hidden else ch)
    return "".join(out)


def inert(text: object) -> str:
    """Text a submission wrote, safe to show anywhere: control characters become visible escapes.

    C0 controls but tab and newline (ESC, BEL, CR …), DEL, C1, bidi controls, line/paragraph separators, lone
    surrogates and U+FFFE/U+FFFF are written ``\\x1b`` / ``\\u202e``, so an OSC 52 or clear-screen sequence is plain
    text, never an instruction to a terminal, and UTF-8 and XML 1.0 can hold the result.  ``\\r\\n`` is a newline.
    """
    return _CONTROL.sub(_escaped, str(text).replace("\r\n", "\n"))


def inert_line(text: object, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` as one inert line, cut to ``limit``: :func:`inert`, newlines and tabs escaped too (``\\x0a``), every
    run of spaces one plain space, and every invisible or blank-looking character escaped (``\\u2800``)."""
    line = _LINE_CONTROL.sub(_escaped, str(text))
    line = _SPACES.sub(" ", _NOT_ASCII.sub(_shown, line))
    return line if len(line) <= limit else line[: limit - 1] + "…"
