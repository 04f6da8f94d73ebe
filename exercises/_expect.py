"""Helpers for the public tests: comparisons whose first line says what went wrong.

A tool shows learners the first line of a failing test's message, so every
failure here starts with the case and the one fact that matters:

    case 'batched', shape (2, 6, 6): expected [0.1385, 0.2379, 0.2333, 0.1240 …] got [...] (max abs diff 0.35 at ...)

Further lines carry the detail.  Expected answers are computed independently
(loops, einsum, torch's own ops) in float64 on the CPU, then cast to the dtype
and device under test.
"""

from __future__ import annotations

import math
import warnings

import torch

from grader.rule_words import english  # the grader's words, where a test says what the grader says

CHAPTER_INPUTS = [
    [0.43, 0.15, 0.89],  # Your
    [0.55, 0.87, 0.66],  # journey
    [0.57, 0.85, 0.64],  # starts
    [0.22, 0.58, 0.33],  # with
    [0.77, 0.25, 0.10],  # one
    [0.05, 0.80, 0.55],  # step
]
"""The chapter's six-token input, "Your journey starts with one step", 3-d embeddings."""

# torch.testing.assert_close's defaults, used only to locate mismatches for the message
_DEFAULT_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}
_SHOWN = 4  # numbers shown per side in a first line


# --- making inputs ---------------------------------------------------------------------


def chapter_inputs(dtype=torch.float32, device="cpu"):
    return torch.tensor(CHAPTER_INPUTS, dtype=torch.float64).to(device=device, dtype=dtype)  # (6, 3)


