"""What one sandboxed child costs: spawn, ``hello`` (its isolation line), close.

    python benchmarks/spawn_cost.py            # 20 cycles
    python benchmarks/spawn_cost.py -n 50

Starts one template (its boot is not counted), then times N cycles of
``Template.spawn`` + a ``hello`` round trip + ``Child.close`` and prints the
median, the fastest and the slowest, with the isolation line the children had.
A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.instructor.sandbox import Limits, Template  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="spawn+hello+close cycles to time")
    args = parser.parse_args()
    with Template() as template:
        isolation = template.isolation()  # boots the template and forks once: not timed
        seconds = []
        for _ in range(args.n):
            started = time.perf_counter()
            child = template.spawn(Limits())
            try:
                child.send({"op": "hello"})
                child.receive(30.0)
            finally:
                child.close()
            seconds.append(time.perf_counter() - started)
    ms = sorted(s * 1000 for s in seconds)
    print(f"isolation: {isolation}")
    median = statistics.median(ms)
    print(f"{args.n} spawn+hello+close cycles: median {median:.1f} ms, min {ms[0]:.1f}, max {ms[-1]:.1f}")


if __name__ == "__main__":
    main()
