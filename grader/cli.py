"""The ``attnkit`` command line."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader.course_commands import diff, override
from grader.handin import kit_version
from grader.instructor_command import InstructorCommand, hold_out_folder, out_option
from grader.registry import HOOK_NAMES, Solution
from grader.rules import MEASURED_CALL_FACTOR

LANG_OPTION = click.option(
    "--lang",
    type=click.Choice(["en", "zh"]),
    default="en",
    show_default=True,
    help="Language of what the learner reads: the feedback's words and the hints for known mistakes (en: English, "
    "zh: Chinese).",
)

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
    help="What to check: 'exercises' (your own package), 'reference', a .py file or a folder.",
)
@LANG_OPTION
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
    in one line, or 'passing'.  Exits 0 only when every exercise asked for passes.

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
    table.add_column("first failure")
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
    console.print(f"{done} of {len(results)} exercises passing.{took()}")
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
    report = run_audit(seed, _device_list(devices), groups=groups)
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


def _device_list(value: str | None) -> list[str] | None:
    return [d.strip() for d in value.split(",") if d.strip()] if value else None


@main.command(cls=InstructorCommand)
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--class",
    "as_class",
    is_flag=True,
    help="Read each folder in PATHS as a class: every .py, .ipynb and .zip file and folder in it is one submission.",
)
@click.option(
    "--one",
    "as_one",
    is_flag=True,
    help="Read each folder in PATHS as one submission (its .py files), never as a class.",
)
@click.option(
    "--roster",
    "roster_path",
    type=click.Path(exists=True, dir_okay=False),
    help="A CSV of the class (columns id, name, email, optional pattern: a glob over hand-in file names) that "
    "maps hand-ins to students; its students with no hand-in are listed as missing.",
)
@click.option(
    "--latest",
    is_flag=True,
    help="Where one student has several hand-ins, grade the one collected last (its file's time on disk, or an "
    "LMS's attempt time in its name; never a manifest's date); the others are listed as skipped.",
)
@out_option("Folder for the gradebook, grades.csv, class.html, class.md, junit.xml and a feedback folder per student.")
@click.option(
    "--seed",
    type=int,
    help="Seed for the hidden inputs of a new --out (default: random). The out folder keeps it: every later run "
    "into it uses it, and a different --seed there is refused unless --force.",
)
@click.option(
    "--devices",
    metavar="LIST",
    help="Comma-separated devices to grade on: cpu, meta, cuda, mps "
    "(default: cpu, meta and cuda, which is skipped with its reason when there is no GPU).",
)
@click.option(
    "--require",
    multiple=True,
    metavar="DEVICE",
    help="Make a missing device an error instead of a skip (e.g. --require cuda).",
)
@click.option(
    "--jobs",
    "-j",
    type=int,
    help="Submissions graded at once (default: the CPU cores; with --executor ray, the Ray workers: the cluster's "
    "CPUs, or its GPUs when cuda is graded).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where submissions are graded: local (this machine), or ray (actors on a Ray cluster, each with a warm "
    "sandbox; this process stays the only writer of the gradebook and the reports). Needs attnkit[ray].",
)
@click.option(
    "--ray-address",
    metavar="ADDRESS",
    help="With --executor ray: the cluster to join, auto or HOST:PORT (default: start a local Ray with this "
    "machine's CPUs and GPUs).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Regrade everything given, even submissions already in the gradebook. Into an --out graded under "
    "another seed, suite version, device set or roster: make the new ones the class's and regrade the whole class.",
)
@click.option(
    "--only",
    multiple=True,
    metavar="STUDENT",
    help="Regrade just this student (repeat for more), even if unchanged, from the hand-in in PATHS or, with no "
    "PATHS, the one OUT's gradebook keeps; every other student's results and files stay as they are.",
)
@click.option(
    "--lms",
    multiple=True,
    type=click.Choice(["canvas", "moodle"]),
    help="Also write the class's grades in an LMS's gradebook import shape (OUT/canvas.csv, OUT/moodle.csv).",
)
@click.option(
    "--assignment",
    default="attnkit",
    show_default=True,
    help="The assignment column of the --lms export; in Canvas, 'Name (123)' updates assignment 123.",
)
@click.option("--reveal", is_flag=True, help="Show hidden input values in feedback (off by default).")
@click.option(
    "--show-output",
    is_flag=True,
    help="Also show what the learner's code printed in each exercise's section of the student's feedback "
    "(off by default: prints can reveal hidden inputs; the class report and OUT/<student>/output.txt always have it).",
)
@click.option(
    "--rubric",
    type=click.Path(dir_okay=False, exists=True),
    help="A rubric TOML file of points per exercise over the hook table's defaults "
    "(default: the kit's grader/instructor/rubric.toml).",
)
@click.option(
    "--timeout",
    type=float,
    help="Seconds a single call may take (default 10); a call whose memory is measured (chunked_attention's long "
    f"case) may take {MEASURED_CALL_FACTOR} times as long.",
)
@click.option(
    "--isolation",
    type=click.Choice(["auto", "strict"]),
    default="auto",
    show_default=True,
    help="auto: isolate learner processes as far as this machine allows and say how far in the report; "
    "strict: refuse to grade without namespaces and Landlock (no network, no view of your files).",
)
@LANG_OPTION
def grade(
    paths: tuple[str, ...],
    as_class: bool,
    as_one: bool,
    roster_path: str | None,
    latest: bool,
    out: str,
    seed: int | None,
    devices: str | None,
    require: tuple[str, ...],
    jobs: int | None,
    executor: str,
    ray_address: str | None,
    force: bool,
    only: tuple[str, ...],
    lms: tuple[str, ...],
    assignment: str,
    reveal: bool,
    show_output: bool,
    rubric: str | None,
    timeout: float | None,
    isolation: str,
    lang: str,
) -> None:
    """Grade submissions in sandboxed processes and write the gradebook and feedback.

    PATHS are .py files, notebooks (.ipynb), folders (a learner's exercises/ package or any folder of hook
    functions), .zip files of these, or a class folder holding many of them.  With no PATHS, grades the bundled
    sample class (examples/submissions).  A folder holding two or more hand-ins of any kind is a class; a package, a
    learner's kit and a folder holding one .py file or notebook are one submission, and --one reads a folder of one
    learner's loose modules as one (the folder's shape decides, never its code).  What was found, and every file
    skipped with why, is printed before grading.

    A student's id is, in this order: the roster's (--roster) student whose file pattern matches the hand-in's name; the
    roster's student its file name names (id or email); else its file or folder name.  The <id> of attnkit submit's
    submission-<id>-<date>.zip is the learner's claim: it takes no id another hand-in has, nor one another such name
    claims.  The id in an attnkit submit manifest only confirms it (another is a note on that row). Two hand-ins for one
    student are refused unless --latest, which grades the one collected last (its file's time, or an LMS's attempt time
    in its name).

    Each submission runs in its own child process with time, memory and CPU limits; every verdict is computed in this
    process.  Results go to OUT/gradebook.sqlite as each submission finishes: if a run stops, running the same command
    again resumes it.  Ctrl-C (or SIGTERM) stops cleanly: the submissions in flight are ended and not recorded, and the
    command to resume is printed (exit 130); a second Ctrl-C quits at once.
    """
    import gc
    import threading
    from dataclasses import replace

    from grader.instructor.class_grading import SAMPLE_CLASS, GradeOptions, GradingStopped, grade_class
    from grader.instructor.console_summary import console_text, print_line, summary_table
    from grader.instructor.progress import grading_progress
    from grader.instructor.reports import write_reports
    from grader.instructor.rubric import load_rubric, rubric_json
    from grader.instructor.sandbox import Limits
    from grader.instructor.stopping import EXIT_INTERRUPTED, resume_command, stop_on_signals

    console = Console(emoji=False)  # learner names in its lines and tables: ":white_check_mark:" stays text
    grader_pool = _executor(executor, ray_address, jobs)
    targets = list(paths)
    if only and force:
        raise click.UsageError(
            "--only regrades some students under the class's conditions; --force regrades the whole class under new "
            "ones: give one of them"
        )
    if not targets and not only:
        if not SAMPLE_CLASS.exists():
            raise click.UsageError(f"no PATHS given and no sample class at {SAMPLE_CLASS}")
        targets = [str(SAMPLE_CLASS)]
        console.print(f"No submissions given: grading the sample class in {SAMPLE_CLASS}")
    try:
        rubric_data = load_rubric(rubric)
    except (OSError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    out_dir = Path(out)
    lang, lms, assignment, show_output = _class_choices(out_dir, lang=lang, lms=lms, assignment=assignment,
                                                         show_output=show_output)  # fmt: skip
    if as_class and as_one:
        raise click.UsageError("--class and --one contradict each other: give one of them")
    reading = "class" if as_class else "one" if as_one else "auto"  # grader.instructor.intake.collect's
    if only:
        unfinished = _from_book(out_dir, lambda book: book.latest_unfinished_run())
        if unfinished is not None:
            raise click.UsageError(
                f"a grading into {out_dir} is unfinished (run {unfinished['id']}, stopped or killed): run the same "
                "attnkit grade command again to finish it, then --only"
            )
        last = _from_book(out_dir, lambda book: ([{}] + book.finished_runs())[-1].get("rubric", ""))
        if last and last != rubric_json(rubric_data):
            raise click.UsageError(
                "--only leaves every other student's files as they are, and this rubric is not the one the class "
                "was last graded under: grade the whole class (no --only) to apply a new rubric"
            )
        given = _take_in(console, targets, reading, roster_path or out_dir, latest, out_dir) if targets else None
        intake = _only(console, only, given, out_dir)
    else:
        intake = _take_in(console, targets, reading, roster_path or out_dir, latest, out_dir)
    if not out_dir.exists():  # a new out folder that a refusal leaves empty is removed: nothing was written
        out_dir.mkdir(parents=True)
        click.get_current_context().call_on_close(lambda: _remove_if_empty(out_dir))
    hold_out_folder(out_dir)  # until the command ends: no other grade or override writes the class meanwhile
    stop = threading.Event()
    with stop_on_signals(stop), grading_progress(console) as progress:
        options = GradeOptions(
            seed=seed,
            devices=_device_list(devices),
            require=require,
            force=force,
            only=frozenset(only),
            reveal=reveal,
            limits=Limits() if timeout is None else Limits(call_seconds=timeout),
            executor=grader_pool,
            strict_isolation=isolation == "strict",
            on_start=progress.start,
            on_graded=lambda o: progress.graded(console_text(o.submission.student)),
            stop=stop,
        )
        try:
            run = grade_class(intake, out_dir, options)
        except GradingStopped as stopped:
            console.print(
                f"[yellow]Stopped:[/] {stopped.done} of {stopped.total} submission(s) graded and kept in "
                f"{escape(str(out_dir / 'gradebook.sqlite'))}; those in flight were ended and not recorded. "
                "Reports are written when the run completes. To resume, run (in this folder):"
            )
            ctx = click.get_current_context()
            click.echo(f"  {resume_command([*_program(), ctx.info_name or 'grade'], ctx.meta['attnkit.args'])}")
            # Everything is closed and every learner process ended; the interpreter's last garbage collection over
            # torch's objects alone would add a second or more to the exit on a busy machine: skip it.
            gc.freeze()
            sys.exit(EXIT_INTERRUPTED)
        except (RuntimeError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    def remember(book) -> tuple:  # this run's rubric and choices (attnkit diff, override); the overrides in force
        book.set_rubric(run.run_id, rubric_json(rubric_data))
        book.set_report_choices({"lang": lang, "lms": list(lms), "assignment": assignment, "show_output": show_output})
        book.set_run_overrides(run.run_id)
        return tuple(override for override, _ in book.overrides())

    rubric_data = replace(rubric_data, overrides=_from_book(out_dir, remember) or ())
    for o in rubric_data.capped_overrides():
        print_line(
            console, f"[yellow]override {o.id}:[/] {console_text(o.student)} {o.exercise} = {o.points:g} is more than "
            "this rubric gives: it counts as the most (attnkit override --undo or a new one to change it)",
        )  # fmt: skip
    chosen = replace(run.report_options, lang=lang, lms=lms, assignment=assignment, show_output=show_output)
    problems = write_reports(out_dir, run.graded, rubric_data, chosen, run.figures, run.roll)
    # Everything below that comes from a submission (ids' file names, messages, findings) goes through
    # console_text: control characters escaped, rich markup escaped, so nothing reaches the terminal raw.
    console.print(summary_table(run.graded, rubric_data))
    _print_flagged(console, run.graded)
    for line in problems:
        print_line(console, f"[red]report:[/] {console_text(line)}")
    ran = ", ".join(run.devices)
    skipped = "; ".join(f"{d}: {why}" for d, why in run.skipped_devices.items())
    console.print(
        f"devices: {ran}"
        + (f" ({skipped})" if skipped else "")
        + f"; isolation: {run.isolation}; seed {run.seed}; suite {run.suite_version}"
        + (f"; executor: {run.executor}" if run.executor else "")
    )
    if run.cuda_overhead_seconds is not None:
        console.print(f"CUDA start-up per submission: {run.cuda_overhead_seconds:.2f} s (one learner process per GPU)")
    if run.peak_child_rss_mib is not None:
        console.print(f"peak RSS of a learner's process: {run.peak_child_rss_mib:.0f} MiB")
    _print_class(console, run, out_dir, lms)


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty (or gone): kept as it is
        os.rmdir(folder)


def _print_flagged(console: Console, graded) -> None:
    """The review findings after the grades table: a header, then one line each, never wrapped (``print_line``)."""
    from grader.instructor.console_summary import console_text, print_line, review_lines

    flagged = review_lines(graded)
    if flagged:
        console.print(
            f"[yellow]{len({line.split(':', 1)[0] for line in flagged})} submission(s) flagged for review[/] "
            "(points unchanged; status 'review' in grades.csv): constructs that can fake what the learner's "
            "process reports"
        )
    for line in flagged:
        print_line(console, f"  {console_text(line)}")


def _executor(kind: str, ray_address: str | None, jobs: int | None):
    """The executor ``--executor`` names; a one-line error where Ray is asked for and not installed."""
    from grader.instructor.class_grading import LocalExecutor

    if kind == "local":
        if ray_address:
            raise click.UsageError("--ray-address is for --executor ray")
        return LocalExecutor(jobs) if jobs else LocalExecutor()
    from grader.instructor.ray_executor import RayExecutor

    try:
        return RayExecutor(ray_address, jobs)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None


def _class_roster(given: str | Path):
    """The roster to match hand-ins against: the ``--roster`` file (a str), else the one ``--out``'s gradebook keeps."""
    from grader.instructor.roster import Roster

    if isinstance(given, str):
        return Roster.load(given)
    rows = _from_book(given, lambda book: book.roster_rows())
    return Roster.from_rows(rows, source=f"the roster kept in {given / 'gradebook.sqlite'}") if rows else None


