"""The gradient rule (issue 23): a hook whose values are right but which cannot train loses points on its own hook,
with a message naming the kind of break; a right answer written another way keeps full marks.

The mutants in ``tests/submissions/gradients/`` are none of the catalogue's (:mod:`solutions.gradient_mistakes`):
each breaks a hook's backward another way (``.data``, a fresh leaf, a detached input, inference mode, a frozen
output projection, a hand-written backward that is wrong or raises).  The ``ok_`` snippets are right answers whose
graph differs from the reference's (a detached max, flash attention's running max, ``zeros_like`` at p=1, the
chapter's ``x @ W`` parameters, one stacked qkv Linear).  Judged in-process here (fast), and through the sandbox
(slow) for the wire: the gradient facts and tensors a child sends.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch

from grader.gradients import local_module_problem, local_problem
from grader.instructor.suite import build_suite
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, judge_in_process
from grader.packs import instructor_part
from grader.registry import HOOK_NAMES, adopt
from grader.rules import RuledSolution

SNIPPETS = Path(__file__).resolve().parent / "submissions" / "gradients"
SEED = 20261206

# snippet: (its hook, the message id of every failing case, what the message names, every gradient case fails)
MUTANTS = {
    "cut_scores_data": ("scaled_dot_product_scores", "grad.cut", "`queries`, `keys`", True),
    "merge_fresh_leaf": ("merge_heads", "grad.unreached", "`x`", True),
    "context_values_detached": ("context_vectors", "grad.unreached", "`values`", True),
    "mask_on_detached": ("apply_causal_mask", "grad.cut", "`scores`", True),
    "mha_out_proj_frozen": ("make_multihead_attention", "grad.frozen", "`out_proj.weight`, `out_proj.bias`", True),
    "softmax_backward_doubled": ("softmax_weights", "grad.values", "`scores`", False),  # 2 x 0 is right
    "dropout_backward_raises": ("attention_dropout", "grad.raised", "backward is not written yet", False),
    "dropout_backward_unscaled": ("attention_dropout", "grad.values", "`weights`", False),  # random: own answer
    "causal_inference_mode": ("make_causal_attention", "grad.cut", "`x`", True),
}
RIGHT = ("ok_softmax_max_detached", "ok_chunked_flash_style", "ok_dropout_zeros_at_one", "ok_self_attention_v1",
         "ok_mha_one_qkv_linear")  # fmt: skip


def snippet_solution(name: str):
    """The snippet's hooks over the reference's, in this process (our own code: no sandbox needed)."""
    path = SNIPPETS / f"{name}.py"
    module = types.ModuleType(f"gradient_snippet_{name}")
    module.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)  # noqa: S102 - our snippet
    hooks = {h: getattr(module, h) for h in HOOK_NAMES if callable(getattr(module, h, None))}
    return adopt(name, str(path), [types.SimpleNamespace(**hooks), *instructor_part("REFERENCE")]), set(hooks)


@pytest.fixture(scope="module")
def suite():
    return build_suite(SEED, ("cpu", "meta"))


def verdicts(solution, hooks, suite):
    """The verdicts of the hooks' trials, but the long ones that measure memory (no gradient pass: memory only)."""
    trials = [t for t in suite.trials if t.hook in hooks and not (t.case.measure_memory or t.case.measure_held)]
    return [(t, judge_in_process(solution, t)) for t in trials]


@pytest.mark.parametrize("name", MUTANTS)
def test_a_mutant_that_cannot_train_fails_its_gradient_cases_and_only_those(name, suite):
    hook, message_id, names, every = MUTANTS[name]
    solution, hooks = snippet_solution(name)
    assert hooks == {hook}
    judged = [(t, v) for t, v in verdicts(solution, hooks, suite) if t.device == "cpu"]
    with_pass = [(t, v) for t, v in judged if t.grad_golds]
    assert with_pass, f"{hook} has no gradient case"
    for trial, verdict in judged:
        if not trial.grad_golds:  # its values are right: every case without a gradient pass passes
            assert verdict.status == PASSED, (trial.case.name, verdict.message)
        elif verdict.status != PASSED:
            assert verdict.status == FAILED and verdict.message.id.startswith(message_id), verdict.message
            assert names in str(verdict.message), verdict.message
    failed = [v for _, v in with_pass if v.status == FAILED]
    assert len(failed) == len(with_pass) if every else failed, [str(v.message) for v in failed]


