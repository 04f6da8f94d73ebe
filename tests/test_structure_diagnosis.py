"""The structural mismatches the parameter mapping sees get a hint (issue 25), and a correct module none.

Each structure is one of the corpus's own hand-ins (tests/learners/, labels proved by test_learner_corpus.py),
loaded in this process (trusted code, as in test_diagnosis.py) and judged on the hidden suite's cases of a fixed
seed; the diagnosis then reads the rows with the hand-in's text.  The rules need both the module's reported
structure and the learner's lines: the same rows with other text name nothing.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from grader.instructor.diagnosis import diagnose_hook, hint
from grader.instructor.fingerprints import Fingerprints
from grader.instructor.learner_source import LearnerSource
from grader.instructor.observations import HookRow, observe
from grader.instructor.structure_diagnosis import STRUCTURE_IDS
from grader.instructor.verdict import judge_in_process
from grader.registry import load_solution

# each builds the suite and the fingerprints of the catalogue (about a minute): the full tier's
pytestmark = pytest.mark.slow

CORPUS = Path(__file__).resolve().parent / "learners"
MHA, CAUSAL = "make_multihead_attention", "make_causal_attention"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def trials():
    from grader.instructor.suite import build_suite

    return [t for t in build_suite(3, ("cpu", "meta")).trials if t.hook in (MHA, CAUSAL)]


@pytest.fixture(scope="module")
def fingerprints():
    return Fingerprints()


def _rows(trials, name: str, hook: str, only: str | None = None) -> tuple[list[HookRow], str]:
    """The hand-in's rows of ``hook`` (``only``: the cases of that name), and its text."""
    path = CORPUS / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solution = load_solution(path)
    rows = []
    for trial in trials:
        if trial.hook != hook or (only and trial.case.name != only):
            continue
        verdict = judge_in_process(solution, trial)
        seen = observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)
        rows.append(HookRow(trial, seen, dict(verdict.reply.get("module") or {})))
    return rows, path.read_text(encoding="utf-8")


def _named(rows, fingerprints, text: str, hook: str) -> dict[int, frozenset[str]]:
    return diagnose_hook(hook, rows, fingerprints, LearnerSource({"attn.py": text}))


UNLOADABLE = [
    ("qin_head_list.py", "mha-per-head-module-list"),
    ("ke_fused_c_attn.py", "fused-qkv-sized-by-d-in"),
    ("yan_heads_no_out_proj.py", "mha-without-out-proj"),
]


@pytest.mark.parametrize(("name", "mistake"), UNLOADABLE, ids=[m for _, m in UNLOADABLE])
def test_a_structure_the_weights_cannot_load_into_is_named_on_every_case_it_fails(trials, fingerprints, name, mistake):
    rows, text = _rows(trials, name, MHA)
    unloadable = [i for i, r in enumerate(rows) if r.facts.get("loaded_by") == "none"]
    assert unloadable, "the reference's weights load into this module: no structural mismatch to name"
    named = _named(rows, fingerprints, text, MHA)
    assert {i for i, ids in named.items() if mistake in ids} == set(unloadable)
    assert set().union(*named.values()) == {mistake}


@pytest.mark.parametrize(("name", "mistake"), UNLOADABLE[:2], ids=[m for _, m in UNLOADABLE[:2]])
def test_the_structure_alone_names_nothing_without_the_learners_lines_showing_it(trials, fingerprints, name, mistake):
    rows, _ = _rows(trials, name, MHA)
    plain = (CORPUS / "wang_ch03_faithful.py").read_text(encoding="utf-8")  # the chapter's lines: no list, no 3 *
    assert mistake not in set().union(*_named(rows, fingerprints, plain, MHA).values(), set())


def test_a_mask_buffer_under_another_name_is_named_on_the_buffer_case_only(trials, fingerprints):
    rows, text = _rows(trials, "tao_tril_head.py", CAUSAL, only="mask-buffer")
    assert rows and all(r.seen.kind == "property" for r in rows)
    assert set().union(*_named(rows, fingerprints, text, CAUSAL).values()) == {"mask-buffer-misnamed"}
    no_buffer = text.replace('self.register_buffer("tril", ', "self.tril = (")
    assert "mask-buffer-misnamed" not in set().union(*_named(rows, fingerprints, no_buffer, CAUSAL).values(), set())


