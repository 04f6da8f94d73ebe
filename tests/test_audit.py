"""``attnkit audit``: the reference passes everything, every catalogued mistake fails something.

And the audit is sharp itself: a "mistake" that is really the reference
survives and makes it exit non-zero; so does a broken reference.
"""

from __future__ import annotations

import json
import types

import pytest
import torch
from click.testing import CliRunner

import grader.instructor.audit
import solutions.mistakes
from grader.cli import main
from grader.instructor.audit import AuditReport
from grader.instructor.submission_grading import available_devices
from grader.packs import instructor_part
from grader.registry import HOOK_NAMES, adopt
from solutions import reference
from solutions.mistakes import Mistake, catalogue

WIDE = {"COLUMNS": "300"}
HARMLESS = Mistake(
    "harmless-reference-softmax",
    "softmax_weights",
    "the reference's own softmax: nothing is wrong",
    "nothing to fix",
    "没有需要修改的地方",
    "tests/test_audit.py",
    types.MappingProxyType({"softmax_weights": reference.softmax_weights}),
)


def _audit(*args: str):
    return CliRunner().invoke(main, ["audit", *args], env=WIDE, catch_exceptions=False)


# --- one real audit per scenario -----------------------------------------------------------------

CATALOGUE = catalogue()  # every group's
SOME = CATALOGUE[:1]
"""The catalogue of the scenarios that break something on purpose: one entry (the real catalogue is audited once)."""
_REPORTS: dict[tuple, AuditReport] = {}
_RUN_AUDIT = grader.instructor.audit.run_audit  # the real one, whatever a test patches in its place


def audit_once(scenario: str, public_skipped: bool = False):
    """``run_audit`` as it is, run at most once per scenario and arguments for this test module.

    A full audit (the reference, every catalogued mistake, every knob of the model, on cpu and meta) takes
    tens of seconds; the tests of one scenario (the real catalogue, a surviving mistake, a surviving knob, a
    broken reference) each read it, through the command's JSON, its table or the report itself, and the
    audit is a pure function of the scenario and its arguments (seeded, in-process).  So each scenario's
    audit runs for real, once, with the very arguments the command passes, and the command renders that
    report.  A scenario is what its fixture patches, the same every time; ``public_skipped`` where that
    fixture replaces the public cases by none (then ``public`` changes nothing, and is not part of the key).
    """

    def run(
        seed: int = 0, devices: list[str] | None = None, public: bool = True, groups: tuple[str, ...] = ()
    ) -> AuditReport:
        if devices is None:  # what run_audit itself does with None
            devices = [d for d, why in available_devices().items() if why is None]
        key = (scenario, seed, tuple(devices), False if public_skipped else public, tuple(groups))
        if key not in _REPORTS:
            _REPORTS[key] = _RUN_AUDIT(seed=seed, devices=list(devices), public=public, groups=tuple(groups))
        return _REPORTS[key]

    return run


@pytest.fixture
def real_catalogue_audited_once(monkeypatch):
    """``attnkit audit`` reads the module's one audit of the real catalogue (what ``report`` holds)."""
    monkeypatch.setattr(grader.instructor.audit, "run_audit", audit_once("catalogue"))


def _json(result) -> dict:
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as exc:  # pragma: no cover - the message is the point
        raise AssertionError(f"audit --json printed something that is not JSON: {result.stdout[:2000]}") from exc


def _check_schema(data: dict) -> None:
    """The documented keys with the documented types (extra keys are allowed)."""
    assert {"reference_passed", "devices", "mistakes"} <= set(data), sorted(data)
    assert isinstance(data["reference_passed"], bool)
    assert isinstance(data["devices"], list) and data["devices"]
    assert all(isinstance(d, str) for d in data["devices"])
    assert isinstance(data["mistakes"], list)
    for m in data["mistakes"]:
        assert {"id", "exercise", "killed", "failed_cases"} <= set(m), m
        assert isinstance(m["id"], str) and m["id"]
        assert m["exercise"] in HOOK_NAMES
        assert isinstance(m["killed"], bool)
        assert isinstance(m["failed_cases"], list) and all(isinstance(c, str) for c in m["failed_cases"])
        assert m["killed"] == bool(m["failed_cases"]), m


# --- the real catalogue -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def report():
    return audit_once("catalogue")(seed=0, devices=["cpu", "meta"])


@pytest.mark.slow
def test_reference_passes_every_public_and_hidden_case(report):
    assert report.public_failures == []
    assert report.hidden_failures == []
    assert report.reference_passed is True
    assert report.devices == ["cpu", "meta"]


