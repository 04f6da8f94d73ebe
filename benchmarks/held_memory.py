"""What the kernel says each of the test snippets held in chunked_attention's longest case (Tq = 2048, Tk = 16384).

    python benchmarks/held_memory.py                      # every snippet of tests/submissions and tests/hostile
    python benchmarks/held_memory.py chunked_chapter scores_renamed

Grades each snippet (Alice's hand-in with that chunked_attention, ``tests/learner_code.py``) on the longest case
alone, in the sandbox, as the grader does, and prints what ``grader.instructor.held_memory`` read around the call
(MiB): the rise of the peak, the pages touched, given back, the most anonymous memory sampled, written, touched by
processes it started, and the verdict. The rule allows less than the case's kept scores in float32 (128 MiB). A
benchmark, not a test."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(KIT), str(KIT / "tests")]

import learner_code  # noqa: E402

from grader.instructor import submission_grading  # noqa: E402
from grader.instructor.sandbox import Limits, Template  # noqa: E402
from grader.instructor.suite import Suite, build_suite  # noqa: E402


def main(names: list[str]) -> None:
    seen: dict = {}
    judge = submission_grading._Verdicts.judge

    def keeping(self, trial, reply, outputs, call_id=-1, held=None):  # what the grader read, kept for the table
        seen["held"] = held
        return judge(self, trial, reply, outputs, call_id, held)

    submission_grading._Verdicts.judge = keeping  # type: ignore[method-assign]
    full = build_suite(5, ("cpu",))
    suite = Suite(full.seed, full.devices, [b for b in full.batches if b.held])
    folders = (learner_code.SNIPPETS, learner_code.HOSTILE_SNIPPETS)
    names = names or sorted(p.stem for f in folders for p in f.glob("*.py") if "def chunked_attention" in p.read_text())
    columns = ("rise", "touch", "drop", "anon", "write", "procs")
    print(f"{'snippet':48s} {'s':>5s} " + " ".join(f"{c:>6s}" for c in columns) + "  verdict")
    with Template() as template:
        for name in names:
            folder = next(f for f in folders if (f / f"{name}.py").exists())
            seen.clear()
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as tmp:
                results = learner_code.graded_snippet(Path(tmp), name, suite, template, Limits(), folder)
            result = next(r for r in results if r.case == "longest")
            held = seen.get("held")
            sizes = [held.rise, held.touched, held.dropped, held.sampled, held.written, held.others] if held else []
            print(
                f"{name:48s} {time.perf_counter() - start:5.1f} "
                + " ".join(f"{s / 2**20:6.0f}" for s in sizes)
                + f"  {result.status}: {result.message.partition('at once: ')[2][:70]}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