def _from_book(out_dir: Path, read: Callable[[Any], Any]) -> Any:
    """``read(the out folder's gradebook)``, or None where it has none yet."""
    from grader.instructor.gradebook import Gradebook

    if not (out_dir / "gradebook.sqlite").is_file():
        return None
    with Gradebook(out_dir / "gradebook.sqlite") as book:
        return read(book)


def _take_in(
    console: Console, targets: list[str], reading: str, roster_from: str | Path, latest: bool,
    out_dir: Path | None = None,
):  # fmt: skip
    """Read the hand-ins (:func:`grader.instructor.intake.collect`) and say what was found; a usage error else.

    ``roster_from`` is the ``--roster`` file, else the out folder (whose gradebook may keep the class's roster).
    No hand-in takes an id the out folder's gradebook holds for another (:mod:`grader.instructor.held_ids`).
    """
    from grader.instructor.console_summary import console_text, print_line
    from grader.instructor.held_ids import keep_held_ids
    from grader.instructor.intake import collect
    from grader.instructor.intake_model import IntakeError
    from grader.instructor.roster import RosterError

    try:
        roster = _class_roster(roster_from)
        intake = collect(targets, reading=reading, roster=roster, latest=latest)
        held = _from_book(out_dir, lambda book: book.stored_submissions()) if out_dir else None  # kept per id
        intake = keep_held_ids(intake, held or {})
    except (IntakeError, RosterError) as exc:
        raise click.UsageError(str(exc)) from None
    line = intake.found_line()
    if roster is not None:
        line += f"; roster of {len(roster.entries)}: {len(intake.missing)} with no hand-in"
        line += f", {len(intake.unmatched)} not on it" if intake.unmatched else ""
    console.print(console_text(line))
    for item in intake.skipped:
        print_line(console, f"[yellow]skipped:[/] {console_text(item.path)}: {console_text(item.reason)}")
    for note in intake.notes:
        print_line(console, f"[yellow]id:[/] {console_text(note)}")
    if intake.missing:
        shown = ", ".join(e.id for e in intake.missing[:20])
        more = f" and {len(intake.missing) - 20} more" if len(intake.missing) > 20 else ""
        console.print(f"[yellow]missing:[/] {console_text(shown + more)} (no hand-in; a 'missing' row each)")
    return intake


