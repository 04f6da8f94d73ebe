"""The ``attnkit`` command line."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from grader.registry import HOOK_NAMES

STATUS_STYLE = {"passing": "green", "failing": "red", "not started": "yellow", "no tests": "dim"}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="attnkit")
def main() -> None:
    """attnkit: auto-graded exercises on attention mechanisms in PyTorch.

    Learners fill in the stubs under exercises/ and run `attnkit check`.
    """


@main.command()
@click.argument("exercise", nargs=-1, type=click.Choice(HOOK_NAMES))
@click.option(
    "--solution",
    default="exercises",
    show_default=True,
    help="What to check: 'exercises' (your own package), 'reference', a .py file or a folder.",
)
def check(exercise: tuple[str, ...], solution: str) -> None:
    """Run the public cases for EXERCISE (default: all) and show where you stand.

    Each exercise is 'not started' while its stub still raises
    NotImplementedError, 'failing' with the first failed case in one line, or
    'passing'.  Exits 0 only when every exercise asked for passes.
    """
    from grader.check import NOT_STARTED, PASSING, run_public_cases

    console = Console()
    results = run_public_cases(solution=solution, exercises=list(exercise) or None)
    table = Table(title=f"attnkit check — {solution}", show_lines=False)
    table.add_column("exercise", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("cases", justify="right", no_wrap=True)
    table.add_column("first failure")
    for r in results:
        total = r.passed + r.failed + r.not_implemented
        detail = "" if r.status in (PASSING, NOT_STARTED) else r.first_failure
        table.add_row(
            r.exercise,
            f"[{STATUS_STYLE[r.status]}]{r.status}[/]",
            f"{r.passed}/{total}",
            detail,
        )
    console.print(table)
    done = sum(r.status == PASSING for r in results)
    console.print(f"{done} of {len(results)} exercises passing.")
    sys.exit(0 if done == len(results) else 1)


if __name__ == "__main__":
    main()
