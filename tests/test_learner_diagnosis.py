"""The diagnosis on the learners' corpus: it names the real mistakes, never a wrong one.

``tests/learners/expected.toml`` says what each (submission, hook) of the corpus really is; the labels are
proved against independent answers by ``tests/test_learner_corpus.py``.  Here the corpus is graded once,
for real (``grade_class``: sandboxed children, cpu and meta, seed 1), and the mistake ids the grader put
on each hook's failing cases (``CaseResult.mistake``, the gradebook's ``mistake`` column) are held to the
labels:

* a defective hook may be named only after ids among its label's (its ``hidden`` ones included): a wrong
  diagnosis is worse than none;
* at least :data:`MIN_NAMED` of the defective hooks get a name (every one of them right), each with a hint
  in English and in Chinese;
* a correct hook gets no name at all; a hook that is right in behaviour but breaks a structural rule
  (``structure``) may be named only after the structural mistake its ``note`` states;
* a hook whose W_query / W_key / W_value are named otherwise (``renamed``, ``layers``) loses the parameter-names
  case, and is named ``projections-named-differently`` there, as a teacher would (and may be, besides its own
  mistakes where it has any).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.instructor.diagnosis import hint

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the kit's own fallback on 3.10
    import tomli as tomllib

CORPUS = Path(__file__).resolve().parent / "learners"
EXPECTED: dict[str, dict[str, Any]] = tomllib.loads((CORPUS / "expected.toml").read_text(encoding="utf-8"))
MIN_NAMED = 0.60
CJK = re.compile(r"[\u4e00-\u9fff]")

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox reads /proc; Linux only"),
    pytest.mark.slow,
]


def student(name: str) -> str:
    return Path(name).stem


@pytest.fixture(scope="module")
def named(graded_corpus) -> dict[tuple[str, str], set[str]]:
    """``{(student, hook): the ids named on its cases}`` from the session's one run of the corpus (conftest)."""
    run = graded_corpus
    assert sorted(o.submission.student for o in run.outcomes) == sorted(student(n) for n in EXPECTED)
    found: dict[tuple[str, str], set[str]] = {}
    for outcome in run.outcomes:
        for result in outcome.results:
            ids = {m for m in result.mistake.split(",") if m}
            found.setdefault((outcome.submission.student, result.hook), set()).update(ids)
            assert not ids or result.status == "failed", f"{result.test_name}: a name on a case that did not fail"
    return found


RENAMED_ID = "projections-named-differently"


def renamed_projections(entry: dict[str, Any], hook: str) -> set[str]:
    """``{projections-named-differently}`` where the hook's query, key or value layer has another name, else none."""
    layers = entry.get("layers", {}).get(hook, {})
    return {RENAMED_ID} if any(layers.get(r, r) != r for r in ("W_query", "W_key", "W_value")) else set()


DEFECTIVE = [
    (name, hook, sorted(set(label) | set(entry.get("hidden", {}).get(hook, [])) | renamed_projections(entry, hook)))
    for name, entry in EXPECTED.items()
    for hook, label in entry["hooks"].items()
    if label != "correct"
]
CORRECT = [
    (name, hook) for name, entry in EXPECTED.items() for hook, label in entry["hooks"].items() if label == "correct"
]


@pytest.mark.parametrize(("name", "hook", "allowed"), DEFECTIVE, ids=[f"{student(n)}-{h}" for n, h, _ in DEFECTIVE])
def test_a_defective_hook_is_named_only_after_its_own_mistakes(named, name, hook, allowed):
    wrong = named.get((student(name), hook), set()) - set(allowed)
    assert wrong == set(), f"named {sorted(wrong)}; the code commits {allowed}"


def test_most_defective_hooks_are_named(named):
    right = [(n, h) for n, h, allowed in DEFECTIVE if (ids := named.get((student(n), h))) and ids <= set(allowed)]
    missed = sorted(f"{student(n)}-{h}" for n, h, _ in DEFECTIVE if not named.get((student(n), h)))
    assert len(DEFECTIVE) >= 40, "the corpus is the yardstick: it must stay large"
    assert len(right) / len(DEFECTIVE) >= MIN_NAMED, f"{len(right)} of {len(DEFECTIVE)} named; missed: {missed}"


def test_every_name_has_a_hint_in_both_languages(named):
    ids = set().union(*named.values())
    assert ids, "nothing was named at all"
    for mistake in sorted(ids):
        (_, en), (_, zh) = hint(mistake, "en"), hint(mistake, "zh")
        assert en and not CJK.search(en), mistake
        assert CJK.search(zh), mistake


@pytest.mark.parametrize(("name", "hook"), CORRECT, ids=[f"{student(n)}-{h}" for n, h in CORRECT])
def test_a_correct_hook_is_named_after_nothing(named, name, hook):
    entry = EXPECTED[name]
    ids = named.get((student(name), hook), set())
    if hook in entry.get("structure", []):  # right behaviour, a structural rule broken: that rule, if anything
        ids = {m for m in ids if not re.search(rf"(?<![\w-]){re.escape(m)}(?![\w-])", entry.get("note", ""))}
    assert ids - renamed_projections(entry, hook) == set()


RENAMED = [(n, h) for n, e in EXPECTED.items() for h in e.get("renamed", []) if renamed_projections(e, h)]


@pytest.mark.parametrize(("name", "hook"), RENAMED, ids=[f"{student(n)}-{h}" for n, h in RENAMED])
def test_a_hook_with_its_projections_named_otherwise_is_named_so(named, name, hook):
    assert RENAMED_ID in named.get((student(name), hook), set())
