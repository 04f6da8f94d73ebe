"""Diagnosis: name the known mistakes a submission's failing cases show, each with its hint.

Per exercise, all its cases together.  The candidates are the catalogue's wrong programs (:mod:`solutions.mistakes`)
and the settings of the mistake model (:mod:`solutions.mistake_model`: one knob per mistake, up to two knobs at once,
three where no smaller setting fits).  A candidate explains the submission when, on every case of the exercise the
grader could judge, it fails exactly the cases the submission fails, the same way (the same outputs within a float32
tolerance; the same error with the same shapes, on a learner's line that shows the mistake; the same complaint), and
passes the others.  Cases are judged in *aspects*, as the verdict checks them: the values (or the error), then the
properties (a buffer, the ``state_dict``), an input changed in place, the meta device (a tensor built on the CPU), a
contract error (``ValueError`` expected); each aspect is explained on its own, so a submission may show one mistake
in its values and another in its buffers.

Precision over recall: the ids named are those every explaining candidate shares -- nothing where two different
explanations fit.  Some mistakes are told apart only by the learner's text (:mod:`grader.instructor.learner_source`):
an error's line must show the mistake (``.T`` for ``q-at-k-t-batched``, the mask for ``mask-not-sliced``, the weights
transposed for ``weights-transposed``), a plain
``self.mask`` attribute, a ``masked_fill`` whose result is thrown away (``mask-result-discarded``, the same numbers as
``mask-not-applied``).

Everything a candidate does is computed here, in the trusted process, on the case's own inputs, once per case for the
whole class (:class:`Fingerprints`, lazily, shared by the grading threads); a submission's outputs come as bytes.
Learner code never runs here: only our own.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.instructor import learner_source as src
from grader.instructor.learner_source import LearnerSource
from grader.instructor.replies import CallReply
from grader.instructor.verdict import FAILED, PASSED, TOLERANCES, judge_in_process

LANGUAGES = ("en", "zh")
MAX_TRIPLES = 20_000
"""Settings of three knobs a hook may have before the search stops at two (a bound on the cost, never reached)."""

__all__ = [
    "LANGUAGES", "Fingerprints", "HookRow", "Seen", "diagnose_hook", "diagnose_in_process", "error_sizes", "hint",
    "main_first", "observe",
]  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """One solution's outcome on one trial, as the diagnosis compares them.

    ``kind``: ``pass``; ``values`` (wrong values, shape, NaN; or, on a case with random outputs, whatever its
    properties found); ``error`` (it raised); ``property``; ``mutation``; ``device`` (fails on meta as it would on a
    GPU); ``contract`` (an expected error did not come); ``banned``; ``other`` (no evidence).  The model adds
    ``random`` (nondeterministic where the case wants it deterministic), ``predicate`` (a random output of a known
    form) and ``any`` (fails, with values no one can predict).
    """

    kind: str
    outputs: tuple[torch.Tensor, ...] = ()
    error_type: str = ""
    sizes: tuple[int, ...] = ()
    message: str = ""
    where: str | None = None
    knob: str = ""  # the model's: the mistake id of the step that raised
    test: Callable[[Sequence[torch.Tensor]], bool | None] | None = field(default=None, compare=False)
    alternative: Seen | None = None  # the model's: what the same setting does written another (right) way


PASS = Seen("pass")
OTHER = Seen("other")

_VALUE_MESSAGES = re.compile(r"^(output \d+: )?(returned |values differ|NaN in the output|wrong entries)")


def error_sizes(message: str) -> tuple[int, ...]:
    """The sizes an error message names, sorted (``at non-singleton dimension 2`` is a position, left out)."""
    text = re.sub(r"dimension \d+", "", message)
    text = re.sub(r"(?<=\d)x(?=\d)", " ", text)  # 6x4: two sizes
    return tuple(sorted(int(n) for n in re.findall(r"(?<![\w.])-?\d+(?![\w.])", text)))  # not mat1, batch2, 0.5


def _normalised(message: str) -> str:
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", message)


def observe(trial: Any, status: str, message: str, reply: CallReply | Mapping | None, outputs: Mapping) -> Seen:
    """What a solution did on ``trial``, from its verdict (``message`` without the case's label) and its reply."""
    if status == PASSED:
        return PASS
    if status != FAILED or reply is None:
        return OTHER
    error = dict(reply.get("error") or {})
    outs = tuple(outputs[k] for k in sorted(outputs) if k.startswith("out") and isinstance(outputs[k], torch.Tensor))
    if (trial.call.get("module") or {}).get("eval_too"):
        outs = outs[:-1]  # the training forwards; the last is the module's own eval-mode answer
    if trial.case.expect_error:
        return Seen("contract", message=message)
    if trial.device == "meta":
        return Seen("device", message=message) if message.startswith("will fail on a GPU") else OTHER
    if error:
        text = str(error.get("message", ""))
        return Seen("error", (), str(error.get("type", "")), error_sizes(text), text, error.get("where"))
    if reply.get("banned"):
        return Seen("banned", message=message)
    if str(getattr(message, "id", "")).startswith("grad."):
        return Seen("gradient", message=_gradient_kind(message))
    if message.startswith("modified its input"):
        return Seen("mutation", outs, message=message)
    if _VALUE_MESSAGES.match(message) or not trial.case.compare_gold:
        return Seen("values", outs, message=message)
    if message.startswith("the reference's weights cannot be loaded"):
        return OTHER
    return Seen("property", outs, message=message)


def _gradient_kind(message: Any) -> str:
    """What kind of break a gradient failure is, as two programs that break alike share it: the message's id, the
    function input it names (a module's names are the learner's own, left out) and, for a backward that raised, the
    exception and the first words of its text (never its shapes, versions or line)."""
    params = dict(getattr(message, "params", {}))
    name = params.get("input", params.get("inputs", ""))
    if message.id in ("grad.raised", "grad.raised_at", "grad.call_raised", "grad.call_raised_at"):
        kind, _, text = str(params.get("error", "")).partition(": ")
        return f"{message.id.removesuffix('_at')} {kind}: {re.split(r'[:[(]', text)[0].strip()}"
    kind = message.id.removesuffix("_at")  # where the graph was cut is the learner's line, not the kind
    return f"{kind} {name}" if kind != "grad.frozen" else kind


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
                if _same(first.outputs, second):
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


def _dropped_matches(expect: Seen, seen: Seen, dtype: str) -> bool:
    """Each of the learner's entries is 0 or the candidate's kept value (where known), and some are 0."""
    if len(seen.outputs) != len(expect.outputs):
        return False
    some_dropped = False
    for got, kept in zip(seen.outputs, expect.outputs, strict=True):
        if got.shape != kept.shape or got.dtype == torch.bool:
            return False
        got = got.double()
        known = ~torch.isnan(kept)
        zero = got == 0
        rtol = 1e-6 if dtype == "float64" else 2e-4
        same = torch.isclose(got, kept.nan_to_num(0.0), rtol=rtol, atol=1e-7)
        if not bool((zero | same | ~known).all()):
            return False
        some_dropped = some_dropped or bool((zero & known & (kept != 0)).any())
    return some_dropped


def _same(a: Sequence[torch.Tensor], b: Seen) -> bool:
    """The very same tensors (NaN where the other has NaN)."""
    return len(a) == len(b.outputs) and all(
        x.shape == y.shape and x.dtype == y.dtype
        and (torch.equal(x, y) or x.is_floating_point() and bool(torch.allclose(x, y, 0.0, 0.0, equal_nan=True)))
        for x, y in zip(a, b.outputs, strict=True)
    )  # fmt: skip


def _close(mine: Sequence[torch.Tensor], theirs: Sequence[torch.Tensor], dtype: str) -> bool:
    """Whether a learner's outputs are the candidate's, within what float32 (or float64) arithmetic allows."""
    if not mine or len(mine) != len(theirs):
        return False
    rtol, atol = (1e-6, 1e-8) if dtype == "float64" else (2e-4, 2e-5) if dtype == "float32" else (2e-2, 2e-2)
    for a, b in zip(mine, theirs, strict=True):
        if a.shape != b.shape:
            return False
        if a.dtype == torch.bool or b.dtype == torch.bool:
            if a.dtype != b.dtype or not torch.equal(a, b):
                return False
            continue
        a64, b64 = a.double(), b.double()
        scale = float(b64.nan_to_num(0.0, 0.0, 0.0).abs().max()) if b64.numel() else 0.0
        if not torch.allclose(a64, b64, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True):
            return False
    return True


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
            if other.kind != seen.kind or other.message != seen.message or not _same(seen.outputs, other):
                return Seen(**{**seen.__dict__, "alternative": other})
        return seen

    def _computed(self, setting: frozenset, in_place: bool = False) -> Seen:
        from grader.instructor.cases import reads_as_weights

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


@dataclass
class HookRow:
    """One trial of one hook for one submission: the trial and what the submission did."""

    trial: Any
    seen: Seen
    facts: Mapping[str, Any] = field(default_factory=dict)  # the module facts of the reply, where one came


DOWNSTREAM = "@downstream"
"""Marks a knob whose error comes a step later: a mask of the wrong size grew the weights, and ``weights @ values``
is what raised."""


def _line_rule(mistake: str, line: Any, code: Any) -> bool | None:
    """Whether the learner's failing line shows ``mistake`` (None: no rule for it)."""
    if mistake.endswith(DOWNSTREAM):  # the line multiplies the grown weights; the code must show the mask's size
        mistake = mistake[: -len(DOWNSTREAM)]
        grown = {"mask-not-sliced": True, "mask-of-size-6": src.fixed_six(code)}.get(mistake)
        return None if grown is None else bool(grown) and src.multiplies(line) and not src.uses_dot_t(line)
    if mistake in ("mask-not-sliced", "mask-of-size-6"):  # the mask's line; of size 6 where the code says so
        sized = mistake == "mask-not-sliced" or src.fixed_six(code)
        return src.uses_mask(line) and not src.uses_dot_t(line) and sized
    if mistake == "weights-transposed":  # the line multiplies the weights transposed
        return src.multiplies_transposed_left(line)
    if mistake in ("scores-bmm-3d-only", "context-bmm-3d-only"):  # its errors name sizes: the code must call bmm
        return src.calls(code, "bmm")
    return src.uses_dot_t(line) if mistake == "q-at-k-t-batched" else None


def _code_rule(mistake: str, code: Any, facts: Sequence[Mapping[str, Any]]) -> bool | None:
    """Whether the hook's code shows ``mistake`` (None: no rule for it, any code will do)."""
    buffers = {b for f in facts for b in f.get("buffers", [])}
    if mistake == "mask-plain-attribute":
        return src.mask_attribute(code) and "mask" not in buffers and bool(facts)
    if mistake == "mask-made-in-forward-on-cpu":
        return src.builds_off_device(code, "forward") and "mask" not in buffers and bool(facts)
    return CODE_RULES[mistake](code) if mistake in CODE_RULES else None


CODE_RULES: dict[str, Callable[[Any], bool]] = {
    # the gradient mistakes (solutions.gradient_mistakes): the break itself -- a cut, a torch.where, a frozen
    # parameter, an in-place update (others break the same way, and get no hint)
    **dict.fromkeys(("softmax-detached", "context-detaches-weights", "dropout-scale-on-data", "split-heads-no-grad",
                     "causal-forward-no-grad"), src.cuts_graph),
    "softmax-where-nan-grad": src.calls_where,
    "frozen-parameters": src.freezes,
    "chunked-in-place-after-amax": src.updates_in_place,
    # the rest: what no output tells apart from another mistake, or from a right answer on the CPU
    "mask-built-on-cpu": src.builds_off_device,
    "causal-mask-ignores-device": src.builds_off_device,
    "mask-of-size-6": src.fixed_six,  # another mask that fails where T != 6 (or on meta) is no mask of size 6
    "dropout-global-rng-cpu-mask": src.draws_from_global_rng,  # draws without the generator
    "dropout-zeroes-input-in-place": src.updates_in_place,  # writes into a tensor
    "merge-view-after-transpose": src.views_swapped,  # views a tensor it transposed
    "merge-not-contiguous": src.swaps_dims,  # reorders dimensions itself
}
"""The mistakes named only where the hook's code shows them (one predicate of
:mod:`grader.instructor.learner_source` each)."""


def _refined(ids: frozenset[str], code: Any) -> frozenset[str]:
    """Ids told apart by the text: a mask never applied because ``masked_fill``'s result was thrown away."""
    discarded = "mask-not-applied" in ids and src.discards_masked_fill(code)
    return (ids - {"mask-not-applied"}) | {"mask-result-discarded"} if discarded else ids


ASPECTS = ("values", "property", "mutation", "gradient", "device", "contract")
CHECKED = ASPECTS[:4]
"""The aspects of a case the verdict checks one after another: a failure in one means the earlier ones passed."""


def _state(aspect: str, row: HookRow) -> str:
    """``fail``, ``pass`` or ``unknown``: the submission on this row, in this aspect.  The device aspect is judged
    on meta rows only, the contract on expected errors only, the others on neither; a row that failed in a later
    aspect (:data:`CHECKED`) passed this one."""
    trial, kind = row.trial, row.seen.kind
    if aspect == "device":
        judged = trial.device == "meta"
    else:
        judged = trial.device != "meta" and bool(trial.case.expect_error) == (aspect == "contract")
    if not judged:
        return "unknown"
    if kind in (("values", "error") if aspect == "values" else (aspect,)):
        return "fail"
    later = CHECKED[CHECKED.index(aspect) + 1 :] if aspect in CHECKED else ()
    return "pass" if kind == "pass" or kind in later else "unknown"


def _program_explains(aspect: str, expect: Seen, row: HookRow, line_ok: bool | None) -> bool:
    """Whether a program that did ``expect`` on this row fails it the way the submission did.

    ``line_ok``: whether the submission's failing line shows the program's mistake (None: no rule for it).
    """
    seen, dtype = row.seen, row.trial.dtype
    if aspect == "values":
        if expect.kind == "any":
            return True
        if expect.kind == "error":
            return _same_error(expect, seen, line_ok)
        if expect.kind == "dropped":
            return seen.kind == "values" and _dropped_matches(expect, seen, dtype)
        if expect.kind != "values" or seen.kind != "values":
            return False
        if not row.trial.case.compare_gold:  # random values: the properties' very complaint, or the same draws
            if not seen.message or _normalised(seen.message) != _normalised(expect.message):
                return False
            return seen.message == expect.message or _close(seen.outputs, expect.outputs, dtype)
        return _close(seen.outputs, expect.outputs, dtype)
    if expect.kind != seen.kind:
        return False
    if aspect == "mutation":
        return _close(seen.outputs, expect.outputs, dtype)
    if aspect == "device":  # the message holds the submission's own error and line: the code rules decide
        return True
    return _normalised(seen.message) == _normalised(expect.message)


def _program_passes(aspect: str, expect: Seen) -> bool | None:
    """Whether a program that did ``expect`` passes this row in ``aspect`` (None: it fails before, unknown)."""
    if expect.kind == "pass":
        return True
    if aspect in CHECKED:
        kind = "values" if expect.kind in ("error", "any", "dropped") else expect.kind  # these fail in the values
        failed_at = CHECKED.index(kind) if kind in CHECKED else -1
        if failed_at < 0:
            return None if expect.kind in ("other", "banned") else False
        return None if failed_at < CHECKED.index(aspect) else failed_at > CHECKED.index(aspect)
    return False if expect.kind == aspect else None


def _same_error(expect: Seen, seen: Seen, line_ok: bool | None) -> bool:
    """The same exception over the same sizes; a shape error needs a learner's line that shows the mistake."""
    if seen.kind != "error" or seen.error_type != expect.error_type:
        return False
    if line_ok is None:  # no rule for this mistake: only the very same message (sizes and all) will do
        return seen.message == expect.message and not expect.sizes
    if not expect.sizes:  # a rule, and a message that names no size: the very same message
        return bool(line_ok) and seen.message == expect.message
    return bool(line_ok) and seen.sizes == expect.sizes


def _model_explains(expect: Seen, row: HookRow, model: ModuleTrialModel, line_ok: Callable) -> bool:
    if expect.alternative is not None and _model_explains(expect.alternative, row, model, line_ok):
        return True
    seen = row.seen
    if expect.kind == "pass" or seen.kind not in ("values", "error"):
        return False
    if expect.kind == "any":
        return True
    if expect.kind == "error":
        return bool(expect.knob) and _same_error(expect, seen, line_ok(expect.knob))
    if seen.kind != "values" or not seen.outputs:
        return False
    if expect.kind == "values":
        return _close(seen.outputs, expect.outputs, row.trial.dtype)
    if expect.kind == "random":
        outs = seen.outputs
        return any(
            i < len(outs) and j < len(outs) and outs[i].shape == outs[j].shape and not torch.equal(outs[i], outs[j])
            for i, j in model.repeats
        )
    if expect.kind == "predicate" and expect.test is not None:
        if [o.shape for o in seen.outputs] != [o.shape for o in expect.outputs]:
            return False
        return expect.test(seen.outputs) is not False  # None: the weights cannot be read back; it fails, values unknown
    return False


def diagnose_hook(
    hook: str, rows: Sequence[HookRow], fingerprints: Fingerprints, source: LearnerSource | None = None
) -> dict[int, frozenset[str]]:
    """``{row index: the mistake ids it shows}`` for one submission's rows of ``hook`` (empty: nothing to say)."""
    if not fingerprints.available:
        return {}
    from grader.hook_table import CLASS_ALIASES

    source = source or LearnerSource({})
    code = source.hook_code(hook, CLASS_ALIASES.get(hook))
    structural = _structure_named(hook, rows, code) if hook in MODULE_HOOK_NAMES else {}
    if not any(r.seen.kind not in ("pass", "other") for r in rows):
        return structural
    facts = [r.facts for r in rows if r.facts]

    def line_rule(row: HookRow) -> Callable[[str], bool | None]:
        line = source.statement_at(row.seen.where)
        return lambda mistake: _line_rule(mistake, line, code)

    named: dict[int, frozenset[str]] = {}
    for aspect in ASPECTS:
        states = [_state(aspect, r) for r in rows]
        failing = [i for i, s in enumerate(states) if s == "fail"]
        if not failing:
            continue
        passing = [i for i, s in enumerate(states) if s == "pass"]
        found = _explanations(Evidence(hook, aspect, rows, failing, passing, fingerprints, line_rule))
        refined = (_refined(ids, code) for ids in found)
        found = [ids for ids in refined if all(_code_rule(mistake, code, facts) is not False for mistake in ids)]
        shared = frozenset.intersection(*found) if found else frozenset()
        shared |= _container_rule(hook, aspect, rows, failing, passing, code)
        named.update({i: named.get(i, frozenset()) | shared for i in failing if shared})
    return {i: named.get(i, frozenset()) | structural.get(i, frozenset()) for i in {*named, *structural}}


# --- issue 25 (hidden): a mask whose container hides its values -----------------------------------------------------

NUMPY_TRIANGLES: Mapping[tuple[str, int], frozenset[str]] = {
    ("triu", 1): frozenset(),
    ("triu", 0): frozenset({"triu-diagonal-0"}),
    **{("tril", k): frozenset({"tril-instead-of-triu"}) for k in (-1, 0, 1)},
}
"""What the one NumPy triangle of ones a ``causal_mask`` builds says of its values (``k``: the diagonal)."""


def _container_rule(
    hook: str, aspect: str, rows: Sequence[HookRow], failing: list[int], passing: list[int], code: Any
) -> frozenset[str]:
    """A ``causal_mask`` that returns a NumPy array: the reply carries no values (only tensors come back), so what
    the mask holds is read off the learner's own lines (:func:`~grader.instructor.learner_source.numpy_triangle`):
    a known wrong triangle is named with the type, right or unreadable values leave the type alone.  Named only
    where the code calls NumPy, every failing case of the values says "not a tensor, a numpy.ndarray" and none
    passes."""
    if hook != "causal_mask" or aspect != "values" or passing:
        return frozenset()
    for i in failing:
        message = rows[i].seen.message
        if getattr(message, "id", "") != "not_a_tensor" or str(getattr(message, "params", {}).get("kind")) != (
            "numpy.ndarray"
        ):
            return frozenset()
    if not src.uses_numpy(code):
        return frozenset()
    return NUMPY_TRIANGLES.get(src.numpy_triangle(code) or ("", 0), frozenset()) | {"causal-mask-numpy"}


def main_first(
    hook: str, rows: Sequence[HookRow], named: Mapping[int, frozenset[str]], fingerprints: Fingerprints
) -> dict[int, tuple[str, ...]]:
    """``named`` (:func:`diagnose_hook`'s answer) with each row's ids in order, the main mistake first: the one
    whose own program (catalogued, or one knob of the model) fails the most of the named rows, where each of two
    mistakes alone fails some of them (``temperature-over-every-element`` fails every value case, its missing max
    subtraction only those that overflow); ties by id.  By id alone where some id has no program of its own (a
    module's model knob, a mistake read from the text): nothing to weigh it by."""
    marked = sorted(named)
    ids = sorted(frozenset().union(*named.values())) if named else []
    own = {m: [c for c in fingerprints.programs(hook) if c.ids == frozenset({m})] for m in ids}

    def reach(mistake: str) -> int:
        with fingerprints.lock:
            return max(
                sum(fingerprints.program_seen(c, rows[i].trial).kind not in ("pass", "other") for i in marked)
                for c in own[mistake]
            )  # fmt: skip

    score = {m: reach(m) for m in ids} if len(ids) > 1 and all(own.values()) else {}
    return {i: tuple(sorted(found, key=lambda m: (-score.get(m, 0), m))) for i, found in named.items()}


@dataclass(frozen=True)
class Evidence:
    """One submission's rows of one hook, seen in one aspect: what a candidate mistake must explain."""

    hook: str
    aspect: str
    rows: Sequence[HookRow]
    failing: list[int]
    passing: list[int]
    fingerprints: Fingerprints
    line_rule: Callable[[HookRow], Callable[[str], bool | None]]


def _explanations(ev: Evidence) -> list[frozenset[str]]:
    """The ids of every candidate that explains this aspect of the rows, smallest settings first."""
    found: list[frozenset[str]] = [c.ids for c in ev.fingerprints.programs(ev.hook) if _program_fits(c, ev)]
    if ev.aspect == "values" and ev.fingerprints.model:
        from solutions import mistake_model as mm

        if ev.hook in mm.MODULE_HOOKS:
            found += _model_search(ev, triples=not found)
    if ev.aspect == "values" and not found and ev.hook not in MODULE_HOOK_NAMES:
        programs = ev.fingerprints.programs(ev.hook)
        found = [c.ids for c in programs if _program_reproduces(c, ev.rows, ev.failing, ev.fingerprints)]
    return found


MODULE_HOOK_NAMES = frozenset({"make_self_attention", "make_causal_attention", "make_multihead_attention"})
MIN_REPRODUCED_CASES = 2
"""Distinct failing cases whose very values a program must reproduce to be named without explaining every case."""


def _program_reproduces(
    cand: Candidate, rows: Sequence[HookRow], failing: list[int], fingerprints: Fingerprints
) -> bool:
    """A function's program that gives the submission's own wrong values on most of its failing value cases.

    The second chance, where no program fails exactly the submission's cases: a learner's variant of a mistake often
    handles an edge (``p = 0``, a non-contiguous input) otherwise than the catalogued program.  The same wrong numbers,
    within float32 tolerance, on at least two distinct cases and on more than half of the cases that fail with values,
    are the mistake at work; the edges that differ are left unexplained.
    """
    valued = [i for i in failing if rows[i].seen.kind == "values" and rows[i].trial.case.compare_gold]
    matched = [
        i
        for i in valued
        if (expect := fingerprints.program_seen(cand, rows[i].trial)).kind == "values"
        and _close(rows[i].seen.outputs, expect.outputs, rows[i].trial.dtype)
    ]
    cases = {rows[i].trial.case.name for i in matched}
    return len(cases) >= MIN_REPRODUCED_CASES and 2 * len(matched) > len(valued)


def _program_fits(cand: Candidate, ev: Evidence) -> bool:
    """Whether a program fails each failing row the submission's way and passes each passing row, in the aspect."""
    aspect, rows, fingerprints = ev.aspect, ev.rows, ev.fingerprints

    def line_ok(row: HookRow) -> bool | None:
        rule = ev.line_rule(row)
        known = [ok for ok in (rule(mistake) for mistake in sorted(cand.ids)) if ok is not None]
        return any(known) if known else None

    specific = False
    for i in ev.failing:
        expect = fingerprints.program_seen(cand, rows[i].trial)
        if not _program_explains(aspect, expect, rows[i], line_ok(rows[i]) if expect.kind == "error" else None):
            return False
        specific = specific or expect.kind != "any"
    passes = (_program_passes(aspect, fingerprints.program_seen(cand, rows[i].trial)) for i in ev.passing)
    return specific and all(passed is not False for passed in passes)  # "fails, values unknown" everywhere: no evidence


def _model_search(ev: Evidence, triples: bool) -> list[frozenset[str]]:
    """The ids of the model's settings that explain the values: one and two knobs, then (``triples``) three if none
    did."""
    from solutions import mistake_model as mm

    hook, rows, fingerprints, line_rule = ev.hook, ev.rows, ev.fingerprints, ev.line_rule
    models = {i: fingerprints.module_model(rows[i].trial) for i in ev.failing + ev.passing}
    failing = [i for i in ev.failing if models[i] is not None and not _drawn_otherwise(models[i], rows[i])]
    passing = [i for i in ev.passing if models[i] is not None]
    if not failing:
        return []
    rules = {i: line_rule(rows[i]) for i in failing}
    for wanted in ((1, 2), (3,)) if triples else ((1, 2),):
        candidates = [s for size in wanted for s in mm.settings(hook, size)]
        if 3 in wanted and len(candidates) > MAX_TRIPLES:
            return []
        with fingerprints.lock:
            for i in failing:
                candidates = [s for s in candidates if _model_explains(models[i].seen(s), rows[i], models[i], rules[i])]
                if not candidates:
                    break
            for i in passing:
                candidates = [s for s in candidates if models[i].seen(s).kind == "pass"]
            candidates = [s for s in candidates if any(models[i].seen(s).kind != "any" for i in failing)]
        if candidates:
            return [mm.ids_of(s) for s in candidates]
    return []


def diagnose_in_process(solution: Any, hooks: list[str], seed: int = 0) -> dict[str, tuple[str, ...]]:
    """``{hook: mistake ids}`` for each failing hook of a trusted, in-process solution that shows known mistakes.

    For ``attnkit check`` and the notebooks' check cells in the instructor's kit (a learner's kit has no
    ``grader/instructor/``, so no hints): trusted code, run on the hidden-suite cases of a fixed public seed.  Returns
    ``{}`` where the catalogue is not installed.
    """
    try:
        import solutions.mistakes  # noqa: F401
    except ImportError:
        return {}
    from grader.instructor.suite import build_suite

    fingerprints = Fingerprints()
    source = _source_of(solution, hooks)
    rows: dict[str, list[HookRow]] = {}
    for trial in build_suite(seed, ("cpu", "meta")).trials:
        if trial.hook not in hooks:
            continue
        try:
            verdict = judge_in_process(solution, trial)
        except Exception:  # a learner's module that breaks the call itself; nothing to compare
            continue
        seen = observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)
        rows.setdefault(trial.hook, []).append(HookRow(trial, seen, dict(verdict.reply.get("module") or {})))
    named = {hook: diagnose_hook(hook, hook_rows, fingerprints, source) for hook, hook_rows in rows.items()}
    return {hook: tuple(sorted(frozenset().union(*ids.values()))) for hook, ids in named.items() if any(ids.values())}


