"""The check cell of a notebook: run the public cases against the notebook's own functions.

Every generated notebook ends with a cell tagged ``attnkit-check``::

    from grader.notebook_check import check

    rows = check(globals(), ["dot_product_scores", ...])

:func:`check` adopts the functions (and the chapter's classes) defined in the kernel, runs the public cases of
the given exercises in-process, asks the catalogue of known mistakes about the failing ones (where the
catalogue and ``grader.instructor`` are installed; a learner's kit asks its hints file, :mod:`grader.hints`,
instead), and shows one row per exercise: an HTML table in Jupyter, plain text elsewhere.  A failure's place in
the learner's code names the cell as IPython does (``cell In[7] (`def helper(x):`), line 2``), never the kernel's
temporary file (:func:`grader.cell_places.in_kernel`).  Either way the
status words (*not started*, *failing*, *passing*) and a final "N of M exercises passing." are in the output.
"""

from __future__ import annotations

import html
import types
from dataclasses import dataclass
from typing import Any

from grader.cell_places import in_kernel
from grader.check import FAILING, NOT_STARTED, PASSING, run_public_cases
from grader.registry import adopt

STATUS_COLOUR = {NOT_STARTED: "#777777", FAILING: "#b22222", PASSING: "#228b22"}


@dataclass(frozen=True)
class CheckRow:
    """One exercise of a notebook's check."""

    exercise: str
    status: str  # not started | failing | passing | no tests
    passed: int
    total: int
    first_failure: str = ""
    mistake: str = ""  # the id of a catalogued mistake the failing code looks like
    hint: str = ""
    note: str = ""  # the grader's note on a case that passes (the chapter's assert, say): for no points

    @property
    def cases(self) -> str:
        return f"{self.passed}/{self.total}"


def _namespace(namespace: Any) -> types.SimpleNamespace:
    if isinstance(namespace, dict):
        return types.SimpleNamespace(**{k: v for k, v in namespace.items() if isinstance(k, str)})
    return namespace


def _hints(solution: Any, failing: list[str], lang: str) -> dict[str, tuple[str, str]]:
    """``{hook: (mistake ids, hints)}`` for failing hooks that show known mistakes (several: comma-separated)."""
    if not failing:
        return {}
    try:
        from grader.instructor.diagnosis import diagnose_in_process, hint
    except ImportError:  # a learner's kit: the hints file the release wrote
        from grader.hints import known_mistakes

        shipped = known_mistakes(solution, failing, lang)
        return {h: (", ".join(m for m, _ in found), " ".join(t for _, t in found)) for h, found in shipped.items()}
    try:
        known = diagnose_in_process(solution, failing)
        return {h: (", ".join(ids), " ".join(hint(m, lang)[1] for m in ids)) for h, ids in known.items()}
    except Exception:  # noqa: BLE001 - a hint is a bonus; the table must show anyway
        return {}


def collect(namespace: Any, hooks: list[str], lang: str = "en") -> list[CheckRow]:
    """The rows :func:`check` shows, without showing them."""
    solution = adopt("notebook", "this notebook", [_namespace(namespace)])
    results = run_public_cases(solution, list(hooks))
    failing = [r.exercise for r in results if r.status == FAILING]
    hints = _hints(solution, failing, lang)
    rows = []
    for r in results:
        total = r.passed + r.failed + r.not_implemented
        failure = "" if r.status in (PASSING, NOT_STARTED) else in_kernel(r.first_failure)  # a cell, not a file
        found = hints.get(r.exercise, ("", ""))
        rows.append(CheckRow(r.exercise, r.status, r.passed, total, failure, *found, note="; ".join(r.notes)))
    return rows


def summary(rows: list[CheckRow]) -> str:
    done = sum(r.status == PASSING for r in rows)
    return f"{done} of {len(rows)} exercise{'s' * (len(rows) != 1)} passing."


def _hint_text(row: CheckRow) -> str:
    parts = [f"looks like {row.mistake}: {row.hint}"] if row.mistake else []
    return "  ".join(parts + ([f"note: {row.note}"] if row.note else []))


def as_text(rows: list[CheckRow]) -> str:
    """The table as plain text, one line per exercise, then the summary line."""
    header = ("exercise", "status", "cases", "first failure", "hint")
    body = [(r.exercise, r.status, r.cases, r.first_failure, _hint_text(r)) for r in rows]
    widths = [max(len(header[i]), *(len(b[i]) for b in body)) if body else len(header[i]) for i in range(3)]
    lines = []
    for cols in [header, *body]:
        left = "  ".join(c.ljust(w) for c, w in zip(cols[:3], widths, strict=True))
        extra = "  ".join(c for c in cols[3:] if c)
        lines.append(f"{left}  {extra}".rstrip())
    lines.append(summary(rows))
    return "\n".join(lines)


def as_html(rows: list[CheckRow]) -> str:
    """The table as HTML, then the summary line."""
    esc = html.escape
    out = [
        '<table class="attnkit-check">',
        "<thead><tr><th>exercise</th><th>status</th><th>cases</th><th>first failure</th><th>hint</th></tr></thead>",
        "<tbody>",
    ]
    for r in rows:
        colour = STATUS_COLOUR.get(r.status, "inherit")
        hint = f"<b>looks like {esc(r.mistake)}</b>: {esc(r.hint)}" if r.mistake else ""
        hint += f"{'<br>' if hint else ''}<i>note:</i> {esc(r.note)}" if r.note else ""
        out.append(
            f"<tr><td><code>{esc(r.exercise)}</code></td>"
            f'<td style="color: {colour}; font-weight: bold">{esc(r.status)}</td>'
            f'<td style="text-align: right">{esc(r.cases)}</td>'
            f'<td style="text-align: left">{esc(r.first_failure)}</td>'
            f'<td style="text-align: left">{hint}</td></tr>'
        )
    out += ["</tbody>", "</table>", f"<p>{esc(summary(rows))}</p>"]
    return "\n".join(out)


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def show(rows: list[CheckRow]) -> None:
    """Display the rows: HTML with a plain-text fallback in IPython, printed text elsewhere."""
    if _in_ipython():
        from IPython.display import display

        display({"text/html": as_html(rows), "text/plain": as_text(rows)}, raw=True)
    else:
        print(as_text(rows))


def check(namespace: dict[str, Any], hooks: list[str], lang: str = "en") -> list[CheckRow]:
    """Run the public cases of ``hooks`` against the functions in ``namespace`` (a notebook's ``globals()``).

    Shows one row per exercise (exercise, status, cases passed/total, first
    failure, hint) and "N of M exercises passing."; returns the rows.
    """
    rows = collect(namespace, hooks, lang)
    show(rows)
    return rows
