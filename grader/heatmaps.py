"""Heatmaps of expected against received attention weights, like the chapter's plots.

Drawn with matplotlib (the ``plots`` extra) into PNG bytes; the HTML feedback
embeds them.  Only 2-D slices are drawn: the first matrix of a batched case.
"""

from __future__ import annotations

import io

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


def render(title: str, expected: torch.Tensor, received: torch.Tensor) -> bytes:
    """Two heatmaps side by side, expected and received, as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    want = first_matrix(expected.detach().double().cpu())
    got = first_matrix(received.detach().double().cpu())
    finite = torch.cat([want[torch.isfinite(want)], got[torch.isfinite(got)]])
    low, high = (float(finite.min()), float(finite.max())) if finite.numel() else (0.0, 1.0)
    fig = Figure(figsize=(8, 3.6), layout="constrained")  # no pyplot: safe from several grading threads
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2)
    for ax, data, label in ((axes[0], want, "expected"), (axes[1], got, "received")):
        image = ax.imshow(data.nan_to_num(nan=high).clamp(low, high).numpy(), cmap="viridis", vmin=low, vmax=high)
        ax.set_title(label)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
    fig.colorbar(image, ax=axes, shrink=0.8)
    fig.suptitle(title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


def write(folder, figures: dict) -> list[str]:
    """Write ``heatmap-<hook>.png`` for each ``hook -> (label, expected, received)``; return the file names."""
    from pathlib import Path

    folder = Path(folder)
    for stale in folder.glob("heatmap-*.png"):  # from an earlier grading of this student
        stale.unlink()
    if not figures or not available():
        return []
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for hook, (label, expected, received) in sorted(figures.items()):
        name = f"heatmap-{hook}.png"
        (folder / name).write_bytes(render(f"{hook}: {label}", expected, received))
        names.append(name)
    return names
