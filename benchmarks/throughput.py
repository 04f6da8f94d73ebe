"""Throughput of `attnkit grade` against the naive way and against the floor.

    python benchmarks/throughput.py                 # N=60 submissions, --jobs = the cores
    python benchmarks/throughput.py -n 60 --jobs 2 --naive 4
    python benchmarks/throughput.py -n 16 --jobs 2 --executor ray   # also (b) on a local Ray: its overhead
    python benchmarks/throughput.py -n 24 --jobs 2 --gradients-cost  # (b) with and without the gradient passes

Grades N generated submissions (copies of the sample class's perfect solution with
distinct ids, plus a few with mistakes) with the full hidden suite on the CPU, three
ways, and prints them side by side:

  (a) naive:  one fresh `python -m pytest grader/instructor/hidden --solution FILE` per submission
              (the same hidden cases, in-process, no isolation); timed on --naive of them;
  (b) grade:  `attnkit grade DIR --devices cpu --jobs J` (sandboxed, one child each);
  (c) floor:  the same cases called in one process, no isolation, no pytest.

It reports submissions per second, the ratios (a)/(b) and (b)/(c) per submission, the
marginal cost of one more submission in (b) (from a second, larger run), and the peak
RSS of a learner's process.  With ``--executor ray`` it also runs (b) as
``attnkit grade --executor ray --jobs J`` (a local Ray of J CPU workers, started by each
run) and prints its per-submission and marginal cost next to the local pool's, and
their differences: Ray's overhead per submission, and its fixed start-up per run.
A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

SAMPLE = KIT / "examples" / "submissions"
MISTAKES = ["bob", "dave.py", "erin"]  # a few realistic single mistakes among the copies
SEED = 2024


def make_class(folder: Path, n: int) -> list[Path]:
    """``n`` submissions: mostly copies of alice.py, every eighth one a copy with a mistake."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(n):
        source = SAMPLE / (MISTAKES[(i // 8) % len(MISTAKES)] if i % 8 == 7 else "alice.py")
        target = folder / f"student{i:04d}{source.suffix}"
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)
        made.append(target)
    return made


def time_naive(paths: list[Path]) -> float:
    """Seconds per submission, one fresh pytest process each."""
    env = dict(os.environ, ATTNKIT_HIDDEN_SEED=str(SEED))
    started = time.perf_counter()
    for path in paths:
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "grader/instructor/hidden",
             f"--solution={path}"],
            cwd=KIT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
        )
    return (time.perf_counter() - started) / len(paths)


WITHOUT_GRADIENTS = (
    "import functools, sys; import grader.instructor.class_grading as c, grader.instructor.suite as s; "
    "c.build_suite = functools.partial(s.build_suite, gradients=False); sys.argv[0] = 'attnkit'; "
    "from grader.cli import main; main()"
)
"""`attnkit grade` as it was before the gradient passes (issue 23): the same suite, no call asks for a VJP."""


def time_grade(folder: Path, jobs: int, out: Path, executor: str = "local", gradients: bool = True) -> float:
    """Seconds for one whole `attnkit grade` run of ``folder`` (``gradients=False``: no gradient pass)."""
    command = ["-m", "grader.cli"] if gradients else ["-c", WITHOUT_GRADIENTS]
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *command, "grade", str(folder), "--out", str(out), "--seed", str(SEED),
         "--devices", "cpu", "--jobs", str(jobs), "--force", "--executor", executor],
        cwd=KIT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
    )
    return time.perf_counter() - started


def gradient_cost(root: Path, small: int, large: int, jobs: int) -> None:
    """The marginal cost of one more hand-in with and without the gradient passes, interleaved in one run."""
    runs: dict[bool, list[float]] = {True: [], False: []}
    for gradients in (False, True, False, True):
        half = time_grade(root / "half", jobs, root / f"g-half-{gradients}", gradients=gradients)
        whole = time_grade(root / "class", jobs, root / f"g-{gradients}", gradients=gradients)
        runs[gradients].append((whole - half) / (large - small))
    before, after = (min(runs[g]) for g in (False, True))
    print(f"marginal cost per hand-in: {before:.3f} s without gradient passes, {after:.3f} s with them "
          f"({100 * (after / before - 1):+.0f}%; best of 2 each, interleaved)")


