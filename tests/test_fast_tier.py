"""The fast tier's rule (tests/conftest.py): there, a test not marked ``slow`` that takes too long fails, naming the
mark; a run of every test (``make test-all``) fails nothing for its time."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parent / "conftest.py"


def test_a_slow_call_fails_unless_marked_slow(pytester: pytest.Pytester):
    pytester.makeconftest(
        f"""
import importlib.util
spec = importlib.util.spec_from_file_location("kit_conftest", {str(CONFTEST)!r})
kit_conftest = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kit_conftest)
kit_conftest.FAST_SECONDS = 0.2
pytest_runtest_makereport = kit_conftest.pytest_runtest_makereport
"""
    )
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