@pytest.mark.parametrize("name", RIGHT)
def test_a_right_answer_with_another_graph_keeps_every_case(name, suite):
    """Every case but the structural ones (other names than the contract's lose the names case, as before)."""
    solution, hooks = snippet_solution(name)
    judged = [(t, v) for t, v in verdicts(solution, hooks, suite) if not t.case.structural]
    assert any(t.grad_golds for t, _ in judged)
    wrong = [(t.case.name, t.device, t.dtype, str(v.message)) for t, v in judged if v.status not in (PASSED, SKIPPED)]
    assert wrong == []


def test_the_catalogues_gradient_mistakes_break_as_described(suite):
    """Each of solutions.gradient_mistakes fails only gradient cases of its hook, with the kind its id names."""
    from solutions.gradient_mistakes import ENTRIES
    from solutions.mistakes import by_id, mistake_solution

    kinds = {"detached": "grad.", "where-nan": "grad.not_finite", "frozen": "grad.frozen", "in-place": "grad.raised"}
    for entry in ENTRIES:
        mistake = by_id(entry[0])
        judged = verdicts(mistake_solution(mistake), set(mistake.overrides), suite)
        failed = [(t, v) for t, v in judged if v.status == FAILED]
        assert failed and all(t.grad_golds for t, _ in failed), mistake.id
        wanted = next((k for word, k in kinds.items() if word in mistake.id), "grad.")
        assert all(v.message.id.startswith(wanted) for _, v in failed), (mistake.id, failed[0][1].message)


def test_the_reference_passes_every_gradient_case_and_has_some_everywhere_it_trains(suite):
    from grader.hook_table import TABLE
    from grader.registry import load_solution

    reference = load_solution("reference")
    with_pass = {t.hook for t in suite.trials if t.grad_golds}
    assert with_pass == {r.hook for r in TABLE if r.gradients}
    for trial in (t for t in suite.trials if t.grad_golds and t.dtype == "float32" and t.device == "cpu"):
        verdict = judge_in_process(reference, trial)  # every trial: tests/test_hidden_cases.py (the audit's too)
        assert verdict.status in (PASSED, SKIPPED), (trial.hook, trial.case.name, verdict.message)


def test_gold_gradients_are_finite_and_a_fully_masked_row_gets_zero(suite):
    masked = [t for t in suite.trials if t.hook == "softmax_weights" and t.case.name == "all-masked-row"]
    assert masked
    for trial in suite.trials:
        for gold in trial.grad_golds.values():
            assert torch.isfinite(gold).all(), (trial.hook, trial.case.name)
    for trial in masked:
        scores, grad = trial.inputs["scores"], trial.grad_golds["grad.scores"]
        dead = torch.isinf(scores).all(dim=-1)
        assert dead.any() and torch.equal(grad[dead], torch.zeros_like(grad[dead]))


def test_a_gradient_pass_that_sends_nothing_fails(suite):
    """A child that leaves the gradient out of its reply (a hostile one) cannot pass: the bytes decide."""
    from grader.registry import load_solution

    trial = next(t for t in suite.trials if t.hook == "softmax_weights" and t.grad_golds and t.device == "cpu")
    verdict = judge_in_process(load_solution("reference"), trial)
    from grader.instructor.verdict import judge

    reply = {k: v for k, v in verdict.reply.items() if k != "gradient"}
    assert judge(trial, reply, verdict.outputs)[1].id == "grad.missing"
    outputs = {k: v for k, v in verdict.outputs.items() if not k.startswith("grad.")}
    assert judge(trial, verdict.reply, outputs)[1].id == "grad.missing"
    lying = dict(verdict.outputs, **{"grad.scores": verdict.outputs["grad.scores"] * 0})
    assert judge(trial, verdict.reply, lying)[1].id == "grad.values"


# --- the local check says the same -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cut_scores_data", "context_values_detached", "softmax_backward_doubled"])
def test_the_local_check_holds_the_structural_rule(name):
    solution, _ = snippet_solution(name)
    ruled = RuledSolution(solution)
    q, k = torch.randn(2, 4, 3), torch.randn(2, 5, 3)
    ruled.scaled_dot_product_scores(q, k)
    ruled.context_vectors(torch.rand(2, 4, 5), torch.randn(2, 5, 3))
    if name == "softmax_backward_doubled":  # no reference locally: a wrong but finite gradient is the grader's
        assert ruled.pending == []
        return
    _, message_id, names, _ = MUTANTS[name]
    assert len(ruled.pending) == 1 and names in ruled.pending[0]
    assert ruled.pending[0].startswith("the gradient does not reach")


