"""A matplotlib Figure read as data in the learner's process (headless): its image's array, axis and tick
labels, colorbar; ``pyplot.show`` recorded.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .load import _torch
from .wire import FIGURE_IMAGES, FIGURE_TEXT, FIGURE_TICKS  # a figure of more images sends its count alone

# a plot is read as data, never shown, never pickled


def headless_pyplot() -> Any:
    """``matplotlib.pyplot``, imported headless (the Agg backend unless one is chosen already, as the sandbox's
    ``MPLBACKEND`` does); None without matplotlib."""
    if "matplotlib.pyplot" not in sys.modules:
        try:
            import matplotlib
        except ImportError:
            return None
        if not os.environ.get("MPLBACKEND"):
            matplotlib.use("Agg")
    import matplotlib.pyplot

    return matplotlib.pyplot


@contextlib.contextmanager
def recording_show(seen: list[str]) -> Iterator[None]:
    """For the block's duration, ``pyplot.show`` and ``Figure.show`` do nothing but note their name in ``seen`` (a
    ``show`` kept under another name is not caught: a learning aid, like the recorder)."""
    plt = headless_pyplot()
    if plt is None:
        yield
        return
    import matplotlib.figure

    def recorder(name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None if name in seen else seen.append(name)

    saved = [(plt, plt.show), (matplotlib.figure.Figure, matplotlib.figure.Figure.show)]
    plt.show = recorder("pyplot.show")
    matplotlib.figure.Figure.show = recorder("Figure.show")  # type: ignore[method-assign]
    try:
        yield
    finally:
        for owner, show in saved:
            owner.show = show  # type: ignore[method-assign]


def _ticks(axis: Any) -> list[dict[str, Any]]:
    """The major ticks of one axis inside its view, at non-negative positions: ``[{"at", "text"}]``, without drawing."""
    low, high = sorted(float(v) for v in axis.get_view_interval())
    locs = [float(v) for v in axis.get_majorticklocs()]
    texts = axis.get_major_formatter().format_ticks(locs) if locs else []
    return [
        {"at": at, "text": str(text)[:FIGURE_TEXT]}
        for at, text in zip(locs, texts)
        if at == at and 0 <= at and low - 1e-9 <= at <= high + 1e-9
    ][:FIGURE_TICKS]


def figure_facts(value: Any) -> tuple[dict[str, Any], Any] | None:
    """What the grader reads of a returned figure: ``(facts, its images' array as a float64 tensor or None)``; None
    when ``value`` is not a matplotlib ``Figure``.

    The facts: ``images`` (how many ``imshow`` images); the first one's axes' labels and ticks; ``colorbar`` (some image
    has one: a grid's shared colorbar may read any); ``array_problem`` (why an array is not numbers).  The array: the
    image's own for one image; several (at most :data:`FIGURE_IMAGES`) of one shape stacked in axes order,
    ``(n, *image_shape)``; of several shapes, none and ``image_shapes``.  Nothing is drawn; the figure is left open.
    """
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is None or not isinstance(value, figure_module.Figure):
        return None
    images = [(ax, image) for ax in value.axes for image in ax.images]
    facts: dict[str, Any] = {"images": len(images)}
    if not images:
        return facts, None
    ax, image = images[0]
    facts.update(
        xlabel=str(ax.get_xlabel())[:FIGURE_TEXT],
        ylabel=str(ax.get_ylabel())[:FIGURE_TEXT],
        xticks=_ticks(ax.xaxis),
        yticks=_ticks(ax.yaxis),
        colorbar=any(getattr(each, "colorbar", None) is not None for _, each in images),  # one shared is enough
    )
    if len(images) > FIGURE_IMAGES:
        return facts, None
    arrays = []
    for i, (_, each) in enumerate(images):
        try:
            arrays.append(_image_array(each))
        except Exception as exc:  # noqa: BLE001 - an image of strings, of objects …: a fact, not a crash
            which = f"image {i}: " if len(images) > 1 else ""
            facts["array_problem"] = f"{which}{type(exc).__name__}: {exc}"[:FIGURE_TEXT]
            return facts, None
    if len(arrays) == 1:
        return facts, _torch().from_numpy(arrays[0])
    if len({a.shape for a in arrays}) > 1:
        facts["image_shapes"] = [list(a.shape) for a in arrays]
        return facts, None
    import numpy as np

    return facts, _torch().from_numpy(np.ascontiguousarray(np.stack(arrays)))


def _image_array(image: Any) -> Any:
    """One image's array as a float64 numpy array, masked entries NaN (raises for what is not numbers)."""
    import numpy as np

    data = np.ma.asarray(image.get_array())
    return np.ascontiguousarray(np.ma.filled(data.astype(np.float64), np.nan))


def _open_figures() -> set[int]:
    plt = sys.modules.get("matplotlib.pyplot")
    return set(plt.get_fignums()) if plt is not None else set()


def _close_figures(value: Any, before: set[int]) -> None:
    """Close ``value`` if it is a figure, and every pyplot figure opened since ``before`` (none outlives its call)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    with contextlib.suppress(Exception):
        if isinstance(value, sys.modules["matplotlib.figure"].Figure):
            plt.close(value)
        for number in _open_figures() - before:
            plt.close(number)
