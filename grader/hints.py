"""Hints for known mistakes in a learner's kit, without the mistakes' code.

A learner's kit has no catalogue of known mistakes (it is instructor-only), so
``attnkit release`` ships its results instead: ``grader/hints.json``, data only,
holding for each catalogued mistake its id, description and hints (en, zh) and
the *fingerprints* of what the mistake returns on the public cases' inputs.

A fingerprint is made on both sides the same way, by :class:`Recorder`: the
public tests (``exercises/test_*.py``, the one place the public inputs come
from) run against a solution wrapped so that every hook call is seen; the call's
inputs give a key (a hash of the hook, the arguments rounded to
:data:`KEY_DECIMALS` decimals in float64, a generator's state, and for a
hook that draws random numbers the dtypes it draws in and, where the result
depends on it, the global generator's state: :func:`call_key`), and its
result (the return value, or the exception's class, and the tensor arguments as
the call left them) gives two hashes of the values rounded to
:data:`DECIMALS` decimals in float64, on two grids half a step apart, so that
float noise (float32 against float64, another order of operations) moves a
value across a rounding edge of one grid at most.  A figure is compared by
what it shows (its images' arrays, colorbars, labels and ticks).  A module
hook's module is recorded twice over: its form (:func:`module_form`: its
buffers, state_dict keys and plain tensor attributes, under
:func:`built_key`), and each forward the tests make (under
:func:`forward_key`, which holds the global generator's state at the build:
the weights the test's seed gave).

:func:`known_mistakes` reruns the public cases of the failing exercises with
the learner's code recorded and names a mistake when the learner's results
agree with the mistake's on the inputs where the mistake differs from the
reference (:func:`agrees`).  The instructor's kit names mistakes with the full
diagnosis instead (``grader.instructor.diagnosis``), so this module is what a
learner's kit runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

HINTS_FILE = Path(__file__).with_name("hints.json")
"""Where a learner's kit keeps the hints (written by ``attnkit release``); absent in the instructor's kit."""

FORMAT = 1
DECIMALS = 3
"""Results are compared rounded to this many decimals (in float64)."""
KEY_DECIMALS = 2
"""Inputs are told apart rounded to this many decimals: coarse, so float32 and float64 inputs share a key."""
HASH_CHARS = 16
MIN_AGREEING = 2
"""A mistake is named when at least this many of its informative inputs agree (or all, when it has fewer) ..."""
MIN_SHARE = 0.75
"""... and at least this share of those the learner's run reached."""

Fingerprint = tuple[str, str]


def _digest(parts: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:HASH_CHARS]


def _tensor_parts(t: Any, decimals: int, offset: float) -> list[bytes]:
    import torch

    t = t.detach().to("cpu")
    if t.dtype == torch.bool:
        kind = "bool"
    else:
        kind = "complex" if t.is_complex() else "float" if t.is_floating_point() else "int"
    head = f"tensor {kind} {tuple(t.shape)}".encode()
    if kind == "complex":
        t = torch.view_as_real(t)
    x = t.to(torch.float64)
    nan = torch.isnan(x)
    scaled = torch.round(torch.where(nan, torch.zeros_like(x), x) * 10.0**decimals + offset) + 0.0  # -0.0 -> 0.0
    return [head, _as_bytes(scaled), _as_bytes(nan)]


def _as_bytes(t: Any) -> bytes:
    return repr(t.flatten().tolist()).encode()  # no numpy needed


def _value_parts(value: Any, decimals: int, offset: float) -> list[bytes]:
    """What a value says, as bytes: tensors rounded, containers element by element, plain values by repr."""
    import torch

    if isinstance(value, torch.Tensor):
        return _tensor_parts(value, decimals, offset)
    if isinstance(value, torch.Generator):
        return [b"generator", _as_bytes(value.get_state())]
    if isinstance(value, (tuple, list)):
        parts = [f"{type(value).__name__} {len(value)}".encode()]
        for item in value:
            parts += _value_parts(item, decimals, offset)
        return parts
    if isinstance(value, Mapping):
        parts = [f"mapping {len(value)}".encode()]
        for key in sorted(value, key=str):
            parts += [str(key).encode(), *_value_parts(value[key], decimals, offset)]
        return parts
    if isinstance(value, float):
        return [b"float", repr(round(value, decimals) + 0.0).encode()]
    if value is None or isinstance(value, (bool, int, str, torch.dtype, torch.device)):
        return [f"{type(value).__name__} {value}".encode()]
    if hasattr(value, "savefig") and hasattr(value, "axes"):  # a matplotlib Figure: what it shows
        return _figure_parts(value, decimals, offset)
    return [f"object {type(value).__name__}".encode()]  # an nn.Module, say: not compared by value


