"""Heatmaps of expected against received attention weights, like the chapter's plots.

Drawn with matplotlib (the ``plots`` extra) into PNG bytes; the HTML feedback
embeds them.  Only 2-D slices are drawn: the first matrix of a batched case.

A heatmap is a courtesy, never a reason for a class to stop: values a learner
sent back may be anything (NaN, ``±inf``, ``±1.7e308``), so the colour range is
kept to finite values within :data:`DRAWN_RANGE` (anything beyond is drawn at the
edge colour and the title says so), and :func:`write` turns any failure into
``heatmap-<hook>.txt``, one line saying why it was not drawn, which the feedback
shows in the figure's place.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path

import torch

WEIGHT_HOOKS = frozenset(
    {
        "softmax_weights",
        "causal_mask",
        "apply_causal_mask",
        "renormalize_masked_weights",
        "dropout_scale",
        "attention_dropout",
    }
)
"""Hooks whose outputs are attention weights or masks: a failing case gets a heatmap."""

DRAWN_RANGE = 1e100
"""Values are drawn within ``±DRAWN_RANGE``: matplotlib's colour bar overflows near ``±1.7e308``."""

NOT_DRAWN_SUFFIX = ".txt"
"""``heatmap-<hook>.txt`` holds why that hook's heatmap is not drawn (one line)."""

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


def write(folder, figures: dict) -> list[str]:
    """Write ``heatmap-<hook>.png`` for each ``hook -> (label, expected, received)``; return the file names.

    Never raises: a heatmap that cannot be drawn is logged and replaced by
    ``heatmap-<hook>.txt`` holding ``heatmap not drawn: <why>``; a folder that
    cannot be written is logged and nothing is drawn.
    """
    folder = Path(folder)
    try:
        for stale in folder.glob("heatmap-*"):  # from an earlier grading of this student
            if stale.is_file() or stale.is_symlink():
                stale.unlink()
        if not figures or not available():
            return []
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("heatmaps for %s not drawn: %s", folder.name, _why(exc))
        return []
    names = []
    for hook, figure in sorted(figures.items()):
        name = f"heatmap-{hook}.png"
        try:
            label, expected, received = figure
            (folder / name).write_bytes(render(f"{hook}: {label}", expected, received))
        except Exception as exc:  # any value a learner sent, any matplotlib failure: no figure, and say why
            why = _why(exc)
            log.warning("heatmap of %s for %s not drawn: %s", hook, folder.name, why)
            try:
                (folder / name).unlink(missing_ok=True)
                (folder / f"heatmap-{hook}{NOT_DRAWN_SUFFIX}").write_text(f"heatmap not drawn: {why}\n", "utf-8")
            except OSError:
                pass
            continue
        names.append(name)
    return names
