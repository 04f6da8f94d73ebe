"""Grading one submission: verdicts in the trusted process, hostile submissions, devices, cleanup.

Every submission here is Alice's correct solution with one part replaced by a
snippet from ``tests/submissions/`` (see its README): the snippet's hooks take
the place of hers, so the attacked hook must earn nothing and every other hook
must still pass.  One suite (cpu and meta) and one template serve the module.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

import learner_code
import pytest
import torch
import torch.testing
from processes import proc_stat

from grader.instructor.cases import HALF
from grader.instructor.fingerprints import Fingerprints
from grader.instructor.handin_reading import read_submission
from grader.instructor.report_model import status, timed_out_hooks
from grader.instructor.rubric import count_cases, score
from grader.instructor.sandbox import Limits, Template
from grader.instructor.submission_grading import grade_submission
from grader.instructor.suite import build_suite
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, CaseResult
from grader.registry import HOOK_NAMES

KIT_ROOT = Path(__file__).resolve().parents[1]
SEED = 20261129
LIMITS = Limits(call_seconds=2, submission_seconds=30)
TRUSTED_COMPARISONS = (torch.allclose, torch.equal, torch.isclose, torch.testing.assert_close,
                       torch.Tensor.allclose, torch.Tensor.equal)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; Linux only")


# --- building submissions -----------------------------------------------------------------------


def alice_with(folder: Path, snippet: str | None, student: str = "learner") -> Path:
    """Alice's solution with a snippet's hooks in place of hers, written to ``folder/<student>.py``."""
    source = learner_code.alice_with(snippet)
    path = folder / f"{student}.py"
    path.write_text(source, encoding="utf-8")
    return path


# --- /proc -----------------------------------------------------------------------------------------


class TrackedTemplate(Template):
    """A Template that remembers the pid (= session and process group) of every child it forked."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.spawned: list[int] = []

    def spawn(self, *args, **kwargs):
        child = super().spawn(*args, **kwargs)
        self.spawned.append(child.pid)
        return child


def learner_processes(template: TrackedTemplate) -> list[str]:
    """Live processes forked by the template, or in the session of a child it forked."""
    sessions = set(template.spawned)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        info = proc_stat(int(entry.name))
        if info is None or info[0] in "ZX":
            continue
        _state, ppid, pgrp, session = info
        if ppid == template.process.pid or session in sessions or pgrp in sessions:
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:80].decode(errors="replace")
            except OSError:
                cmd = "?"
            found.append(f"{entry.name}: {cmd}")
    return found


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def suite():
    return build_suite(SEED, ("cpu", "meta"))


@pytest.fixture(scope="module")
def template():
    tpl = TrackedTemplate()
    try:
        yield tpl
    finally:
        tpl.close()


@pytest.fixture
def grade(tmp_path, suite, template):
    """``grade(snippet) -> results`` for Alice's solution patched with ``snippet`` (None: as she wrote it)."""

    def run(snippet: str | None, student: str = "learner", **kwargs) -> list[CaseResult]:
        submission = read_submission(alice_with(tmp_path, snippet, student))
        assert submission.error is None, submission.error
        kwargs.setdefault("suite", suite)
        return grade_submission(submission, template=template, limits=LIMITS, **kwargs).results

    return run


def of(results: list[CaseResult], hook: str | None = None, device: str | None = None) -> list[CaseResult]:
    return [r for r in results if (hook is None or r.hook == hook) and (device is None or r.device == device)]


def statuses(results: list[CaseResult]) -> Counter:
    return Counter(r.status for r in results)


def not_passed(results: list[CaseResult]) -> list[str]:
    return [f"{r.test_name}: {r.status}: {r.message}" for r in results if r.status != PASSED]


# --- correct and mistaken submissions -------------------------------------------------------------


@pytest.mark.slow
def test_correct_submission_passes_every_case(grade, suite, rubric):
    results = grade(None, "alice")
    assert len(results) == len(suite.trials)
    assert {r.hook for r in results} == set(HOOK_NAMES)
    assert of(results, device="cpu"), "no cpu cases ran"
    assert not_passed(results) == []
    scores = score(results, rubric)
    assert all(earned == possible for earned, possible in scores.values()), scores


