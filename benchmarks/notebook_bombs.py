"""What a hostile notebook costs the grader's own process: time and peak memory per case.

    python benchmarks/notebook_bombs.py            # every case, each in a fresh process
    python benchmarks/notebook_bombs.py cell-700k  # one case

A notebook submission is parsed in the trusted process (``grader.notebooks``,
through ``grader.instructor.handin_reading.read_submission``), so it must be refused or
converted in a few seconds with modest memory, whatever it holds.  Each case is
written to a temporary folder, then read by ``read_submission`` in a fresh
Python process that reports the wall time of the read, the process's peak RSS
after it (``VmHWM``, the interpreter and its imports included) and the peak
of ``tracemalloc`` over a second, traced read (Python allocations only).  The ``uncapped`` case lifts the size caps
to show that conversion itself is linear (the red team's 700 kB cell took 448 s
before).  The last line measures the alternative that was not taken: starting a
helper process (``python -I`` importing nbformat) per notebook.  A benchmark,
not a test: nothing here asserts a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent

GOOD = "import torch\n\n\ndef softmax_weights(scores, dim=-1):\n    return scores.softmax(dim)\n"


def _notebook(cells: list[dict]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})


def _code(source: str, i: int, outputs: list | None = None) -> dict:
    return {
        "cell_type": "code",
        "id": f"c{i}",
        "metadata": {},
        "source": source,
        "outputs": outputs or [],
        "execution_count": None,
    }


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def build(case: str, folder: Path) -> Path:
    """Write the case's submission into ``folder``; return its path."""
    path = folder / f"{case}.ipynb"
    if case in ("cell-700k", "cell-700k-uncapped"):
        text = _notebook([_code(GOOD, 0), _code("x = 1; " * 100_000, 1)])  # 700 kB, one line of statements
    elif case == "cell-250k":
        text = _notebook([_code(GOOD, 0), _code("x = 1; " * 36_000, 1)])  # just under the per-cell cap
    elif case == "code-512k":  # the most code a notebook may hold: two dense cells just under the cap
        text = _notebook([_code(GOOD, 0)] + [_code("x = 1; " * 36_000, i) for i in range(1, 3)])
    elif case == "outputs-8mb":
        text = _notebook([_code(GOOD, 0, [_stream("y" * 79 + "\n") for _ in range(100_000)])])
    elif case == "zip-20mb":
        inner = _notebook([_code(GOOD, 0, [_stream("z" * 20_000_000)])])
        path = folder / f"{case}.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            zf.writestr("bomb/work.ipynb", inner)
        return path
    elif case == "cells-100k":
        text = _notebook([_code(GOOD, 0)] + [_code("a = 1", i) for i in range(1, 100_000)])
    elif case == "metadata-19mb":  # millions of tiny JSON objects: the worst case for the JSON parser itself
        cell = _code(GOOD, 0)
        cell["metadata"] = {"junk": [[] for _ in range(4_900_000)]}
        text = _notebook([cell])
    elif case == "escaped-quotes":  # 10 MB inside one unterminated string: a regex counting strings goes quadratic
        text = '{"cells": ["' + '\\"' * 5_000_000
    elif case == "cells-1000":  # at the cap: a thousand cells of real code
        body = "def f{i}(x):\n    return x * {i}\n"
        text = _notebook([_code(GOOD, 0)] + [_code(body.format(i=i), i) for i in range(1, 1000)])
    elif case == "v3-headings":  # nbformat 3, upgraded by nbformat: 999 headings whose "#" * level would be a petabyte
        heading = {"cell_type": "heading", "level": 10**15, "metadata": {}, "source": "x"}
        code = {"cell_type": "code", "input": GOOD, "outputs": [], "language": "python", "metadata": {}}
        worksheet = {"cells": [code] + [heading] * 999}
        text = json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [worksheet]})
    else:
        raise SystemExit(f"unknown case {case!r}; the cases are: {', '.join(CASES)}")
    path.write_text(text, encoding="utf-8")
    return path


CASES = (
    "cell-700k",
    "cell-700k-uncapped",
    "cell-250k",
    "code-512k",
    "outputs-8mb",
    "zip-20mb",
    "cells-100k",
    "cells-1000",
    "metadata-19mb",
    "escaped-quotes",
    "v3-headings",
)

MEASURE = """
import resource, sys, time, tracemalloc
sys.path.insert(0, {kit!r})

def peak_rss_mib():  # VmHWM: this process's own peak (ru_maxrss also counts the parent's, before exec)
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

from grader import notebooks
from grader.instructor.handin_reading import read_submission
if {uncapped!r}:
    notebooks.MAX_CELL_BYTES = notebooks.MAX_CODE_BYTES = 1 << 30
started = time.perf_counter()
sub = read_submission({path!r})
seconds = time.perf_counter() - started
rss = peak_rss_mib()
tracemalloc.start()  # a second read, traced (tracing slows it down, so it is not the one timed)
read_submission({path!r})
peak = tracemalloc.get_traced_memory()[1]
outcome = ("refused: " + sub.error) if sub.error else "converted, %d lines" % sum(
    t.count(chr(10)) for t in sub.files.values())
print("%.2f\\t%.0f\\t%.0f\\t%s" % (seconds, peak / 2**20, rss, outcome[:90]))
"""


def measure(case: str, folder: Path) -> str:
    path = build(case, folder)
    size = path.stat().st_size
    code = MEASURE.format(kit=str(KIT), uncapped=case.endswith("uncapped"), path=str(path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    line = done.stdout.strip() or f"failed: {done.stderr.strip()[-200:]}"
    return f"{case:<20}{size / 2**20:>8.1f} MB  {line}"


def helper_process_cost(runs: int = 5) -> float:
    """Mean wall time of starting ``python -I`` that imports what a converter in a helper process would need."""
    started = time.perf_counter()
    for _ in range(runs):
        subprocess.run([sys.executable, "-I", "-c", "import ast, json, nbformat"], check=True)
    return (time.perf_counter() - started) / runs


def main(argv: list[str]) -> None:
    cases = argv or list(CASES)
    print(f"{'case':<20}{'on disk':>11}  seconds\ttracemalloc peak MiB\tpeak RSS MiB\toutcome")
    with tempfile.TemporaryDirectory(prefix="attnkit-bombs-") as tmp:
        for case in cases:
            print(measure(case, Path(tmp)), flush=True)
    print(f"a helper process per notebook would cost {helper_process_cost():.2f} s to start, before any work")


if __name__ == "__main__":
    main(sys.argv[1:])
