"""``attnkit audit``: proof that the hidden suite is right and sharp.

Claims checked in this process on trusted code only:

* the reference passes every public case and every hidden case, on every
  device present;
* every catalogued mistake fails at least one hidden case (it is *killed*);
* the mistake model (:mod:`solutions.mistake_model`) computes the reference
  with no knob switched on, and every single knob of it is killed too.

The catalogue and the model are reported apart: ``mistakes`` and ``model``.
:func:`half_precision_errors` measures what the half-precision tolerances are
calibrated from: the reference's own error in float16 and bfloat16 on the CPU
against the float64 gold (``benchmarks/half_tolerances.py`` prints it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.hook_table import row
from grader.instructor.cases import HALF
from grader.instructor.suite import build_suite
from grader.instructor.verdict import FAILED, PASSED, calibrated, judge_in_process, tolerance, trial_id
from grader.registry import HOOK_NAMES, load_solution

__all__ = [
    "AuditReport", "HalfError", "KnobOutcome", "MistakeOutcome", "half_precision_errors", "matrix_rows", "model_rows",
    "run_audit",
]  # fmt: skip


@dataclass
class MistakeOutcome:
    id: str
    exercise: str
    failed_cases: list[str] = field(default_factory=list)
    by_hook: Counter = field(default_factory=Counter)

    @property
    def killed(self) -> bool:
        return bool(self.failed_cases)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "exercise": self.exercise, "killed": self.killed, "failed_cases": self.failed_cases}


@dataclass
class KnobOutcome:
    """One knob of the mistake model on one hook: the hidden cases it fails there."""

    id: str  # the mistake it is
    hook: str
    knob: str  # step=value
    failed_cases: list[str] = field(default_factory=list)

    @property
    def killed(self) -> bool:
        return bool(self.failed_cases)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "hook": self.hook, "knob": self.knob, "killed": self.killed, "failed": self.failed_cases}


@dataclass
class AuditReport:
    seed: int
    devices: list[str]
    public_failures: list[str]
    hidden_failures: list[str]
    mistakes: list[MistakeOutcome]
    model: list[KnobOutcome] = field(default_factory=list)
    model_failures: list[str] = field(default_factory=list)  # hidden cases the model with no knob on fails

    @property
    def reference_passed(self) -> bool:
        return not self.public_failures and not self.hidden_failures

    @property
    def model_ok(self) -> bool:
        return not self.model_failures and all(k.killed for k in self.model)

    @property
    def ok(self) -> bool:
        return self.reference_passed and all(m.killed for m in self.mistakes) and self.model_ok

    def as_dict(self) -> dict[str, Any]:
        return {
            "reference_passed": self.reference_passed,
            "devices": self.devices,
            "seed": self.seed,
            "reference_failures": self.public_failures + self.hidden_failures,
            "mistakes": [m.as_dict() for m in self.mistakes],
            "model": {"chapter_failures": self.model_failures, "knobs": [k.as_dict() for k in self.model]},
        }


def _failures(solution: Any, trials: list[Any]) -> list[tuple[Any, str]]:
    """``(trial, message)`` for each trial ``solution`` fails."""
    verdicts = ((trial, judge_in_process(solution, trial)) for trial in trials)
    return [(trial, verdict.message) for trial, verdict in verdicts if verdict.status == FAILED]


def _model_outcomes(trials: list[Any], hooks: tuple[str, ...] = HOOK_NAMES) -> tuple[list[str], list[KnobOutcome]]:
    """The hidden cases the model fails with no knob on, and each single knob's failed cases, hook by hook."""
    from solutions import mistake_model

    chapter_failures: list[str] = []
    outcomes = []
    for hook in hooks:
        if hook not in mistake_model.MODULE_HOOKS and hook not in mistake_model.FUNCTION_HOOKS:
            continue
        mine = [t for t in trials if t.hook == hook]
        chapter = mistake_model.knob_solution(hook, ())
        chapter_failures += [f"{trial_id(t)}: {message}" for t, message in _failures(chapter, mine)]
        for knob in mistake_model.knobs_for(hook):
            failed = [trial_id(t) for t, _ in _failures(mistake_model.knob_solution(hook, {knob}), mine)]
            outcomes.append(KnobOutcome(knob.id, hook, knob.name, failed))
    return chapter_failures, outcomes


