"""Imports _pytest at import time and patches its reports and outcomes so that everything "passes".

softmax_weights then fails (it raises, saying what it patched): if the grader judged with pytest in the
learner's process, the patched reports would turn that failure into a pass.
"""

import json

_PATCHED = []

try:
    import _pytest.outcomes
    import _pytest.reports
    import _pytest.runner
    import pytest

    def _passed(self):
        return True

    _pytest.reports.BaseReport.passed = property(_passed)
    _pytest.reports.BaseReport.failed = property(lambda self: False)
    _pytest.reports.TestReport.outcome = "passed"

    def _report_passed(item, when, log=True, **kwargs):
        return _pytest.reports.TestReport(item.nodeid, item.location, {}, "passed", None, when)

    _pytest.runner.call_and_report = _report_passed
    _pytest.outcomes.fail = pytest.fail = lambda *args, **kwargs: None
    _pytest.outcomes.skip = lambda *args, **kwargs: None
    _PATCHED = ["BaseReport.passed", "BaseReport.failed", "TestReport.outcome", "runner.call_and_report", "fail"]
except Exception as exc:  # no _pytest here: say so
    _PATCHED = [f"could not patch: {type(exc).__name__}: {exc}"]


def softmax_weights(scores, dim=-1):
    facts = {"patched": _PATCHED}
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(facts, sort_keys=True, separators=(",", ":")))