def _figure_parts(figure: Any, decimals: int, offset: float) -> list[bytes]:
    """A figure's images (their arrays), whether each has a colorbar, and its axes' labels and ticks."""
    import numpy as np
    import torch

    parts = [b"figure"]
    for ax in figure.axes:
        for image in ax.images:
            array = np.ma.filled(np.ma.asarray(image.get_array(), dtype=np.float64), np.nan)
            parts += _tensor_parts(torch.from_numpy(np.array(array)), decimals, offset)
            parts.append(f"colorbar {image.colorbar is not None}".encode())
        if ax.images:
            ticks = [(list(axis.get_majorticklocs()), [t.get_text() for t in axis.get_ticklabels()])
                     for axis in (ax.xaxis, ax.yaxis)]  # fmt: skip
            parts.append(f"labels {ax.get_xlabel()!r} {ax.get_ylabel()!r} {ticks!r}".encode())
    return parts


def draws(hook: str) -> bool:
    """Whether a hook draws random numbers (it takes a ``generator``)."""
    from grader.registry import hook_signature

    return "generator" in hook_signature(hook).parameters


def call_key(hook: str, arguments: Mapping[str, Any], global_state: bool = False) -> str:
    """The key of a hook call: the hook and its arguments, coarsely rounded.

    A hook that :func:`draws` has the tensors' dtypes in the key too (draws
    differ between float32 and float64); with ``global_state``, the state of
    torch's global generator as well: the key of a result that depends on it
    (code that ignores ``generator``), which only a test that seeds it makes
    the same twice.
    """
    import torch

    parts = [hook.encode(), *_value_parts(dict(arguments), KEY_DECIMALS, 0.0)]
    if draws(hook):
        parts += [str(v.dtype).encode() for v in arguments.values() if isinstance(v, torch.Tensor)]
        if global_state:
            parts += [b"global", _as_bytes(torch.get_rng_state())]
    return _digest(parts)


def call_keys(hook: str, arguments: Mapping[str, Any]) -> list[str]:
    """The keys a call is recorded under: the plain one, and for a hook that draws, the one with the global state."""
    keys = [call_key(hook, arguments)]
    if draws(hook):
        keys.append(call_key(hook, arguments, global_state=True))
    return keys


def built_key(hook: str, arguments: Mapping[str, Any]) -> str:
    """The key of a module hook's build: the hook and its arguments (what the module holds, its form, is kept)."""
    return call_key(hook, {**arguments, "_part": "built"})


def forward_key(hook: str, arguments: Mapping[str, Any], built_state: Any, x: Any, training: bool) -> str:
    """The key of a forward call of a module a module hook built: its build's arguments, the global generator's
    state when it was built (its weights: the public tests seed it first), the input, its dtype (dropout draws
    differ between dtypes) and the module's mode."""
    forward = {"_part": "forward", "_state": built_state, "_x": x, "_dtype": x.dtype, "_training": training}
    return call_key(hook, {**arguments, **forward})


def module_form(module: Any) -> dict[str, list[str]]:
    """What a module holds, by name: its buffers, its state_dict's keys, its tensors held as plain attributes."""
    import torch

    plain = sorted(k for k, v in vars(module).items() if isinstance(v, torch.Tensor))
    buffers = sorted(name for name, _ in module.named_buffers())
    return {"buffers": buffers, "state": sorted(module.state_dict()), "plain": plain}


def watch_forward(module: Any, seen: Callable[[Any, Any], None]) -> None:
    """Call ``seen(x, output)`` after each call of ``module`` on one tensor, ``output`` what it returned or
    :func:`raised` (not a NotImplementedError: a stub says nothing); the module's own forward runs as it is."""
    import torch

    forward = module.forward

    def watched(*args: Any, **kwargs: Any) -> Any:
        one = len(args) == 1 and not kwargs and isinstance(args[0], torch.Tensor)
        try:
            output = forward(*args, **kwargs)
        except NotImplementedError:
            raise
        except Exception as exc:
            if one:
                seen(args[0], raised(exc))
            raise
        if one:
            seen(args[0], output)
        return output

    module.forward = watched


def fingerprint(result: Any, arguments: Mapping[str, Any]) -> Fingerprint:
    """Two hashes of what a call did (its result, and the tensor arguments afterwards), on grids half a step apart."""
    import torch

    after = {k: v for k, v in arguments.items() if isinstance(v, torch.Tensor)}
    return tuple(  # type: ignore[return-value]
        _digest([*_value_parts(result, DECIMALS, offset), *_value_parts(after, DECIMALS, offset)])
        for offset in (0.0, 0.5)
    )


def raised(exc: BaseException) -> Any:
    """What a call that raised stands for in a fingerprint: the exception's class name."""
    return ("raised", type(exc).__name__)


def same(a: Iterable[str], b: Iterable[str]) -> bool:
    """Whether two fingerprints agree on either grid."""
    return any(x == y for x, y in zip(a, b, strict=True))


