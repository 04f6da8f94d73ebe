"""What the diagnosis costs: the evidence per failing case, and a whole class.

    python benchmarks/diagnosis_cost.py                      # the evidence, case by case, seed 1
    python benchmarks/diagnosis_cost.py --corpus tests/learners -j 2

The evidence (:class:`grader.instructor.fingerprints.Fingerprints`) is computed
once per hidden case for the whole class, the first time a failing case needs
it.  The first part times that worst case for every cpu case of every hook the
diagnosis covers: the mistake model on one module case under every setting of
one and two knobs (what the search may ask for; three knobs are counted, and
asked only where nothing smaller fits), and the catalogue's programs (plus the
model's function settings) on one function case.  With ``--corpus``, the
second part grades a folder of submissions for real and reports the seconds
spent in the diagnosis, over the class, against the run's wall time.
A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.instructor import submission_grading  # noqa: E402
from grader.instructor.fingerprints import Fingerprints  # noqa: E402
from grader.instructor.suite import build_suite  # noqa: E402
from solutions import mistake_model as mm  # noqa: E402


def evidence(seed: int) -> None:
    trials = [t for t in build_suite(seed, ("cpu",)).trials if t.device == "cpu"]
    fingerprints = Fingerprints()
    for hook in mm.MODULE_HOOKS:
        settings = [s for size in (1, 2) for s in mm.settings(hook, size)]
        triples = sum(1 for _ in mm.settings(hook, 3))
        times, seen = [], 0
        for trial in (t for t in trials if t.hook == hook):
            started = time.perf_counter()
            model = fingerprints.module_model(trial)
            if model is None:
                continue
            for setting in settings:
                model.seen(setting)
            seen += len(model._cache)
            times.append(time.perf_counter() - started)
        print(
            f"{hook:26} {len(settings):4} settings of 1-2 knobs ({triples} of 3); {len(times)} cases: "
            f"median {1000 * statistics.median(times):7.1f} ms, max {1000 * max(times):7.1f} ms, "
            f"total {sum(times):5.2f} s; {seen / len(times):.0f} distinct computations a case"
        )
    for hook in sorted({t.hook for t in trials} - set(mm.MODULE_HOOKS)):
        programs = fingerprints.programs(hook)
        if not programs:
            continue
        times = []
        for trial in (t for t in trials if t.hook == hook):
            started = time.perf_counter()
            for program in programs:
                fingerprints.program_seen(program, trial)
            times.append(time.perf_counter() - started)
        print(
            f"{hook:26} {len(programs):4} programs; {len(times)} cases: median "
            f"{1000 * statistics.median(times):7.1f} ms, max {1000 * max(times):7.1f} ms, total {sum(times):5.2f} s"
        )


def corpus(path: str, jobs: int, seed: int) -> None:
    from grader.instructor.class_grading import GradeOptions, LocalExecutor, grade_class

    spent = [0.0]
    calls = [0]
    real = submission_grading.diagnose_hook

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started
            calls[0] += 1

    submission_grading.diagnose_hook = timed
    options = GradeOptions(seed=seed, devices=["cpu", "meta"], executor=LocalExecutor(jobs=jobs))
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        run = grade_class([path], Path(out), options)
        wall = time.perf_counter() - started
    print(
        f"{len(run.outcomes)} submissions, {calls[0]} (submission, hook) diagnoses: {spent[0]:.1f} s in the diagnosis "
        f"(summed over {jobs} grading threads, the class's shared evidence included) of a {wall:.1f} s run"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corpus", help="a folder of submissions to grade for real")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    evidence(args.seed)
    if args.corpus:
        corpus(args.corpus, args.jobs, args.seed)


if __name__ == "__main__":
    main()
