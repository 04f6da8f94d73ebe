"""The half-precision tolerances, and the reference's own error they are calibrated from.

    python benchmarks/half_tolerances.py            # seed 0
    python benchmarks/half_tolerances.py --seed 3

For every hook with float16/bfloat16 cases, the reference runs them on the CPU
(:func:`grader.instructor.audit.half_precision_errors`) and the table shows its
max error against the float64 gold (abs, and rel where the gold is a normal
number of the dtype), the smallest rtol = atol the verdict's check would pass
it with ("needed"), what the calibration rule makes of that (max of
``HALF_SAFETY`` x needed and ``HALF_FLOOR_ULPS`` x eps, in
:mod:`grader.instructor.verdict`), and the tolerance in force.  Where the rule
gives more than the one in force, it prints the ``HALF_TOLERANCES`` line to
add.  A benchmark, not a test: ``tests/test_half_precision.py`` holds the rule.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from grader.instructor.audit import half_precision_errors  # noqa: E402
from grader.instructor.verdict import HALF_FLOOR_ULPS, HALF_SAFETY  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = half_precision_errors(args.seed)
    table = Table(title=f"half precision on the CPU, seed {args.seed}: safety {HALF_SAFETY:g}x, floor "
                  f"{HALF_FLOOR_ULPS:g} eps")  # fmt: skip
    for column in ("hook", "dtype", "trials", "max abs err", "max rel err", "needed", "calibrated", "in force"):
        table.add_column(column, justify="left" if column in ("hook", "dtype") else "right")
    for r in rows:
        table.add_row(r.hook, r.dtype, str(r.trials), f"{r.max_abs:.3g}", f"{r.max_rel:.3g}", f"{r.needed:.3g}",
                      f"{r.calibrated:.3g}", f"{r.in_force:.3g}")  # fmt: skip
    console = Console()
    console.print(table)
    problems = 0
    for r in rows:
        for failure in r.failed:
            console.print(f"[red]the reference fails {failure}[/red]")
            problems += 1
        if r.calibrated > r.in_force:
            value = f"{r.calibrated:.3g}"
            console.print(f'add to HALF_TOLERANCES: ("{r.hook}", "{r.dtype}"): ({value}, {value}),')
            problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
