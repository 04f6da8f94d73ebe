"""The options several ``attnkit`` commands share (``--lang``, ``--out``) and the parsing of ``--devices``."""

from __future__ import annotations

import click

__all__ = ["device_list", "lang_option", "out_option"]


def lang_option(what: str):
    """``--lang``, its help naming ``what`` the command writes in that language."""
    return click.option(
        "--lang",
        type=click.Choice(["en", "zh"]),
        default="en",
        show_default=True,
        help=f"Language of {what} (en: English, zh: Chinese).",
    )


def out_option(help: str):
    """``--out``, the class's out folder, as every instructor command takes it (``attnkit-results`` by default)."""
    return click.option(
        "--out", default="attnkit-results", show_default=True, type=click.Path(file_okay=False), help=help
    )


def device_list(value: str | None) -> list[str] | None:
    """``--devices cpu,meta`` as a list; None where not given."""
    return [d.strip() for d in value.split(",") if d.strip()] if value else None
