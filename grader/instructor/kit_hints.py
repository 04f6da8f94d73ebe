"""The hints file of a learner's kit: what each known mistake returns on the public inputs, as fingerprints.

Instructor-only; ``attnkit release`` writes the result into the kit as
``grader/hints.json`` (:data:`grader.hints.HINTS_FILE`), which
:mod:`grader.hints` reads there.  The public tests run once, against the
reference, through a :class:`FanOut`: every call of a function hook is made
again by each catalogued mistake of that hook, on copies of the arguments (a
generator copied with its state), and recorded with :mod:`grader.hints`' keys
and fingerprints.  A module hook's mistake builds its twin beside the
reference's module (under the same global generator's state, as the public
test seeded it: the public weights), its form is recorded, and every forward
of the reference's module is made again by every twin.  A mistake keeps the
inputs where its fingerprint differs from the reference's (its *marks*); a
mistake with none (it only differs on devices, say) is left out.  The file
holds ids, descriptions, hints and hashes: data, never code (:func:`problems_in`
is the release's leak scan of it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import torch

from grader.hints import (
    FORMAT,
    HASH_CHARS,
    Fingerprint,
    built_key,
    call_keys,
    fingerprint,
    forward_key,
    module_form,
    raised,
    same,
    watch_forward,
)
from grader.registry import HOOK_NAMES, Solution, hook_signature

MODULE_HOOKS = frozenset({"make_self_attention", "make_causal_attention", "make_multihead_attention"})
NAMED_FROM_CODE = frozenset({"mask-made-in-forward-on-cpu"})
"""Mistakes the public inputs cannot tell from right work: a mask built in forward on the CPU looks, on the CPU,
like one built on ``x.device`` (no buffer, the same outputs), which loses one case only; the grader names it from
the learner's code (``grader.instructor.diagnosis``), so the kit holds no hint for it."""
FIELDS = ("id", "exercise", "description", "hint", "hint_zh", "fingerprints")
OTHER_STATE = torch.Generator().manual_seed(20_240_601).get_state()
"""A global generator state no public test sets: a result that changes under it depends on the global state."""
_HASH = re.compile(rf"[0-9a-f]{{{HASH_CHARS}}}")


def _copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)  # a test's leaf that requires grad
    if isinstance(value, torch.Generator):
        twin = torch.Generator(device=value.device)
        twin.set_state(value.get_state())
        return twin
    return value


class FanOut:
    """The reference, seen by the public tests; each function-hook call is also made by every mistake of the hook."""

    def __init__(self, reference: Solution, mistakes: dict[str, tuple[str, Solution]]) -> None:
        self._reference = reference
        self._mistakes = mistakes  # id -> (hook, solution)
        self.reference_seen: dict[str, dict[str, tuple[str, str]]] = {}
        self.seen: dict[str, dict[str, tuple[str, str]]] = {m: {} for m in mistakes}

    @staticmethod
    def _run(solution: Solution, hook: str, given: dict[str, Any], rng: torch.Tensor) -> tuple[str, str]:
        """The fingerprint of ``solution``'s call on copies of the arguments, the global generator in state ``rng``."""
        torch.set_rng_state(rng)
        arguments = {k: _copy(v) for k, v in given.items()}
        try:
            result = solution.call(hook, **arguments)
        except Exception as exc:  # noqa: BLE001 - what the mistake raises is its fingerprint
            result = raised(exc)
        return fingerprint(result, arguments)

    @staticmethod
    def _build(solution: Solution, hook: str, given: dict[str, Any], rng: torch.Tensor) -> tuple[Any, Fingerprint]:
        """A module hook's module built by ``solution`` under the global generator's state ``rng`` (None where
        there is none), and the fingerprint of its form (or of what it raised)."""
        torch.set_rng_state(rng)
        try:
            module = solution.call(hook, **{k: _copy(v) for k, v in given.items()})
        except Exception as exc:  # noqa: BLE001 - what the mistake raises is its fingerprint
            return None, fingerprint(raised(exc), {})
        if not isinstance(module, torch.nn.Module):
            return None, fingerprint(module, {})
        return module, fingerprint(module_form(module), {})

    def _module_hook(self, name: str, given: dict[str, Any], build: Any) -> Any:
        """The reference's module for the test; each mistake of the hook builds its twin under the same global
        state, and each forward of the reference's module is made again by every twin (in its dtype and mode,
        from the global state it started from), every result recorded under the keys the learner's side uses."""
        rng = torch.get_rng_state()
        key = built_key(name, given)
        twins = {}
        for mistake, (hook, solution) in self._mistakes.items():
            if hook == name:
                twin, self.seen[mistake][key] = self._build(solution, name, given, rng)
                if twin is not None:
                    twins[mistake] = twin
        torch.set_rng_state(rng)
        module = build()
        self.reference_seen.setdefault(name, {})[key] = fingerprint(module_form(module), {})
        started: list[torch.Tensor] = []
        module.register_forward_pre_hook(lambda _module, _args: started.append(torch.get_rng_state()))

        def forward_seen(x: torch.Tensor, output: Any) -> None:
            call = forward_key(name, given, rng, x, module.training)
            self.reference_seen[name][call] = fingerprint(output, {})
            after = torch.get_rng_state()
            dtype = next((p.dtype for p in module.parameters()), x.dtype)
            for mistake, twin in twins.items():
                torch.set_rng_state(started[-1])
                try:
                    out = twin.to(device=x.device, dtype=dtype).train(module.training)(x.detach().clone())
                except NotImplementedError:  # no forward: the learner's side records none (a stub says nothing)
                    continue
                except Exception as exc:  # noqa: BLE001 - what the mistake raises is its fingerprint
                    out = raised(exc)
                self.seen[mistake][call] = fingerprint(out, {})
            torch.set_rng_state(after)  # the test goes on as the reference left it

        watch_forward(module, forward_seen)
        return module

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._reference, name)
        if name not in HOOK_NAMES:
            return attribute
        if name in MODULE_HOOKS:

            def built(*args: Any, **kwargs: Any) -> Any:
                bound = hook_signature(name).bind(*args, **kwargs)
                bound.apply_defaults()
                return self._module_hook(name, dict(bound.arguments), lambda: attribute(*args, **kwargs))

            built.__name__ = name
            return built

        def fanned(*args: Any, **kwargs: Any) -> Any:
            bound = hook_signature(name).bind(*args, **kwargs)
            bound.apply_defaults()
            given = dict(bound.arguments)
            rng = torch.get_rng_state()  # each call draws from the global state the test set
            plain, *with_global = call_keys(name, given)
            for mistake, (hook, solution) in self._mistakes.items():
                if hook == name:
                    fp = self._run(solution, name, given, rng)
                    # a result that changes with the global state is kept under the key that holds it
                    if with_global and not same(fp, self._run(solution, name, given, OTHER_STATE)):
                        self.seen[mistake][with_global[0]] = fp
                    else:
                        self.seen[mistake][plain] = fp
            fp = self._run(self._reference, name, given, rng)
            for key in [plain, *with_global]:
                self.reference_seen.setdefault(name, {})[key] = fp
            torch.set_rng_state(rng)
            return attribute(*args, **kwargs)  # the test goes on with the reference, on its own arguments

        fanned.__name__ = name
        return fanned


