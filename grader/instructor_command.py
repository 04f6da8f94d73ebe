"""A command of the instructor's kit only: hidden in a learner's kit (``attnkit release``), where calling it says
why."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

__all__ = ["INSTRUCTOR", "InstructorCommand", "hold_out_folder"]

_SPEC = importlib.util.find_spec("grader.instructor")
INSTRUCTOR = (
    _SPEC is not None
    and _SPEC.origin is not None
    and (Path(_SPEC.origin).resolve().parent == Path(__file__).resolve().parent / "instructor")
)
"""True in the instructor's kit (``grader/instructor/`` beside this file, not some other install's).  A learner's kit
(`attnkit release`) has none: there the instructor-only commands are hidden and say so in one line when called."""


class InstructorCommand(click.Command):
    """A command of the instructor's kit only: hidden in a learner's kit, where calling it says why."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("hidden", not INSTRUCTOR)
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not INSTRUCTOR:
            raise click.ClickException(
                f"attnkit {self.name} is for instructors and is not part of this learner's kit; "
                "use attnkit check and attnkit submit."
            )
        ctx.meta["attnkit.args"] = list(args)  # as given, for the command that resumes a stopped run
        return super().parse_args(ctx, args)


def hold_out_folder(out: str | Path) -> None:
    """Hold OUT until the command ends (:func:`grader.instructor.out_folder.holding`); an error (exit 1) naming it
    where another attnkit command is writing it."""
    from grader.instructor.out_folder import OutFolderBusy, holding

    try:
        click.get_current_context().with_resource(holding(out))
    except OutFolderBusy as exc:
        raise click.ClickException(str(exc)) from None
