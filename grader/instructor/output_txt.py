"""``<student>/output.txt``: what the learner's process printed (inert), a section per exercise that printed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from grader.instructor.inert import inert
from grader.instructor.out_folder import write_text
from grader.registry import HOOK_NAMES

__all__ = ["output_text", "write_output"]


def output_text(printed: str, by_hook: Mapping[str, str] | None = None) -> str:
    """``output.txt``'s text: what each exercise's calls printed (a section each, hook order), then everything
    the learner's process printed, in order (its import included); inert."""
    by_hook = by_hook or {}
    sections = [f"== {hook} ==\n{by_hook[hook].rstrip()}\n" for hook in HOOK_NAMES if by_hook.get(hook)]
    if printed and sections:
        sections.append(f"== everything the process printed, in order ==\n{printed.rstrip()}\n")
    elif printed:
        sections.append(printed)
    return inert("\n".join(sections))


def write_output(folder: Path, printed: str, by_hook: Mapping[str, str] | None = None) -> None:
    """``folder/output.txt``: what the learner's process printed (:func:`output_text`); removed if nothing."""
    path, text = folder / "output.txt", output_text(printed, by_hook)
    if text:
        write_text(path, text)
    else:
        path.unlink(missing_ok=True)

