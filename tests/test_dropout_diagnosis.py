"""Two dropout families of issue 25, named from the outputs and the learner's own lines.

* d2l's ``dropout_layer`` (``(torch.rand(X.shape) > p).float()``): the mask comes from the global RNG, not the
  ``generator`` the hook is given, and is made on the CPU as float32.  The hidden cases see two calls from the same
  generator state disagree, half-precision weights come back float32, and the meta case fail as on a GPU;
  ``dropout-global-rng-cpu-mask`` is named only where the code draws without ``generator=``.
* a dropout that zeroes the caller's weights in place at ``p = 1`` (``weights.zero_()``, ``weights *= 0``): the
  right zeros, the input changed; ``dropout-zeroes-input-in-place`` is named only where the code writes in place.

A correct dropout is named after nothing.  The "learners" here are trusted text of ours, run in this process.
"""

from __future__ import annotations

import ast
import types

import pytest

from grader.instructor import learner_source as src
from grader.instructor.diagnosis import diagnose_hook
from grader.instructor.fingerprints import Fingerprints
from grader.instructor.learner_source import LearnerSource
from grader.instructor.observations import HookRow, observe
from grader.instructor.verdict import judge_in_process
from grader.registry import adopt
from solutions import reference

# each builds the suite and the fingerprints of the catalogue (about a minute): the full tier's
pytestmark = pytest.mark.slow

SEED = 3
D2L = """\
import torch


def attention_dropout(weights, p, training=True, generator=None):
    if p < 0 or p > 1:
        raise ValueError("p")
    if not training or p == 0:
        return weights.clone()
    if p == 1:
        return torch.zeros_like(weights)
    mask = (torch.rand(weights.shape) > p).float()
    return mask * weights / (1.0 - p)
"""
IN_PLACE = """\
import torch


def dropout_scale(weights, keep_mask, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(p)
    if p == 1.0:
        weights *= 0
        return weights
    return weights * keep_mask.to(weights.dtype) / (1.0 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError(p)
    if not training or p == 0.0:
        return weights.clone()
    if p == 1.0:
        return weights.zero_()
    keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p
    return dropout_scale(weights, keep, p)
"""
CORRECT = """\
import torch


def dropout_scale(weights, keep_mask, p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(p)
    if p == 1.0:
        return torch.zeros_like(weights)
    return weights * keep_mask.to(weights.dtype) / (1.0 - p)


def attention_dropout(weights, p, training=True, generator=None):
    if not 0.0 <= p <= 1.0:
        raise ValueError(p)
    if not training or p == 0.0:
        return weights.clone()
    keep = torch.rand(weights.shape, generator=generator, device=weights.device, dtype=weights.dtype) >= p
    return dropout_scale(weights, keep, p)
"""
HOOKS = ("dropout_scale", "attention_dropout")


def _learner(text: str):
    namespace: dict = {}
    exec(compile(text, "learner.py", "exec"), namespace)  # noqa: S102 - our own text, in the test
    functions = {h: namespace[h] for h in HOOKS if h in namespace}
    return adopt("learner", "learner", [types.SimpleNamespace(**functions), reference]), functions


def _source(text: str) -> LearnerSource:
    tree = ast.parse(text)
    places = {n.name: f"learner.py:{n.lineno}" for n in tree.body if isinstance(n, ast.FunctionDef)}
    return LearnerSource({"learner.py": text}, places)


@pytest.fixture(scope="module")
def trials():
    from grader.instructor.suite import build_suite

    suite = build_suite(SEED, ("cpu", "meta")).trials
    return [t for t in suite if t.hook in HOOKS and t.dtype == "float32"]  # float32 (and meta): quick


@pytest.fixture(scope="module")
def fingerprints():
    return Fingerprints()


def _named(text: str, hook: str, trials, fingerprints, source_text: str | None = None) -> set[str]:
    solution, _ = _learner(text)
    rows = []
    for trial in (t for t in trials if t.hook == hook):
        verdict = judge_in_process(solution, trial)
        rows.append(HookRow(trial, observe(trial, verdict.status, verdict.message, verdict.reply, verdict.outputs)))
    found = diagnose_hook(hook, rows, fingerprints, _source(source_text or text))
    return set().union(*found.values()) if found else set()


@pytest.mark.parametrize(
    ("line", "draws"),
    [
        ("mask = (torch.rand(X.shape) > p).float()", True),
        ("mask = torch.bernoulli(torch.full(X.shape, 1 - p))", True),
        ("mask = torch.rand_like(X) >= p", True),
        ("mask = torch.rand(X.shape, generator=generator, device=X.device) >= p", False),
        ("mask = torch.bernoulli(keep, generator=generator)", False),
        ("mask = X >= p", False),
    ],
    ids=["d2l-rand", "bernoulli", "rand-like", "rand-with-generator", "bernoulli-with-generator", "no-draw"],
)
def test_a_draw_without_the_generator_is_read_from_the_code(line, draws):
    assert src.draws_from_global_rng(ast.parse(line)) is draws


def test_d2ls_dropout_layer_is_named_after_its_global_rng_cpu_mask(trials, fingerprints):
    assert _named(D2L, "attention_dropout", trials, fingerprints) == {"dropout-global-rng-cpu-mask"}


def test_the_global_rng_is_named_only_from_code_that_draws_without_the_generator(trials, fingerprints):
    """The same outputs, with a text whose draw passes ``generator=``: no line shows the d2l mask, so it is not named
    (the float32 rows alone also fit a draw from the global RNG on the right device: ``dropout-ignores-generator``)."""
    honest_text = D2L.replace("torch.rand(weights.shape)", "torch.rand(weights.shape, generator=generator)")
    assert "dropout-global-rng-cpu-mask" not in _named(D2L, "attention_dropout", trials, fingerprints, honest_text)


@pytest.mark.parametrize("hook", HOOKS, ids=list(HOOKS))
def test_zeroing_the_input_in_place_at_p_1_is_named(trials, fingerprints, hook):
    assert _named(IN_PLACE, hook, trials, fingerprints) == {"dropout-zeroes-input-in-place"}


def test_the_in_place_write_is_named_only_from_code_that_writes_in_place(trials, fingerprints):
    untouched = IN_PLACE.replace("return weights.zero_()", "return torch.zeros_like(weights)")
    assert _named(IN_PLACE, "attention_dropout", trials, fingerprints, untouched) == set()


@pytest.mark.parametrize("hook", HOOKS, ids=list(HOOKS))
def test_a_correct_dropout_is_named_after_nothing(trials, fingerprints, hook):
    solution, _ = _learner(CORRECT)
    assert all(judge_in_process(solution, t).status != "failed" for t in trials if t.hook == hook)
    assert _named(CORRECT, hook, trials, fingerprints) == set()
