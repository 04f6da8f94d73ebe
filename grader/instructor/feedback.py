"""A student's ``feedback.md`` and ``feedback.html``, and :func:`render`, for them and the class report.

What matters comes first: a submission-wide error, then the failing exercises (each known mistake named once, with
its hint), then the passing ones, compact.
"""

from __future__ import annotations

import base64
import functools
import re
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from grader.instructor import heatmaps
from grader.instructor.inert import MAX_LINE_CHARS, inert
from grader.instructor.out_folder import write_text
from grader.instructor.report_model import MAX_MESSAGE_CHARS, StudentReport, one_line, short_points
from grader.instructor.verdict import FAILED, PASSED

__all__ = ["attach_figures", "render", "render_feedback_html", "render_feedback_md", "write_html", "write_md"]

TEMPLATES = Path(__file__).with_name("templates")


def _fenced(text: str, lang: str = "text") -> str:
    """A Markdown code block that ``text`` cannot break out of, whatever backticks it holds."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _md_inline(text: str) -> str:
    """Text for a Markdown line: on one line, every character Markdown or HTML would act on escaped."""
    return _MD_SPECIAL.sub(r"\\\1", one_line(str(text), MAX_MESSAGE_CHARS))


def _code_spans(text: str) -> markupsafe.Markup:
    """The catalogue's own text for HTML: escaped, then each `code span` shown as code (never a learner's text)."""
    return markupsafe.Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(markupsafe.escape(text))))


@functools.cache
def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=autoescape, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )  # fmt: skip
    env.filters.update(fenced=_fenced, md=_md_inline, points=short_points, code_spans=_code_spans)
    return env


def render(template: str, autoescape: bool, **context: Any) -> str:
    """``templates/<template>`` rendered with ``context`` (HTML: ``autoescape``), with this module's filters."""
    return _environment(autoescape).get_template(template).render(FAILED=FAILED, PASSED=PASSED, **context)


def render_feedback_md(report: StudentReport) -> str:
    return render("feedback.md.j2", False, report=report)


def render_feedback_html(report: StudentReport) -> str:
    return render("feedback.html.j2", True, report=report)


def write_md(folder: Path, report: StudentReport) -> None:
    write_text(folder / "feedback.md", render_feedback_md(report))


def write_html(folder: Path, report: StudentReport) -> None:
    write_text(folder / "feedback.html", render_feedback_html(report))


def attach_figures(report: StudentReport, drawn: list[heatmaps.Drawn]) -> None:
    """Embed each drawn heatmap under its exercise, with its alt text and caption, or say why it is not drawn."""
    by_hook, t = {heatmap.hook: heatmap for heatmap in drawn}, report.t
    for exercise in report.exercises:
        heatmap = by_hook.get(exercise.hook)
        if heatmap is not None and heatmap.png is not None:
            label = inert(heatmap.label)
            alt = t["figure_alt_mask" if heatmap.mask else "figure_alt_weights"].format(label=label)
            exercise.figures = [(heatmap.file_name, base64.b64encode(heatmap.png).decode("ascii"), alt)]
            exercise.figure_captions = [t["figure_caption"].format(label=label)]
        elif heatmap is not None:
            exercise.figure_notes = [one_line(inert(heatmap.note), MAX_LINE_CHARS) or "heatmap not drawn"]

