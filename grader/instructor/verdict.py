"""Verdicts: decide, in the trusted process, whether one case passed.

A case passes only if the learner's process sent back exactly a tensor of the expected dtype and shape whose values
match the gold answer within the dtype's tolerance, with no NaN where none is expected.  The dtype and shape are read
from the tensor bytes received, never from what the child says about them, also where there is no gold answer to
compare with (random dropout).  A thread or a process the learner's code started fails every call after it (measured
or heard by an audit hook in the child: :func:`grader.rules.spawn_message`).  The reported device, the input-unchanged
flag, the subclass flag and the banned-call list are diagnostics: a hostile process can lie about them, but it cannot
make a wrong value pass.  A reply reaches :func:`judge` only after :mod:`grader.instructor.replies` checked its schema.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, cast

if TYPE_CHECKING:
    from grader.instructor.replies import CallReply

from grader.gradients import gradient_problem, ticked
from grader.hook_table import row
from grader.instructor.said import Message, message_data, message_from_data, said
from grader.rules import (
    banned_message,
    dtype_message,
    expected_images,
    figure_form_problem,
    gpu_device_message,
    gpu_error_message,
    image_stack_problem,
    is_device_error,
    is_transpose,
    not_a_figure_message,
    spawn_message,
    subclass_message,
    transposed_message,
)

__all__ = [
    "FAILED", "PASSED", "SKIPPED", "CaseResult", "InProcessVerdict", "Status", "case_id", "case_label", "case_note",
    "calibrated", "contract_parameters", "judge", "judge_in_process", "own_inputs", "tolerance", "trial_id",
    "value_problem",
]  # fmt: skip

Status = Literal["passed", "failed", "skipped"]
PASSED: Final = "passed"
FAILED: Final = "failed"
SKIPPED: Final = "skipped"


def case_id(hook: str, case: str, device: str, dtype: str) -> str:
    """``hook[case-device-dtype]``: how one case on one device in one dtype is named everywhere
    (JUnit, the audit, the hidden tests' ids)."""
    return f"{hook}[{case}-{device}-{dtype}]"


def case_label(case: str, device: str, dtype: str) -> str:
    """``case (device, dtype)``: a case named within its hook's part of the feedback (and a heatmap's title)."""
    return f"{case} ({device}, {dtype})"


def trial_id(trial: Any) -> str:
    """The :func:`case_id` of a :class:`~grader.instructor.cases.Trial`."""
    return case_id(trial.hook, trial.case.name, trial.device, trial.dtype)


@dataclass(frozen=True)
class CaseResult:
    """One case of one hook, run once on one device in one dtype, for one student."""

    student: str
    hook: str
    case: str
    device: str
    dtype: str
    status: Status
    message: str = ""  # English; a Message (grader.instructor.said) where grading said it by id
    seconds: float = 0.0
    mistake: str = ""  # the id of a catalogued mistake whose output matched, if any
    note: str = ""  # worth telling the learner, for no points (an accepted assert, an extra buffer), any status

    @property
    def test_name(self) -> str:
        return case_id(self.hook, self.case, self.device, self.dtype)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON-able): the message and the note as their English text, each with its id and parameters
        (``message_said``, ``note_said``: :func:`~grader.instructor.said.message_data`) where it has them."""
        return dict(asdict(self), message=str(self.message), note=str(self.note),
                    message_said=message_data(self.message), note_said=message_data(self.note))  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaseResult:
        """The result :meth:`as_dict` gave."""
        data = dict(data)
        for key in ("message", "note"):
            data[key] = message_from_data(data.pop(f"{key}_said", None), str(data.get(key, "")))
        return cls(**data)


HALF_SAFETY = 4.0
"""A half-precision tolerance is at least this many times the reference's own error in that dtype."""
HALF_FLOOR_ULPS = 4.0
"""...and at least this many units of the dtype's rounding at 1.0 (its eps): room for another correct order of
the same arithmetic (``q / sqrt(d) @ k.T``, a broadcast sum, ``* d ** -0.25`` on both sides), whose error is
a few eps where the reference's is half of one."""
HALF_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}  # torch.finfo(dtype).eps