class Recorder:
    """A solution seen through: every hook call's key and fingerprint are kept in :attr:`seen`, per hook.

    Anything else is the wrapped solution's.  A call that raises is recorded
    (by its exception's class) and raises on; ``NotImplementedError`` is not
    recorded (a stub says nothing).
    """

    def __init__(self, solution: Any) -> None:
        self._solution = solution
        self.seen: dict[str, dict[str, Fingerprint]] = {}
        self.raised: dict[str, set[str]] = {}  # per hook, the keys of the calls that raised

    def __getattr__(self, name: str) -> Any:
        import torch

        from grader.registry import HOOK_NAMES, hook_signature

        attribute = getattr(self._solution, name)
        if name not in HOOK_NAMES:
            return attribute

        def recorded(*args: Any, **kwargs: Any) -> Any:
            bound = hook_signature(name).bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            keys = call_keys(name, arguments)
            mine = self.seen.setdefault(name, {})
            state = torch.get_rng_state()
            try:
                result = attribute(*args, **kwargs)
            except NotImplementedError:
                raise
            except Exception as exc:
                for key in keys:
                    mine.setdefault(key, fingerprint(raised(exc), arguments))
                self.raised.setdefault(name, set()).update(keys)
                raise
            for key in keys:
                mine.setdefault(key, fingerprint(result, arguments))
            if isinstance(result, torch.nn.Module):
                record_module(mine, name, arguments, result, state)
            return result

        recorded.__name__ = name
        return recorded


def record_module(
    seen: dict[str, Fingerprint], hook: str, arguments: Mapping[str, Any], module: Any, state: Any
) -> None:
    """Record what a module hook built (under :func:`built_key`) and, as the tests call it, what its forward
    returns (under :func:`forward_key`; ``state``: the global generator's state before the build)."""
    seen.setdefault(built_key(hook, arguments), fingerprint(module_form(module), {}))

    def forward_seen(x: Any, output: Any) -> None:
        seen.setdefault(forward_key(hook, arguments, state, x, module.training), fingerprint(output, {}))

    watch_forward(module, forward_seen)


def record_public_outputs(
    solution: Any, hooks: list[str], tests_dir: Path | None = None, raised: dict[str, set[str]] | None = None
) -> dict[str, dict[str, Fingerprint]]:
    """Run the public cases of ``hooks`` against ``solution`` (a loaded solution), recording every hook call; the
    keys of the calls that raised go into ``raised`` where given."""
    from grader.check import run_public_cases

    recorder = Recorder(solution)
    run_public_cases(recorder, list(hooks), tests_dir=tests_dir)
    if raised is not None:
        raised.update(recorder.raised)
    return recorder.seen


def agrees(
    seen: Mapping[str, Iterable[str]], marks: Mapping[str, Iterable[str]], raised: Iterable[str] = ()
) -> bool:
    """Whether a learner's results (``seen``) look like a mistake's (``marks``: where it differs from the reference).

    Of the mistake's inputs the learner's run reached, at least
    :data:`MIN_AGREEING` (all, when there are fewer) and :data:`MIN_SHARE` of
    them agree.  An input where the learner's call raised and the mistake's did
    not (``raised``: the keys of the learner's calls that raised) counts neither
    way: a learner's variant of a mistake often fails on an edge (``view`` of a
    non-contiguous input) where the catalogued one gives its wrong values.
    """
    errors = set(raised)
    common = [key for key in marks if key in seen]
    agreeing = sum(same(seen[key], marks[key]) for key in common)
    weighed = [key for key in common if key not in errors or same(seen[key], marks[key])]
    if not weighed:
        return False
    return agreeing >= min(MIN_AGREEING, len(marks)) and agreeing >= MIN_SHARE * len(weighed)


def load_hints(path: Path = HINTS_FILE) -> list[dict[str, Any]]:
    """The mistakes of the hints file, or ``[]`` where there is none (the instructor's kit) or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return []
    return [m for m in data.get("mistakes", []) if isinstance(m, dict)]


def matching(
    seen: Mapping[str, Mapping[str, Iterable[str]]],
    hints: list[dict[str, Any]],
    lang: str = "en",
    raised: Mapping[str, Iterable[str]] | None = None,
):
    """``{hook: [(mistake id, hint), ...]}`` for the hooks whose results look like known mistakes (``raised``: per
    hook, the keys of the learner's calls that raised)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for mistake in hints:
        hook = str(mistake.get("exercise"))
        marks = mistake.get("fingerprints") or {}
        if hook in seen and marks and agrees(seen[hook], marks, (raised or {}).get(hook, ())):
            text = mistake.get("hint_zh") if lang == "zh" else mistake.get("hint")
            found.setdefault(hook, []).append((str(mistake.get("id")), str(text or mistake.get("hint") or "")))
    return found


def known_mistakes(
    solution: Any, failing: list[str], lang: str = "en", path: Path = HINTS_FILE
) -> dict[str, list[tuple[str, str]]]:
    """``{hook: [(mistake id, hint), ...]}`` for the failing hooks whose results look like a known mistake.

    Reruns the public cases of ``failing`` against ``solution`` (a loaded
    solution), recorded; ``{}`` without a hints file, or when anything goes
    wrong (a hint is a bonus: the check's table must show anyway).
    """
    hints = [m for m in load_hints(path) if m.get("exercise") in failing]
    if not failing or not hints:
        return {}
    raised: dict[str, set[str]] = {}
    try:
        seen = record_public_outputs(solution, sorted({str(m["exercise"]) for m in hints}), raised=raised)
    except Exception:  # noqa: BLE001 - a hint is a bonus
        return {}
    return matching(seen, hints, lang, raised)