def run_audit(
    seed: int = 0, devices: list[str] | None = None, public: bool = True, groups: tuple[str, ...] = ()
) -> AuditReport:
    """Run the audit on ``devices`` (default: cpu, meta and every GPU present), of the exercise ``groups`` (default:
    all).  A hook whose public tests this kit does not hold (an installed pack's, before its release) has none to
    pass."""
    from grader.check import NO_TESTS, PASSING, run_public_cases
    from grader.instructor.submission_grading import available_devices
    from solutions.mistakes import catalogue, mistake_solution

    hooks = tuple(h for h in HOOK_NAMES if not groups or row(h).group in groups)
    if devices is None:
        devices = [d for d, why in available_devices().items() if why is None]
    public_failures: list[str] = []
    if public:
        public_failures = [
            f"public {r.exercise}: {r.status} {r.first_failure}".strip()
            for r in run_public_cases("reference", list(hooks))
            if r.status not in (PASSING, NO_TESTS)
        ]
    trials = [t for t in build_suite(seed, tuple(devices)).trials if t.hook in hooks]
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = load_solution("reference")
        hidden_failures = [f"{trial_id(trial)}: {message}" for trial, message in _failures(reference, trials)]
        outcomes = []
        for mistake in (m for m in catalogue() if m.exercise in hooks):
            outcome = MistakeOutcome(mistake.id, mistake.exercise)
            mine = [t for t in trials if t.hook in mistake.overrides]
            for trial, _ in _failures(mistake_solution(mistake), mine):
                outcome.failed_cases.append(trial_id(trial))
                outcome.by_hook[trial.hook] += 1
            outcomes.append(outcome)
        model_failures, knobs = _model_outcomes(trials, hooks)
    finally:
        torch.set_num_threads(previous_threads)
    return AuditReport(seed, list(devices), public_failures, hidden_failures, outcomes, knobs, model_failures)


def model_rows(report: AuditReport) -> list[list[str]]:
    """One row per knob of the model: hook, knob, mistake id, failed-case count, killed."""
    return [[k.hook, k.knob, k.id, str(len(k.failed_cases)), "yes" if k.killed else "NO"] for k in report.model]


def matrix_rows(report: AuditReport) -> list[list[str]]:
    """One row per mistake: id, then the failed-case count under each exercise (blank where none)."""
    return [
        [m.id] + [str(m.by_hook[h]) if m.by_hook[h] else "" for h in HOOK_NAMES] + ["yes" if m.killed else "NO"]
        for m in report.mistakes
    ]


# --- the half-precision calibration ----------------------------------------------------------------


@dataclass
class HalfError:
    """The reference's own error on one hook's half-precision cases in one dtype, on the CPU."""

    hook: str
    dtype: str
    trials: int = 0
    max_abs: float = 0.0  # max |got - gold| against the float64 gold
    max_rel: float = 0.0  # max |got - gold| / |gold| where |gold| is a normal number of the dtype
    needed: float = 0.0  # the smallest rtol = atol the verdict's check passes with (against the gold rounded)
    failed: list[str] = field(default_factory=list)  # trials the reference fails (none, or the tolerance is wrong)

    @property
    def in_force(self) -> float:
        """The tolerance (rtol = atol) the verdict holds this hook's values to in this dtype."""
        return max(tolerance(self.hook, self.dtype))

    @property
    def calibrated(self) -> float:
        """What the calibration rule gives from :attr:`needed` (:func:`grader.instructor.verdict.calibrated`)."""
        return calibrated(self.dtype, self.needed)


def half_precision_errors(seed: int = 0) -> list[HalfError]:
    """Per hook and half dtype, the reference's error on its hidden half-precision cases on the CPU.

    Trusted code only: the reference is called in this process on the suite's
    own trials (inputs rounded to the dtype, gold in float64 from those very
    values).  Cases without a gold to compare with (random dropout) count as
    trials and add no error.
    """
    reference = load_solution("reference")
    found: dict[tuple[str, str], HalfError] = {}
    for trial in build_suite(seed, ("cpu",)).trials:
        if trial.dtype not in HALF:
            continue
        row = found.setdefault((trial.hook, trial.dtype), HalfError(trial.hook, trial.dtype))
        row.trials += 1
        verdict = judge_in_process(reference, trial)
        if verdict.status != PASSED:
            row.failed.append(f"{trial_id(trial)}: {verdict.message}")
        if not trial.case.compare_gold or trial.case.expect_error:
            continue
        tiny = torch.finfo(getattr(torch, trial.dtype)).tiny
        for i, gold in enumerate(trial.golds):
            got = verdict.outputs.get(f"out{i}")
            if got is None or not got.is_floating_point():
                continue
            g64, w64 = got.double(), gold.double()
            rounded = gold.to(got.dtype).double()
            diff = torch.where(g64 == w64, 0.0, (g64 - w64).abs())
            off = torch.where(g64 == rounded, 0.0, (g64 - rounded).abs())
            normal = w64.abs() >= tiny
            row.max_abs = max(row.max_abs, float(diff.max()))
            if normal.any():
                row.max_rel = max(row.max_rel, float((diff[normal] / w64[normal].abs()).max()))
            row.needed = max(row.needed, float((off / (1 + rounded.abs())).max()))
    return list(found.values())