def _source_of(solution: Any, hooks: list[str]) -> LearnerSource:
    """The text of a solution loaded in this process, keyed as its errors' ``where`` names files."""
    import inspect
    import os

    files: dict[str, str] = {}
    places: dict[str, str] = {}
    for hook in hooks:
        fn = solution.functions.get(hook)
        if fn is None:
            continue
        target = getattr(fn, "__init__", fn) if inspect.isclass(fn) else fn
        try:
            path = inspect.getsourcefile(inspect.unwrap(target)) or ""
            line = inspect.unwrap(target).__code__.co_firstlineno
            rel = os.path.relpath(path)
            with open(path, encoding="utf-8") as fh:
                files[rel] = fh.read()
        except (TypeError, AttributeError, ValueError, OSError):
            continue
        places[hook] = f"{rel}:{line}"
    return LearnerSource(files, places)


def hint(mistake_id: str, lang: str = "en") -> tuple[str, str]:
    """``(description, hint)`` of a known mistake, the hint in ``lang`` (en or zh)."""
    from solutions.mistakes import by_id

    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    mistake = by_id(mistake_id)
    return mistake.description, mistake.hint_zh if lang == "zh" else mistake.hint


# --- structure: the mismatches the parameter mapping sees (issue 25) ------------------------------------------------

