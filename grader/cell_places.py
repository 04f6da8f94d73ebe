"""Where in a notebook an error happened, named as the learner sees the notebook: the cell and its first line.

A notebook hand-in is graded as the module :func:`grader.notebooks.notebook_to_source` makes of it, and run in a
kernel as cells with temporary file names (``/tmp/ipykernel_4242/2148950658.py``); neither file is one the
learner ever saw.  So an error's ``file:line`` is said here as ``cell 5 (`def helper(x):`), line 2``:

- :func:`converted_place` / :func:`in_cells`: a line of the converted module (each cell starts at its
  ``# --- cell N ---`` line, N counting every cell of the notebook from 1, its lines following one for one);
  the cell's first line is read back from the module's text (a line left out is there as a comment);
- :func:`in_kernel`: a kernel's cell file, as IPython names the cell in its own tracebacks (``cell In[7]``), its
  first line from the kernel's line cache.

Text only: nothing here runs or imports the learner's code.
"""

from __future__ import annotations

import bisect
import functools
import linecache
import os
import re
from collections.abc import Iterable
from typing import Any

CELL_PLACE = "cell {cell} (`{first}`), line {line}"
"""How a place in a notebook is said (the grader's message ``cell_place`` says it so, in English)."""
FIRST_LINE_CHARS = 60
"""A cell's first line is shown up to this many characters."""

_MARKER = re.compile(r"# --- cell (\d+)\b")
_DROPPED = re.compile(r"^(?:.*?  )?# \[(?:not run|left out|partly run)\] (.*)$")  # grader.notebooks' comments


def first_line(lines: Iterable[str]) -> str:
    """The first line of a cell that is not blank, stripped and cut short, without backticks."""
    line = next((ln.strip() for ln in lines if ln.strip()), "")
    line = line.replace("`", "'")
    return line if len(line) <= FIRST_LINE_CHARS else line[: FIRST_LINE_CHARS - 1] + "…"


def converted_place(source: str, lineno: int) -> tuple[int, str, int] | None:
    """``(cell, first line, line in the cell)`` of line ``lineno`` of a module made of a notebook, or None
    where that line is in no cell (the header)."""
    lines, starts = _cells(source)
    if not 0 < lineno <= len(lines):
        return None
    at = bisect.bisect_right(starts, lineno - 1) - 1  # the last cell marker at or above the line
    if at < 0:
        return None
    start = starts[at]
    end = starts[at + 1] if at + 1 < len(starts) else len(lines)
    number = int(_MARKER.match(lines[start]).group(1))  # type: ignore[union-attr]
    return number, first_line(_original(lines[n]) for n in range(start + 1, end)), lineno - start - 1


@functools.lru_cache(maxsize=16)
def _cells(source: str) -> tuple[list[str], list[int]]:
    """The module's lines and the indices of its cell markers (read once a module: a hand-in's messages are many)."""
    lines = source.splitlines()
    return lines, [n for n, line in enumerate(lines) if _MARKER.match(line)]


def _original(line: str) -> str:
    dropped = _DROPPED.match(line)
    return dropped.group(1) if dropped else line


def place_text(cell: int | str, first: str, line: int) -> str:
    return CELL_PLACE.format(cell=cell, first=first, line=line)


def in_cells(text: str, entry: str, source: str) -> str:
    """``text`` with each ``entry:N`` (``nina.py:14``, ``submission/nina.py:14``) said as the place in the notebook
    the module ``source`` (saved as ``entry``) was made of."""

    def said(match: re.Match[str]) -> str:
        place = converted_place(source, int(match.group(1)))
        return place_text(*place) if place else match.group(0)

    return _entry_pattern(entry).sub(said, text)


def _entry_pattern(entry: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w./\\-])(?:[\w.-]+[/\\])*{re.escape(entry)}:(\d+)\b")


def entry_place(where: str, entry: str, source: str) -> tuple[int, str, int] | None:
    """The place of a ``where`` that is exactly ``entry:N`` (a folder before it allowed), else None."""
    match = _entry_pattern(entry).fullmatch(where.strip())
    return converted_place(source, int(match.group(1))) if match else None


_FILE_LINE = re.compile(r"(?<![\w.])((?:[A-Za-z]:)?[^\s:()\"']*\.py):(\d+)\b")


def in_kernel(text: str) -> str:
    """``text`` with each ``file.py:N`` that is a cell this IPython kernel ran said as ``cell In[7] (…), line N``;
    ``text`` itself outside IPython."""
    compiler = _ipython_compiler()
    if compiler is None:
        return text

    def said(match: re.Match[str]) -> str:
        path, line = match.group(1), int(match.group(2))
        for name in (path, os.path.abspath(path)):
            try:
                label = compiler.format_code_name(name)
            except Exception:  # noqa: BLE001 - an IPython without it, or an odd name: the path stays
                label = None
            if label:
                return place_text(label[1], first_line(linecache.getlines(name)), line)
        return match.group(0)

    return _FILE_LINE.sub(said, text)


def _ipython_compiler() -> Any:
    import sys

    if "IPython" not in sys.modules:
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "compile", None) if shell is not None else None
