"""What chunked_attention's long hidden case costs: Tq = Tk = 2048, d = 16, on the CPU.

    python benchmarks/long_sequence_cost.py              # the reference and full attention sliced, 5 runs each
    python benchmarks/long_sequence_cost.py --runs 10

Times one call of the case's inputs in this process, plainly, under the child runtime's measuring mode
(the peak memory held, what the long case asks the learner's process for), and under both that mode and the
allocator's record (``grader.child.allocations``: what a CPU call runs under in the child), and prints the peak
of elements each one held at once and the allocator's peak of bytes.  The grader's limit for one call is
``Limits.call_seconds``.  A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

import torch  # noqa: E402

from grader.child.allocations import allocator_record  # noqa: E402
from grader.child.call import _MemoryMeter  # noqa: E402
from grader.instructor.cases import make_cases  # noqa: E402
from grader.instructor.sandbox import Limits  # noqa: E402
from solutions import reference  # noqa: E402
from solutions.mistakes import by_id  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    (case,) = [c for c in make_cases(0) if c.hook == "chunked_attention" and c.measure_memory]
    args = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in case.args.items()}
    shapes = {k: tuple(v.shape) for k, v in args.items() if isinstance(v, torch.Tensor)}
    print(f"case {case.name}: {shapes}, chunk_size {args['chunk_size']}, causal {args['causal']}, float32")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; the call limit is {Limits().call_seconds} s")
    solutions = {"reference": reference.chunked_attention, "full-attention-sliced": by_id("full-attention-sliced")}
    solutions["full-attention-sliced"] = solutions["full-attention-sliced"].overrides["chunked_attention"]
    for name, fn in solutions.items():
        plain, measured, recorded, peak, record = [], [], [], 0, {}
        for _ in range(runs):
            started = time.perf_counter()
            fn(**args)
            plain.append(time.perf_counter() - started)
            meter = _MemoryMeter()
            started = time.perf_counter()
            with meter:
                fn(**args)
            measured.append(time.perf_counter() - started)
            peak = meter.peak_elements
            started = time.perf_counter()
            with allocator_record(record), _MemoryMeter():
                fn(**args)
            recorded.append(time.perf_counter() - started)
        print(
            f"{name:>22}: median {statistics.median(plain):.3f} s plain, {statistics.median(measured):.3f} s measured"
            f" (max {max(measured):.3f} s), {statistics.median(recorded):.3f} s measured and recorded;"
            f" held at its peak {peak:,} elements; the allocator's peak {record.get('cpu_peak_bytes', 0):,} bytes"
        )


if __name__ == "__main__":
    main()