STRUCTURE_IDS = ("mha-per-head-module-list", "mha-without-out-proj", "fused-qkv-sized-by-d-in", "mask-buffer-misnamed",
                 "fused-qkv-projection")
"""Named from the module's reported structure and the learner's own lines, where no output can be compared: the
reference's weights do not load (the mapping found nothing), or the causal mask is a buffer under another name."""


def _structure_named(hook: str, rows: Sequence[HookRow], code: Any) -> dict[int, frozenset[str]]:
    """``{row index: the structural mistake}`` on the rows that fail because of the module's structure.

    The learner's process reports its parameters' names and shapes and its buffers' names: they decide nothing
    here alone (each rule needs the learner's text, read with ``ast``, to show the same structure: an
    ``nn.ModuleList``, an ``nn.Linear`` sized ``3 *``, a ``register_buffer`` of a triangle, no ``nn.Linear`` whose
    name says out), and no word of theirs reaches the hint, whose text is the catalogue's own.  The verdicts stay
    what they are: this only names."""
    named = {}
    for i, row in enumerate(rows):
        found = _structure_of(hook, row, code) or _named_otherwise(hook, row, code)
        if found:
            named[i] = frozenset({found})
    return _one_fused_id(named)


def _structure_of(hook: str, row: HookRow, code: Any) -> str | None:
    from grader.child.modules import _role_of, map_parameters
    from grader.instructor.verdict import contract_parameters

    facts = row.facts or {}
    if row.seen.kind == "property" and getattr(row.seen.message, "id", "") == "mask_buffer.missing":
        buffers = [str(b) for b in facts.get("buffers", [])]
        others = [b for b in buffers if b != "mask" and b in src.registered_buffers(code)]
        return "mask-buffer-misnamed" if any(src.triangle_buffer(code, b) for b in others) else None
    if facts.get("loaded_by") != "none" or row.seen.kind not in ("other", "values") or code is None:
        return None  # (a case with random outputs keeps its verdict's message as "values": here, the mapping's)
    learner = [(str(p["name"]), tuple(int(n) for n in p["shape"])) for p in facts.get("parameters", [])]
    contract = contract_parameters(row.trial)
    shapes = dict(contract)
    if not learner or "W_query.weight" not in shapes:
        return None
    if hook == "make_multihead_attention" and src.holds_module_list(code):
        if any(part.isdigit() for name, _ in learner for part in name.split(".")):
            return "mha-per-head-module-list"
    d_out, d_in = shapes["W_query.weight"]
    fused = [s for name, s in learner if len(s) == 2 and s[0] == 3 * s[1] and _role_of(name)[0] is None]
    if fused and d_in != d_out and all(s[1] == d_in for s in fused) and src.fused_projection(code):
        return "fused-qkv-sized-by-d-in"
    linears = src.linear_attributes(code)
    if hook == "make_multihead_attention" and not any(_role_of(n)[0] == "out" for n in [*linears, *dict(learner)]):
        without = [(name, shape) for name, shape in contract if not name.startswith("out_proj.")]
        if map_parameters(learner, without)[0] != "none":
            return "mha-without-out-proj"
    return None


