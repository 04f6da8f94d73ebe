"""The held-out hand-ins' answer key is well formed, and benchmarks/diagnosis_rate.py scores rows as documented.

Fast: nothing here grades.  The measurement itself is ``python benchmarks/diagnosis_rate.py``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from grader.registry import HOOK_NAMES
from solutions.mistakes import ACCEPTED, READ_FROM_SOURCE, catalogue

KIT = Path(__file__).resolve().parent.parent
HELDOUT = KIT / "tests" / "heldout"
SETS = [HELDOUT, *(KIT / "tests" / f"heldout{i}" for i in (2, 3, 4))]  # each a new validator's, written after the
# ones before it were used
HOOKS = set(HOOK_NAMES)  # every group's, the patterns group's too


def _rate():
    spec = importlib.util.spec_from_file_location("diagnosis_rate", KIT / "benchmarks" / "diagnosis_rate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["diagnosis_rate"] = module
    spec.loader.exec_module(module)
    return module


rate = _rate()


@pytest.mark.parametrize("folder", SETS, ids=[f.name for f in SETS])
def test_every_heldout_file_is_labelled_and_every_label_names_a_file_and_a_hook(folder):
    labels = rate.read_labels(folder / "labels.toml")
    files = {p.stem for p in folder.glob("*.py")}
    assert set(labels) == files
    for stem, hooks in labels.items():
        assert hooks, stem
        assert set(hooks) <= HOOKS, (stem, set(hooks) - HOOKS)
        source = (folder / f"{stem}.py").read_text(encoding="utf-8")
        for hook in hooks:
            assert f"def {hook}(" in source, (stem, hook)


@pytest.mark.parametrize("folder", SETS, ids=[f.name for f in SETS])
def test_label_ids_are_catalogue_ids(folder):
    known = {m.id for m in catalogue() + READ_FROM_SOURCE + ACCEPTED}
    for stem, hooks in rate.read_labels(folder / "labels.toml").items():
        for hook, label in hooks.items():
            assert label.ids <= known, (stem, hook, label.ids - known)
            assert label.also <= known, (stem, hook, label.also - known)
            assert not (label.correct and (label.ids or label.also)), (stem, hook)


def test_the_set_is_mixed():
    pairs = [label for hooks in rate.read_labels(HELDOUT / "labels.toml").values() for label in hooks.values()]
    assert sum(label.correct for label in pairs) >= 20
    assert sum(not label.correct for label in pairs) >= 20


def _out(tmp_path: Path, tests: list[dict]) -> Path:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "results.json").write_text(json.dumps({"tests": tests}), encoding="utf-8")
    return tmp_path


def test_rows_are_scored_as_documented(tmp_path):
    labels = {
        "s": {
            "softmax_weights": rate.Label(False, "no max", frozenset({"softmax-without-max"})),
            "causal_mask": rate.Label(False, "tril", frozenset({"tril-instead-of-triu"})),
            "split_heads": rate.Label(False, "view", frozenset({"split-heads-without-transpose"})),
            "merge_heads": rate.Label(True),
            "dropout_scale": rate.Label(True),
        }
    }
    tests = [
        {"name": "softmax_weights", "score": 1.0, "max_score": 2.0,
         "output": "Looks like the known mistake 'softmax-without-max': hint\nFAILED ..."},
        {"name": "causal_mask", "score": 0.3, "max_score": 1.0,
         "output": "Looks like the known mistake 'triu-diagonal-0': hint\nFAILED ..."},
        {"name": "split_heads", "score": 2.0, "max_score": 2.0, "output": "All 20 cases passed."},
        {"name": "merge_heads", "score": 0.5, "max_score": 1.0, "output": "FAILED ..."},
        {"name": "dropout_scale", "score": 1.0, "max_score": 1.0, "output": "All cases passed."},
    ]
    totals = rate.read_rows(_out(tmp_path, tests), labels, seed=7)
    verdicts = {row.hook: rate.verdict(row) for row in totals.rows}
    assert verdicts == {
        "softmax_weights": "named",
        "causal_mask": "WRONG NAME",
        "split_heads": "FALSE PASS",
        "merge_heads": "FALSE FAIL",
        "dropout_scale": "ok",
    }
    figures = totals.figures()
    assert (figures["defective_pairs"], figures["main_named"], figures["wrong_names"]) == (3, 1, 1)
    assert (figures["false_passes"], figures["false_fails"]) == (1, 1)
    assert len(totals.bars_failed()) == 4


def test_a_missing_folder_is_a_usage_error(tmp_path):
    with pytest.raises(SystemExit) as exit_:
        rate.main([str(tmp_path / "nowhere")])
    assert exit_.value.code == 2