RENAMED = [
    ("zhao_qkv_proj.py", MHA),
    ("kim_w_keys.py", MHA),
    ("liu_w_query.py", CAUSAL),
    ("sun_query_key_value.py", CAUSAL),
    ("zhou_mask_on_device.py", CAUSAL),
]


@pytest.mark.parametrize(("name", "hook"), RENAMED, ids=[n.removesuffix(".py") for n, _ in RENAMED])
def test_a_correct_module_with_other_names_gets_no_structural_hint(trials, fingerprints, name, hook):
    rows, text = _rows(trials, name, hook)
    named = _named(rows, fingerprints, text, hook)
    assert set().union(*named.values(), set()) & set(STRUCTURE_IDS) == set()


@pytest.mark.parametrize("mistake", STRUCTURE_IDS)
def test_each_structural_hint_says_what_the_contract_expects_in_both_languages(mistake):
    (_, en), (_, zh) = hint(mistake, "en"), hint(mistake, "zh")
    assert "contract" in en and "?" in en and not CJK.search(en)
    assert "约定" in zh and CJK.search(zh) and ("？" in zh or "?" in zh)


def test_a_scale_by_d_in_is_named_in_a_head_that_makes_its_key_first_and_keeps_a_tril_buffer(trials, fingerprints):
    """Karpathy's Head: its seeded build draws key first, so those cases say nothing of the values; the cases with
    the reference's weights name the scale (and the missing dropout), the buffer case the buffer's name."""
    rows, text = _rows(trials, "tao_tril_head.py", CAUSAL)
    named = _named(rows, fingerprints, text, CAUSAL)
    by_case = {rows[i].trial.case.name: ids for i, ids in named.items()}
    assert by_case["reference-weights"] == {"scale-by-d-in", "dropout-never-applied"}
    assert by_case["mask-buffer"] == {"mask-buffer-misnamed"}


@pytest.mark.parametrize(
    ("names", "otherwise"),
    [
        (["key.weight", "query.weight", "value.weight"], True),
        (["W_key.weight", "W_query.weight", "W_value.weight", "out_proj.weight", "out_proj.bias"], True),
        (["W_query.weight", "W_key.weight", "W_value.weight"], False),
        (["q.weight", "k.weight", "v.weight", "o.weight", "o.bias"], False),
        (["lin1.weight", "lin0.weight", "lin2.weight"], False),  # no role in the names: cannot tell
    ],
    ids=["karpathy", "key-first", "chapter", "short-names", "no-roles"],
)
def test_a_seeded_build_is_set_aside_only_where_the_names_show_another_creation_order(names, otherwise):
    from types import SimpleNamespace

    from grader.instructor.structure_diagnosis import drawn_otherwise

    row = HookRow(None, None, {"parameters": [{"name": n, "shape": [2, 2]} for n in names]})
    assert drawn_otherwise(SimpleNamespace(init_seed=5), row) is otherwise
    assert drawn_otherwise(SimpleNamespace(init_seed=None), row) is False


# fused-names: a layout the reference's weights load into otherwise (by role, by order, stacked) loses the names case
NAMES_CASE = [
    ("xing_fused_qkv.py", MHA, "fused-qkv-projection"),
    ("lan_w_q_names.py", CAUSAL, "projections-named-differently"),
    ("zhao_qkv_proj.py", MHA, "projections-named-differently"),
]


@pytest.mark.parametrize(("name", "hook", "mistake"), NAMES_CASE, ids=[n.removesuffix(".py") for n, _, _ in NAMES_CASE])
def test_a_layout_the_weights_load_into_otherwise_is_named_on_the_names_case_only(trials, fingerprints, name, hook,
                                                                                  mistake):  # fmt: skip
    rows, text = _rows(trials, name, hook)
    named = _named(rows, fingerprints, text, hook)
    assert {rows[i].trial.case.name for i in named} == {"names"}
    assert set().union(*named.values()) == {mistake}
    chapter = (CORPUS / "wang_ch03_faithful.py").read_text(encoding="utf-8")  # no such layers in these lines
    assert set().union(*_named(rows, fingerprints, chapter, hook).values(), set()) == set()