def test_the_local_check_leaves_the_random_state_and_generators_alone():
    from grader.registry import load_solution

    reference = load_solution("reference")
    weights = torch.rand(3, 4)
    gen = torch.Generator().manual_seed(5)
    torch.manual_seed(0)
    out = reference.call("attention_dropout", weights=weights, p=0.5, generator=gen)
    after = (torch.get_rng_state(), gen.get_state())
    gen2 = torch.Generator().manual_seed(5)
    torch.manual_seed(0)
    state = gen2.get_state()
    again = reference.call("attention_dropout", weights=weights, p=0.5, generator=gen2)
    call = lambda **kw: reference.call("attention_dropout", **kw)  # noqa: E731
    sent = {"weights": weights, "p": 0.5, "training": True, "generator": gen2}
    assert local_problem("attention_dropout", call, sent, again, {"generator": state}) is None
    assert torch.equal(out, again)
    assert torch.equal(torch.get_rng_state(), after[0]) and torch.equal(gen2.get_state(), after[1])


def test_the_local_check_names_a_frozen_parameter():
    solution, _ = snippet_solution("mha_out_proj_frozen")
    module = solution.call("make_multihead_attention", d_in=4, d_out=6, context_length=5, dropout=0.0, num_heads=2)
    x = torch.randn(2, 5, 4)
    problem = local_module_problem(module, x, module(x))
    assert problem is not None and "`out_proj.weight`, `out_proj.bias`" in problem and "frozen" in problem


# --- through the sandbox ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_mutants_graded_in_a_sandbox_lose_points_on_their_hooks(tmp_path, rubric):
    """Every mutant at once in one learner file, graded by the child: each hook loses points with its message."""
    import re

    import learner_code

    from grader.instructor.handin_reading import read_submission
    from grader.instructor.rubric import score
    from grader.instructor.sandbox import Limits, Template
    from grader.instructor.submission_grading import grade_submission

    mutants = {n: m for n, m in MUTANTS.items() if n != "dropout_backward_unscaled"}  # one mutant per hook
    source = learner_code.alice_with(None)
    for hook, *_ in mutants.values():  # Alice's own stay, renamed, as learner_code.alice_with does for one snippet
        source = re.sub(rf"\b{hook}\b", f"_alice_{hook}", source)
    source += "".join(f"\n\n{(SNIPPETS / f'{n}.py').read_text(encoding='utf-8')}" for n in mutants)
    (tmp_path / "learner.py").write_text(source, encoding="utf-8")
    submission = read_submission(tmp_path / "learner.py")
    template = Template()
    try:
        results = grade_submission(submission, build_suite(SEED, ("cpu",)), template, Limits()).results
    finally:
        template.close()
    scores = score(results, rubric)
    for name, (hook, message_id, _, _) in mutants.items():
        failed = [r for r in results if r.hook == hook and r.status == FAILED]
        assert failed, name
        assert all(r.message.params.get("message", r.message).id.startswith(message_id) for r in failed), name
        assert scores[hook][0] < scores[hook][1], name
    hooks = {hook for hook, *_ in mutants.values()}
    assert all(earned == possible for hook, (earned, possible) in scores.items() if hook not in hooks)


@pytest.mark.parametrize(
    "name, where",
    [
        ("cut_scores_data", "cut_scores_data.py:6 (Tensor.data)"),
        ("context_values_detached", "context_values_detached.py:3 (detach)"),
        ("mask_on_detached", "mask_on_detached.py:10 (detach)"),
    ],
)
def test_a_cut_is_located_on_the_learners_line(name, where, suite):
    """The child finds the learner's line where the graph was cut (the last call that dropped requires_grad)."""
    solution, hooks = snippet_solution(name)
    trial = next(t for t in suite.trials if t.hook in hooks and t.grad_golds and t.device == "cpu")
    verdict = judge_in_process(solution, trial)
    assert verdict.message.id.endswith("_at") and verdict.message.params["where"].endswith(where), verdict.message
