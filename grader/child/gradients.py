"""The gradient pass of one call: the hook run again on inputs that require grad, then backward for a cotangent the
grader chose; what reached each input, as facts (:class:`grader.child.wire.GradientFacts`) and tensors.

Each input is a fresh leaf handed to the hook as a copy that requires grad (not a leaf, as tensors inside a model: an
in-place step is autograd's to judge).  A module's parameters are its own, the reference's weights loaded; a frozen one
is named.  The local check (:mod:`grader.rules`) runs the same pass with a cotangent of its own.
"""

from __future__ import annotations

import dis
import os
import re
import traceback
import warnings
from gc import disable as _stop_collecting
from typing import Any

from .load import _relative, _torch, tensor_facts

_OURS = os.path.dirname(os.path.abspath(__file__))
_KIT = os.path.dirname(_OURS) + os.sep  # the grader package (its runtime, the local check's rules)
_STDLIB = os.path.dirname(os.__file__) + os.sep
_FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')  # a frame in autograd's anomaly trace


def error_info(exc: BaseException, where: str | None = None) -> dict[str, Any]:
    """An exception as a reply's ``ErrorInfo``: its class, MRO, message, the learner's line (``where``) and
    whether the learner's own ``raise`` (or ``assert``) raised it (``own``)."""
    return {
        "type": type(exc).__name__,
        "mro": [c.__name__ for c in type(exc).__mro__],
        "message": (str(exc) or type(exc).__name__)[:2000],
        "where": where if where is not None else learner_frame(traceback.extract_tb(exc.__traceback__)),
        "own": raised_by_learner(exc),
    }


def _library(filename: str) -> bool:
    """Whether a frame's code is not the learner's: the kit's grader package, the standard library's (frozen too), an
    installed one's (but the kit's own solutions, judged as a learner's).  ``<string>``, a cell's, is the learner's."""
    packages = "site-packages" in filename or "dist-packages" in filename
    if filename.startswith("<"):
        return filename.startswith("<frozen ")
    installed = packages and os.sep + "solutions" + os.sep not in filename
    return installed or os.path.abspath(filename).startswith((_KIT, _STDLIB))


def learner_frame(frames: Any) -> str | None:
    """``file:line`` of the last frame that is the learner's, in a file a message can name, or None."""
    mine = [f for f in frames if not f.filename.startswith("<") and not _library(f.filename)]
    return f"{_relative(mine[-1].filename, os.getcwd())}:{mine[-1].lineno}" if mine else None