TOLERANCES = {
    # (rtol, atol): float32 is calibrated a little above assert_close's defaults because the
    # gold answer is float64 and attention chains several float32 reductions.  The half dtypes are
    # calibrated by ``benchmarks/half_tolerances.py`` (:func:`grader.instructor.audit.half_precision_errors`):
    # max(HALF_SAFETY x the reference's error, HALF_FLOOR_ULPS x eps); over every hook with half cases the
    # floor decides, so one value per dtype holds them all (``tests/test_half_precision.py`` checks it).
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (HALF_FLOOR_ULPS * HALF_EPS["float16"],) * 2,
    "bfloat16": (HALF_FLOOR_ULPS * HALF_EPS["bfloat16"],) * 2,
}

HALF_TOLERANCES: dict[tuple[str, str], tuple[float, float]] = {}
"""``{(hook, dtype): (rtol, atol)}`` where a hook's calibrated half tolerance is above its dtype's (none today):
the calibration prints the line to add."""


def tolerance(hook: str, dtype: str) -> tuple[float, float]:
    """``(rtol, atol)`` of one hook's values in one dtype: its own calibrated pair, else its dtype's."""
    return HALF_TOLERANCES.get((hook, dtype)) or TOLERANCES.get(dtype, (1e-5, 1e-5))


def calibrated(dtype: str, needed: float) -> float:
    """The half tolerance the calibration rule gives for a reference that needs ``needed`` (rtol = atol) to pass."""
    return max(HALF_SAFETY * needed, HALF_FLOOR_ULPS * HALF_EPS[dtype])


def _numbers(t: Any, n: int = 4) -> str:
    flat = t.detach().reshape(-1)[:n].tolist()
    text = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat)
    return f"[{text}{', …' if t.numel() > n else ''}]"


def _expected_dtype(trial: Any) -> str:
    """The dtype the answer must have: the hook table's (``bool`` for a mask), else the trial's own."""
    return row(trial.hook).expected_dtype or trial.dtype


def _wrong_shape(got: Any, expected: Any) -> Message:
    """The "shape" message, each shape written ``(2, 3)``, ``(5)``."""
    shown = ["(" + ", ".join(str(int(s)) for s in shape) + ")" for shape in (got, expected)]
    return said("shape", got=shown[0], expected=shown[1])


def _form_problem(trial: Any, got: Any, gold: Any) -> str | None:
    """A received tensor's dtype (the hook table's, else the trial's) or shape, read from its bytes, if wrong."""
    got_dtype, expected_dtype = str(got.dtype).replace("torch.", ""), _expected_dtype(trial)
    if got_dtype != expected_dtype:
        return dtype_message(got_dtype, expected_dtype, said)
    return _wrong_shape(got.shape, gold.shape) if tuple(got.shape) != tuple(gold.shape) else None