@pytest.mark.slow
def test_every_catalogued_mistake_is_killed(report):
    assert len(report.mistakes) >= 25
    assert [m.id for m in report.mistakes] == [m.id for m in CATALOGUE]
    assert [m.id for m in report.mistakes if not m.killed] == []
    assert report.ok is True


@pytest.mark.slow
@pytest.mark.parametrize("mistake", CATALOGUE, ids=[m.id for m in CATALOGUE])
def test_a_mistake_fails_hidden_cases_of_the_hooks_it_overrides_only(report, mistake):
    (outcome,) = [m for m in report.mistakes if m.id == mistake.id]
    assert outcome.exercise == mistake.exercise
    assert outcome.failed_cases, f"{mistake.id} survives the hidden suite"
    failed_hooks = {name.split("[", 1)[0] for name in outcome.failed_cases}
    assert failed_hooks <= set(mistake.overrides), failed_hooks
    assert mistake.exercise in failed_hooks, f"{mistake.id} survives its own exercise; failed only {failed_hooks}"
    assert sum(outcome.by_hook.values()) == len(outcome.failed_cases)


@pytest.mark.slow
def test_audit_json_reports_the_reference_passed_every_mistake_killed_and_exits_0(real_catalogue_audited_once):
    result = _audit("--json")
    assert result.exit_code == 0, result.output[-3000:]
    data = _json(result)
    _check_schema(data)
    assert data["reference_passed"] is True
    assert data["devices"] == [d for d, why in available_devices().items() if why is None]
    assert len(data["mistakes"]) >= 25
    assert [m["id"] for m in data["mistakes"] if not m["killed"]] == []
    assert [m["id"] for m in data["mistakes"]] == [m.id for m in CATALOGUE]


# --- a surviving mistake ---------------------------------------------------------------------


@pytest.fixture
def public_cases_skipped(monkeypatch):
    """Leave the public cases out of run_audit (it imports run_public_cases from grader.check when called).

    The tests using this break the catalogue or the reference *as the audit loads
    it*; the public cases load the real reference by name and pass anyway, so
    running them (pytest in-process, seconds) would prove nothing here.
    """
    import grader.check

    monkeypatch.setattr(grader.check, "run_public_cases", lambda *args, **kwargs: [])


@pytest.fixture
def with_survivor(monkeypatch, public_cases_skipped):
    """One real mistake and a "mistake" whose softmax_weights is the reference's (run_audit reads the attribute).

    The rest of the catalogue and the model's knobs are left out: the real catalogue's audit is ``report``'s, and
    this scenario is about how a survivor is reported."""
    from solutions import mistake_model

    monkeypatch.setattr(solutions.mistakes, "catalogue", lambda: (*SOME, HARMLESS))
    monkeypatch.setattr(mistake_model, "KNOBS", ())
    monkeypatch.setattr(grader.instructor.audit, "run_audit", audit_once("survivor", public_skipped=True))
    return HARMLESS


@pytest.mark.slow
def test_a_surviving_mistake_is_reported_not_killed_in_json_and_exits_1(with_survivor):
    result = _audit("--json", "--devices", "cpu,meta")
    assert result.exit_code == 1, result.output[-3000:]
    data = _json(result)
    _check_schema(data)
    assert data["reference_passed"] is True
    (entry,) = [m for m in data["mistakes"] if m["id"] == with_survivor.id]
    assert entry == {**entry, "exercise": "softmax_weights", "killed": False, "failed_cases": []}
    assert [m["id"] for m in data["mistakes"] if not m["killed"]] == [with_survivor.id]


@pytest.mark.slow
def test_a_surviving_mistake_is_named_in_the_table_and_exits_1(with_survivor):
    result = _audit("--devices", "cpu,meta")
    assert result.exit_code == 1, result.output[-3000:]
    out = result.output
    assert f"Survivors: {with_survivor.id}" in out, out[-3000:]
    assert f"{len(SOME)} of {len(SOME) + 1} known mistakes killed" in out
    (row,) = [ln for ln in out.splitlines() if with_survivor.id in ln and "Survivors" not in ln]
    assert row.rstrip(" │┃|").endswith("NO"), row
    assert "The reference passes every public and hidden case" in out


# --- the mistake model, reported apart from the catalogue --------------------------------------------


