"""attnkit's grader: the exercise contract, the solution registry and the tools around them.

Plugin authors write ``from grader import hookimpl``.  The markers are imported when first asked for, so
that ``python -I -m grader.child`` (the learner's side) imports nothing of the kit but that package.
"""

from typing import Any

__all__ = ["hookimpl", "hookspec"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from grader import hookspecs

        return getattr(hookspecs, name)
    raise AttributeError(f"module 'grader' has no attribute {name!r}")
