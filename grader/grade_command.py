"""``attnkit grade``: the instructor's command that grades a class into an out folder, and what it prints.

Declared here, run by :mod:`grader.instructor`'s modules, imported only when called: a learner's kit holds the
declaration and says the command is for instructors."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from grader.cli_options import device_list, lang_option, out_option
from grader.instructor_command import InstructorCommand, hold_out_folder
from grader.rules import MEASURED_CALL_FACTOR

__all__ = ["grade"]


@click.command(cls=InstructorCommand)
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
@lang_option("the feedback a learner reads (results.json, feedback.md and .html)")
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
    reading = Reading("class" if as_class else "one" if as_one else "auto", latest, roster_path or out_dir)
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
        given = None
        if targets:
            given = _take_in(console, targets, reading, out_dir, only=frozenset(only))
        intake = _only(console, only, given, out_dir)
    else:
        intake = _take_in(console, targets, reading, out_dir)
    if not out_dir.exists():  # a new out folder that a refusal leaves empty is removed, with the folders made for it
        made = [folder for folder in (out_dir, *out_dir.parents) if not folder.exists()]  # deepest first
        out_dir.mkdir(parents=True)
        click.get_current_context().call_on_close(lambda: _remove_if_empty(made))
    hold_out_folder(out_dir)  # until the command ends: no other grade or override writes the class meanwhile
    stop = threading.Event()
    with stop_on_signals(stop), grading_progress(console) as progress:
        options = GradeOptions(
            seed=seed,
            devices=device_list(devices),
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
            command = resume_command([*_program(), ctx.info_name or "grade"], ctx.meta["attnkit.args"])
            console.print(f"  {command}", markup=False, highlight=False, soft_wrap=True)  # below the live bar, whole
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


def _remove_if_empty(made: list[Path]) -> None:
    """Remove the folders made for OUT, deepest first, while they are empty (one that is not is kept, with those
    above it)."""
    for folder in made:
        try:
            os.rmdir(folder)
        except OSError:
            return


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


@dataclass(frozen=True)
class Reading:
    """How PATHS are read: :func:`grader.instructor.intake.collect`'s ``reading`` and ``latest``, and where the
    roster comes from (the ``--roster`` file, else the out folder, whose gradebook may keep the class's roster)."""

    how: str
    latest: bool
    roster_from: str | Path


def _take_in(
    console: Console, targets: list[str], reading: Reading, out_dir: Path | None = None,
    only: frozenset[str] = frozenset(),
):  # fmt: skip
    """Read the hand-ins (:func:`grader.instructor.intake.collect`) and say what was found; a usage error else.

    No hand-in takes an id the out folder's gradebook holds for another (:mod:`grader.instructor.held_ids`).
    ``only``: the students ``--only`` regrades from PATHS: no one on the roster is said to be missing, and only they
    are told of an older hand-in."""
    some = bool(only)
    from grader.instructor.console_summary import console_text, print_line
    from grader.instructor.held_ids import keep_held_ids
    from grader.instructor.intake import collect
    from grader.instructor.intake_model import IntakeError
    from grader.instructor.roster import RosterError

    try:
        roster = _class_roster(reading.roster_from)
        intake = collect(targets, reading=reading.how, roster=roster, latest=reading.latest)
        held = _from_book(out_dir, lambda book: book.stored_submissions()) if out_dir else None  # kept per id
        intake = keep_held_ids(intake, held or {})
    except (IntakeError, RosterError) as exc:
        raise click.UsageError(str(exc)) from None
    went_back = [w for w in _went_back(intake, held or {}, out_dir) if not some or w[0] in only] if out_dir else []
    line = intake.found_line()
    if roster is not None and not some:
        line += f"; roster of {len(roster.entries)}: {len(intake.missing)} with no hand-in"
        line += f", {len(intake.unmatched)} not on it" if intake.unmatched else ""
    console.print(console_text(line))
    for item in intake.skipped:
        print_line(console, f"[yellow]skipped:[/] {console_text(item.path)}: {console_text(item.reason)}")
    for note in intake.notes:
        print_line(console, f"[yellow]id:[/] {console_text(note)}")
    if intake.notes:
        console.print("  (the id notes in full, up to 400 characters, in the class report's 'Student ids')")
    for student, source, run in went_back:  # wrapped, not cut: what to do is at its end
        console.print(
            f"[yellow]older hand-in:[/] {console_text(student)}: {console_text(source)} is the hand-in graded in run "
            f"{run}, not the one graded since: the result goes back to it (put the newer one in PATHS to keep that)"
        )
    if intake.missing and not some:
        shown = ", ".join(e.id for e in intake.missing[:20])
        more = f" and {len(intake.missing) - 20} more" if len(intake.missing) > 20 else ""
        console.print(f"[yellow]missing:[/] {console_text(shown + more)} (no hand-in; a 'missing' row each)")
    return intake


def _went_back(intake, held: dict, out_dir: Path) -> list[tuple[str, str, int]]:
    """``(student, source, run)`` for each hand-in in PATHS that an earlier run graded as that student's where a
    later one graded another (a regrade by ``--only`` from a new file, the class folder still holding the first)."""
    changed = [sub for sub in intake.submissions if sub.student in held and held[sub.student].sha256 != sub.sha256]
    if not changed:
        return []
    runs = _from_book(out_dir, lambda book: [book.last_run_with(sub.student, sub.sha256) for sub in changed])
    return [(sub.student, sub.source, run) for sub, run in zip(changed, runs) if run is not None]


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
        hint = _how_to_name(unknown, out_dir) if given is not None else ""
        raise click.UsageError(f"--only {', '.join(unknown)}: no such student {where} (there: {known or 'none'}){hint}")
    chosen = [found[student] for student in dict.fromkeys(only)]
    if given is None:
        console.print(console_text(f"Regrading {', '.join(s.student for s in chosen)} from the hand-ins {where}"))
    return replace(intake, submissions=chosen, missing=[])


def _how_to_name(unknown: list[str], out_dir: Path) -> str:
    """How a hand-in in PATHS keeps the id of a student the class holds (:mod:`grader.instructor.held_ids`)."""
    from grader.instructor.intake_model import name_of

    held = _from_book(out_dir, lambda book: book.stored_submissions()) or {}
    graded = [f"{student}'s as {name_of(Path(held[student].source))!r}" for student in unknown if student in held]
    if not graded:
        return f"; a hand-in in PATHS takes a student's id from its name ({unknown[0]}.py, a folder {unknown[0]}/ …)"
    return (
        "; a hand-in in PATHS keeps a student's id when collected under the file name of the hand-in graded "
        f"({', '.join(graded)}); attnkit submit's name never takes an id the class holds"
    )


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
    parts = [f"{len(graded_now)} in this run"]
    if run.reused:
        parts.append(f"{len(run.reused)} already graded under the same conditions, not regraded (--force regrades)")
    if earlier:
        parts.append(f"{len(earlier)} not in this run, kept as graded earlier")
    console.print(
        f"The class in {console_text(out_dir)}: {len(roll.graded)} student(s) graded ({', '.join(parts)})"
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