@pytest.mark.slow
def test_every_knob_of_the_model_is_killed_and_the_model_with_none_passes(report):
    from solutions import mistake_model

    assert report.model_failures == []
    expected = [(h, k.name) for h in HOOK_NAMES for k in mistake_model.knobs_for(h)]
    assert [(k.hook, k.knob) for k in report.model] == expected
    assert len(report.model) >= 60
    assert [f"{k.hook} {k.knob}" for k in report.model if not k.killed] == []
    for knob in report.model:  # a knob fails cases of its own hook only
        assert {case.split("[", 1)[0] for case in knob.failed_cases} == {knob.hook}, knob


@pytest.fixture
def with_surviving_knob(monkeypatch, public_cases_skipped):
    """A real knob and a knob that changes nothing (``bias=never`` is not read by the computation), beside one real
    mistake (the full model's audit is ``report``'s)."""
    from solutions import mistake_model

    harmless = mistake_model.Knob("no-scaling", "bias", "never", frozenset({mistake_model.SELF}))
    monkeypatch.setattr(mistake_model, "KNOBS", (*mistake_model.knobs_for(mistake_model.SELF)[:1], harmless))
    monkeypatch.setattr(solutions.mistakes, "catalogue", lambda: SOME)
    monkeypatch.setattr(grader.instructor.audit, "run_audit", audit_once("surviving-knob", public_skipped=True))
    return harmless


@pytest.mark.slow
def test_a_surviving_knob_is_reported_apart_from_the_catalogue_and_exits_1(with_surviving_knob):
    result = _audit("--json", "--devices", "cpu,meta")
    assert result.exit_code == 1, result.output[-3000:]
    data = _json(result)
    assert [m["id"] for m in data["mistakes"] if not m["killed"]] == [], "the catalogue is all killed"
    assert data["model"]["chapter_failures"] == []
    alive = [k for k in data["model"]["knobs"] if not k["killed"]]
    assert alive == [
        {"id": "no-scaling", "hook": "make_self_attention", "knob": "bias=never", "killed": False, "failed": []}
    ]
    table = _audit("--devices", "cpu,meta")
    assert table.exit_code == 1
    assert "Model survivors: make_self_attention bias=never" in table.output
    assert f"{len(SOME)} of {len(SOME)} known mistakes killed" in table.output


# --- a broken reference ------------------------------------------------------------------------


def _too_flat_softmax(scores, dim=-1):
    """A softmax at temperature 2: wrong everywhere but on uniform rows, and like no catalogued mistake."""
    return reference.softmax_weights(scores / 2, dim=dim)


@pytest.fixture
def broken_reference(monkeypatch, public_cases_skipped):
    real = grader.instructor.audit.load_solution

    def load(spec):
        if spec == "reference":
            return adopt(
                "reference",
                "broken for a test",
                [types.SimpleNamespace(softmax_weights=_too_flat_softmax), *instructor_part("REFERENCE")],
            )
        return real(spec)

    from solutions import mistake_model

    monkeypatch.setattr(grader.instructor.audit, "load_solution", load)
    monkeypatch.setattr(solutions.mistakes, "catalogue", lambda: SOME)  # the reference is what this is about
    monkeypatch.setattr(mistake_model, "KNOBS", ())
    monkeypatch.setattr(grader.instructor.audit, "run_audit", audit_once("broken-reference", public_skipped=True))


@pytest.mark.slow
def test_run_audit_with_a_broken_reference_is_not_ok(broken_reference):
    report = grader.instructor.audit.run_audit(seed=0, devices=["cpu", "meta"], public=False)  # audit_once's
    assert report.reference_passed is False
    assert report.ok is False
    assert report.hidden_failures
    assert {line.split("[", 1)[0] for line in report.hidden_failures} == {"softmax_weights"}


@pytest.mark.slow
def test_audit_json_with_a_broken_reference_exits_non_zero(broken_reference):
    result = _audit("--json", "--devices", "cpu,meta")
    assert result.exit_code != 0, result.output[-3000:]
    data = _json(result)
    _check_schema(data)
    assert data["reference_passed"] is False


@pytest.mark.slow
def test_audit_table_with_a_broken_reference_says_so(broken_reference):
    result = _audit("--devices", "cpu,meta")
    assert result.exit_code != 0
    assert "The reference fails" in result.output
    assert "softmax_weights[" in result.output
    assert "The reference passes" not in result.output


def test_the_broken_softmax_is_really_broken():
    """Guard for the test above: the temperature-2 softmax differs from the reference on ordinary scores."""
    scores = torch.tensor([[0.0, 1.0, 2.0]])
    assert not torch.allclose(_too_flat_softmax(scores), reference.softmax_weights(scores))