@pytest.mark.slow
def test_one_wrong_function_loses_only_that_hooks_cases(grade, rubric):
    results = grade("wrong_causal_mask")
    mine = of(results, "causal_mask", "cpu")
    assert statuses(mine)[FAILED] > 0, "the wrong causal_mask passed every case"
    assert any("wrong entries" in r.message for r in mine)
    others = [r for r in results if r.hook != "causal_mask"]
    assert not_passed(others) == []
    scores = score(results, rubric)
    assert scores["causal_mask"][0] < scores["causal_mask"][1]
    assert all(earned == possible for hook, (earned, possible) in scores.items() if hook != "causal_mask")


# --- the outcome: results, the heatmaps' data, the learner process's stats ---------------------------------


@pytest.mark.slow
def test_the_outcome_holds_the_most_informative_failing_weights_case_as_a_figure(tmp_path, suite, template):
    import importlib.util

    from grader.instructor.heatmaps import first_matrix, informative

    submission = read_submission(alice_with(tmp_path, "wrong_causal_mask"))
    outcome = grade_submission(submission, suite, template, LIMITS)
    assert outcome.submission is submission
    assert list(outcome.figures) == ["causal_mask"], "only the failing weights hook gets a figure"
    trials = {(t.hook, t.case.name, t.device, t.dtype): t for t in suite.trials}
    failing = [r for r in outcome.results if r.hook == "causal_mask" and r.status == FAILED and r.device != "meta"]
    sizes = [informative(trials[(r.hook, r.case, r.device, r.dtype)].golds[0].shape) for r in failing]
    best = failing[sizes.index(max(sizes))]  # the first of the most informative (a 1x1 T=1 case comes last)
    trial = trials[(best.hook, best.case, best.device, best.dtype)]
    figure = outcome.figures["causal_mask"]
    assert figure.label == f"{best.case} ({best.device}, {best.dtype})"
    t = trial.call["args"]["num_tokens"]["value"]
    assert t >= 4, f"a T={t} case was drawn where a larger one failed"
    above_diagonal = torch.tensor([[j > i for j in range(t)] for i in range(t)])  # the mask, written out
    assert torch.equal(figure.expected, above_diagonal)
    spec = importlib.util.spec_from_file_location("wrong_mask", learner_code.SNIPPETS / "wrong_causal_mask.py")
    wrong = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrong)  # trusted test code: the snippet's own mask, computed here
    assert torch.equal(figure.received, first_matrix(wrong.causal_mask(t)))
    assert outcome.stats.peak_rss_kib > 0 and outcome.stats.restarts == 0
    assert outcome.stats.cuda_init_seconds is None


@pytest.mark.slow
def test_a_passing_submission_has_no_figures(tmp_path, suite, template):
    outcome = grade_submission(read_submission(alice_with(tmp_path, None, "alice")), suite, template, LIMITS)
    assert not_passed(outcome.results) == [] and outcome.figures == {}


@pytest.mark.slow
def test_a_timeout_counts_as_a_restart_in_the_stats(tmp_path, suite, template):
    outcome = grade_submission(read_submission(alice_with(tmp_path, "infinite_loop")), suite, template, LIMITS)
    assert any("timed out" in r.message for r in outcome.results if r.hook == "softmax_weights")
    assert outcome.stats.restarts >= 1


# --- hostile submissions: zero on the attacked hook, the rest still passes --------------------------

