"""Prepare the hidden suite once per run: wire calls, tensor bytes and gold answers; and its version.

Everything here is computed in the trusted process and shared by every
submission: the inputs for each case and dtype, the gold answers (the
reference in float64 on the CPU), and one serialised batch per hook and
device, so grading a submission costs its own calls and little else.

:func:`suite_version` names the code that decides a verdict; the gradebook
reuses a result only under the same version, so a change to any of that code
(a fix to the reference, say) means a regrade.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch
from safetensors.torch import save as save_tensors

from grader import hook_table
from grader.child.figures import figure_facts, headless_pyplot
from grader.child.wire import plain_to_wire
from grader.instructor.cases import DEVICE, HALF, Case, GeneratorSeed, Trial, make_cases, observable_state
from grader.instructor.verdict import HALF_SAFETY
from grader.registry import HOOK_NAMES, Solution, hook_signature, load_solution


@dataclass
class Batch:
    """The calls of one hook on one device, ready to send: a header list and one blob."""

    hook: str
    device: str
    trials: list[Trial]
    calls: list[dict[str, Any]]
    blob: bytes

    @property
    def held(self) -> bool:
        """One call whose memory the grader reads from the kernel (``Case.measure_held``): sent alone, first."""
        return len(self.trials) == 1 and self.trials[0].case.measure_held


@dataclass
class Suite:
    seed: int
    devices: tuple[str, ...]
    batches: list[Batch] = field(default_factory=list)
    fingerprints: Any = None  # a fingerprints.Fingerprints: the known mistakes failing each trial, on demand
    skipped: dict[str, str] = field(default_factory=dict)  # devices of ``devices`` that do not run here, with why

    @property
    def trials(self) -> list[Trial]:
        return [trial for batch in self.batches for trial in batch.trials]

    def batches_for(self, hook: str) -> list[Batch]:
        return [b for b in self.batches if b.hook == hook]


def _dtypes_for(case: Case, device: str) -> tuple[str, ...]:
    """The dtypes ``case`` runs in on ``device``: its own, and float16/bfloat16 where it has ``half`` (the CPU too)."""
    if device == "meta":
        return (case.dtypes[0],) if case.meta else ()
    return case.dtypes + (HALF if case.half else ())


def _cast(value: torch.Tensor, dtype: str) -> torch.Tensor:
    if value.is_floating_point() and dtype not in ("bool",):
        return value.to(getattr(torch, dtype))
    return value


def _gold_args(case: Case, inputs: dict[str, Any], seed: int | None = None) -> dict[str, Any]:
    """The reference's arguments; ``seed``, when given, seeds every generator instead of the case's own."""
    args: dict[str, Any] = {}
    for name, value in case.args.items():
        if value is DEVICE:
            args[name] = "cpu"
        elif isinstance(value, GeneratorSeed):
            args[name] = torch.Generator().manual_seed(value.seed if seed is None else seed)
        else:
            args[name] = inputs.get(name, value)
    return args


def _module_gold(reference: Solution, case: Case, dtype: str, keep: bool = False) -> tuple[Any, dict[str, Any]]:
    """The gold outputs of a module case and the parameters it sends (``{}`` where it sends none).

    The reference is built under the case's seed; with a ``state_seed`` its parameters -- never its
    buffers -- are what the learner's module gets (set by :func:`observable_state` for an observable
    case), rounded to ``dtype``, and the gold is computed from those very values.  The gold is always
    the reference in eval mode: for a training case, the weights that dropout must drop or scale.  ``keep``: the
    reference's module itself instead of the gold answers (in float64, those weights loaded).
    """
    spec = case.module
    if spec is None:
        raise ValueError(f"{case.hook}[{case.name}] is not a module case: it has no ModuleSpec")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.init_seed if spec.init_seed is not None else (spec.state_seed or 0))
        module = reference.call(case.hook, **case.args)
    params: dict[str, torch.Tensor] = {}
    if spec.state_seed is not None:
        params = {name: value.detach() for name, value in module.named_parameters()}
        if spec.observable:
            tokens = spec.forwards[0].shape[-2]
            params = observable_state(params, tokens, int(case.args.get("num_heads", 1)), spec.state_seed)
        params = {name: _cast(value, dtype) for name, value in params.items()}
    module = module.double()
    with torch.no_grad():
        for name, value in params.items():  # the learner gets the weights rounded to ``dtype``; so does the gold
            module.get_parameter(name).copy_(value.double())
        if keep:
            return module, params
        module.eval()
        golds = [module(_cast(x, dtype).double()) for x in spec.forwards]
    if spec.train and golds:  # the call's last answer: the first forward again, in eval mode
        golds.append(golds[0])
    return golds, params


def backward_case(case: Case) -> bool:
    """Whether ``case`` also runs its gradient pass: its hook declares what a gradient must reach (the hook table's
    ``gradients``), and the case computes (no expected error, no structure alone, no memory measured, a module's
    weights loaded)."""
    if not hook_table.row(case.hook).gradients or case.expect_error or case.structural:
        return False
    if case.measure_memory or case.measure_held:
        return False
    return case.module is None or (case.module.state_seed is not None and bool(case.module.forwards))


def _vjp(reference: Solution, case: Case, dtype: str, inputs: dict, cotangent: Any, precision: str) -> dict | None:
    """The reference's VJP for ``cotangent`` of a case's first answer, from its values in ``dtype``, computed in
    ``precision``: ``{grad.<name>: float64 tensor}`` (:func:`~grader.child.wire.gradient_keys`), or None where the
    answer is a constant (it does not require grad)."""
    p = getattr(torch, precision)
    wanted = hook_table.row(case.hook).gradients
    with torch.enable_grad():
        if case.module is None:
            cast = {n: v.to(p) if v.is_floating_point() else v for n, v in inputs.items()}
            leaves = {n: cast[n].requires_grad_() for n in wanted if n in cast and cast[n].is_floating_point()}
            out = reference.call(case.hook, **_gold_args(case, cast))
        else:
            module = _module_gold(reference, case, dtype, keep=True)[0].to(p)
            leaves = {"x": _cast(case.module.forwards[0], dtype).to(p).requires_grad_()}
            if "parameters" in wanted:
                leaves.update({f"state.{n}": param for n, param in module.named_parameters()})
            out = module.eval()(leaves["x"])
        if not leaves or not out.requires_grad:
            return None
        grads = torch.autograd.grad([out], list(leaves.values()), [cotangent.to(out.dtype)], allow_unused=True)
    pairs = zip(leaves.items(), grads)
    return {f"grad.{n}": (torch.zeros_like(leaf) if g is None else g).detach().double() for (n, leaf), g in pairs}


def _gradient(reference: Solution, case: Case, dtype: str, answer: Any, inputs: dict, seed: int) -> tuple:
    """The cotangent of a case's first answer (of ``shape``, drawn from ``seed``, rounded to ``dtype``), the
    reference's VJP for it in float64 and the gradients' absolute tolerance in ``dtype`` (None: the values'); or
    ``(None, {}, None)`` where the answer is a constant or its VJP is zero (no gradient to judge: a learner's
    ``zeros_like`` for dropout with p=1 is as right as the reference's).

    Backward sums over more terms than forward (a cancellation's rounding shows where the gold is near 0), so in
    float32 the tolerance is the values', or ``HALF_SAFETY`` times the reference's own error in float32 where that
    is more: the calibration rule of the half values (:func:`~grader.instructor.verdict.calibrated`), per case.
    (A half gradient's values are not compared: :func:`build_suite`.)"""
    cotangent = torch.randn(answer.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    # where the answer is -inf (a masked score) it is a constant: no gradient flows back through it, whichever way
    # it was made (masked_fill sends 0 back, an added -inf mask the cotangent itself); a softmax after sends 0 there
    cotangent = _cast(cotangent.masked_fill(~torch.isfinite(answer), 0.0), dtype).double()
    gold = _vjp(reference, case, dtype, inputs, cotangent, "float64")
    if gold is None or not any(g.any() for g in gold.values()):  # nothing trains through it (dropout with p=1)
        return None, {}, None
    atol = None
    if dtype == "float32" and case.compare_gold and not (case.module is not None and case.module.train):
        own = _vjp(reference, case, dtype, inputs, cotangent, dtype) or {}
        errors = [float((own[k] - g).abs().max()) for k, g in gold.items() if k in own and g.numel()]
        atol = HALF_SAFETY * max(errors, default=0.0)
    return cotangent, gold, atol


def _image_of(case: Case, figure: Any) -> torch.Tensor:
    """The gold answer of a figure case: the array of the reference's image, read as a learner's is; then closed."""
    read = figure_facts(figure)
    if read is None or read[1] is None:
        raise RuntimeError(f"{case.hook}[{case.name}]: the reference returned no figure with an image")
    plt = headless_pyplot()
    if plt is not None:
        plt.close(figure)
    return read[1]


def _prepare(reference: Solution, case: Case, ci: int, dtype: str, seed: int | None) -> tuple[Any, ...]:
    """The wire args, wire tensors, gold answers, float64 inputs and gold gradients of one case in one dtype;
    ``seed`` draws its cotangent (None: no gradient pass)."""
    prefix = f"c{ci}.{dtype}"
    wire_args: dict[str, Any] = {}
    tensors: dict[str, torch.Tensor] = {}
    inputs: dict[str, torch.Tensor] = {}
    for name, value in case.args.items():
        if isinstance(value, torch.Tensor):
            cast = _cast(value, dtype)
            inputs[name] = cast.double() if cast.is_floating_point() else cast
            sent = cast.transpose(-2, -1) if name in case.transposed else cast
            tensors[f"{prefix}.{name}"] = sent.clone(memory_format=torch.contiguous_format)
            wire_args[name] = {"tensor": f"{prefix}.{name}", "transposed": name in case.transposed}
            if name in case.requires_grad:
                wire_args[name]["requires_grad"] = True
        elif isinstance(value, GeneratorSeed):
            wire_args[name] = {"generator": value.seed}
        elif value is DEVICE:
            wire_args[name] = {"device": True}
        else:
            wire_args[name] = {"value": plain_to_wire(value)}
    golds: list[torch.Tensor] = []
    module_wire = None
    if case.module is not None:
        state: dict[str, torch.Tensor] = {}
        if case.expect_error is None:
            golds, state = _module_gold(reference, case, dtype)
        forwards = []
        for i, x in enumerate(case.module.forwards):
            tensors[f"{prefix}.x{i}"] = _cast(x, dtype).clone(memory_format=torch.contiguous_format)
            forwards.append(f"{prefix}.x{i}")
        for key, value in state.items():
            tensors[f"{prefix}.state.{key}"] = value.clone(memory_format=torch.contiguous_format)
        module_wire = {
            "dtype": dtype,
            "init_seed": case.module.init_seed,
            "state": {key: f"{prefix}.state.{key}" for key in state},
            "train": case.module.train,
            "eval_too": case.module.train,  # the training cases read the module's own eval-mode weights too
            "forwards": forwards,
            "order": list(hook_signature(case.hook).parameters),  # a class is built in this order
        }
    elif case.expect_error is None:
        with torch.no_grad():
            gold = reference.call(case.hook, **_gold_args(case, inputs))
            others = [reference.call(case.hook, **_gold_args(case, inputs, seed)) for seed in case.reseeds]
        golds = [gold] * case.repeat + others
        if hook_table.row(case.hook).output == "figure":
            golds = [_image_of(case, figure) for figure in golds]
    grad_golds: dict[str, torch.Tensor] = {}
    grad_atol = None
    if seed is not None and golds and backward_case(case):
        cotangent, grad_golds, grad_atol = _gradient(reference, case, dtype, golds[0], inputs, seed)
        if grad_golds:
            tensors[f"{prefix}.cotangent"] = _cast(cotangent, dtype).contiguous()
    call = {
        "hook": case.hook,
        "args": wire_args,
        "output": hook_table.row(case.hook).output,
        "banned": list(hook_table.row(case.hook).banned),
        "repeat": case.repeat,
        "module": module_wire,
    }
    if grad_golds:  # the gradient pass: the VJP of the first answer for this cotangent, w.r.t. these inputs
        call["vjp"] = {"cotangent": f"{prefix}.cotangent", "wrt": [key.removeprefix("grad.") for key in grad_golds]}
    if case.measure_memory:  # the child records the peak memory the call holds
        call["measure_memory"] = True
    if case.reseeds:  # the same call once more per seed, its generators seeded with it
        call["also"] = [
            {name: {"generator": seed} if "generator" in arg else arg for name, arg in wire_args.items()}
            for seed in case.reseeds
        ]
    return call, tensors, golds, inputs, (grad_golds, grad_atol)


def build_suite(
    seed: int, devices: tuple[str, ...] = ("cpu",), reference: Solution | None = None, gradients: bool = True
) -> Suite:
    """Expand the hidden cases for ``seed`` over dtypes and ``devices`` and compute the gold answers (and, with
    ``gradients``, the gold VJPs of every case that has a gradient pass: :func:`backward_case`)."""
    reference = reference or load_solution("reference")
    cases = make_cases(seed)
    prepared: dict[tuple[int, str], tuple[Any, ...]] = {}
    grouped: dict[tuple[str, str], list[tuple[Trial, dict]]] = defaultdict(list)
    for ci, case in enumerate(cases):
        for device in devices:
            for dtype in _dtypes_for(case, device):
                if (ci, dtype) not in prepared:
                    cotangent_seed = (seed * 1_000_003 + ci) % 2**63 if gradients else None
                    prepared[(ci, dtype)] = _prepare(reference, case, ci, dtype, cotangent_seed)
                call, tensors, golds, inputs, (grads, atol) = prepared[(ci, dtype)]
                # the values of a gradient are compared where the answer's are, but in float16/bfloat16: there the
                # rounding of backward's intermediates (a 1/w of 12 where the gradient is 0) is bounded by no
                # tolerance of the gradient's own scale; float32 judges the same values (README, Gradients)
                values = case.compare_gold and dtype not in HALF and not (case.module is not None and case.module.train)
                call = dict(call, device=device)
                trial = Trial(case, device, dtype, call, tensors, golds, inputs, grads, values, atol)
                grouped[(case.hook, device)].append((trial, tensors))
    suite = Suite(seed, tuple(devices))
    for hook in HOOK_NAMES:
        for device in devices:
            items = grouped.get((hook, device), [])
            # a call whose memory the grader reads goes alone: what the child held around its batch is the call's
            measured = [item for item in items if item[0].case.measure_held]
            rest = [item for item in items if not item[0].case.measure_held]
            for part in ([rest] if rest else []) + [[item] for item in measured]:
                suite.batches.append(_batch(hook, device, part))
    return suite


def _batch(hook: str, device: str, items: list[tuple[Trial, dict]]) -> Batch:
    blob_tensors: dict[str, torch.Tensor] = {}
    calls = []
    for i, (trial, tensors) in enumerate(items):
        blob_tensors.update(tensors)
        calls.append(dict(trial.call, id=i))
    blob = save_tensors(blob_tensors) if blob_tensors else b""
    return Batch(hook, device, [trial for trial, _ in items], calls, blob)


# --- the version ---------------------------------------------------------------------------------
