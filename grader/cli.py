"""The ``attnkit`` command line."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader.cli_options import device_list, lang_option
from grader.course_commands import diff, override
from grader.grade_command import grade
from grader.handin import kit_version
from grader.instructor_command import InstructorCommand
from grader.registry import HOOK_NAMES, Solution

_HAS_REFERENCE = (Path(__file__).resolve().parent.parent / "solutions" / "reference.py").is_file()
"""The instructor's repository holds the reference beside grader/; a learner's kit (or a learner's own solutions
package elsewhere on the path) does not."""

STATUS_STYLE = {"passing": "green", "failing": "red", "not started": "yellow", "no tests": "dim"}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=kit_version(), prog_name="attnkit")
def main() -> None:
    """attnkit: auto-graded exercises on attention mechanisms in PyTorch.

    Learners fill in the stubs under exercises/, run `attnkit check`, and hand in their work with `attnkit submit`.
    """


def _exercises_named(ctx: click.Context, param: click.Parameter, names: tuple[str, ...]) -> tuple[str, ...]:
    """Hook names and group names (``scores``: its exercises, docs/learners.md's table); a typo: "did you mean"."""
    import difflib

    from grader.hook_table import GROUPS, hooks_in

    hooks: list[str] = []
    for name in names:
        if name in GROUPS:
            hooks += hooks_in(name)
        elif name in HOOK_NAMES:
            hooks.append(name)
        else:
            close = difflib.get_close_matches(name, [*HOOK_NAMES, *GROUPS], n=3, cutoff=0.5)
            maybe = f"; did you mean {' or '.join(close)}?" if close else f"; the groups are {', '.join(GROUPS)}"
            raise click.BadParameter(f"no exercise {name!r}{maybe}", ctx=ctx, param=param)
    return tuple(dict.fromkeys(hooks))


@main.command()
@click.argument("exercise", nargs=-1, callback=_exercises_named)
@click.option(
    "--solution",
    default="exercises",
    show_default=True,
    help="What to check: 'exercises' (your own package), a .py file or a folder"
    + (", or 'reference' (the instructor's)." if _HAS_REFERENCE else "."),
)
@lang_option("the hints for known mistakes")
@click.option(
    "--watch",
    is_flag=True,
    help="Keep running: check again each time you save your code or the public tests (Ctrl-C to stop).",
)
def check(exercise: tuple[str, ...], solution: str, lang: str, watch: bool) -> None:
    """Run the public cases for EXERCISE (default: all) and show where you stand.

    EXERCISE is an exercise (softmax_weights) or a group of them (scores, masking, dropout, heads, modules,
    long_sequences, plotting, patterns).

    Each exercise is 'not started' while its stub still raises NotImplementedError, 'failing' with the first failed case
    in one message, or 'passing'.  Exits 0 only when every exercise asked for passes.

    With --watch it stays running and checks again on every save, in well under the first round's time (torch stays
    loaded); Ctrl-C stops it, with exit status 0.

    It checks the exercises/ of the kit it runs in (the table's title names the folder); a test that runs longer than
    the grader's limit on a call fails its exercise with the grader's words.
    """
    from grader.check import use_kit_here  # first: see grader.check's NumPy note

    use_kit_here()
    console = Console()
    if not watch:
        sys.exit(_check_once(console, solution, list(exercise), lang))
    import time

    from grader.watch import watch as watch_files
    from grader.watch import watched_roots

    def one_round() -> None:
        _check_once(console, solution, list(exercise), lang, started=time.perf_counter())

    watch_files(one_round, watched_roots(solution), lambda line: console.print(escape(line), highlight=False))
    sys.exit(0)


def _check_once(console: Console, solution: str, exercise: list[str], lang: str, started: float | None = None) -> int:
    """One round of ``attnkit check``: load, run the public cases, print the table; the exit status.

    ``started`` (a ``time.perf_counter()``): the summary line also says how long the round took.
    """
    import time

    # grader.check first: see its NumPy note
    from grader.check import FAILING, NOT_STARTED, PASSING, public_tests_dir, run_public_cases
    from grader.registry import SolutionError, load_solution

    def took() -> str:
        return "" if started is None else f"  [dim]({time.perf_counter() - started:.2f} s)[/]"

    try:
        loaded = load_solution(solution)
    except SolutionError as exc:
        console.print(f"[red]Your code does not load:[/] {escape(str(exc))}{took()}")
        return 1
    except ImportError as exc:  # `--solution reference` in a learner's kit, which has no solutions/
        console.print(f"[red]Cannot load {escape(solution)!r}:[/] {escape(str(exc))}")
        return 1
    with _progress_console(console) as shown, shown.status("Checking …") as status:
        results = run_public_cases(
            solution=loaded,
            exercises=exercise or None,
            checking=lambda hook: status.update(f"Checking {escape(hook)} …"),
            say=lambda line: shown.print(escape(line), highlight=False),
        )
    failing = [r.exercise for r in results if r.status == FAILING and not r.timed_out]  # no hint reruns a loop
    known = _known_mistakes(loaded, failing, lang) if failing else {}
    title = f"attnkit check — {public_tests_dir() if solution == 'exercises' else solution}"  # which folder
    table = Table(title=title, show_lines=False, min_width=min(len(title) + 4, console.width))
    table.add_column("exercise", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("cases", justify="right", no_wrap=True)
    table.add_column("first failure", overflow="fold")  # a hint in Chinese has no spaces to wrap at: folded, not cut
    for r in results:
        total = r.passed + r.failed + r.not_implemented
        detail = "" if r.status in (PASSING, NOT_STARTED) else escape(r.first_failure)
        for mistake, text in known.get(r.exercise, []):
            detail += f"\n[bold]looks like {mistake}[/]: {escape(text)}"
        for note in r.notes:  # the grader's note on a case that passes, for no points
            detail += ("\n" if detail else "") + f"[dim]note:[/] {escape(note)}"
        table.add_row(r.exercise, f"[{STATUS_STYLE[r.status]}]{r.status}[/]", f"{r.passed}/{total}", detail)
    console.print(table)
    done = sum(r.status == PASSING for r in results)
    console.print(f"{done} of {len(results)} exercise{'s' * (len(results) != 1)} passing.{took()}")
    return 0 if done == len(results) else 1


@contextlib.contextmanager
def _progress_console(console: Console) -> Iterator[Console]:
    """A console for the progress of a run, writing where ``console`` does: the run silences ``sys.stdout``, and
    pytest's capture points the descriptor elsewhere while a test runs, so it writes to a copy of the descriptor."""
    console.file.flush()
    try:
        fd = os.dup(console.file.fileno())
    except (AttributeError, OSError, ValueError):  # not a file with a descriptor (a test's stream)
        yield Console(file=console.file)
        return
    encoding = getattr(console.file, "encoding", None) or "utf-8"
    with os.fdopen(fd, "w", encoding=encoding, errors="replace") as stream:
        yield Console(file=stream)


def _known_mistakes(loaded: Solution, failing: list[str], lang: str) -> dict[str, list[tuple[str, str]]]:
    """``{hook: [(mistake id, hint), ...]}`` for failing hooks that show known mistakes."""
    try:
        from grader.instructor.diagnosis import diagnose_in_process, hint
    except ImportError:  # a learner's kit: no diagnosis here, but the hints file the release wrote
        from grader.hints import known_mistakes

        return known_mistakes(loaded, failing, lang)
    found = diagnose_in_process(loaded, failing)
    return {hook: [(mistake, hint(mistake, lang)[1]) for mistake in ids] for hook, ids in found.items()}


@main.command(cls=InstructorCommand)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the hidden inputs to audit with.")
@click.option("--devices", metavar="LIST", help="Comma-separated devices (default: all present).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of tables.")
@click.option(
    "--group", "groups", multiple=True, metavar="GROUP", help="Audit this exercise group (repeatable; default: all)."
)
def audit(seed: int, devices: str | None, as_json: bool, groups: tuple[str, ...]) -> None:
    """Prove the hidden suite: the reference passes everything, every known mistake fails something.

    Runs every public and hidden case against the reference on every device present, and the hidden cases against each
    entry of the catalogue of known mistakes.  Exits non-zero if the reference fails anything or a mistake survives.
    """
    import json

    from grader.hook_table import GROUPS
    from grader.instructor.audit import matrix_rows, run_audit

    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise click.UsageError(f"no exercise group {', '.join(unknown)}; the groups are: {', '.join(GROUPS)}")
    report = run_audit(seed, device_list(devices), groups=groups)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
        sys.exit(0 if report.ok else 1)
    console = Console(width=None if sys.stdout.isatty() else 200)  # the matrix needs room in CI logs
    table = Table(title=f"known mistakes × exercises (failed hidden cases, seed {seed})", header_style="bold")
    table.add_column("mistake", no_wrap=True)
    for i, _ in enumerate(HOOK_NAMES, start=1):
        table.add_column(str(i), justify="right")
    table.add_column("killed", justify="center")
    for row in matrix_rows(report):
        table.add_row(*row, style="" if row[-1] == "yes" else "red")
    table.caption = "  ".join(f"{i}={hook}" for i, hook in enumerate(HOOK_NAMES, start=1))
    console.print(table)
    console.print(f"devices: {', '.join(report.devices)}")
    failures = report.public_failures + report.hidden_failures
    _print_failures(console, failures, "The reference", "The reference passes every public and hidden case.")
    survivors = [m.id for m in report.mistakes if not m.killed]
    _print_killed(console, len(report.mistakes), "known mistakes", survivors, "Survivors")
    _print_model(console, report)
    sys.exit(0 if report.ok else 1)


def _print_failures(console: Console, failures: list[str], who: str, passes: str) -> None:
    """``passes`` in green, or in red how many cases ``who`` fails, and the first 20 of them."""
    if not failures:
        console.print(f"[green]{passes}[/]")
        return
    console.print(f"[red]{who} fails {len(failures)} case(s):[/]")
    for line in failures[:20]:
        console.print(f"  {escape(line)}")


def _print_killed(console: Console, total: int, what: str, alive: list[str], label: str) -> None:
    """``k of n <what> killed.``, green where every one was, and the survivors after ``label``."""
    console.print(f"[{'red' if alive else 'green'}]{total - len(alive)} of {total} {what} killed.[/]")
    if alive:
        console.print(f"[red]{label}: {', '.join(alive)}[/]")


def _print_model(console: Console, report: Any) -> None:
    """The mistake model's part of the audit: its knobs, each killed or not, and the model with none on."""
    from grader.instructor.audit import model_rows

    table = Table(title="the mistake model: each knob alone (failed hidden cases)", header_style="bold")
    for name in ("exercise", "knob", "mistake", "failed", "killed"):
        table.add_column(name, no_wrap=True, justify="right" if name == "failed" else "left")
    for row in model_rows(report):
        table.add_row(*row, style="" if row[-1] == "yes" else "red")
    console.print(table)
    passes = "With no knob on, the model passes every hidden case."
    _print_failures(console, report.model_failures, "With no knob on, the model", passes)
    alive = [f"{k.hook} {k.knob}" for k in report.model if not k.killed]
    _print_killed(console, len(report.model), "model knobs", alive, "Model survivors")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The zip to write (default: submission-<id>-<date>.zip in the current folder, never overwritten).",
)
@click.option(
    "--student",
    metavar="ID",
    help="Your student id, written into the manifest and the file name "
    "(default: the ATTNKIT_STUDENT environment variable; without either the hand-in carries no id).",
)
@click.option("--no-check", is_flag=True, help="Do not run the public cases; the manifest then says 'not checked'.")
@click.option("--force", is_flag=True, help="Pack even what would grade as an error (a syntax error, say), warning.")
def submit(paths: tuple[Path, ...], out: Path | None, student: str | None, no_check: bool, force: bool) -> None:
    """Pack your work into one zip to hand in.

    PATHS: your exercises/ folder (default: the one in the current folder's kit), a notebook, several notebooks or a
    folder of them (merged into one notebooks.ipynb), or a .py file.  The zip holds your code -- no tests, no caches, no
    hidden files -- and manifest.json: the kit version, the time, a sha256 of every file, your public check results
    right now and your student id (--student, else ATTNKIT_STUDENT, which a JupyterHub admin can set for every user).
    """
    from grader.submit import SubmitError, Validation
    from grader.submit import submit as pack

    console = Console()
    try:
        packed = pack(list(paths), out, student=student, validation=Validation(public_checks=not no_check), force=force)
    except SubmitError as exc:
        raise click.ClickException(str(exc)) from exc
    manifest = packed.manifest
    table = Table(title=f"{packed.out.name}: {packed.kind}", show_lines=False)
    table.add_column("file", no_wrap=True)
    table.add_column("bytes", justify="right")
    table.add_column("sha256", no_wrap=True)
    for name, sha in manifest["files"].items():
        table.add_row(escape(name), str(packed.sizes.get(name, "")), sha[:16] + "…")
    table.add_row("manifest.json", "", "kit version, time, hashes, checks")
    console.print(table)
    if packed.checks:
        behind = [(hook, c) for hook, c in packed.checks.items() if c["status"] != "passing"]
        for hook, c in behind:
            colour = STATUS_STYLE.get(c["status"])
            click.echo(
                f"  {hook}: {click.style(c['status'], fg=colour if colour != 'dim' else None)} "
                f"({c['passed']}/{c['total']})"
            )
        click.echo(
            f"Public checks at packing time: {manifest['passing']} of {manifest['exercises']} exercises passing."
        )
    else:
        click.echo(f"Public checks: {manifest['check_note']}")
    for line in packed.warnings:
        click.echo(f"{click.style('warning:', fg='yellow')} {line}")
    click.echo(f"Hand in this file: {click.style(str(packed.out.resolve()), bold=True)}")


@main.command(cls=InstructorCommand)
@click.argument("dest", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--force",
    is_flag=True,
    help="Release into a non-empty DEST: removes the files an earlier release wrote there "
    "(listed in DEST/.attnkit-release.json) and overwrites the files of this release; "
    "never deletes anything else (a .git folder, say), which is kept and listed.",
)
def release(dest: Path, force: bool) -> None:
    """Write the learner's kit into DEST: stubs, public tests, notebooks, README; no answers.

    DEST gets exercises/ (stubs, public tests), notebooks/, the parts of grader/ a learner runs (check, submit, the
    registry), conftest.py checking the learner's own exercises, pyproject.toml, constraints.txt and README.md. Nothing
    of solutions/, the hidden cases or the grading machinery goes in: the kit is built in a staging folder and scanned
    for reference function bodies, hidden case names and catalogue entries before DEST is touched.  What the kit
    keeps of the catalogue of known mistakes is grader/hints.json, data only (each mistake's id, description, hints
    and fingerprints on the public inputs), from which attnkit check names a known mistake.

    DEST must be empty or absent, unless --force.
    """
    from collections import Counter

    from grader.instructor.release import ReleaseError
    from grader.instructor.release import release as write_release

    if force or not (dest.is_dir() and any(dest.iterdir())):  # else refused at once, below
        click.echo(
            "Building the kit in a staging folder: its hints run the public tests on each known mistake (a minute or "
            "two on two cores), then a scan for answers…",
            err=True,
        )
    try:
        summary = write_release(dest, force=force)
    except ReleaseError as exc:
        raise click.ClickException(str(exc)) from exc
    folders = Counter(rel.split("/", 1)[0] + ("/" if "/" in rel else "") for rel in summary.files)
    listing = ", ".join(f"{name} ({n})" if name.endswith("/") else name for name, n in folders.items())
    click.echo(f"Wrote the learner's kit (attnkit {summary.version}) to {dest}: {listing}")
    for line in summary.warnings:
        click.echo(f"{click.style('warning:', fg='yellow')} {line}")
    if summary.removed:
        click.echo(f"Removed {len(summary.removed)} file(s) of the earlier release that this one no longer has.")
    if summary.kept:
        more = f" … and {len(summary.kept) - 10} more" if len(summary.kept) > 10 else ""
        shown = ", ".join(summary.kept[:10]) + more
        click.echo(
            f"{click.style(f'Kept {len(summary.kept)} file(s)', fg='yellow')} not written by attnkit release: {shown}"
        )
    click.echo("No reference code, hidden case or catalogue entry found in it.")


@main.command(cls=InstructorCommand)
@click.argument("dest", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--rubric",
    type=click.Path(dir_okay=False, exists=True),
    help="The course's rubric TOML (points, all-or-nothing, each test's Gradescope visibility); "
    "default: the kit's grader/instructor/rubric.toml.",
)
@click.option("--seed", type=int, help="Seed of the hidden inputs every learner gets (default: random, printed).")
@click.option(
    "--devices",
    metavar="LIST",
    help="Comma-separated devices Gradescope grades on: cpu, meta, cuda, mps (default: the grader's own; "
    "Gradescope's machines have no GPU, so cuda is skipped there with its reason).",
)
@click.option("--force", is_flag=True, help="Overwrite DEST if it exists.")
def gradescope(dest: Path, rubric: str | None, seed: int | None, devices: str | None, force: bool) -> None:
    """Write DEST (a .zip): the autograder to upload to Gradescope.

    The zip holds setup.sh (a virtual environment with the CPU build of the pinned torch and this kit), run_autograder
    (grades /autograder/submission as `attnkit grade` would, with the course's --rubric and --seed, and writes
    /autograder/results/results.json, each test's visibility the rubric's), and the whole instructor's kit: hidden cases
    and reference included, so never give the zip to learners.  AUTOGRADER_ROOT moves /autograder elsewhere (for a trial
    run).  docs/gradescope.md says how to upload it and what isolation learners' code gets there.
    """
    from grader.instructor.gradescope import BundleError, write_bundle

    try:
        bundle = write_bundle(dest, rubric, seed, force, device_list(devices))
    except (BundleError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    except FileExistsError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"Wrote {bundle.path} ({bundle.files} files): rubric {bundle.rubric}, seed {bundle.seed}. "
        "Upload it as the assignment's autograder (Gradescope: Configure Autograder > Zip file upload)."
    )


@main.command(cls=InstructorCommand)
@click.argument("dest", default="notebooks", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite notebooks in DEST that differ from the ones generated.")
def notebooks(dest: Path, force: bool) -> None:
    """Write one notebook per exercise group into DEST (default: notebooks/).

    Built with nbformat from the exercise sources: the explanations, a code cell per stub (tagged attnkit-solution) and
    a check cell that runs the public cases in the kernel.  A notebook already in DEST that differs from the generated
    one (a learner's work, say) is never overwritten without --force; identical ones are left as they are.
    """
    import tempfile

    from grader.notebooks import write_notebooks

    with tempfile.TemporaryDirectory(prefix="attnkit-notebooks-") as tmp:
        fresh = write_notebooks(Path(tmp))
        if dest.exists() and not dest.is_dir():
            raise click.ClickException(f"{dest}: exists and is not a folder")
        same = [p.name for p in fresh if (dest / p.name).exists() and (dest / p.name).read_bytes() == p.read_bytes()]
        changed = [p.name for p in fresh if (dest / p.name).exists() and p.name not in same]
        if changed and not force:
            raise click.ClickException(
                f"{dest}: {', '.join(changed)} differ from the generated notebooks; "
                "nothing was written (--force overwrites them)"
            )
        dest.mkdir(parents=True, exist_ok=True)
        written = [p.name for p in fresh if p.name not in same]
        for p in fresh:
            if p.name in written:
                (dest / p.name).write_bytes(p.read_bytes())
    click.echo(
        f"Wrote {len(written)} notebook(s) to {dest}"
        + (f": {', '.join(written)}" if written else "")
        + (f"; {len(same)} already up to date" if same else "")
    )


@main.command()
@click.argument("group", nargs=-1)
def contract(group: tuple[str, ...]) -> None:
    """Print the exercise contract: every hook of every exercise group, as a Markdown table.

    The kit's own groups and every installed exercise pack's (GROUP names some of them): the hook's signature, its group
    and the first paragraph of its hookspec, which states the contract in full (`pydoc` shows it all).
    """
    import inspect

    from grader.hook_table import GROUPS, TABLE
    from grader.packs import hookspec_of
    from grader.registry import format_hook

    unknown = [g for g in group if g not in GROUPS]
    if unknown:
        raise click.UsageError(f"no exercise group {', '.join(unknown)}; the groups are: {', '.join(GROUPS)}")
    click.echo("| hook | group | contract |\n| --- | --- | --- |")
    for row in TABLE:
        if group and row.group not in group:
            continue
        first = " ".join((inspect.getdoc(hookspec_of(row.hook)) or "").split("\n\n")[0].split())
        click.echo(f"| `{format_hook(row.hook)}` | {row.group} | {first.replace('|', '/')} |")


main.add_command(grade)
main.add_command(diff)
main.add_command(override)

if __name__ == "__main__":
    main()
