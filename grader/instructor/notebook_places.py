"""A notebook hand-in's messages name the cell, never the module it was converted to (:mod:`grader.cell_places`).

The learner's process reports places in the module the grader made of the notebook (``submission/nina.py:14``);
a learner never saw that file.  :func:`in_notebook` says each such place in a result's message as the notebook's
cell, its first line and the line in it (``cell 5 (`def helper(x):`), line 2``): a place that is a whole
parameter of a message (``at``'s ``where``) becomes the message ``cell_place``, said in the report's language; one
inside a text (an import error's line) is said in English there.  Text only: nothing of the learner's is run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from grader.cell_places import entry_place, in_cells
from grader.instructor.intake_model import Submission
from grader.instructor.said import Message, said

NOTEBOOK_FORMAT = "ipynb"
"""``Submission.format`` of a notebook hand-in (intake's)."""


def in_notebook(submission: Submission, message: str) -> str:
    """``message`` with the places in ``submission``'s converted module said as cells (a notebook's only)."""
    source = submission.files.get(submission.entry) if submission.format == NOTEBOOK_FORMAT else None
    if not source or not message:
        return message
    return _said(message, submission.entry, source)


def results_in_notebook(submission: Submission, results: Iterable[Any]) -> list[Any]:
    """Each result (a :class:`~grader.instructor.verdict.CaseResult`) with its message and note :func:`in_notebook`."""
    return [
        dataclasses.replace(r, message=in_notebook(submission, r.message), note=in_notebook(submission, r.note))
        for r in results
    ]


def _said(value: Any, entry: str, source: str) -> Any:
    if isinstance(value, Message):
        params = {name: _param(v, entry, source) for name, v in value.params.items()}
        return value if params == dict(value.params) else said(value.id, **params)
    if isinstance(value, tuple):
        return tuple(_said(v, entry, source) for v in value)
    if isinstance(value, str):
        return in_cells(value, entry, source)
    return value


def _param(value: Any, entry: str, source: str) -> Any:
    if isinstance(value, str) and not isinstance(value, Message):
        place = entry_place(value, entry, source)
        if place is not None:
            cell, first, line = place
            return said("cell_place", cell=cell, first=first, line=line)
    return _said(value, entry, source)