def rand(*shape, seed, dtype=torch.float32, device="cpu", low=-1.0, high=1.0):
    """Uniform values in [low, high), the same numbers for every dtype and device."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low
    return x.to(device=device, dtype=dtype)


def f64(t):
    """A float64 CPU copy to compute an expected answer in."""
    return t.detach().to(device="cpu", dtype=torch.float64)


def like(expected, got_like):
    """``expected`` cast to the dtype and device of the tensor under test."""
    return expected.to(device=got_like.device, dtype=got_like.dtype)


# --- comparing -------------------------------------------------------------------------------


def expect_close(got, expected, case, atol=None, rtol=None):
    """Fail unless ``got`` is a tensor of ``expected``'s shape, dtype and device, with close values.

    The tolerance decision is torch.testing.assert_close's (its per-dtype defaults
    unless ``atol``/``rtol`` are given); bool tensors must match exactly.
    """
    __tracebackhide__ = True
    prefix = f"case '{case}'"
    _expect_tensor(got, prefix)
    shape = _shape(expected.shape)
    if got.shape != expected.shape:
        raise AssertionError(f"{prefix}: expected shape {shape}, got {_shape(got.shape)}")
    prefix = f"{prefix}, shape {shape}"
    if got.dtype != expected.dtype:
        raise AssertionError(f"{prefix}: expected dtype {expected.dtype}, got {got.dtype}")
    if got.device != expected.device:
        raise AssertionError(f"{prefix}: expected a tensor on {expected.device}, got one on {got.device}")
    if atol is not None or rtol is not None:
        default_rtol, default_atol = _DEFAULT_TOLERANCES.get(expected.dtype, (0.0, 0.0))
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
    try:
        torch.testing.assert_close(got.detach(), expected.detach(), atol=atol, rtol=rtol, equal_nan=False)
    except AssertionError as exc:
        raise AssertionError(f"{prefix}: {_describe_mismatch(got, expected, atol, rtol)}\n{exc}") from None


def expect_shape(got, shape, case):
    """Fail unless ``got`` is a tensor of the given shape (before indexing into it)."""
    __tracebackhide__ = True
    prefix = f"case '{case}'"
    _expect_tensor(got, prefix)
    if tuple(got.shape) != tuple(shape):
        raise AssertionError(f"{prefix}: expected shape {_shape(shape)}, got {_shape(got.shape)}")


def expect_raises(exc_type, case, fn, *args, **kwargs):
    """Fail unless ``fn(*args, **kwargs)`` raises ``exc_type``.

    A NotImplementedError (an unfinished stub) propagates unchanged, so its own
    message is the one learners see.
    """
    __tracebackhide__ = True
    try:
        result = fn(*args, **kwargs)
    except exc_type:
        return
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported, with the original chained
        first = (str(exc).splitlines() or [""])[0]
        raise AssertionError(f"case '{case}': expected {exc_type.__name__}, got {type(exc).__name__}: {first}") from exc
    raise AssertionError(f"case '{case}': expected {exc_type.__name__}, but it returned {_summary(result)}")


class AttnkitNote(UserWarning):
    """The grader's note on a case that passes: worth telling the learner, for no points (``attnkit check`` says
    it)."""


def expect_raises_preferring(preferred, why, case, fn, *args, **kwargs):
    """Fail unless ``fn(*args, **kwargs)`` raises, as the grader's case does: any exception will do, and one other
    than ``preferred`` passes with the grader's note (an :class:`AttnkitNote` warning; ``why``: the words' id).

    A NotImplementedError (an unfinished stub) propagates unchanged.
    """
    __tracebackhide__ = True
    try:
        result = fn(*args, **kwargs)
    except preferred:
        return
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001 - accepted, with the grader's note
        warnings.warn(AttnkitNote(english("prefer", kind=type(exc).__name__, why=english(why))), stacklevel=2)
        return
    raise AssertionError(f"case '{case}': expected {preferred.__name__}, but it returned {_summary(result)}")


def expect_unchanged(tensor, snapshot, case, name="the input"):
    """Fail if ``tensor`` no longer equals ``snapshot`` (a clone taken before the call)."""
    __tracebackhide__ = True
    if not torch.equal(tensor.isnan(), snapshot.isnan()) or not torch.equal(
        tensor.nan_to_num(0.0), snapshot.nan_to_num(0.0)
    ):
        raise AssertionError(
            f"case '{case}': {name} was modified in place; return a new tensor (masked_fill, not masked_fill_)"
        )


def expect(condition, case, message):
    """Fail with ``case '<case>': <message>`` unless ``condition``."""
    __tracebackhide__ = True
    if not condition:
        raise AssertionError(f"case '{case}': {message}")


# --- messages ----------------------------------------------------------------------------------


def _expect_tensor(got, prefix):
    __tracebackhide__ = True
    if not isinstance(got, torch.Tensor):
        hint = " (did the function forget to return?)" if got is None else ""
        raise AssertionError(f"{prefix}: expected a torch.Tensor, got {type(got).__name__}{hint}")


def _shape(shape):
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def _summary(value):
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {_shape(value.shape)}"
    return f"{type(value).__name__} {value!r}"[:80]


def _describe_mismatch(got, expected, atol, rtol):
    """``expected [a, b, c …] got [x, y, z …] (max abs diff 0.35 at (0, 1, 2))``, one line."""
    g = got.detach().cpu()
    e = expected.detach().cpu()
    if e.dtype == torch.bool or not (e.is_floating_point() or e.is_complex()):
        wrong = g != e
        worst = _index(wrong.flatten().nonzero()[0, 0].item(), e.shape) if wrong.any() else None
        tail = f"{int(wrong.sum())} of {e.numel()} entries differ, first at {worst}"
        return f"expected {_window(e, worst)} got {_window(g, worst)} ({tail})"

    g, e = g.double(), e.double()
    if rtol is None:
        rtol, atol = _DEFAULT_TOLERANCES.get(expected.dtype, (1.3e-6, 1e-5))
    wrong = ~torch.isclose(g, e, rtol=rtol, atol=atol)
    diff = (g - e).abs()
    diff = torch.where(wrong & ~torch.isfinite(diff), torch.full_like(diff, math.inf), diff)
    ranked = torch.where(wrong, diff, torch.full_like(diff, -1.0)) if wrong.any() else diff.nan_to_num(math.inf)
    worst = _index(int(ranked.flatten().argmax()), e.shape)
    at = tuple(worst) if worst else ()
    if g[at].isnan():
        tail = f"got nan at {worst}"
    else:
        tail = f"max abs diff {diff[at].item():.3g} at {worst}"
    if wrong.sum() > 1:
        tail += f"; {int(wrong.sum())} of {e.numel()} entries differ"
    decimals = 4
    if 0 < diff[at].item() < 1e-4:  # show enough digits for the numbers to differ visibly
        decimals = min(12, 2 - math.floor(math.log10(diff[at].item())))
    return f"expected {_window(e, worst, decimals)} got {_window(g, worst, decimals)} ({tail})"


def _index(flat, shape):
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _window(t, at, decimals=4):
    """A few entries of the last-dim row holding ``at``, as ``[… a, b, c, d …]``."""
    if t.dim() == 0:
        return _number(t.item(), decimals)
    at = at or (0,) * t.dim()
    row = t[at[:-1]] if t.dim() > 1 else t
    n, col = row.shape[0], at[-1]
    start = max(0, min(col - 1, n - _SHOWN))
    stop = min(n, start + _SHOWN)
    parts = [_number(v, decimals) for v in row[start:stop].tolist()]
    if start > 0:
        parts[0] = "… " + parts[0]
    if stop < n:
        parts[-1] += " …"
    return "[" + ", ".join(parts) + "]"


def _number(v, decimals):
    if isinstance(v, bool):
        return str(v)
    if math.isfinite(v) and abs(v) >= 1e5:
        return f"{v:.4g}"
    return f"{v:.{decimals}f}"
