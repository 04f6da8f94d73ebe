"""Heatmaps of expected against received attention weights, like the chapter's plots.

A :class:`Figure` is the data of one heatmap (the most informative failing
weights or mask case of a hook, :func:`informative`: a matrix of at least 4×4
where one exists; its label and the first matrix of the expected and the
received tensor); grading produces them as plain data, the gradebook keeps them with the
results, and the report writer draws them.  :func:`draw` makes PNG bytes with
matplotlib (the ``plots`` extra) for the HTML feedback to embed, and
:func:`write` puts them beside the feedback as ``heatmap-<hook>.png``.

A heatmap is a courtesy, never a reason for a class to stop: values a learner
sent back may be anything (NaN, ``±inf``, ``±1.7e308``), so the colour range is
kept to finite values within :data:`DRAWN_RANGE` (anything beyond is drawn at the
edge colour and the title says so), and :func:`draw` turns any failure into a
:class:`Drawn` without a picture, whose note (``heatmap not drawn: <why>``) the
feedback shows in the figure's place.
"""

from __future__ import annotations

import io
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.hook_table import TABLE

__all__ = [
    "DRAWN_RANGE", "Drawn", "Figure", "colour_range", "draw", "first_matrix", "informative", "render", "write",
]

DRAWN_KINDS = frozenset({"weights", "mask"})
"""Output kinds (:data:`grader.hook_table.OUTPUT_KINDS`) drawn as a heatmap: attention matrices and masks."""

WEIGHT_HOOKS = frozenset(r.hook for r in TABLE if r.output in DRAWN_KINDS)
"""Hooks whose outputs are attention weights or masks (the hook table says): a failing case gets a heatmap."""

DRAWN_RANGE = 1e100
"""Values are drawn within ``±DRAWN_RANGE``: matplotlib's colour bar overflows near ``±1.7e308``."""

log = logging.getLogger(__name__)
warnings.filterwarnings("ignore", category=UserWarning, module=rf"{__name__}$")
"""matplotlib's warnings on a figure drawn here (a layout too tight for its labels, an empty matrix's axis) go to
the instructor's console, which is for grading: the figure is drawn as well as it can be, never worth a line there."""


def first_matrix(t: torch.Tensor) -> torch.Tensor:
    """The first ``(rows, cols)`` slice of a tensor with leading batch dims."""
    while t.dim() > 2:
        t = t[0]
    return t if t.dim() == 2 else t.reshape(1, -1)


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def colour_range(*tensors: torch.Tensor) -> tuple[float, float, bool]:
    """(low, high, clipped): a finite, non-empty range for the colours of ``tensors`` (float64).

    Non-finite values are left out; finite values beyond ``±DRAWN_RANGE`` are
    clipped to it (``clipped`` says so); a constant picture gets a range of 1
    around its value.
    """
    finite = torch.cat([t[torch.isfinite(t)].reshape(-1) for t in tensors])
    if not finite.numel():
        return 0.0, 1.0, False
    low, high = float(finite.min()), float(finite.max())
    clipped = low < -DRAWN_RANGE or high > DRAWN_RANGE
    low, high = max(low, -DRAWN_RANGE), min(high, DRAWN_RANGE)
    if not high > low:
        low, high = low - 0.5, high + 0.5
    return low, high, clipped


VALUES_UP_TO = 8
"""A matrix of at most ``VALUES_UP_TO x VALUES_UP_TO`` cells has its values written in the cells."""


def _values(ax: object, data: torch.Tensor, fmt: str) -> None:
    rows, cols = data.shape
    if rows > VALUES_UP_TO or cols > VALUES_UP_TO:
        return
    for i in range(rows):
        for j in range(cols):
            value = float(data[i, j])
            text = fmt.format(value) if value == value and abs(value) != float("inf") else str(value)
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white",  # type: ignore[attr-defined]
                    path_effects=_outline())


def _outline() -> list:
    from matplotlib import patheffects

    return [patheffects.withStroke(linewidth=1.5, foreground="black")]


def _panel(fig: object, ax: object, data: torch.Tensor, label: str, cmap: str, mask: bool) -> bool:
    """One labelled panel with its own colour scale (a colorbar); whether values were clipped to draw it."""
    low, high, clipped = colour_range(data)
    shown = data.nan_to_num(nan=high, posinf=high, neginf=low).clamp(low, high)
    if mask:
        low, high = 0.0, 1.0
    image = ax.imshow(shown.numpy(), cmap=cmap, vmin=low, vmax=high)  # type: ignore[attr-defined]
    ax.set_title(label)  # type: ignore[attr-defined]
    ax.set_xlabel("key position")  # type: ignore[attr-defined]
    ax.set_ylabel("query position")  # type: ignore[attr-defined]
    bar = fig.colorbar(image, ax=ax, shrink=0.8)  # type: ignore[attr-defined]
    if mask:
        bar.set_ticks([0, 1], labels=["False (kept)", "True (masked)"])
    else:
        bar.set_label(f"{label} value")
    _values(ax, data, "{:.0f}" if mask else "{:.2f}")
    return clipped


