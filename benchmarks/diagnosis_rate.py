"""How well the diagnosis names learners' mistakes, measured on a labelled folder of hand-ins.

    python benchmarks/diagnosis_rate.py                              # tests/heldout, seeds 1 and 2
    python benchmarks/diagnosis_rate.py tests/heldout --seeds 1,2,3 --strict
    python benchmarks/diagnosis_rate.py tests/heldout2                # the second validator's set
    python benchmarks/diagnosis_rate.py some/folder --labels key.toml --devices cpu -j 1

The folder is graded for real, the way an instructor grades a class: ``attnkit grade FOLDER
--class`` (sandboxed child processes, the grader's default devices unless ``--devices``), once per
seed, into a temporary out folder.  Only the grader's output is read: each student's
``results.json`` (Gradescope's format: one test per hook, its score and its feedback text).  A
catalogued hint shows in that text as ``known mistake '<id>'``.

The answer key (``labels.toml`` in the folder unless ``--labels``) has one table per file (its
stem) and one key per hook the file implements: ``"correct"``, or an inline table ``{ mistake =
"...", ids = [...], also = [...] }`` where ``ids`` are the catalogue ids that name the main
mistake and ``also`` the ids of a secondary mistake the same code makes too.

Per (file, hook) and seed it reports passed/failed, the ids named, whether the main mistake is
named, the wrong names (named ids in neither ``ids`` nor ``also``), a false pass (a defective hook
with full marks) and a false fail (a correct hook losing points).  Then, per seed, the totals
against the bars of issue 25:

* named: the share of defective pairs whose main mistake is named by a catalogued hint, >= 80%;
* wrong names: 0;  false passes: 0;  false fails: 0.

Exit status: 2 on a usage error (a missing folder or key, a label for a file that is not there);
1 when ``attnkit grade`` fails or writes no result for a labelled file; with ``--strict``, 1 when
a bar fails; else 0.  A benchmark first: it never edits anything outside its temporary folder
(``--keep DIR`` grades into DIR instead and leaves it; ``--graded DIR`` grades nothing and scores
such a folder again, e.g. after the answer key changed).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the kit's own dependency on 3.10
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

ROOT = Path(__file__).resolve().parent.parent
NAMED = re.compile(r"known mistake '([a-z0-9][a-z0-9-]*)'")
BAR_NAMED = 0.80


@dataclass(frozen=True)
class Label:
    correct: bool
    mistake: str = ""
    ids: frozenset[str] = frozenset()
    also: frozenset[str] = frozenset()


@dataclass
class Row:
    file: str
    hook: str
    label: Label
    score: float
    max_score: float
    named: list[str]
    first_line: str

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score

    @property
    def main_named(self) -> bool:
        return not self.label.correct and bool(self.label.ids & set(self.named))

    @property
    def wrong(self) -> list[str]:
        return [n for n in self.named if n not in self.label.ids | self.label.also]

    @property
    def false_pass(self) -> bool:
        return not self.label.correct and self.passed

    @property
    def false_fail(self) -> bool:
        return self.label.correct and not self.passed


@dataclass
class Totals:
    seed: int
    rows: list[Row] = field(default_factory=list)

    def defective(self) -> list[Row]:
        return [r for r in self.rows if not r.label.correct]

    def figures(self) -> dict[str, object]:
        bad = self.defective()
        nameable = [r for r in bad if r.label.ids]
        named = sum(r.main_named for r in bad)
        return {
            "seed": self.seed,
            "pairs": len(self.rows),
            "correct_pairs": len(self.rows) - len(bad),
            "defective_pairs": len(bad),
            "main_named": named,
            "named_rate": named / len(bad) if bad else 1.0,
            "nameable_pairs": len(nameable),
            "named_rate_nameable": named / len(nameable) if nameable else 1.0,
            "wrong_names": sum(len(r.wrong) for r in self.rows),
            "false_passes": sum(r.false_pass for r in self.rows),
            "false_fails": sum(r.false_fail for r in self.rows),
        }

    def bars_failed(self) -> list[str]:
        f = self.figures()
        failed = []
        if f["named_rate"] < BAR_NAMED:  # type: ignore[operator]
            failed.append(f"named {f['named_rate']:.0%} < {BAR_NAMED:.0%}")
        for key in ("wrong_names", "false_passes", "false_fails"):
            if f[key]:
                failed.append(f"{key.replace('_', ' ')} {f[key]} > 0")
        return failed


def read_labels(path: Path) -> dict[str, dict[str, Label]]:
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    labels: dict[str, dict[str, Label]] = {}
    for stem, hooks in raw.items():
        labels[stem] = {}
        for hook, value in hooks.items():
            if value == "correct":
                labels[stem][hook] = Label(correct=True)
            elif isinstance(value, dict) and "mistake" in value:
                labels[stem][hook] = Label(
                    correct=False,
                    mistake=str(value["mistake"]),
                    ids=frozenset(value.get("ids", ())),
                    also=frozenset(value.get("also", ())),
                )
            else:
                raise ValueError(f"{path}: [{stem}] {hook}: neither \"correct\" nor {{ mistake = ..., ids = [...] }}")
    return labels


def attnkit_command() -> list[str]:
    beside = Path(sys.executable).with_name("attnkit")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "grader.cli"]


def grade(folder: Path, out: Path, seed: int, devices: str | None, jobs: int | None) -> None:
    command = [*attnkit_command(), "grade", str(folder), "--class", "--out", str(out), "--seed", str(seed), "--force"]
    if devices:
        command += ["--devices", devices]
    if jobs:
        command += ["-j", str(jobs)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}")


def read_rows(out: Path, labels: dict[str, dict[str, Label]], seed: int) -> Totals:
    totals = Totals(seed)
    for stem, hooks in sorted(labels.items()):
        results = out / stem / "results.json"
        if not results.is_file():
            raise RuntimeError(f"seed {seed}: no {results} (was {stem} graded?)")
        tests = {t["name"]: t for t in json.loads(results.read_text(encoding="utf-8"))["tests"]}
        for hook, label in hooks.items():
            if hook not in tests:
                raise RuntimeError(f"seed {seed}: {results} has no test {hook!r}")
            test = tests[hook]
            output = test.get("output", "")
            totals.rows.append(
                Row(
                    file=stem,
                    hook=hook,
                    label=label,
                    score=float(test["score"]),
                    max_score=float(test["max_score"]),
                    named=list(dict.fromkeys(NAMED.findall(output))),
                    first_line=output.splitlines()[0] if output else "",
                )
            )
    return totals


def verdict(row: Row) -> str:
    if row.label.correct:
        return "FALSE FAIL" if row.false_fail else "ok"
    if row.false_pass:
        return "FALSE PASS"
    if row.wrong:
        return "WRONG NAME"
    if row.main_named:
        return "named"
    return "missed" if row.label.ids else "missed (no id)"


def report(runs: list[Totals], show_all: bool) -> None:
    seeds = [t.seed for t in runs]
    print(f"{'file':26} {'hook':26} {'label':8} " + " ".join(f"{'seed ' + str(s):>38}" for s in seeds))
    for i, first in enumerate(runs[0].rows):
        cells = []
        for run in runs:
            row = run.rows[i]
            named = ",".join(row.named) or "-"
            cells.append(f"{row.score:4.2f}/{row.max_score:g} {verdict(row):14} {named}")
        quiet = all(verdict(run.rows[i]) in ("ok", "named") for run in runs)
        if show_all or not quiet:
            label = "correct" if first.label.correct else "defect"
            print(f"{first.file:26} {first.hook:26} {label:8} " + "   ".join(cells))
    print()
    print(
        f"{'seed':>5} {'pairs':>5} {'defective':>9} {'named':>14} {'named/nameable':>15} "
        f"{'wrong':>5} {'false pass':>10} {'false fail':>10}  bars"
    )
    for run in runs:
        f = run.figures()
        failed = run.bars_failed()
        print(
            f"{f['seed']:>5} {f['pairs']:>5} {f['defective_pairs']:>9} "
            f"{f['main_named']:>3} ({f['named_rate']:4.0%}) {'':>3} "
            f"{f['main_named']:>3}/{f['nameable_pairs']:<3} ({f['named_rate_nameable']:4.0%}) "
            f"{f['wrong_names']:>5} {f['false_passes']:>10} {f['false_fails']:>10}  "
            + ("pass" if not failed else "FAIL: " + "; ".join(failed))
        )
    print(
        f"bars (issue 25): named >= {BAR_NAMED:.0%} of the defective pairs, 0 wrong names, 0 false passes, "
        "0 false fails; 'nameable' = pairs whose label lists a catalogue id"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Grade a labelled folder of hand-ins with `attnkit grade` and measure the diagnosis.",
        epilog="Exit status: 2 usage error; 1 grading failed, or (--strict) a bar failed; 0 otherwise.",
    )
    parser.add_argument(
        "folder", nargs="?", default=str(ROOT / "tests" / "heldout"), help="the hand-ins (default: tests/heldout)"
    )
    parser.add_argument("--labels", help="the answer key (default: FOLDER/labels.toml)")
    parser.add_argument("--seeds", default="1,2", help="comma-separated grading seeds (default: 1,2)")
    parser.add_argument("--devices", help="passed to attnkit grade --devices (default: the grader's own)")
    parser.add_argument("-j", "--jobs", type=int, help="passed to attnkit grade -j")
    parser.add_argument("--keep", metavar="DIR", help="grade into DIR/seed-N and keep it (default: a temp folder)")
    parser.add_argument(
        "--graded", metavar="DIR", help="grade nothing: score DIR/seed-N of an earlier --keep DIR (after relabelling)"
    )
    parser.add_argument("--all", action="store_true", help="list every pair, not only those off the mark")
    parser.add_argument("--json", metavar="FILE", help="also write the rows and the figures as JSON")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any bar fails")
    args = parser.parse_args(argv)

    folder = Path(args.folder)
    labels_path = Path(args.labels) if args.labels else folder / "labels.toml"
    if not folder.is_dir():
        parser.error(f"no such folder: {folder}")
    if not labels_path.is_file():
        parser.error(f"no answer key: {labels_path}")
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        labels = read_labels(labels_path)
    except ValueError as error:
        parser.error(str(error))
    if not seeds:
        parser.error("--seeds names no seed")
    missing = sorted(stem for stem in labels if not (folder / f"{stem}.py").is_file())
    if missing:
        parser.error(f"{labels_path} labels files that are not in {folder}: {', '.join(missing)}")

    if args.graded and not Path(args.graded).is_dir():
        parser.error(f"no such folder: {args.graded}")
    base = Path(args.graded or args.keep or tempfile.mkdtemp(prefix="diagnosis-rate-"))
    runs = []
    try:
        for seed in seeds:
            out = base / f"seed-{seed}"
            if not args.graded:
                print(f"grading {folder} with seed {seed} into {out} ...", file=sys.stderr, flush=True)
                grade(folder.resolve(), out.resolve(), seed, args.devices, args.jobs)
            runs.append(read_rows(out, labels, seed))
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        if not (args.keep or args.graded):
            shutil.rmtree(base, ignore_errors=True)

    report(runs, args.all)
    if args.json:
        data = {
            "figures": [run.figures() for run in runs],
            "rows": [
                {
                    "seed": run.seed, "file": r.file, "hook": r.hook, "correct": r.label.correct,
                    "mistake": r.label.mistake, "ids": sorted(r.label.ids), "score": r.score,
                    "max_score": r.max_score, "named": r.named, "main_named": r.main_named,
                    "wrong": r.wrong, "false_pass": r.false_pass, "false_fail": r.false_fail,
                    "verdict": verdict(r), "first_line": r.first_line,
                }
                for run in runs
                for r in run.rows
            ],
        }
        Path(args.json).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    failed = any(run.bars_failed() for run in runs)
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