HOSTILE = [
    # (id, snippet, attacked hook, a phrase every failed cpu case of that hook says)
    ("patch-comparisons", "patch_comparisons", "softmax_weights", "values differ"),
    ("forged-eq", "forged_eq", "softmax_weights", "expected a torch.Tensor"),
    ("tensor-subclass", "tensor_subclass", "softmax_weights", "not a subclass"),
    ("returns-list", "returns_list", "softmax_weights", "returned builtins.list, expected a torch.Tensor"),
    ("returns-numpy", "returns_numpy", "softmax_weights", "returned numpy.ndarray, expected a torch.Tensor"),
    ("returns-none", "returns_none", "softmax_weights", "returned builtins.NoneType, expected a torch.Tensor"),
    ("sys-exit-in-call", "sys_exit_in_call", "softmax_weights", "the process ended"),
    ("os-exit-in-call", "os_exit_in_call", "softmax_weights", "the process ended"),
    ("infinite-loop", "infinite_loop", "softmax_weights", "timed out"),
    ("memory-blowup", "memory_blowup", "softmax_weights", "allocate"),
    ("mutates-input", "mutates_input", "softmax_weights", "modified its input in place"),
    ("banned-torch-softmax", "banned_softmax", "softmax_weights", "uses torch.softmax"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("snippet", "hook", "phrase"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_submission_gets_zero_on_the_hook_it_attacks(grade, suite, rubric, snippet, hook, phrase):
    started = time.monotonic()
    results = grade(snippet)
    assert time.monotonic() - started < 30
    assert len(results) == len(suite.trials), "the run did not complete"
    attacked = of(results, hook, "cpu")
    assert attacked, f"no cpu case of {hook}"
    assert [r.test_name for r in attacked if r.status == PASSED] == []
    assert [r.message for r in attacked if phrase not in r.message] == []
    scores = score(results, rubric)
    assert scores[hook][0] == 0, f"{hook} earned {scores[hook][0]} points"
    others = [r for r in results if r.hook != hook]
    assert not_passed(others) == [], "hooks the submission does not attack must still pass"
    assert all(earned == possible for h, (earned, possible) in scores.items() if h != hook)
    current = (torch.allclose, torch.equal, torch.isclose, torch.testing.assert_close,
               torch.Tensor.allclose, torch.Tensor.equal)
    assert current == TRUSTED_COMPARISONS, "the trusted process's comparison functions changed"


@pytest.mark.slow
def test_exit_at_import_fails_every_case_and_the_run_goes_on(grade, suite):
    results = grade("exit_at_import")
    assert len(results) == len(suite.trials)
    assert statuses(results) == Counter({FAILED: len(suite.trials)})
    assert all("does not import" in r.message and "SystemExit" in r.message for r in results), results[0].message
    assert not_passed(grade(None, "after")) == [], "the next submission graded after it failed"


# --- attention_dropout: what can be checked from outside is checked there -----------------------------------

DROPOUT_LIES = [
    # (id, snippet, the train cases it fails, what each of them says)
    # the training cases also run in float16 and bfloat16 on the CPU
    ("fixed-mask", "dropout_fixed_mask", ("float32", "float64", *HALF), "a generator seeded differently gave the same"),
    ("float64-output", "dropout_float64", ("float32", *HALF), "returned dtype float64, expected {dtype}"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("snippet", "dtypes", "phrase"), [d[1:] for d in DROPOUT_LIES], ids=[d[0] for d in DROPOUT_LIES]
)
def test_dropout_without_a_gold_answer_is_still_checked_from_the_bytes(grade, rubric, snippet, dtypes, phrase):
    results = grade(snippet)
    train = [r for r in of(results, "attention_dropout", "cpu") if r.case.startswith("train-")]
    assert train, "no training case of attention_dropout"
    failing = [r for r in train if r.dtype in dtypes]
    assert failing and all(r.status == FAILED and phrase.format(dtype=r.dtype) in r.message for r in failing), [
        r.message for r in train
    ]
    assert not_passed([r for r in train if r.dtype not in dtypes]) == []
    scores = score(results, rubric)
    assert scores["attention_dropout"][0] < scores["attention_dropout"][1]
    assert not_passed([r for r in results if r.hook != "attention_dropout"]) == []


def test_the_reference_dropout_differs_between_generator_seeds(suite):
    """The check above cannot fail an honest dropout: the reference passes it, and its two masks differ."""
    from grader.instructor.verdict import judge_in_process
    from grader.registry import load_solution

    reference = load_solution("reference")
    train = [t for t in suite.trials if t.hook == "attention_dropout" and t.device == "cpu" and "train-" in t.case.name]
    for trial in train:
        verdict = judge_in_process(reference, trial)
        outputs = verdict.outputs
        # the input, back as it was left, and the gradient pass's VJP w.r.t. the weights
        assert sorted(outputs) == ["grad.weights", "in.weights", "out0", "out1", "out2"]
        assert torch.equal(outputs["out0"], outputs["out1"]) and not torch.equal(outputs["out0"], outputs["out2"])
        assert (verdict.status, verdict.message) == (PASSED, "")


# --- diagnosis runs the catalogue on copies of the inputs ---------------------------------------------------------


@pytest.mark.slow
def test_diagnosis_never_changes_the_suites_inputs():
    suite = build_suite(SEED, ("cpu",))  # a suite of its own: on failure the shared one would stay changed
    trials = [t for t in suite.trials if t.hook == "apply_causal_mask"]
    before = [{k: v.clone() for k, v in t.tensors.items()} for t in trials]
    fingerprints = Fingerprints()
    in_place = [c for c in fingerprints.programs("apply_causal_mask") if "mask-in-place" in c.ids]
    assert in_place, "the catalogue has no mask-in-place mistake"
    seen = [fingerprints.program_seen(cand, t) for cand in in_place for t in trials]
    assert any(s.kind != "pass" for s in seen), "the catalogue's mask-in-place mistake did not run"
    changed = [f"{t.case.name}/{t.dtype}/{k}" for t, old in zip(trials, before) for k in old
               if not torch.equal(t.tensors[k], old[k])]  # fmt: skip
    assert changed == []


# --- devices --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cpu_built_mask_is_reported_as_will_fail_on_a_gpu(grade):
    results = grade("cpu_built_mask")
    assert not_passed(of(results, "apply_causal_mask", "cpu")) == []
    meta = of(results, "apply_causal_mask", "meta")
    assert meta, "no meta case of apply_causal_mask"
    assert all(r.status == FAILED and "will fail on a GPU" in r.message for r in meta), [r.message for r in meta]
    assert not_passed([r for r in results if r.hook != "apply_causal_mask"]) == []


@pytest.mark.slow
def test_cuda_cases_are_skipped_with_the_reason_never_passed(grade):
    cuda_suite = build_suite(SEED, ("cpu", "meta", "cuda"))
    cuda_suite.skipped = {"cuda": "not available"}
    results = grade(None, "alice", suite=cuda_suite)
    cuda = of(results, device="cuda")
    assert cuda, "the suite has no cuda cases"
    assert {"float16", "bfloat16"} <= {r.dtype for r in cuda}
    assert statuses(cuda) == Counter({SKIPPED: len(cuda)})
    assert {r.message for r in cuda} == {"cuda: not available"}
    counts = count_cases(results)
    assert sum(c.skipped for c in counts.values()) == len(cuda)
    assert not_passed(of(results, device="cpu")) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="cuda: not available")
def test_correct_submission_passes_every_cuda_case(grade):
    cuda_suite = build_suite(SEED, ("cpu", "cuda"))
    results = grade(None, "alice", suite=cuda_suite)
    cuda = of(results, device="cuda")
    assert cuda, "the suite has no cuda cases"
    assert {"float16", "bfloat16"} <= {r.dtype for r in cuda}
    assert not_passed(results) == []


# --- cleanup ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_no_learner_process_is_left_behind(grade, template):
    results = grade("spins_and_spawns")  # starts `sleep 300` in its process group, then spins until timed out
    assert any("timed out" in r.message for r in of(results, "dot_product_scores", "cpu"))
    assert template.spawned, "no child was forked"
    deadline = time.monotonic() + 3.0
    left = learner_processes(template)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = learner_processes(template)
    assert left == [], f"learner processes left after grading: {left}"


@pytest.mark.slow
def test_what_each_exercise_printed_comes_back_per_hook(tmp_path, suite, template):
    source = learner_code.alice_with(None) + (
        "\n\nprint('at import')\n_alice_merge = merge_heads\n\n\n"
        "def merge_heads(x):\n    print('merge sees', tuple(x.shape))\n    return _alice_merge(x)\n"
    )
    path = tmp_path / "printer.py"
    path.write_text(source, encoding="utf-8")
    outcome = grade_submission(read_submission(path), suite, template, LIMITS)
    assert not [r for r in outcome.results if r.hook == "merge_heads" and r.status == FAILED]
    printed = outcome.stats.printed
    assert "merge_heads" in printed and "softmax_weights" not in printed, printed.keys()
    assert all("merge sees (" in text for text in printed.values()), "only calls that reach merge_heads print"
    assert outcome.stats.printed["merge_heads"].startswith("merge sees (")
    assert "at import" in outcome.stats.output and "at import" not in outcome.stats.printed["merge_heads"]


def test_the_gpu_child_goes_on_numbering_the_submissions_calls(monkeypatch):
    """Call ids are the submission's, across its CPU and GPU children: the witness's ``banned <id>`` lines name
    them, and a GPU call numbered from 0 again would pin a CPU call's line on it (red team facts4 A9)."""
    from grader.instructor import submission_grading as sg

    seen = []
    monkeypatch.setattr(sg, "_grade_batch", lambda session, batch, verdicts: seen.append(session.calls_sent) or [])
    cpu = sg._Session(None, None, None, 0.0, sg.Stats())
    cpu.calls_sent = 41
    sg._grade_on_gpu(cpu, "0", {3: object()}, None)
    assert seen == [41]


# --- one exercise's loop never costs another exercise its cases ------------------------------------------------

LOOP_CALLERS = {"softmax_weights", "softmax_with_temperature", "make_self_attention", "make_causal_attention",
                "make_multihead_attention"}  # Alice's functions that call her softmax_weights


@pytest.mark.slow
def test_a_loop_in_one_exercise_ends_only_the_exercises_that_call_it(tmp_path, suite, template, rubric):
    head = "def softmax_weights(scores, dim=-1):\n"
    source = learner_code.alice_with(None).replace(head, head + "    while True:\n        pass\n", 1)
    path = tmp_path / "loopy.py"
    path.write_text(source, encoding="utf-8")
    # 1 s per call; the loops' timeouts are given back to the submission's time, and the rest of its trials need a
    # margin on a loaded machine (CI ran out of 12 s once, ending five exercises after the loop)
    outcome = grade_submission(read_submission(path), suite, template, Limits(call_seconds=1, submission_seconds=60))
    scores = score(outcome.results, rubric)
    assert {hook for hook, (earned, possible) in scores.items() if earned < possible} == LOOP_CALLERS
    assert not_passed([r for r in outcome.results if r.hook not in LOOP_CALLERS]) == []
    assert set(timed_out_hooks(outcome.results)) == LOOP_CALLERS
    assert status(outcome.submission, outcome.results) == "timed out: " + ", ".join(
        hook for hook in HOOK_NAMES if hook in LOOP_CALLERS
    )


@pytest.mark.slow
def test_a_class_that_names_its_parameters_otherwise_is_built_in_the_contracts_order(tmp_path, suite, template, rubric):
    source = learner_code.alice_with(None).replace("def make_multihead_attention(", "def _her_maker(", 1)
    source += (
        "\n\nclass MultiHeadAttention(MultiHeadAttention):\n"
        "    def __init__(self, d_in, d_out, context_len, dropout_rate, n_heads, qkv_bias=False):\n"
        "        super().__init__(d_in, d_out, context_len, dropout_rate, n_heads, qkv_bias)\n"
    )
    path = tmp_path / "renamed.py"
    path.write_text(source, encoding="utf-8")
    results = grade_submission(read_submission(path), suite, template, LIMITS).results
    assert of(results, "make_multihead_attention") and not_passed(results) == []


@pytest.mark.slow
def test_a_keep_mask_drawn_with_bernoulli_keeps_every_case_in_the_sandbox(grade):
    """The kernel watch hears aten::bernoulli_ inside torch.bernoulli: drawing a mask is the exercise, not a ban."""
    assert not_passed(of(grade("dropout_bernoulli"), "attention_dropout")) == []


@pytest.mark.slow
def test_what_timeouts_give_back_is_bounded_by_the_submissions_own_time(tmp_path, suite, template):
    """A submission that hangs in every exercise: each timeout is given back, but in all at most its own time."""
    source = learner_code.alice_with(None)
    hang = "(*args, **kwargs):\n    while True:\n        pass\n\n\n"
    for hook in HOOK_NAMES:
        source = source.replace(f"\ndef {hook}(", f"\ndef {hook}{hang}def _{hook}(", 1)
    path = tmp_path / "hangs.py"
    path.write_text(source, encoding="utf-8")
    limits = Limits(call_seconds=0.5, submission_seconds=4)
    started = time.monotonic()
    outcome = grade_submission(read_submission(path), suite, template, limits)
    assert time.monotonic() - started < 2 * limits.submission_seconds + 6  # the loops alone would take over 20 s
    assert [r for r in outcome.results if r.status == PASSED] == []


@pytest.mark.slow
def test_code_that_loops_on_some_inputs_only_is_graded_on_the_others(tmp_path, suite, template):
    head = "def softmax_weights(scores, dim=-1):\n"
    loop = "    while scores.dim() == 4:  # loops on heads' scores only\n        pass\n"
    path = tmp_path / "loops_on_4d.py"
    path.write_text(learner_code.alice_with(None).replace(head, head + loop, 1), encoding="utf-8")
    results = of(grade_submission(read_submission(path), suite, template, LIMITS).results, "softmax_weights", "cpu")
    four_d = {t.case.name for t in suite.trials if t.hook == "softmax_weights" and t.case.args["scores"].dim() == 4}
    failed = {r.case for r in results if r.status != PASSED}
    assert four_d and failed == four_d, (four_d, failed)  # every other case ran, in another learner's process