def render(title: str, expected: torch.Tensor, received: torch.Tensor) -> bytes:
    """Expected, received and (same shape) their difference, each with its own labelled colour scale, as PNG bytes.

    Small matrices (at most :data:`VALUES_UP_TO` a side) have their values in
    the cells.  Boolean masks are drawn as masks: two colours, a ``True =
    masked`` legend, and the difference is where they disagree.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    mask = expected.dtype == torch.bool
    want = first_matrix(expected.detach().double().cpu())
    got = first_matrix(received.detach().double().cpu())
    panels = [(want, "expected", "viridis"), (got, "received", "viridis")]
    if want.shape == got.shape:
        if mask:
            panels.append(((want != got).double(), "differs (True = wrong)", "Reds"))
        else:
            panels.append(((got - want).nan_to_num(nan=0.0), "received − expected", "coolwarm"))
    fig = Figure(figsize=(4.2 * len(panels), 3.8), layout="constrained")  # no pyplot: safe from grading threads
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels))
    clipped = False
    for ax, (data, label, cmap) in zip(axes, panels):
        clipped = _panel(fig, ax, data, label, cmap, mask) or clipped
    if clipped:
        title += f" (values beyond ±{DRAWN_RANGE:.0e} drawn at the edge colour)"
    fig.suptitle(title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


def informative(shape: tuple[int, ...] | torch.Size) -> tuple[int, int, int]:
    """How well a failing case of this output shape shows a mistake in a heatmap: larger is better.

    A matrix of at least 4×4 first; among those the one nearest 8 a side (its
    values still fit in the cells), then the smaller.  A 1×1 case comes last.
    """
    rows, cols = (int(shape[-2]), int(shape[-1])) if len(shape) >= 2 else (1, int(shape[0]) if shape else 1)
    side = min(rows, cols)
    return (int(side >= 4), -abs(side - VALUES_UP_TO), -rows * cols)


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class Figure:
    """The data of one heatmap: a label (``case (device, dtype)``) and two CPU matrices."""

    label: str
    expected: torch.Tensor
    received: torch.Tensor

    @classmethod
    def of(cls, label: str, expected: torch.Tensor, received: torch.Tensor) -> Figure:
        """The figure of two tensors of any rank: their first matrices, copied to the CPU (all a heatmap draws)."""
        return cls(label, *(first_matrix(t.detach()).cpu().contiguous().clone() for t in (expected, received)))


@dataclass(frozen=True)
class Drawn:
    """One hook's heatmap as drawn: PNG bytes, or ``None`` and a one-line note saying why not."""

    hook: str
    png: bytes | None
    note: str = ""
    label: str = ""  # the case drawn: ``case (device, dtype)``
    mask: bool = False  # a boolean mask (its alt text and legend say so)

    @property
    def file_name(self) -> str:
        return f"heatmap-{self.hook}.png"


def draw(figures: Mapping[str, Figure], who: str = "") -> list[Drawn]:
    """Each ``hook -> Figure`` drawn, hooks sorted; ``[]`` where matplotlib is not installed.

    Never raises: a figure that cannot be drawn (any value a learner sent, any
    matplotlib failure) is logged and comes back with ``png=None`` and the note
    ``heatmap not drawn: <why>``.  ``who`` names the student in the log.
    """
    if not figures or not available():
        return []
    drawn = []
    for hook, figure in sorted(figures.items()):
        try:
            png = render(f"{hook}: {figure.label}", figure.expected, figure.received)
            drawn.append(Drawn(hook, png, label=figure.label, mask=figure.expected.dtype == torch.bool))
        except Exception as exc:
            why = _why(exc)
            log.warning("heatmap of %s for %s not drawn: %s", hook, who or "a student", why)
            drawn.append(Drawn(hook, None, f"heatmap not drawn: {why}"))
    return drawn


def write(folder: str | Path, drawn: list[Drawn]) -> list[str]:
    """Write ``heatmap-<hook>.png`` into ``folder`` for each drawn heatmap; return the file names.

    Heatmaps an earlier grading left in the folder go first, so the folder
    holds exactly this grading's.  An ``OSError`` is raised to the caller (the
    report writer notes it and goes on).
    """
    folder = Path(folder)
    for stale in folder.glob("heatmap-*"):  # from an earlier grading of this student
        if stale.is_file() or stale.is_symlink():
            stale.unlink()
    names = []
    for heatmap in drawn:
        if heatmap.png is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / heatmap.file_name).write_bytes(heatmap.png)
            names.append(heatmap.file_name)
    return names
