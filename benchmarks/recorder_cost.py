"""What the banned-call recorders cost one call: the reference's softmax_weights and masked attention, on the CPU.

    python benchmarks/recorder_cost.py              # 200 calls of each, 5 runs
    python benchmarks/recorder_cost.py --calls 1000 --runs 3

Times the same calls plainly, under the TorchFunctionMode alone, and under both recorders (the function mode
and the TorchDispatchMode that every banned exercise's call runs under, ``grader.child.call._recording_mode``),
each one telling a witness that writes to ``/dev/null``.  Prints microseconds per call (median of the runs).
A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

import torch  # noqa: E402

from grader.child.call import _recording_mode  # noqa: E402
from solutions import reference  # noqa: E402


def per_call_us(fn, calls: int, recorder) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        with recorder() if recorder else contextlib.nullcontext():
            fn()
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 4, 64, 64, generator=g)
    q, k, v = (torch.randn(2, 4, 64, 16, generator=g) for _ in range(3))
    null = os.open(os.devnull, os.O_WRONLY)
    tell = lambda line: os.write(null, line.encode())  # noqa: E731  (what the witness does with a line)
    calls = {
        "softmax_weights (2, 4, 64, 64)": lambda: reference.softmax_weights(scores),
        "chunked_attention (2, 4, 64, 16)": lambda: reference.chunked_attention(q, k, v, chunk_size=16, causal=True),
    }
    ways = {
        "plain": None,
        "function mode": lambda: _recording_mode([], tell),  # no banned names: the dispatch mode stays out
        "both modes": lambda: _recording_mode(["softmax"], tell),
    }
    print(f"{'call':34} " + " ".join(f"{w:>14}" for w in ways) + "   (µs per call, median of runs)")
    for name, fn in calls.items():
        row = [statistics.median(per_call_us(fn, options.calls, w) for _ in range(options.runs)) for w in ways.values()]
        print(f"{name:34} " + " ".join(f"{t:14.1f}" for t in row))


if __name__ == "__main__":
    main()
