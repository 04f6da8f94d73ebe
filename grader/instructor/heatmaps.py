"""Heatmaps of expected against received attention weights, like the chapter's plots.

A :class:`Figure` is the data of one heatmap (the first failing weights case of
a hook: its label and the first matrix of the expected and the received
tensor); grading produces them as plain data, the gradebook keeps them with the
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.hook_table import TABLE

__all__ = ["DRAWN_RANGE", "Drawn", "Figure", "colour_range", "draw", "first_matrix", "render", "write"]

DRAWN_KINDS = frozenset({"weights", "mask"})
"""Output kinds (:data:`grader.hook_table.OUTPUT_KINDS`) drawn as a heatmap: attention matrices and masks."""

WEIGHT_HOOKS = frozenset(r.hook for r in TABLE if r.output in DRAWN_KINDS)
"""Hooks whose outputs are attention weights or masks (the hook table says): a failing case gets a heatmap."""

DRAWN_RANGE = 1e100
"""Values are drawn within ``±DRAWN_RANGE``: matplotlib's colour bar overflows near ``±1.7e308``."""

log = logging.getLogger(__name__)


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


def render(title: str, expected: torch.Tensor, received: torch.Tensor) -> bytes:
    """Two heatmaps side by side, expected and received, as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    want = first_matrix(expected.detach().double().cpu())
    got = first_matrix(received.detach().double().cpu())
    low, high, clipped = colour_range(want, got)
    if clipped:
        title += f" (values beyond ±{DRAWN_RANGE:.0e} drawn at the edge colour)"
    fig = Figure(figsize=(8, 3.6), layout="constrained")  # no pyplot: safe from several grading threads
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2)
    for ax, data, label in ((axes[0], want, "expected"), (axes[1], got, "received")):
        shown = data.nan_to_num(nan=high, posinf=high, neginf=low).clamp(low, high)
        image = ax.imshow(shown.numpy(), cmap="viridis", vmin=low, vmax=high)
        ax.set_title(label)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
    fig.colorbar(image, ax=axes, shrink=0.8)
    fig.suptitle(title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


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
            drawn.append(Drawn(hook, render(f"{hook}: {figure.label}", figure.expected, figure.received)))
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
