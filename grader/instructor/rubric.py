"""The rubric: points per exercise, the hook table's defaults with the instructor's TOML file over them.

Each hook's default points and all-or-nothing flag are in its row of :mod:`grader.hook_table`, so a new hook
arrives with its points.  The instructor's TOML file of overrides (the packaged, empty ``rubric.toml``, or
``--rubric``): under ``[points]`` a hook listed gets those points (``hook = 0``: worth nothing), a hook left
out keeps its default; ``all_or_nothing``, when given, is the whole list of all-or-nothing hooks; under
``[visibility]``, the Gradescope visibility of each exercise's test in ``results.json`` (``default`` for every
hook not listed and the file's top ``visibility``; each one of :data:`VISIBILITIES`; left out: ``visible``).

Partial credit is the share of cases passed: ``points × passed / (passed + failed)`` per hook.  Skipped cases
(a device that is not present, an inconclusive ``meta`` run) count neither way.  All-or-nothing hooks earn
their points only if no case failed.  A hook with no case that ran (all skipped, or none at all) earns **0**
of its points: not running is never a free pass.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grader.hook_table import TABLE
from grader.instructor.verdict import PASSED, SKIPPED, CaseResult
from grader.registry import HOOK_NAMES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

DEFAULT_RUBRIC = Path(__file__).with_name("rubric.toml")
"""The packaged overrides (none: the hook table's defaults hold)."""

VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
"""The visibilities Gradescope reads for a test of ``results.json``."""


TOTAL = "total"
"""The exercise name an override of a student's whole grade gives."""


@dataclass(frozen=True)
class Override:
    """The instructor's grade for one student on one exercise (or on the total): it replaces the points grading
    computed, in every file, under every later regrade, until undone (kept in the gradebook)."""

    id: int
    student: str
    exercise: str  # a hook, or TOTAL
    points: float
    reason: str
    by: str = ""
    at: str = ""


@dataclass(frozen=True)
class Rubric:
    """Points per hook, for every hook of ``HOOK_NAMES``, and the instructor's overrides of some students' points."""

    points: dict[str, float]
    all_or_nothing: frozenset[str] = frozenset()
    source: str = ""
    visibility: dict[str, str] = field(default_factory=dict)  # hook -> its test's visibility, where not the default
    default_visibility: str = "visible"
    overrides: tuple[Override, ...] = ()  # in the order made: a later one of the same student and exercise wins

    def overrides_of(self, student: str) -> dict[str, Override]:
        """``exercise -> Override`` in force for ``student`` (``TOTAL`` for the whole grade)."""
        return {o.exercise: o for o in self.overrides if o.student == student}

    def capped_overrides(self) -> list[Override]:
        """The overrides worth more than this rubric gives their exercise (or total): each counts as the most."""
        most = {**self.points, TOTAL: self.max_total}
        return [o for o in self.overrides if o.points > most.get(o.exercise, 0.0)]

    def visibility_of(self, hook: str) -> str:
        """The Gradescope visibility of ``hook``'s test in ``results.json``."""
        return self.visibility.get(hook, self.default_visibility)

    @property
    def max_total(self) -> float:
        return round(sum(self.points.get(h, 0.0) for h in HOOK_NAMES), 2)


def _fail(path: Path | str, message: str) -> ValueError:
    return ValueError(f"{path}: {message}")


def _number(path: Path | str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, f"points for {key!r} must be a number, not {value!r}")
    if value != value or value < 0 or value == float("inf"):  # NaN, negative, infinite
        raise _fail(path, f"points for {key!r} must be a non-negative finite number, not {value!r}")
    return float(value)


def parse_rubric(data: dict, source: str | Path = "<rubric>") -> Rubric:
    """The hook table's defaults with a rubric already read from TOML over them (a ValueError names the file and
    key of anything invalid)."""
    unknown = ", ".join(map(repr, sorted(set(data) - {"points", "all_or_nothing", "visibility"})))
    if unknown:
        raise _fail(source, f"unknown key(s) {unknown}; expected [points], all_or_nothing and [visibility]")
    visibility, default_visibility = _visibility(source, data.get("visibility", {}))
    points_table = data.get("points", {})
    if not isinstance(points_table, dict):
        raise _fail(source, "[points] must be a table of hook = points")
    points = {r.hook: float(r.points) for r in TABLE}  # TABLE holds every hook of HOOK_NAMES, in its order
    for key, value in points_table.items():
        if key not in HOOK_NAMES:
            raise _fail(source, f"[points] {key!r} is not a hook; the hooks are: {', '.join(HOOK_NAMES)}")
        points[key] = _number(source, key, value)
    aon = data.get("all_or_nothing", [r.hook for r in TABLE if r.all_or_nothing])
    if not isinstance(aon, list) or not all(isinstance(h, str) for h in aon):
        raise _fail(source, "all_or_nothing must be a list of hook names")
    for hook in aon:
        if hook not in HOOK_NAMES:
            raise _fail(source, f"all_or_nothing: {hook!r} is not a hook; the hooks are: {', '.join(HOOK_NAMES)}")
    return Rubric(points, frozenset(aon), str(source), visibility, default_visibility)


def _visibility(source: str | Path, table: object) -> tuple[dict[str, str], str]:
    """``[visibility]``: (hook -> visibility, the default), each checked against :data:`VISIBILITIES`."""
    if not isinstance(table, dict):
        raise _fail(source, 'visibility must be a table: [visibility] default = "visible", <hook> = "hidden"')
    for key, value in table.items():
        if key != "default" and key not in HOOK_NAMES:
            hooks = ", ".join(HOOK_NAMES)
            raise _fail(source, f"[visibility] {key!r} is not a hook nor 'default'; the hooks are: {hooks}")
        if value not in VISIBILITIES:
            raise _fail(source, f"[visibility] {key} = {value!r}: a visibility is one of {', '.join(VISIBILITIES)}")
    found = dict(table)
    return found, found.pop("default", "visible")


def rubric_json(rubric: Rubric) -> str:
    """``rubric`` as JSON (points, all-or-nothing hooks, visibilities; not its overrides), for the gradebook's run."""
    visibility = {"default": rubric.default_visibility, **rubric.visibility}
    data = {"points": rubric.points, "all_or_nothing": sorted(rubric.all_or_nothing), "visibility": visibility}
    return json.dumps(data, sort_keys=True)


def rubric_from_json(text: str, source: str) -> Rubric:
    """The rubric :func:`rubric_json` wrote; hooks it lacks (added since) keep their defaults, hooks unknown now
    are dropped."""
    data = json.loads(text)
    points = {hook: value for hook, value in data.get("points", {}).items() if hook in HOOK_NAMES}
    added = {r.hook for r in TABLE if r.all_or_nothing and r.hook not in data.get("points", {})}
    aon = [hook for hook in data.get("all_or_nothing", []) if hook in HOOK_NAMES] + sorted(added)
    visibility = {k: v for k, v in data.get("visibility", {}).items() if k == "default" or k in HOOK_NAMES}
    return parse_rubric({"points": points, "all_or_nothing": aon, "visibility": visibility}, source)


def run_rubric(run: dict) -> Rubric | None:
    """The rubric a gradebook run recorded; ``None`` where it recorded none (graded before attnkit kept one)."""
    return rubric_from_json(run["rubric"], f"run {run['id']}") if run.get("rubric") else None


def load_rubric(path: str | Path | None = None) -> Rubric:
    """Read and validate a rubric file (the packaged ``rubric.toml`` by default) over the hook table's defaults."""
    path = Path(path) if path is not None else DEFAULT_RUBRIC
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise _fail(path, f"cannot read the rubric ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(path, f"not valid TOML ({exc})") from None
    return parse_rubric(data, path)


@dataclass(frozen=True)
class HookCounts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def ran(self) -> int:
        return self.passed + self.failed


def count_cases(results: Iterable[CaseResult]) -> dict[str, HookCounts]:
    """Passed, failed and skipped cases per hook (every hook present; unknown statuses count as failed).  A case on
    the ``meta`` device checks shapes and devices only: its pass counts for nothing, its failure costs a case."""
    tally = {hook: [0, 0, 0] for hook in HOOK_NAMES}
    for r in results:
        if r.hook not in tally:
            continue
        if r.device == "meta" and r.status == PASSED:
            continue  # the meta pass only looks for device mistakes: a pass there earns nothing
        index = 0 if r.status == PASSED else 2 if r.status == SKIPPED else 1
        tally[r.hook][index] += 1
    return {hook: HookCounts(*counts) for hook, counts in tally.items()}


def hook_points(points: float, counts: HookCounts, all_or_nothing: bool) -> float:
    """Points earned on one hook (see the module docstring), rounded to 2 decimals."""
    if counts.ran == 0:
        return 0.0
    if all_or_nothing:
        return round(points, 2) if counts.failed == 0 else 0.0
    return round(points * counts.passed / counts.ran, 2)


def score(results: Iterable[CaseResult], rubric: Rubric, student: str = "") -> dict[str, tuple[float, float]]:
    """``{hook: (earned, possible)}`` for every hook in ``HOOK_NAMES`` order, for one student's results; the
    rubric's overrides of ``student``'s points replace what the cases earned."""
    counts = count_cases(results)
    points = {hook: rubric.points.get(hook, 0.0) for hook in HOOK_NAMES}
    scores = {hook: (hook_points(p, counts[hook], hook in rubric.all_or_nothing), p) for hook, p in points.items()}
    for hook, override in rubric.overrides_of(student).items():
        if hook in scores:  # at most the exercise's points: a rubric changed since may make it worth less
            scores[hook] = (round(min(override.points, scores[hook][1]), 2), scores[hook][1])
    return scores


def total(
    scores: dict[str, tuple[float, float]], rubric: Rubric | None = None, student: str = ""
) -> tuple[float, float]:
    """``(earned, possible)`` over all hooks, rounded to 2 decimals; an override of ``student``'s total replaces
    the sum."""
    earned, possible = round(sum(e for e, _ in scores.values()), 2), round(sum(p for _, p in scores.values()), 2)
    override = rubric.overrides_of(student).get(TOTAL) if rubric is not None and student else None
    return (round(min(override.points, possible), 2) if override else earned, possible)