CONTRACT_ROLE_ORDER = ("query", "key", "value", "out")


def _drawn_otherwise(model: Any, row: HookRow) -> bool:
    """A case that builds the module under a seed, nothing loaded, where the learner's module creates its
    projections in another order than the contract's (Karpathy's ``Head`` makes ``key`` first): its random weights
    are other draws, so the model's values say nothing there (as of any module whose parameters it cannot know).
    Only where every weight's name says its role; the order is the module's reported ``named_parameters()``."""
    from grader.child.modules import _role_of

    if model.init_seed is None:
        return False
    roles = [_role_of(str(p.get("name", ""))) for p in (row.facts or {}).get("parameters", [])]
    weights = [role for role, kind in roles if kind == "weight"]
    if not weights or None in weights or len(set(weights)) != len(weights):
        return False
    return weights != sorted(weights, key=CONTRACT_ROLE_ORDER.index)


# --- structure: the names the parameter mapping tells apart (issue 25) ---------------------------------------------

QKV_WEIGHTS = ("W_query.weight", "W_key.weight", "W_value.weight")


def _named_otherwise(hook: str, row: HookRow, code: Any) -> str | None:
    """The mistake on the "names" case (the reference's weights load by name), where the weights were loaded
    otherwise (by role or by creation order): ``fused-qkv-projection`` where one parameter takes W_query, W_key and
    W_value stacked by rows, sized (3 * d_out, d_in) with d_in != d_out (not the d_in-sized variant), and the class
    assigns it an ``nn.Linear(..., 3 * ...)``; ``projections-named-differently`` where three distinct parameters take
    them whole (no transpose, no stacking), one at least under another name, each an ``nn.Linear`` the class assigns
    to ``self``.  The mapping is recomputed here from the reported names and shapes, and must agree with how the
    weights were loaded; those names reach no hint (the catalogue's own text)."""
    from grader.child.modules import map_parameters
    from grader.instructor.verdict import contract_parameters

    facts = row.facts or {}
    if row.seen.kind != "property" or getattr(row.seen.message, "id", "") != "names" or code is None:
        return None
    how = facts.get("loaded_by")
    if how not in ("role", "order"):
        return None
    learner = [(str(p["name"]), tuple(int(n) for n in p["shape"])) for p in facts.get("parameters", [])]
    contract = contract_parameters(row.trial)
    shapes = dict(contract)
    if not all(w in shapes for w in QKV_WEIGHTS):
        return None
    found, pairs = map_parameters(learner, contract)
    onto = {theirs: (mine, layout) for mine, theirs, layout in pairs}
    if found != how or not all(w in onto for w in QKV_WEIGHTS):
        return None
    mine = [onto[w][0] for w in QKV_WEIGHTS]
    layouts = [onto[w][1] for w in QKV_WEIGHTS]
    stems = [name.removesuffix(".weight") for name in mine]
    linears = src.linear_attributes(code)
    d_out, d_in = shapes["W_query.weight"]
    if len(set(mine)) == 1:
        stacked = [f"rows {j * d_out}:{(j + 1) * d_out}" for j in range(3)]
        fused = layouts == stacked and dict(learner).get(mine[0]) == (3 * d_out, d_in) and d_in != d_out
        return "fused-qkv-projection" if fused and stems[0] in linears and src.fused_projection(code) else None
    whole = len(set(mine)) == 3 and all(layout == "" for layout in layouts)
    renamed = any(name != theirs for name, theirs in zip(mine, QKV_WEIGHTS))
    return "projections-named-differently" if whole and renamed and set(stems) <= linears else None


def _one_fused_id(named: dict[int, frozenset[str]]) -> dict[int, frozenset[str]]:
    """One fused Linear is sized either by d_out (``fused-qkv-projection``) or by d_in (``fused-qkv-sized-by-d-in``);
    where the rows show the latter, the former is not named on the same module."""
    if not any("fused-qkv-sized-by-d-in" in ids for ids in named.values()):
        return named
    kept = {i: ids - {"fused-qkv-projection"} for i, ids in named.items()}
    return {i: ids for i, ids in kept.items() if ids}
