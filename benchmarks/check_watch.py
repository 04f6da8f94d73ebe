"""What a round of ``attnkit check --watch`` costs once the process is warm.

    python benchmarks/check_watch.py                  # every exercise, 5 saves
    python benchmarks/check_watch.py heads --saves 10
    python benchmarks/check_watch.py --solution reference   # every case run to the end, under the rules

Copies the public tests and stubs to a temporary kit, starts ``attnkit check
--watch`` there, waits for the first round, then saves a stub again and again
(the same text, so the table stays the same) and reports, per save, the round
time the watch prints (load the learner's code, run the public cases, print
the table) and the time from the save to the summary line (that plus the
polling).  A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"^\d+ of \d+ exercises passing\.\s+\((\d+\.\d+) s\)")


def _summary(stream) -> float:
    for line in stream:
        found = SUMMARY.search(line)
        if found:
            return float(found.group(1))
    raise SystemExit("the watch stopped before printing a summary")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exercise", nargs="*", help="exercises or groups, as attnkit check takes them")
    parser.add_argument("--saves", type=int, default=5)
    parser.add_argument("--solution", default="exercises", help="as attnkit check takes it (default: the stubs)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kit = Path(tmp)
        shutil.copytree(KIT / "exercises", kit / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(KIT / "conftest.py", kit / "conftest.py")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(kit), str(KIT)]), COLUMNS="200")
        started = time.perf_counter()
        watcher = subprocess.Popen(
            [sys.executable, "-m", "grader.cli", "check", "--watch", "--solution", args.solution, *args.exercise],
            cwd=kit, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            first = _summary(watcher.stdout)
            print(f"first round: {first:.2f} s (process start to summary: {time.perf_counter() - started:.2f} s)")
            rounds, latencies = [], []
            stub = kit / "exercises" / "heads.py"
            for _ in range(args.saves):
                time.sleep(0.5)
                saved = time.perf_counter()
                stub.write_text(stub.read_text())
                rounds.append(_summary(watcher.stdout))
                latencies.append(time.perf_counter() - saved)
            print(f"later rounds ({len(rounds)}): median {statistics.median(rounds):.2f} s, max {max(rounds):.2f} s")
            print(f"save to summary line: median {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s")
        finally:
            watcher.send_signal(signal.SIGINT)
            watcher.wait(timeout=30)


if __name__ == "__main__":
    main()
