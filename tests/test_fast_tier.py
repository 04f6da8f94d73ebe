"""The fast tier's rule (tests/conftest.py): there, a test not marked ``slow`` that takes too long fails, naming the
mark; a run of every test (``make test-all``) fails nothing for its time."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parent / "conftest.py"


def _conftest(pytester: pytest.Pytester, load_ratio: float) -> None:
    """The kit's rule at 0.2 s, on a machine as loaded as ``load_ratio`` (the load per core)."""
    pytester.makeconftest(
        f"""
import importlib.util
spec = importlib.util.spec_from_file_location("kit_conftest", {str(CONFTEST)!r})
kit_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kit_conftest)
kit_conftest.FAST_SECONDS = 0.2
kit_conftest.load_ratio = lambda: {load_ratio!r}
pytest_runtest_makereport = kit_conftest.pytest_runtest_makereport
"""
    )


def test_a_slow_call_fails_unless_marked_slow(pytester: pytest.Pytester):
    _conftest(pytester, 1.0)
    pytester.makepyfile(
        """
import time
import pytest

def test_quick():
    pass

def test_sleeps():
    time.sleep(0.5)

@pytest.mark.slow
def test_sleeps_marked():
    time.sleep(0.5)

def test_fails_on_its_own():
    assert False
"""
    )
    quiet = ("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestUnknownMarkWarning")
    fast = pytester.runpytest("-m", "not slow", *quiet)
    fast.assert_outcomes(passed=1, failed=2, deselected=1)
    fast.stdout.fnmatch_lines(["*test_sleeps took 0.5 s, over the fast tier's 0.2 s: mark it @pytest.mark.slow*"])
    every = pytester.runpytest(*quiet)  # test-all: only the failing assert fails, whatever the times
    every.assert_outcomes(passed=3, failed=1)
    assert "took" not in every.stdout.str()


def test_on_a_loaded_machine_the_limit_stretches_with_the_load(pytester: pytest.Pytester):
    _conftest(pytester, 3.0)  # a load of 6 on 2 cores: 0.6 s
    pytester.makepyfile(
        "import time\n\ndef test_sleeps():\n    time.sleep(0.5)\n\ndef test_sleeps_longer():\n    time.sleep(0.7)\n"
    )
    fast = pytester.runpytest("-m", "not slow", "-p", "no:cacheprovider")
    fast.assert_outcomes(passed=1, failed=1)
    fast.stdout.fnmatch_lines(["*test_sleeps_longer took 0.7 s, over the fast tier's 0.6 s*"])
