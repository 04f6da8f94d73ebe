"""What a plot costs a sandboxed child: matplotlib's import, the first ``plot_attention`` call, the rest.

    python benchmarks/plot_cost.py             # 5 children, the template warm with matplotlib and without
    python benchmarks/plot_cost.py -n 10

For each way of starting the template (``warm_figures``: pyplot imported headless in the template, or
not), boots it (timed), then N times: spawns a child, loads a submission whose ``plot_attention`` imports
pyplot inside the function (as the stub suggests), and runs the hidden suite's ``plot_attention`` batch.
Prints the template's boot, and per child the load, the first plot call (which pays the import where the
template did not) and the median of the others, as the child measured them (``reply["seconds"]``).
A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.hook_table import CLASS_NAMES  # noqa: E402
from grader.instructor.sandbox import Limits, Template  # noqa: E402
from grader.instructor.suite import build_suite  # noqa: E402
from grader.registry import HOOK_NAMES  # noqa: E402

SUBMISSION = """
def plot_attention(weights, tokens=None):
    import matplotlib.pyplot as plt

    if weights.dim() != 2:
        raise ValueError("plot_attention draws one (Tq, Tk) matrix")
    tq, tk = weights.shape
    queries = keys = tokens
    if tokens is not None and len(tokens) == 2 and not isinstance(tokens[0], str):
        queries, keys = tokens
    if tokens is not None and (len(queries), len(keys)) != (tq, tk):
        raise ValueError("tokens of the wrong lengths")
    fig, ax = plt.subplots()
    fig.colorbar(ax.imshow(weights.detach().cpu().numpy()), ax=ax)
    ax.set_xlabel("Key positions")
    ax.set_ylabel("Query positions")
    if tokens is not None:
        ax.set_xticks(range(tk), keys)
        ax.set_yticks(range(tq), queries)
    return fig
"""


def one_child(template: Template, calls: list, blob: bytes) -> tuple[float, list[float]]:
    child = template.spawn(Limits())
    try:
        started = time.perf_counter()
        child.send({"op": "load", "files": {"mine.py": SUBMISSION}, "entry": "mine.py",
                    "hooks": list(HOOK_NAMES), "aliases": CLASS_NAMES})  # fmt: skip
        child.receive(60.0)
        load = time.perf_counter() - started
        child.send({"op": "call", "calls": [dict(c, id=i) for i, c in enumerate(calls)]}, blob)
        seconds = []
        for _ in calls:
            header, _ = child.receive(60.0)
            if header.get("error"):
                raise SystemExit(f"the plot call failed: {header['error']}")
            seconds.append(float(header["seconds"]))
        return load, seconds
    finally:
        child.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="children per way of starting the template")
    args = parser.parse_args()
    (batch,) = [b for b in build_suite(1, ("cpu",)).batches if b.hook == "plot_attention"]
    drawing = [c for c, t in zip(batch.calls, batch.trials) if t.case.expect_error is None]
    for warm in (True, False):
        started = time.perf_counter()
        with Template(warm_meta=False, warm_figures=warm) as template:
            isolation = template.isolation()  # boots the template and forks once
            boot = time.perf_counter() - started
            runs = [one_child(template, drawing, batch.blob) for _ in range(args.n)]
        loads = [load for load, _ in runs]
        firsts = [seconds[0] for _, seconds in runs]
        others = [s for _, seconds in runs for s in seconds[1:]]
        print(f"warm_figures={warm}: template boot {boot:.2f} s ({isolation})")
        print(
            f"  {args.n} children: load median {statistics.median(loads):.3f} s; first plot call median "
            f"{statistics.median(firsts):.3f} s (max {max(firsts):.3f}); later calls median "
            f"{statistics.median(others):.3f} s over {len(others)}"
        )


if __name__ == "__main__":
    main()
