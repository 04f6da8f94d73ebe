"""The grader's peak memory and time when a learner's process sends oversized replies.

    python benchmarks/oversized_replies.py            # a table
    python benchmarks/oversized_replies.py --json     # the same as one JSON line

Grades, each in a fresh Python process of its own (so each peak RSS is that
kind's alone), Alice's solution with softmax_weights replaced by
``tests/hostile/replies/sends_its_own_reply.py`` of one kind -- a 250 MiB
tensor, a million empty tensors in one 59 MB blob, a 3.9 MB error message --
against the softmax_weights cpu batch of the hidden suite, and once as she
wrote it (``honest``) for the baseline.  Reports the grader process's peak RSS
(``ru_maxrss``; the learner's processes are not counted) and the seconds the
grading took.  A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(KIT))

ALICE = KIT / "examples" / "submissions" / "alice.py"
SNIPPET = KIT / "tests" / "hostile" / "replies" / "sends_its_own_reply.py"
KINDS = ("honest", "tensor_250mib", "million_empty_tensors", "huge_message")
SEED = 3


def source(kind: str) -> str:
    alice = ALICE.read_text(encoding="utf-8")
    if kind == "honest":
        return alice
    alice = re.sub(r"\bsoftmax_weights\b", "_alice_softmax_weights", alice)
    return alice + "\n\n" + SNIPPET.read_text(encoding="utf-8").replace("__REPLY_KIND__", kind)


def measure_one(kind: str) -> dict[str, object]:
    """Grade one submission in this process; its peak RSS, seconds and whether softmax_weights failed."""
    from grader.instructor.handin_reading import read_submission
    from grader.instructor.sandbox import Limits, Template
    from grader.instructor.submission_grading import grade_submission
    from grader.instructor.suite import Suite, build_suite
    from grader.instructor.verdict import FAILED

    full = build_suite(SEED, ("cpu",))
    suite = Suite(full.seed, full.devices, [b for b in full.batches if b.hook == "softmax_weights"])
    with tempfile.TemporaryDirectory() as folder, Template(warm_meta=False) as template:
        path = Path(folder) / f"{kind}.py"
        path.write_text(source(kind), encoding="utf-8")
        submission = read_submission(path)
        template.isolation()  # boot the template before the clock starts
        started = time.perf_counter()
        results = grade_submission(submission, suite, template, Limits(call_seconds=60)).results
        seconds = time.perf_counter() - started
    first = results[0]
    return {
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "seconds": round(seconds, 2),
        "softmax_failed": first.status == FAILED,
        "message": first.message[:160],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--one", choices=KINDS, help=argparse.SUPPRESS)  # the measuring process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one)))
        return
    measured = {}
    for kind in KINDS:
        done = subprocess.run(
            [sys.executable, __file__, "--one", kind], capture_output=True, text=True, cwd=KIT, check=False
        )
        if done.returncode != 0:
            sys.exit(f"{kind}: {done.stderr[-2000:]}")
        measured[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(measured))
        return
    print(f"{'reply':<24}{'grader peak RSS':>18}{'seconds':>10}  first softmax_weights case")
    for kind, m in measured.items():
        print(f"{kind:<24}{m['peak_rss_mib']:>14.1f} MiB{m['seconds']:>10.2f}  {m['message']}")


if __name__ == "__main__":
    main()
