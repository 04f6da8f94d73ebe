"""What every candidate (a catalogued wrong program, or a setting of the mistake model) does on every trial:
computed in the trusted process, on the case's own inputs, once per case for the whole class, lazily, and shared by
the grading threads (:class:`Fingerprints`).  Learner code never runs here: only our own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from grader.instructor.module_trial_model import ModuleTrialModel
from grader.instructor.observations import OTHER, Seen, observe, same
from grader.instructor.verdict import judge_in_process

__all__ = ["RANDOM_RUNS", "Candidate", "Fingerprints"]


@dataclass(frozen=True)
class Candidate:
    """A catalogued program (``setting`` None) or a setting of the model; ``ids``: the mistakes it is."""

    key: str
    hook: str
    ids: frozenset[str]
    setting: frozenset | None = None
    solution: Any = None


class Fingerprints:
    """What every candidate does on every trial, computed the first time a failing case needs it.

    Shared by every grading thread of a class; a trial no submission fails costs nothing.  Empty where the catalogue
    is not installed (no ``solutions/``).  The name is the old one (a fingerprint was one mistake's output on one
    trial); the class holds the model's outcomes too.
    """

    def __init__(self, catalogue: Iterable[Any] | None = None, model: bool = True) -> None:
        self._programs: dict[str, list[Candidate]] = {}
        self._seen: dict[tuple[str, int], Seen] = {}
        self._models: dict[int, Any] = {}
        self._keep: dict[int, Any] = {}  # the trials cached by id, kept alive so an id is never reused
        self.lock = threading.RLock()  # shared by the grading threads
        self.model = model
        self.available = True
        try:
            from solutions import mistake_model
            from solutions.mistakes import catalogue as every_group_s
            from solutions.mistakes import mistake_solution
        except ImportError:
            self.available = False
            return
        for mistake in every_group_s() if catalogue is None else catalogue:
            solution = mistake_solution(mistake)
            for hook in mistake.overrides:
                cand = Candidate(f"catalogue:{mistake.id}", hook, frozenset({mistake.id}), None, solution)
                self._programs.setdefault(hook, []).append(cand)
        hooks = sorted(mistake_model.FUNCTION_HOOKS) if model else []
        for hook, setting in ((h, s) for h in hooks for size in (1, 2) for s in mistake_model.settings(h, size)):
            solution = mistake_model.knob_solution(hook, setting)
            key = "model:" + "+".join(sorted(k.name for k in setting))
            ids = mistake_model.ids_of(setting)
            self._programs.setdefault(hook, []).append(Candidate(key, hook, ids, setting, solution))

    def programs(self, hook: str) -> list[Candidate]:
        return self._programs.get(hook, [])

    def program_seen(self, cand: Candidate, trial: Any) -> Seen:
        """What a catalogued program (or a function setting of the model) does on ``trial``."""
        key = (cand.key + "@" + cand.hook, id(trial))
        with self.lock:
            if key not in self._seen:
                self._keep[id(trial)] = trial
                self._seen[key] = self._judge(cand, trial)
            return self._seen[key]

    def _judge(self, cand: Candidate, trial: Any) -> Seen:
        """The candidate's outcome; where its values hang on the global random state (its own random init, a
        dropout in eval), what can be said of them from a few runs under other seeds."""

        def run(seed: int) -> Seen:
            torch.manual_seed(seed)
            verdict = judge_in_process(cand.solution, trial)
            return observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)

        try:
            with torch.random.fork_rng(devices=[]):
                first = run(1)
                if first.kind != "values" or not trial.case.compare_gold:
                    return first
                second = run(2)
                if same(first.outputs, second):
                    return first
                if trial.case.module is not None:  # random parameters it never loaded: nothing to compare
                    return Seen("any")
                return _dropped_like([first, second] + [run(seed) for seed in range(3, RANDOM_RUNS + 1)])
        except Exception:  # noqa: BLE001 - our own candidate breaking the call: no evidence
            return OTHER

    def module_model(self, trial: Any) -> Any:
        """The model on one module trial (:class:`ModuleTrialModel`), or None where it does not apply."""
        with self.lock:
            if id(trial) not in self._models:
                self._keep[id(trial)] = trial
                self._models[id(trial)] = ModuleTrialModel.of(trial) if self.model else None
            return self._models[id(trial)]


RANDOM_RUNS = 4
"""Runs of a candidate whose values change with the global random state, to learn what each entry can be."""


def _dropped_like(runs: list[Seen]) -> Seen:
    """A random candidate as what it keeps: each entry 0, or the one value it takes whenever it is kept."""
    if any(len(r.outputs) != len(runs[0].outputs) for r in runs):
        return OTHER
    kept = []
    for outs in zip(*(r.outputs for r in runs), strict=True):
        stack = torch.stack([o.double() for o in outs])
        nonzero = stack != 0
        first = nonzero.float().argmax(dim=0, keepdim=True)
        value = torch.where(nonzero.any(0), stack.gather(0, first).squeeze(0), torch.nan)
        if not bool(torch.isclose(torch.where(nonzero, stack, value), value.expand_as(stack), equal_nan=True).all()):
            return OTHER  # not a dropout: a kept entry takes different values
        kept.append(value)
    return Seen("dropped", tuple(kept), message=runs[0].message)