def raised_by_learner(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a ``raise`` (or an ``assert``) in the learner's code: the innermost frame is the
    learner's and stopped at a raise instruction (an error raised from C stops at the call instead)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or _library(tb.tb_frame.f_code.co_filename):
        return False
    at = next((i for i in dis.get_instructions(tb.tb_frame.f_code) if i.offset == tb.tb_lasti), None)
    return at is None or at.opname.startswith(("RAISE", "RERAISE"))  # None: an offset this Python counts otherwise


def _backward(out: Any, targets: dict[str, Any], cotangent: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The VJP of ``out`` for ``cotangent`` w.r.t. each of ``targets``: facts, and the gradients that reached."""
    torch = _torch()
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return {"requires_grad": False, "unreached": list(targets)}, {}
    wanted = {name: t for name, t in targets.items() if t.requires_grad}
    grads = torch.autograd.grad([out], list(wanted.values()), [cotangent.to(out.dtype)], allow_unused=True)
    got = {name: g for name, g in zip(wanted, grads) if g is not None}
    return {"requires_grad": True, "unreached": [n for n in wanted if n not in got]}, got


def _where_backward_failed(run: Any) -> str | None:
    """The learner's line of the forward step whose backward failed, from autograd's anomaly mode (run again)."""
    torch = _torch()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly(check_nan=False):
                run()
        except Exception:  # noqa: BLE001 - the same failure again; only its forward trace is wanted
            pass
    for warning in caught:
        text = str(warning.message)
        if "Traceback of forward call" in text:
            return learner_frame([traceback.FrameSummary(path, int(n), "") for path, n in _FILE_LINE.findall(text)])
    return None


class _CallFailed(Exception):
    """The hook itself raised when called again on inputs that require grad (not backward): ``__cause__``."""


def _called(forward: Any) -> Any:
    try:
        return forward()
    except Exception as exc:
        raise _CallFailed from exc


def _pass(run: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``run()`` (forward and backward), its failure kept as facts with the learner's line where it can be found,
    and ``stage``: ``call`` where the hook itself raised on inputs that require grad, else ``backward``."""
    try:
        return run()
    except _CallFailed as failed:
        exc = failed.__cause__ or failed
        return {"error": error_info(exc), "stage": "call"}, {}
    except Exception as exc:  # noqa: BLE001 - learner code failing in backward is a finding, not our error
        where = learner_frame(traceback.extract_tb(exc.__traceback__)) or _where_backward_failed(run)
        return {"error": error_info(exc, where), "stage": "backward"}, {}


def _cut_at(forward: Any) -> str | None:
    """Where the learner's code took a tensor out of the graph (``file:line (Tensor.detach)``), from ``forward()`` run
    again under a mode watching every torch call: the last that took a tensor requiring grad and gave a floating one
    that does not; None where none is seen.  Run only for a pass whose gradient did not reach."""
    torch = _torch()
    seen: list[str] = []

    class Finder(torch.overrides.TorchFunctionMode):  # type: ignore[misc, name-defined]
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", "")
            if name.endswith("_like") or name.startswith(("new_", "empty")):  # a new tensor, not a cut
                return out
            if isinstance(out, torch.Tensor) and out.is_floating_point() and not out.requires_grad:
                if any(isinstance(a, torch.Tensor) and a.requires_grad for a in (*args, *(kwargs or {}).values())):
                    where = _calling_learner(traceback.extract_stack()[:-1])
                    if where:
                        seen.append(f"{where} ({'Tensor.data' if name == '__get__' else name})")
            return out

    try:
        with Finder():
            forward()
    except Exception:  # noqa: BLE001 - the pass already said what failed; only where it cut is wanted here
        pass
    return seen[-1] if seen else None


def _calling_learner(frames: Any) -> str | None:
    """``file:line`` of the learner's line that made a torch call: the nearest frame that is not torch's own, where it
    is the learner's; None where it is ours, or inside an ``autograd.Function``'s forward (grad off by design)."""
    if any(f.filename.endswith(os.path.join("torch", "autograd", "function.py")) for f in frames):
        return None
    for frame in reversed(frames):
        if "site-packages" not in frame.filename:
            return learner_frame([frame])
    return None


def _located(facts: dict[str, Any], forward: Any) -> dict[str, Any]:
    """``facts`` with ``cut_at`` where the gradient did not reach and the cut can be found (:func:`_cut_at`)."""
    if facts.get("error") or not (facts.get("requires_grad") is False or facts.get("unreached")):
        return facts
    where = _cut_at(forward)
    return {**facts, "cut_at": where} if where else facts


def function_vjp(fn: Any, args: dict[str, Any], wrt: list[str], cotangent: Any) -> tuple[dict, dict]:
    """Call ``fn`` again with the tensors of ``wrt`` requiring grad; the VJP w.r.t. each (by argument name)."""
    torch = _torch()

    def forward() -> tuple[Any, dict[str, Any]]:
        leaves = {
            name: args[name].detach().clone().requires_grad_(True)
            for name in wrt
            if isinstance(args.get(name), torch.Tensor) and args[name].is_floating_point()
        }
        out = fn(**{**args, **{name: leaf.clone() for name, leaf in leaves.items()}})
        _stop_collecting()
        return out, leaves

    def run() -> tuple[dict, dict]:
        out, leaves = _called(forward)
        return _backward(out, leaves, cotangent)

    facts, grads = _pass(run)
    return _located(facts, forward), grads


def module_vjp(
    module: Any, x: Any, pairs: list[tuple[str, str, str]], cotangent: Any, train: bool
) -> tuple[dict, dict]:
    """One forward of ``module`` on ``x`` (requiring grad), then its VJP w.r.t. ``x`` and the parameters ``pairs`` load
    (each ``state.<the contract's name>``, laid out as the contract's); ``frozen`` lists those not requiring grad."""
    params = dict(module.named_parameters())
    mine = list(dict.fromkeys(m for m, _, _ in pairs if m in params))
    frozen = [m for m in mine if not params[m].requires_grad]

    def forward() -> tuple[Any, Any]:
        leaf = x.detach().clone().requires_grad_(True)
        module.train(train)
        out = module(leaf.clone())
        _stop_collecting()
        return out, leaf

    def run() -> tuple[dict, dict]:
        out, leaf = _called(forward)
        facts, got = _backward(out, {"x": leaf, **{m: params[m] for m in mine if m not in frozen}}, cotangent)
        grads = {"x": got["x"]} if "x" in got else {}
        for m, theirs, layout in pairs:
            grad = got.get(m)
            if grad is not None:
                if layout == "transposed":
                    grad = grad.t()
                elif layout.startswith("rows "):
                    start, stop = (int(n) for n in layout[5:].split(":"))
                    grad = grad[start:stop]
                grads[f"state.{theirs}"] = grad
        return facts, grads

    facts, grads = _pass(run)
    facts = _located(facts, forward)
    return {**facts, "frozen": frozen} if frozen else facts, grads


def describe(grads: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each gradient's dtype, shape and device (what the grader judges on the meta device)."""
    return {name: {"type": "torch.Tensor", **tensor_facts(g)} for name, g in grads.items()}
