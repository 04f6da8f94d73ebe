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
whole class (:class:`~grader.instructor.fingerprints.Fingerprints`, lazily, shared by the grading threads); a
submission's outputs come as bytes.  Learner code never runs here: only our own.  The outcomes compared are
:mod:`~grader.instructor.observations`; the model on a module case is
:mod:`~grader.instructor.module_trial_model`; the rules that read the learner's text,
:mod:`~grader.instructor.text_rules`; the module's structure, :mod:`~grader.instructor.structure_diagnosis`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from grader.instructor import text_rules
from grader.instructor.fingerprints import Candidate, Fingerprints
from grader.instructor.learner_source import LearnerSource
from grader.instructor.module_trial_model import ModuleTrialModel
from grader.instructor.observations import HookRow, Seen, close, dropped_matches, normalised, observe
from grader.instructor.structure_diagnosis import drawn_otherwise, structure_named
from grader.instructor.verdict import judge_in_process

LANGUAGES = ("en", "zh")
MAX_TRIPLES = 20_000
"""Settings of three knobs a hook may have before the search stops at two (a bound on the cost, never reached)."""

__all__ = ["LANGUAGES", "diagnose_hook", "diagnose_in_process", "hint", "main_first"]


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
            return seen.kind == "values" and dropped_matches(expect, seen, dtype)
        if expect.kind != "values" or seen.kind != "values":
            return False
        if not row.trial.case.compare_gold:  # random values: the properties' very complaint, or the same draws
            if not seen.message or normalised(seen.message) != normalised(expect.message):
                return False
            return seen.message == expect.message or close(seen.outputs, expect.outputs, dtype)
        return close(seen.outputs, expect.outputs, dtype)
    if expect.kind != seen.kind:
        return False
    if aspect == "mutation":
        return close(seen.outputs, expect.outputs, dtype)
    if aspect == "device":  # the message holds the submission's own error and line: the code rules decide
        return True
    if aspect == "gradient" and seen.message.startswith("grad.values"):  # wrong gradients: the very same ones
        return seen.message == expect.message and close(seen.outputs, expect.outputs, dtype, floor=0.0)
    return normalised(seen.message) == normalised(expect.message)


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
        return close(seen.outputs, expect.outputs, row.trial.dtype)
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
    structural = structure_named(hook, rows, code) if hook in MODULE_HOOK_NAMES else {}
    if not any(r.seen.kind not in ("pass", "other") for r in rows):
        return structural
    facts = [r.facts for r in rows if r.facts]

    def line_rule(row: HookRow) -> Callable[[str], bool | None]:
        line = source.statement_at(row.seen.where)
        return lambda mistake: text_rules.line_rule(mistake, line, code)

    named: dict[int, frozenset[str]] = {}
    for aspect in ASPECTS:
        states = [_state(aspect, r) for r in rows]
        failing = [i for i, s in enumerate(states) if s == "fail"]
        if not failing:
            continue
        passing = [i for i, s in enumerate(states) if s == "pass"]
        found = _explanations(Evidence(hook, aspect, rows, failing, passing, fingerprints, line_rule))
        refined = (text_rules.refined(ids, code) for ids in found)
        found = [
            ids for ids in refined if all(text_rules.code_rule(mistake, code, facts) is not False for mistake in ids)
        ]
        shared = frozenset.intersection(*found) if found else frozenset()
        shared |= text_rules.container_rule(hook, aspect, rows, failing, passing, code)
        named.update({i: named.get(i, frozenset()) | shared for i in failing if shared})
    return {i: named.get(i, frozenset()) | structural.get(i, frozenset()) for i in {*named, *structural}}


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
        found = [c.ids for c in programs if _program_reproduces(c, ev)]
    return found


MODULE_HOOK_NAMES = frozenset({"make_self_attention", "make_causal_attention", "make_multihead_attention"})
MIN_REPRODUCED_CASES = 2
"""Distinct failing cases whose very values a program must reproduce to be named without explaining every case."""


def _program_reproduces(cand: Candidate, ev: Evidence) -> bool:
    """A function's program that gives the submission's own wrong values on most of its failing value cases.

    The second chance, where no program fails exactly the submission's cases: a learner's variant of a mistake often
    handles an edge (``p = 0``, a non-contiguous input) otherwise than the catalogued program.  The same wrong numbers,
    within float32 tolerance, on at least two distinct cases and on more than half of the cases that fail with values,
    are the mistake at work; the edges that differ are left unexplained.  The same numbers show that one mistake of
    a program is at work, not that each of several is: a program of two mistakes that also fails half or more of what
    the submission gets right names nothing (a softmax over dim 1 without the max subtraction overflows like one
    over the right dim, and fails every batched case the submission passes).
    """
    rows, failing, fingerprints = ev.rows, ev.failing, ev.fingerprints
    if len(cand.ids) > 1:
        wrong_where_right = sum(
            _program_passes(ev.aspect, fingerprints.program_seen(cand, rows[i].trial)) is False for i in ev.passing
        )
        if 2 * wrong_where_right >= len(ev.passing) > 0:
            return False
    valued = [i for i in failing if rows[i].seen.kind == "values" and rows[i].trial.case.compare_gold]
    matched = [
        i
        for i in valued
        if (expect := fingerprints.program_seen(cand, rows[i].trial)).kind == "values"
        and close(rows[i].seen.outputs, expect.outputs, rows[i].trial.dtype)
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
    failing = [i for i in ev.failing if models[i] is not None and not drawn_otherwise(models[i], rows[i])]
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