def _class_choices(out_dir: Path, **given: Any) -> tuple:
    """``lang, lms, assignment, show_output``: each as given on the command line, else as the class's last grading
    chose it (so a run that writes some students' files, a late hand-in or --only, writes them as the rest)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    stored = _from_book(out_dir, lambda book: book.report_choices()) or {}
    chosen = {
        name: value if ctx.get_parameter_source(name) != ParameterSource.DEFAULT or name not in stored else stored[name]
        for name, value in given.items()
    }
    return str(chosen["lang"]), tuple(chosen["lms"]), str(chosen["assignment"]), bool(chosen["show_output"])


def _only(console: Console, only: tuple[str, ...], given: Any, out_dir: Path):
    """The hand-ins of ``--only``'s students: from ``given`` (PATHS' :func:`_take_in`), else the ones OUT's
    gradebook keeps."""
    from dataclasses import replace

    from grader.instructor.console_summary import console_text
    from grader.instructor.intake_model import Intake

    if given is not None:
        intake = given
        found = {sub.student: sub for sub in intake.submissions}
        where = "in PATHS"
    else:
        found = _from_book(out_dir, lambda book: book.stored_submissions())
        if found is None:
            raise click.UsageError(f"--only without PATHS regrades from {out_dir / 'gradebook.sqlite'}: there is none")
        intake, where = Intake([]), f"in {out_dir / 'gradebook.sqlite'}"
    unknown = [student for student in only if student not in found]
    if unknown:
        known = ", ".join(sorted(found)[:20]) + (" …" if len(found) > 20 else "")
        hint = (
            "; a hand-in in PATHS takes a student's id from its file name as you collect it (alice.zip, or the "
            "roster's pattern), never from attnkit submit's name of an id the class already holds"
            if given is not None
            else ""
        )
        raise click.UsageError(f"--only {', '.join(unknown)}: no such student {where} (there: {known or 'none'}){hint}")
    chosen = [found[student] for student in dict.fromkeys(only)]
    if given is None:
        console.print(console_text(f"Regrading {', '.join(s.student for s in chosen)} from the hand-ins {where}"))
    return replace(intake, submissions=chosen, missing=[])


def _print_class(console: Console, run, out_dir: Path, lms: tuple[str, ...]) -> None:
    """What the out folder's class holds after this run, and the files written from it."""
    from grader.instructor.console_summary import console_text, print_line

    roll = run.roll
    in_run = {o.submission.student for o in run.outcomes}  # graded now, or reused unchanged
    graded_now = in_run - set(run.reused)
    earlier = [sub.student for sub, _ in roll.graded if sub.student not in in_run]
    for note in run.notes:
        print_line(console, f"[yellow]class:[/] {console_text(note)}")
    if run.regraded_from_gradebook:
        console.print(
            f"Regraded {len(run.regraded_from_gradebook)} student(s) of the class from the hand-ins the gradebook "
            f"keeps: {console_text(', '.join(run.regraded_from_gradebook))}"
        )
    console.print(
        f"The class in {console_text(out_dir)}: {len(roll.graded)} student(s) graded "
        f"({len(graded_now)} in this run, "
        + (f"{len(run.reused)} already graded under the same conditions, not regraded (--force regrades), "
           if run.reused else "")
        + f"{len(earlier)} earlier)"
        + (f", {len(roll.missing)} missing from the roster" if roll.missing else "")
        + "; grades.csv, junit.xml and class.html list them all."
    )
    if roll.missing:
        console.print(f"[yellow]missing:[/] {console_text(', '.join(p.id for p in roll.missing))}")
    if roll.stale:
        console.print(
            f"[yellow]{len(roll.stale)} folder(s) in {console_text(out_dir)} belong to no student of its class[/] "
            f"(kept; remove them yourself if they are stale): {console_text(', '.join(roll.stale))}"
        )
    exports = "".join(f", {out_dir / (name + '.csv')}" for name in lms)
    console.print(
        f"Wrote {out_dir / 'grades.csv'}, {out_dir / 'junit.xml'}, {out_dir / 'class.html'}, "
        f"{out_dir / 'class.md'}{exports} and feedback per student in {out_dir}/"
    )


def _program() -> list[str]:
    """How this process was started, to print a command that runs it again: ``attnkit`` or ``python -m grader.cli``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name == "grader.cli":
        return [sys.executable, "-m", "grader.cli"]
    name = click.get_current_context().find_root().info_name or "attnkit"
    return [sys.argv[0]] if Path(sys.argv[0]).name == name else [name]


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

    PATH is your exercises/ folder (default: the one in the current folder's kit), a notebook, several notebooks or a
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
        bundle = write_bundle(dest, rubric, seed, force, _device_list(devices))
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


main.add_command(diff)
main.add_command(override)

if __name__ == "__main__":
    main()