def time_floor(paths: list[Path]) -> float:
    """Seconds per submission: every hidden case called in this process, no isolation, no pytest."""
    import torch

    from grader.instructor.suite import build_suite
    from grader.instructor.verdict import judge_in_process
    from grader.registry import load_solution

    torch.set_num_threads(1)
    suite = build_suite(SEED, ("cpu",))
    started = time.perf_counter()
    for path in paths:
        solution = load_solution(str(path))
        for trial in suite.trials:
            judge_in_process(solution, trial)
    return (time.perf_counter() - started) / len(paths)


def child_peak_rss_mib(path: Path) -> float:
    from grader.instructor.handin_reading import read_submission
    from grader.instructor.sandbox import Template
    from grader.instructor.submission_grading import grade_submission
    from grader.instructor.suite import build_suite

    suite = build_suite(SEED, ("cpu",))
    with Template() as template:
        outcome = grade_submission(read_submission(path), suite, template)
    return outcome.stats.peak_rss_kib / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=60, help="submissions in the main run (default 60)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="attnkit grade --jobs (default: cores)")
    parser.add_argument("--naive", type=int, default=3, help="submissions timed the naive way (default 3)")
    parser.add_argument("--gradients-cost", action="store_true",
                        help="only compare the marginal cost per hand-in with and without the gradient passes")
    parser.add_argument("--executor", choices=["local", "ray"], default="local",
                        help="ray: also time (b) on a local Ray and print its overhead next to the local pool's")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="attnkit-bench-") as tmp:
        root = Path(tmp)
        small, large = max(2, args.n // 2), args.n
        paths = make_class(root / "class", large)
        make_class(root / "half", small)
        print(f"{large} submissions ({sum(p.name.endswith(('.py',)) for p in paths)} .py files), seed {SEED}, "
              f"jobs {args.jobs}, {os.cpu_count()} cores")
        if args.gradients_cost:
            gradient_cost(root, small, large, args.jobs)
            return

        naive = time_naive(paths[: args.naive])
        print(f"(a) naive, fresh pytest per submission: {naive:.2f} s per submission (timed on {args.naive})")
        whole_small = time_grade(root / "half", args.jobs, root / "out-half")
        whole = time_grade(root / "class", args.jobs, root / "out")
        per_sub = whole / large
        marginal = (whole - whole_small) / (large - small)
        print(f"(b) attnkit grade: {whole:.2f} s for {large} = {per_sub:.3f} s per submission "
              f"({large / whole:.1f} submissions/s); marginal cost of one more: {marginal:.3f} s "
              f"(from {small} → {large}: {whole_small:.2f} s → {whole:.2f} s)")
        floor = time_floor(paths)
        print(f"(c) floor, one process, no isolation: {floor:.3f} s per submission ({1 / floor:.1f} submissions/s)")
        rss = child_peak_rss_mib(paths[0])
        print()
        print(f"(a)/(b) per submission: {naive / per_sub:.1f}x   (target >= 20x)")
        print(f"(b)/(c) per submission: {per_sub / floor:.2f}x   (target <= 3x)")
        print(f"(b)/(c) marginal:       {marginal / floor:.2f}x")
        print(f"peak RSS of a learner's process: {rss:.0f} MiB   (target <= 300 MiB)")
        if args.executor == "ray":
            ray_small = time_grade(root / "half", args.jobs, root / "ray-half", "ray")
            ray_whole = time_grade(root / "class", args.jobs, root / "ray", "ray")
            ray_marginal = (ray_whole - ray_small) / (large - small)
            ray_fixed, fixed = ray_whole - ray_marginal * large, whole - marginal * large
            print()
            print(f"{'':28}{'per submission':>16}{'marginal':>10}{'fixed per run':>15}")
            print(f"{'(b) local pool, --jobs ' + str(args.jobs):28}{per_sub:>14.3f} s{marginal:>8.3f} s"
                  f"{fixed:>13.1f} s")
            print(f"{'(b) ray, ' + str(args.jobs) + ' CPU workers':28}{ray_whole / large:>14.3f} s"
                  f"{ray_marginal:>8.3f} s{ray_fixed:>13.1f} s")
            print(f"{'Ray overhead':28}{ray_whole / large - per_sub:>14.3f} s{ray_marginal - marginal:>8.3f} s"
                  f"{ray_fixed - fixed:>13.1f} s   (ray minus local; fixed: the local Ray's start and stop)")


if __name__ == "__main__":
    main()