def build_hints(tests_dir: Path) -> dict[str, Any]:
    """The hints file's content: every catalogued mistake of a function hook, with its marks on the public inputs."""
    from grader.check import run_public_cases
    from grader.registry import load_solution
    from solutions.mistakes import catalogue, mistake_solution

    chosen = [m for m in catalogue() if m.exercise in m.overrides and m.id not in NAMED_FROM_CODE]
    fan = FanOut(load_solution("reference"), {m.id: (m.exercise, mistake_solution(m)) for m in chosen})
    hooks = sorted({m.exercise for m in chosen}, key=HOOK_NAMES.index)
    # each test runs in float32, then float64: where their inputs share a key, the float64 result is kept
    run_public_cases(fan, hooks, tests_dir=tests_dir)
    entries = []
    for mistake in chosen:
        reference = fan.reference_seen.get(mistake.exercise, {})
        marks = {
            key: list(fp)
            for key, fp in sorted(fan.seen[mistake.id].items())
            if key in reference and not same(fp, reference[key])
        }
        if marks:
            entries.append({**{name: getattr(mistake, name) for name in FIELDS[:-1]}, "fingerprints": marks})
    return {"format": FORMAT, "mistakes": entries}


def _digest(folder: Path) -> str:
    """The sha256 of every file's name and bytes under ``folder`` (caches left out)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=2)
def _hints_text(tests_dir: Path, digest: str) -> tuple[str, int]:
    """The hints file's text and its count of mistakes, built once per process for public tests of one ``digest``:
    nothing else it reads (the catalogue, the reference) can change while the process runs."""
    content = build_hints(tests_dir)
    return json.dumps(content, indent=1, ensure_ascii=False, sort_keys=True) + "\n", len(content["mistakes"])


def write_hints(path: Path, tests_dir: Path) -> int:
    """Write the hints file to ``path``; returns how many mistakes it names."""
    text, count = _hints_text(tests_dir, _digest(tests_dir))
    path.write_text(text, encoding="utf-8")
    return count


def problems_in(path: Path) -> list[str]:
    """Why the hints file is not plain data (one line each): a field, an id or a value that has no place there."""
    from solutions.mistakes import catalogue

    known = {m.id: m for m in catalogue()}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"not JSON ({type(exc).__name__})"]
    if not isinstance(data, dict) or set(data) != {"format", "mistakes"} or not isinstance(data["mistakes"], list):
        return ["not a hints file: its top level must be exactly {format, mistakes}"]
    problems = []
    for entry in data["mistakes"]:
        if not isinstance(entry, dict) or set(entry) != set(FIELDS):
            problems.append(f"an entry with fields other than {', '.join(FIELDS)}")
            continue
        mistake = known.get(entry["id"])
        if mistake is None:
            problems.append(f"{entry['id']!r}: not a catalogued mistake")
            continue
        for name in FIELDS[1:-1]:  # exercise, description, hint, hint_zh
            if entry[name] != getattr(mistake, name):
                problems.append(f"{mistake.id}: its {name} is not the catalogue's")
        marks = entry["fingerprints"]
        if not isinstance(marks, dict) or not all(
            _HASH.fullmatch(str(k)) and isinstance(v, list) and len(v) == 2 and all(_HASH.fullmatch(str(x)) for x in v)
            for k, v in marks.items()
        ):
            problems.append(f"{mistake.id}: fingerprints other than hashes")
    return problems