def value_problem(trial: Any, got: Any, gold: Any, reveal: bool = False, atol: float | None = None) -> str | None:
    """Compare one received tensor with its gold answer; say what is wrong, or None.  ``atol``: an absolute
    tolerance above the dtype's (a gradient's, calibrated per case)."""
    import torch

    problem = _form_problem(trial, got, gold)
    if problem:
        return problem
    if gold.dtype == torch.bool:
        if torch.equal(got, gold):
            return None
        first = tuple((got != gold).nonzero()[0].tolist())
        return said("wrong_entries", index=str(first), got=str(bool(got[first])), expected=str(bool(gold[first])))
    want = gold.to(got.dtype) if trial.dtype in ("float16", "bfloat16") else gold
    g64, w64 = got.to(torch.float64), want.to(torch.float64)
    if torch.isnan(g64).any() and not torch.isnan(w64).any():
        where = tuple(torch.isnan(g64).nonzero()[0].tolist())
        return said("nan", index=str(where))
    rtol, dtype_atol = tolerance(trial.hook, trial.dtype)
    atol = max(dtype_atol, atol or 0.0)
    if torch.allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True):
        return None  # the common case, fast: assert_close's own machinery only words a failure
    try:
        torch.testing.assert_close(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError:
        diff = (g64 - w64).abs().nan_to_num(nan=float("inf"), posinf=float("inf"))
        both_inf = torch.isinf(g64) & torch.isinf(w64) & (torch.sign(g64) == torch.sign(w64))
        diff = diff.masked_fill(both_inf, 0.0)
        flat = int(diff.reshape(-1).argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
        text = said(
            "values_differ",
            diff=f"{diff.reshape(-1)[flat].item():.3g}",
            index=str(index),
            got=f"{g64[index].item():.4g}",
            expected=f"{w64[index].item():.4g}",
        )
        if reveal:
            return said("values_shown", values=text, got=_numbers(got), expected=_numbers(want))
        return text
    return None


def _figure_problem(trial: Any, info: dict[str, Any], got: Any, gold: Any, reveal: bool) -> str | None:
    """What is wrong with a returned figure before its labels (a case property judges those): not a Figure,
    no image, not as many as the gold answer's (:func:`grader.rules.expected_images`: one for a ``(Tq, Tk)`` gold,
    ``H`` for an ``(H, Tq, Tk)`` stack), images of different shapes, an image that is the weights' transpose (or
    heads out of order), or its array's values (the shape read from the bytes received); None when it holds."""
    facts = info.get("figure")
    if facts is None:
        return not_a_figure_message(str(info["type"]) if "type" in info else said("something"), said)
    expected = expected_images(gold)
    problem = figure_form_problem(dict(facts), said, expected)
    if problem or got is None:
        return problem or said("figure.unread")
    if expected > 1:
        problem = image_stack_problem(got, gold, said)
    else:
        problem = transposed_message(said) if is_transpose(got, gold) else None
    if problem:
        return problem
    problem = value_problem(trial, got, gold, reveal)
    return said("image_arrays" if expected > 1 else "image_array", problem=problem) if problem else None


def contract_parameters(trial: Any) -> list[tuple[str, tuple[int, ...]]]:
    """``(name, shape)`` of the reference's parameters a module trial sends, in creation order (``[]``: none)."""
    state = (trial.call.get("module") or {}).get("state") or {}
    return [(name, tuple(int(s) for s in trial.tensors[key].shape)) for name, key in state.items()]


def _unloadable(trial: Any, module: dict[str, Any]) -> Message:
    """Why the reference's parameters could not be loaded into a learner's module, naming every parameter and its
    shape as torch writes one: ``W_query.weight (12, 5), W_query.bias (12,)``."""
    mine = [(p.get("name", "?"), p.get("shape", [])) for p in module.get("parameters", [])]
    listed = [", ".join(f"{name} {tuple(int(s) for s in shape)}" for name, shape in parameters) or said("none")
              for parameters in (mine, contract_parameters(trial))]  # fmt: skip
    return said("unloadable", mine=listed[0], contract=listed[1])


def _error_text(kind: str, text: str, whole: bool) -> str:
    """``raised Kind: message``: its first line, or every line (a module's ``load_state_dict`` lists every key)."""
    lines = [line.strip() for line in f"raised {kind}: {text}".splitlines() if line.strip()]
    joined = " · ".join(lines) if whole else lines[0]
    return said("raised", error=joined[len("raised ") :]) if joined.startswith("raised ") else joined


def judge(
    trial: Any, reply: CallReply, outputs: dict[str, Any], reveal: bool = False, held: Any = None
) -> tuple[Status, str]:
    """The status and message of one trial, from what the learner's process sent back (a checked reply), and
    ``held``: what the kernel says the call's process held (``grader.instructor.held_memory.Held``), where read."""
    case = trial.case
    error: dict[str, Any] = dict(reply.get("error") or {})
    kind, text = str(error.get("type", "an exception")), str(error.get("message", ""))
    spawned = list(reply.get("spawned") or [])
    if case.expect_error:
        wanted = said("an_exception") if case.expect_error == "Exception" else case.expect_error
        if "NotImplementedError" in error.get("mro", []) and case.expect_error != "NotImplementedError":
            return FAILED, said("not_implemented", text=(text.splitlines() or [""])[0])  # a stub raises anything
        if error and case.expect_error in error.get("mro", []) and error.get("own") is True:
            return (FAILED, spawn_message(spawned, said)) if spawned else (PASSED, "")
        if error and case.expect_error in error.get("mro", []):  # a library's error, raised inside a call it made
            library = said("should_raise.not_own", wanted=wanted, what=case.what, kind=kind, text=text)
            return FAILED, said("at", message=library, where=str(error["where"])) if error.get("where") else library
        if error:
            return FAILED, said("should_raise.raised", wanted=wanted, what=case.what, kind=kind, text=text)
        return FAILED, said("should_raise.returned", wanted=wanted, what=case.what)
    if error:
        message = _error_text(kind, text, whole=case.module is not None)
        if error.get("where"):
            message = said("at", message=message, where=str(error["where"]))
        if trial.device == "meta":
            if is_device_error(text):
                return FAILED, gpu_error_message(message, said)
            return SKIPPED, said("inconclusive", message=message)
        if kind == "NotImplementedError":
            return FAILED, said("not_implemented", text=(text.splitlines() or [""])[0])
        return FAILED, message
    if spawned:  # measured, or heard by an audit hook the learner's code cannot remove
        return FAILED, spawn_message(spawned, said)
    banned = reply.get("banned") or []
    if banned:
        return FAILED, banned_message(trial.hook, banned, said)
    module = dict(reply.get("module") or {})
    if case.module is not None and module.get("loaded_by") == "none":
        return FAILED, _unloadable(trial, module)
    described = reply.get("results") or []
    if len(described) < len(trial.golds):
        return FAILED, said("returned_nothing")
    figures = row(trial.hook).output == "figure"
    for i, info in enumerate(described[: len(trial.golds)]):
        if figures:
            problem = _figure_problem(trial, dict(info), outputs.get(f"out{i}"), trial.golds[i], reveal)
            if problem:
                return FAILED, problem
            continue
        if not info.get("is_tensor"):
            return FAILED, said("not_a_tensor", kind=str(info["type"]) if "type" in info else said("something"))
        if not info.get("exact_tensor"):
            return FAILED, subclass_message(str(info.get("type")), said)
        if trial.device == "meta":
            if info.get("device") != "meta":
                return FAILED, gpu_device_message(str(info.get("device")), said)
            if tuple(info.get("shape", ())) != tuple(trial.golds[i].shape):
                return FAILED, _wrong_shape(info["shape"], trial.golds[i].shape)
            if info.get("dtype") != _expected_dtype(trial):
                return FAILED, said("dtype.meta", got=str(info.get("dtype")), expected=_expected_dtype(trial))
            continue
        if info.get("device", trial.device).split(":")[0] != trial.device:
            return FAILED, said("wrong_device", device=str(info.get("device")), expected=trial.device)
        got = outputs.get(f"out{i}")
        if got is None:
            return FAILED, said("tensor_unread")
        if not case.compare_gold:  # no gold to compare with (random output): the dtype and shape are still read
            problem = _form_problem(trial, got, trial.golds[i])
            if problem:
                return FAILED, problem
            continue
        problem = value_problem(trial, got, trial.golds[i], reveal)
        if problem:
            numbered = len(trial.golds) > 1 and case.module is not None
            return FAILED, said("output", n=i + 1, problem=problem) if numbered else problem
    if trial.device != "meta":
        received = [outputs[f"out{i}"] for i in range(len(trial.golds)) if f"out{i}" in outputs]
        facts = dict(reply, held=held)  # the reply's keys are the wire's (CallReply): none is "held"
        problem = next((found for holds in case.properties if (found := holds(trial, received, facts))), None)
        if problem or _inputs_changed(trial, outputs):
            return FAILED, problem or said("in_place")
    problem = _gradient_problem(trial, reply, outputs, reveal) if trial.grad_golds else None
    return (FAILED, problem) if problem else (PASSED, "")


def _gradient_problem(trial: Any, reply: CallReply, outputs: dict[str, Any], reveal: bool) -> str | None:
    """What is wrong with the call's gradient pass (:mod:`grader.gradients`): its facts, then each gradient read from
    the bytes received -- present, finite, of the input's dtype and shape, and (where the case compares values)
    the reference's VJP within the dtype's tolerance.  On the meta device, only the described dtypes and shapes."""
    facts: dict[str, Any] = dict(reply.get("gradient") or {})
    wanted = {key.removeprefix("grad."): key for key in trial.grad_golds}
    if not facts:
        return said("grad.missing", input=ticked(list(wanted)))
    if trial.device == "meta":
        if facts.get("error"):
            message = str(facts["error"].get("message", ""))
            return gpu_error_message(message, said) if is_device_error(message) else None
        for name, key in wanted.items():
            info = (facts.get("grads") or {}).get(name)
            gold = trial.grad_golds[key]
            if info is not None and tuple(info.get("shape", ())) != tuple(gold.shape):
                return said("grad.values", input=ticked([name])[0], problem=_wrong_shape(info["shape"], gold.shape))
        return None
    problem = gradient_problem(facts, {name: outputs.get(key) for name, key in wanted.items()}, list(wanted), said)
    if problem:
        return problem
    for name, key in wanted.items():
        gold, got = trial.grad_golds[key], outputs.get(key)
        if got is None:
            return said("grad.missing", input=ticked([name])[0])
        if trial.grad_values:
            problem = value_problem(trial, got, gold, reveal, trial.grad_atol)
        elif tuple(got.shape) != tuple(gold.shape):
            problem = _wrong_shape(got.shape, gold.shape)
        elif not trial.case.compare_gold and (scaled := _scaled_gradient(trial, key, outputs)) is not None:
            problem = value_problem(trial, got, scaled, reveal)
        if problem:
            return said("grad.values", input=ticked([name])[0], problem=problem)
    return None


def _scaled_gradient(trial: Any, key: str, outputs: dict[str, Any]) -> Any:
    """What the gradient of a random elementwise answer must be, from the learner's own answer: a hook whose answer
    is its input scaled entry by entry (dropout: ``w * keep / (1 - p)``) has the VJP ``cotangent * answer / w``, the
    keep mask scaled by ``1 / (1 - p)`` that the answer shows; the entries where ``w`` is 0 say nothing, so they
    take the learner's own value.  None where the trial is no such case (a module's, or another shape)."""
    import torch

    name, out = key.removeprefix("grad."), outputs.get("out0")
    sent, cotangent = trial.inputs.get(name), trial.tensors.get((trial.call.get("vjp") or {}).get("cotangent", ""))
    if trial.case.module is not None or out is None or sent is None or cotangent is None:
        return None
    if not (tuple(out.shape) == tuple(sent.shape) == tuple(cotangent.shape)):
        return None
    w, y, c = sent.double(), out.double(), cotangent.double()
    return torch.where(w != 0, c * y / torch.where(w != 0, w, 1.0), outputs[key].double())


def _inputs_changed(trial: Any, outputs: dict[str, Any]) -> bool:
    """Whether an input came back (:func:`~grader.instructor.replies.sent_back`) other than it was sent, byte for
    byte (or not at all)."""
    import torch

    from grader.instructor.replies import sent_back

    for name, key in sent_back(trial).items():
        sent, back = trial.tensors[key], outputs.get(name)
        if back is None or back.dtype != sent.dtype or back.shape != sent.shape:
            return True
        if not torch.equal(back.reshape(-1).view(torch.uint8), sent.reshape(-1).view(torch.uint8)):
            return True
    return False


def case_note(trial: Any, reply: CallReply) -> str:
    """What the case's notes (``Case.notes``) say about this reply, ``""`` for nothing: shown, worth no points."""
    notes = [note(trial, dict(reply)) for note in getattr(trial.case, "notes", ())]
    return "; ".join(n for n in notes if n)


@dataclass(frozen=True)
class InProcessVerdict:
    """What :func:`judge_in_process` found: the verdict, and the reply and tensors it was judged from."""

    status: Status
    message: str
    reply: CallReply
    outputs: dict[str, Any]
    note: str = ""


def own_inputs(trial: Any) -> dict[str, Any]:
    """Copies of a trial's input tensors for one call here: a solution that writes into its input
    (a mistake that masks in place) must not change the suite's tensors, which every submission shares."""
    return {name: tensor.clone() for name, tensor in trial.tensors.items()}


def judge_in_process(solution: Any, trial: Any) -> InProcessVerdict:
    """Call a trusted solution's hook on one trial, in this process, and judge what it returned.

    For trusted code only (the reference, the catalogue of known mistakes, an instructor's own solution): the audit, the
    diagnosis's fingerprints, the hidden cases as pytest cases.  A learner's submission never comes here; it is called
    in a sandboxed child.  The call gets its own copies of the inputs and runs under a forked random state, so it
    changes nothing shared.
    """
    import torch

    from grader.child.call import call_hook

    with torch.random.fork_rng(devices=[]):
        raw, outputs = call_hook(solution.functions, dict(trial.call, id=0), own_inputs(trial))
    reply = cast("CallReply", raw)  # trusted code's reply, as the child runtime builds it
    status, message = judge(trial, reply, outputs)
    note = case_note(trial, reply) if status != SKIPPED else ""
    return InProcessVerdict(status, message, reply, outputs, note)
