"""The local check's time limit: a looping exercise fails with the grader's words, the others are checked, and a
watch round after the fix passes (grader.deadline, grader.check, grader.watch)."""

from __future__ import annotations

import io
import signal
from pathlib import Path

import pytest
from learner_code import reference_source
from rich.console import Console

from grader.check import FAILING, PASSING, run_public_cases
from grader.instructor.messages import MESSAGES

LOOP = "import torch\n\n\ndef softmax_weights(scores, dim=-1):\n    while True:\n        pass\n\n\n"
"""A learner's softmax_weights that never returns: the loop is line 5."""

SECONDS = 2.0
"""Short enough for a quick test, long enough for a passing case on a loaded machine."""


def graders_words(seconds: float) -> str:
    """What the grader says of a call that ran out of time, in English."""
    return MESSAGES["timed_out"]["en"].format(seconds=f"{seconds:g}")


@pytest.fixture(scope="module", autouse=True)
def warm() -> None:
    """The first check in a process imports what the rules need (torch's autograd imports sympy on its first
    gradient): paid here, not in a test held to one second a case."""
    run_public_cases("reference", ["context_vectors"])


def _alarm() -> tuple[object, tuple[float, float]]:
    return signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)


def test_a_looping_exercise_fails_with_the_graders_words_and_the_others_pass(tmp_path: Path) -> None:
    path = tmp_path / "mine.py"
    path.write_text(LOOP + reference_source(("context_vectors",)), encoding="utf-8")
    handler, timer = _alarm()
    said: list[str] = []
    hooks = ["softmax_weights", "context_vectors"]
    looping, other = run_public_cases(str(path), hooks, seconds=SECONDS, say=said.append)
    assert looping.status == FAILING and looping.timed_out and looping.passed == 0
    assert looping.failed == len(looping.nodeids) // 3 > 1  # every case fails: the first ran out, the others not run
    assert f": {graders_words(SECONDS)} (at " in looping.first_failure, looping.first_failure
    assert looping.first_failure.endswith("mine.py:5)"), looping.first_failure  # where the loop is
    assert other.status == PASSING and not other.timed_out, other.first_failure
    assert said == [f"softmax_weights: {looping.first_failure}"]  # said as it happened, once
    assert signal.getsignal(signal.SIGALRM) is handler  # the limit is gone: its handler and timer too
    assert (signal.getitimer(signal.ITIMER_REAL)[0] > 0) == (timer[0] > 0)


def test_a_loop_that_catches_every_exception_is_stopped_all_the_same(tmp_path: Path) -> None:
    path = tmp_path / "mine.py"
    path.write_text(
        "def softmax_weights(scores, dim=-1):\n    while True:\n        try:\n            scores = scores + 0\n"
        "        except Exception:\n            pass\n",
        encoding="utf-8",
    )
    (result,) = run_public_cases(str(path), ["softmax_weights"], seconds=0.5)
    assert result.status == FAILING and result.timed_out, result.first_failure
    assert graders_words(0.5) in result.first_failure


def test_a_watch_round_after_the_loop_is_fixed_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader import deadline
    from grader.cli import _check_once
    from grader.watch import watch, watched_roots

    monkeypatch.setattr(deadline, "CALL_SECONDS", 0.5)
    path = tmp_path / "mine.py"
    path.write_text("def causal_mask(num_tokens, device=None):\n    while True:\n        pass\n", encoding="utf-8")
    out = io.StringIO()
    console = Console(file=out, width=300)
    codes: list[int] = []

    def one_round() -> None:
        codes.append(_check_once(console, str(path), ["causal_mask"], "en"))  # an exercise of few cases
        if len(codes) == 1:  # the learner fixes the loop and saves
            path.write_text(reference_source(("causal_mask",)), encoding="utf-8")
            monkeypatch.setattr(deadline, "CALL_SECONDS", 30.0)  # the fixed code is not held to the loop's quick limit
        else:
            raise KeyboardInterrupt  # Ctrl-C after the second round

    lines: list[str] = []
    watch(one_round, watched_roots(str(path)), lines.append, poll=0.05)
    assert codes == [1, 0], out.getvalue()
    assert graders_words(0.5) in out.getvalue()
    assert "1 of 1 exercise passing." in out.getvalue()
    assert any(line.endswith("mine.py changed") for line in lines), lines
    assert lines[-1] == "Stopped watching."


def test_the_local_limit_is_the_graders_limit_on_a_call() -> None:
    from grader import deadline
    from grader.instructor.sandbox import Limits

    assert deadline.CALL_SECONDS == Limits().call_seconds


def test_a_measured_exercise_has_the_graders_longer_limit() -> None:
    """The grader lets a call whose memory it measures (chunked_attention's long case) take MEASURED_CALL_FACTOR
    times the limit: the local check, which measures it too and runs it for its gradient and on meta, gives each
    of those as long."""
    from grader.check import MEASURED_RUNS, _Collector
    from grader.rules import MEASURED_CALL_FACTOR

    collector = _Collector(["chunked_attention", "softmax_weights"], seconds=SECONDS)
    assert collector._seconds("chunked_attention") == SECONDS * MEASURED_CALL_FACTOR * MEASURED_RUNS
    assert collector._seconds("softmax_weights") == SECONDS
