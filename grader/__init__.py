"""attnkit's grader: the exercise contract, the solution registry and the tools around them.

Plugin authors write ``from grader import hookimpl``.
"""

from grader.hookspecs import hookimpl, hookspec

__all__ = ["hookimpl", "hookspec"]
