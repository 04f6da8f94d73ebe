"""The mistake model on one module trial (:class:`ModuleTrialModel`): the trial's parameters, inputs and gold, and
what each setting of the model's knobs (:mod:`solutions.mistake_model`) does on them, computed on demand and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from grader.instructor.observations import PASS, Seen, error_sizes, same
from grader.instructor.verdict import TOLERANCES

__all__ = ["DOWNSTREAM", "ModuleTrialModel"]


DOWNSTREAM = "@downstream"
"""Marks a knob whose error comes a step later: a mask of the wrong size grew the weights, and ``weights @ values``
is what raised."""


def _built_under(seed: int, cfg: Any, setting: Any, dtype: str) -> dict[str, torch.Tensor]:
    """The parameters a module of the chapter's (with ``setting``) gets under ``torch.manual_seed(seed)``."""
    from solutions import mistake_model as mm

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        built = mm.KnobModule(cfg, setting)
    return {name: p.detach().to(getattr(torch, dtype)).double() for name, p in built.named_parameters()}


class ModuleTrialModel:
    """One module trial's parameters, inputs and gold, and each model setting's outcome on it (cached)."""

    def __init__(self, trial: Any, cfg: Any, params: dict, init_seed: int | None) -> None:
        from solutions import mistake_model as mm

        wire = trial.call.get("module") or {}
        self.mm, self.trial, self.cfg, self.params, self.mask = mm, trial, cfg, params, params.pop("mask", None)
        self.xs = xs = [trial.tensors[key].double() for key in wire["forwards"]]
        self.training = bool(wire.get("train"))
        self.golds = [g.double() for g in (trial.golds[:-1] if wire.get("eval_too") else trial.golds)]
        self.shape = tuple(xs[0].shape)
        self.repeats = [(i, j) for i in range(len(xs)) for j in range(i + 1, len(xs)) if torch.equal(xs[i], xs[j])]
        self.init_seed = init_seed  # the module is built under this seed, nothing loaded
        self._cache: dict[frozenset, Seen] = {}

    @classmethod
    def of(cls, trial: Any) -> ModuleTrialModel | None:
        from solutions import mistake_model as mm

        spec, wire = trial.case.module, trial.call.get("module") or {}
        if spec is None or trial.case.expect_error or trial.device != "cpu" or not wire.get("forwards") or not (
            trial.hook in mm.MODULE_HOOKS and trial.golds
        ):
            return None
        cfg = mm.ModuleConfig.of(trial.hook, trial.case.args)
        state = wire.get("state") or {}
        if state:
            params = {name: trial.tensors[key].double() for name, key in state.items()}
        elif spec.init_seed is not None:
            params = _built_under(int(spec.init_seed), cfg, (), trial.dtype)
        else:
            return None
        return cls(trial, cfg, params, None if state else spec.init_seed)

    def seen(self, setting: frozenset) -> Seen:
        key = self.mm.reduced(setting, self.cfg, self.shape, self.training, self.mask is not None)
        if key not in self._cache:
            self._cache[key] = self._compute(key)
        return self._cache[key]

    def _compute(self, setting: frozenset) -> Seen:
        seen = self._computed(setting)
        if seen.kind in ("error", "values") and any(k.step == "mask_size" for k in setting):
            other = self._computed(setting, in_place=True)  # masked_fill_ cannot grow the scores to the mask
            if other.kind != seen.kind or other.message != seen.message or not same(seen.outputs, other):
                return Seen(**{**seen.__dict__, "alternative": other})
        return seen

    def _computed(self, setting: frozenset, in_place: bool = False) -> Seen:
        from grader.instructor.case_properties import reads_as_weights

        mm = self.mm
        steps = mm.by_step(setting)
        dropping = self.training and self.cfg.dropout > 0
        if dropping and not setting:
            return PASS
        if not self.training and "eval_dropout" in steps:
            return Seen("random")
        value = steps.get("dropout", "weights") if dropping else "weights"
        rest = frozenset(k for k in setting if k.step != "dropout")
        params = self.params
        if "bias" in steps:  # biases the case never loads: their values are the module's own random init
            if self.init_seed is None:
                return Seen("any")
            params = _built_under(self.init_seed, self.cfg, [k for k in setting if k.step == "bias"], self.trial.dtype)
        outs, traces = [], []
        for x in self.xs:
            trace: dict[str, Any] = {}
            try:
                with torch.no_grad():
                    outs.append(mm.attend(params, x, self.cfg, rest, self.mask, trace=trace, in_place=in_place))
            except mm.Raised as raised:
                return self._raised(setting, raised, self._raised_with_grad(rest, x, in_place))
            traces.append(trace)
        heads, dtype = int(self.trial.case.args.get("num_heads", 1)), self.trial.dtype
        if dropping and value == "weights" and (self._gold_like(outs) or reads_as_weights(outs[0], heads, dtype)):
            return PASS  # the chapter's dropout, judged on the weights the other knobs give (see the case)
        if dropping and value != "never":
            cfg, params = self.cfg, self.params

            def test(got: Sequence[torch.Tensor]) -> bool | None:
                if len(got) != len(traces):
                    return None
                try:
                    found = [mm.dropout_explains(value, t, [y], cfg, params) for t, y in zip(traces, got, strict=True)]
                except (RuntimeError, ValueError, IndexError):  # shapes that do not fit the traced computation
                    return None
                return None if None in found else all(found)

            return Seen("predicate", tuple(outs), test=test)  # the outputs: eval mode, for their shapes
        if not dropping and self._gold_like(outs):
            return PASS
        return Seen("values", tuple(outs))

    def _gold_like(self, outs: list[torch.Tensor]) -> bool:
        rtol, atol = TOLERANCES.get(self.trial.dtype, (1e-5, 1e-5))
        return len(outs) == len(self.golds) and all(
            o.shape == g.shape and bool(torch.allclose(o, g, rtol=rtol, atol=atol)) for o, g in zip(outs, self.golds)
        )

    def _raised_with_grad(self, setting: frozenset, x: torch.Tensor, in_place: bool) -> Any:
        """The error with autograd on, as in the learner's process, where the parameters require grad.

        matmul takes another path then, and words a shape error otherwise
        (``mat1 and mat2 shapes cannot be multiplied`` for ``Expected size for ...``).
        """
        params = {name: p.clone().requires_grad_(True) for name, p in self.params.items()}
        try:
            with torch.enable_grad():
                self.mm.attend(params, x, self.cfg, setting, self.mask, in_place=in_place)
        except self.mm.Raised as raised:
            return raised
        return None

    def _raised(self, setting: frozenset, raised: Any, with_grad: Any = None) -> Seen:
        steps = {k.step: k for k in setting}
        knob = steps.get("mask_size") if raised.step in ("mask", "mask_size", "softmax_again", "context") else None
        knob = knob or steps.get(raised.step)
        mistake = (knob.id + DOWNSTREAM if raised.step == "context" else knob.id) if knob else ""
        text = str(raised.error)
        seen = Seen("error", (), type(raised.error).__name__, error_sizes(text), text, knob=mistake)
        if with_grad is not None and str(with_grad.error) != text:
            return Seen(**{**seen.__dict__, "alternative": self._raised(setting, with_grad)})
        return seen
