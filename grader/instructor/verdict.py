"""Verdicts: decide, in the trusted process, whether one case passed.

A case passes only if the learner's process sent back exactly a tensor of the
expected dtype and shape whose values match the gold answer within the
dtype's tolerance, with no NaN where none is expected.  The dtype and shape are
read from the tensor bytes received, never from what the child says about
them, also where there is no gold answer to compare with (random dropout).
The reported device, the input-unchanged flag, the subclass flag and
the banned-call list are diagnostics: a hostile process can lie about them,
but it cannot make a wrong value pass.  A reply reaches :func:`judge` only
after :mod:`grader.instructor.replies` has checked it against its schema.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass(frozen=True)
class CaseResult:
    """One case of one hook, run once on one device in one dtype, for one student."""

    student: str
    hook: str
    case: str
    device: str
    dtype: str
    status: str  # passed | failed | skipped
    message: str = ""
    seconds: float = 0.0
    mistake: str = ""  # the id of a catalogued mistake whose output matched, if any

    @property
    def test_name(self) -> str:
        return f"{self.hook}[{self.case}-{self.device}-{self.dtype}]"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- judging one run -----------------------------------------------------------------

TOLERANCES = {
    # (rtol, atol): float32 is calibrated a little above assert_close's defaults because the
    # gold answer is float64 and attention chains several float32 reductions.
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (1e-2, 1e-2),
    "bfloat16": (4e-2, 4e-2),
}

_DEVICE_ERRORS = (
    "expected device",
    "expected all tensors to be on the same device",
    "is not on the expected device",
    "device meta",
    "on the meta device",
    "found at least two devices",
)


def _fmt_shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ")"


def _numbers(t: Any, n: int = 4) -> str:
    flat = t.detach().reshape(-1)[:n].tolist()
    text = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat)
    return f"[{text}{', …' if t.numel() > n else ''}]"


def _expected_dtype(run: Any) -> str:
    return "bool" if run.hook == "causal_mask" else run.dtype


def value_problem(run: Any, got: Any, gold: Any, reveal: bool = False) -> str | None:
    """Compare one received tensor with its gold answer; say what is wrong, or None."""
    import torch

    expected_dtype = _expected_dtype(run)
    got_dtype = str(got.dtype).replace("torch.", "")
    if got_dtype != expected_dtype:
        return f"returned dtype {got_dtype}, expected {expected_dtype} (keep the input's dtype)"
    if tuple(got.shape) != tuple(gold.shape):
        return f"returned shape {_fmt_shape(got.shape)}, expected {_fmt_shape(gold.shape)}"
    if gold.dtype == torch.bool:
        if torch.equal(got, gold):
            return None
        first = tuple((got != gold).nonzero()[0].tolist())
        return f"wrong entries, first at {first}: got {bool(got[first])}, expected {bool(gold[first])}"
    want = gold.to(got.dtype) if run.dtype in ("float16", "bfloat16") else gold
    g64, w64 = got.to(torch.float64), want.to(torch.float64)
    if torch.isnan(g64).any() and not torch.isnan(w64).any():
        where = tuple(torch.isnan(g64).nonzero()[0].tolist())
        return f"NaN in the output, first at {where}, where no NaN belongs"
    rtol, atol = TOLERANCES.get(run.dtype, (1e-5, 1e-5))
    try:
        torch.testing.assert_close(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError:
        diff = (g64 - w64).abs().nan_to_num(nan=float("inf"), posinf=float("inf"))
        both_inf = torch.isinf(g64) & torch.isinf(w64) & (torch.sign(g64) == torch.sign(w64))
        diff = diff.masked_fill(both_inf, 0.0)
        flat = int(diff.reshape(-1).argmax())
        index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), diff.shape))
        text = (
            f"values differ: max abs diff {diff.reshape(-1)[flat].item():.3g} at {index} "
            f"(got {g64[index].item():.4g}, expected {w64[index].item():.4g})"
        )
        if reveal:
            text += f"; got {_numbers(got)}, expected {_numbers(want)}"
        return text
    return None


def judge(
    run: Any,
    reply: dict[str, Any] | None,
    outputs: dict[str, Any],
    gone: str | None = None,
    reveal: bool = False,
) -> tuple[str, str]:
    """The status and message of one run, from what the learner's process sent back.

    ``gone`` is why the process stopped before answering (timeout, crash).
    """
    case = run.case
    if gone is not None:
        return FAILED, gone
    assert reply is not None
    error = reply.get("error") or {}
    kind, text = str(error.get("type", "an exception")), str(error.get("message", ""))
    if case.expect_error:
        if error and case.expect_error in error.get("mro", []):
            return PASSED, ""
        if error:
            return FAILED, f"should raise {case.expect_error} ({case.what}), raised {kind}: {text}"
        return FAILED, f"should raise {case.expect_error} ({case.what}), returned normally"
    if error:
        message = f"raised {kind}: {text}".splitlines()[0]
        if error.get("where"):
            message += f" (at {error['where']})"
        if run.device == "meta":
            if any(s in text.lower() for s in _DEVICE_ERRORS):
                why = "a tensor is built on the CPU whatever the input's device"
                return FAILED, f"will fail on a GPU: {why} ({message})"
            return SKIPPED, f"inconclusive on the meta device: {message}"
        if kind == "NotImplementedError":
            return FAILED, f"not implemented yet ({(text.splitlines() or [''])[0]})"
        return FAILED, message
    banned = reply.get("banned") or []
    if banned:
        from grader.instructor.cases import WHY_BANNED

        return FAILED, f"uses {', '.join(banned)}: {WHY_BANNED.get(run.hook, 'not allowed here')}"
    described = reply.get("results") or []
    if len(described) < len(run.golds):
        return FAILED, "returned nothing"
    for i, info in enumerate(described[: len(run.golds)]):
        if not info.get("is_tensor"):
            return FAILED, f"returned {info.get('type', 'something')}, expected a torch.Tensor"
        if not info.get("exact_tensor"):
            return FAILED, f"returned a {info.get('type')}, expected exactly a torch.Tensor (not a subclass)"
        if run.device == "meta":
            if info.get("device") != "meta":
                return FAILED, (
                    f"will fail on a GPU: given inputs on the meta device it returned a tensor on {info.get('device')}"
                )
            if tuple(info.get("shape", ())) != tuple(run.golds[i].shape):
                return FAILED, f"returned shape {_fmt_shape(info['shape'])}, expected {_fmt_shape(run.golds[i].shape)}"
            if info.get("dtype") != _expected_dtype(run):
                return FAILED, f"returned dtype {info.get('dtype')}, expected {_expected_dtype(run)}"
            continue
        if info.get("device", run.device).split(":")[0] != run.device:
            return FAILED, f"returned a tensor on {info.get('device')} for inputs on {run.device}"
        got = outputs.get(f"out{i}")
        if got is None:
            return FAILED, "returned a tensor the grader could not read"
        if case.compare_gold:
            problem = value_problem(run, got, run.golds[i], reveal)
            if problem:
                prefix = f"output {i + 1}: " if len(run.golds) > 1 and case.module is not None else ""
                return FAILED, prefix + problem
        else:  # no gold to compare with (random output): the dtype and shape are still read from the bytes
            got_dtype = str(got.dtype).replace("torch.", "")
            if got_dtype != _expected_dtype(run):
                return FAILED, f"returned dtype {got_dtype}, expected {_expected_dtype(run)} (keep the input's dtype)"
            if tuple(got.shape) != tuple(run.golds[i].shape):
                return FAILED, f"returned shape {_fmt_shape(got.shape)}, expected {_fmt_shape(run.golds[i].shape)}"
    if run.device != "meta":
        received = [outputs[f"out{i}"] for i in range(len(run.golds)) if f"out{i}" in outputs]
        facts = dict(reply)
        for check in case.checks:
            problem = check(run, received, facts)
            if problem:
                return FAILED, problem
    if reply.get("inputs_unchanged") is False:
        return FAILED, "modified its input in place; return a new tensor and leave the inputs alone"
    return PASSED, ""
