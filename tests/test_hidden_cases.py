"""The hidden suite itself: complete, reproducible from its seed, and passed by the reference."""

from __future__ import annotations

import importlib.util
import inspect
import json
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import pytest
import torch

import solutions
from grader.hook_table import row
from grader.instructor.cases import make_cases
from grader.instructor.suite import build_suite
from grader.instructor.suite_version import suite_version, verdict_modules
from grader.instructor.verdict import PASSED, SKIPPED, judge_in_process
from grader.registry import HOOK_NAMES, adopt, load_solution

KIT = Path(__file__).resolve().parent.parent


def outcomes(solution_spec: str, seed: int) -> Counter:
    solution = load_solution(solution_spec)
    suite = build_suite(seed, ("cpu", "meta"))
    tally: Counter = Counter()
    for trial in suite.trials:
        tally[(trial.hook, judge_in_process(solution, trial).status)] += 1
    return tally


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 12345], ids=["seed0", "seed12345"])
def test_reference_passes_every_hidden_case(seed):
    tally = outcomes("reference", seed)
    assert {status for (_, status) in tally} <= {PASSED, SKIPPED}
    assert sum(n for (_, status), n in tally.items() if status == SKIPPED) == 0


def test_every_hook_has_hidden_cases_with_unique_names():
    cases = make_cases(0)
    per_hook = Counter(c.hook for c in cases)
    assert set(per_hook) == set(HOOK_NAMES)
    assert min(per_hook.values()) >= 5
    names = [(c.hook, c.name) for c in cases]
    assert len(names) == len(set(names))
    assert all(c.what for c in cases), "every case says what it checks, for the feedback"


def test_every_hook_but_a_figure_has_a_meta_case():
    """A figure is drawn from numbers, which the meta device does not hold: a figure hook has no meta case."""
    figures = {hook for hook in HOOK_NAMES if row(hook).output == "figure"}
    assert "plot_attention" in figures
    assert {c.hook for c in make_cases(0) if c.meta} == set(HOOK_NAMES) - figures


def test_inputs_come_from_the_seed():
    def tensors(seed):
        return [v for c in make_cases(seed) for v in c.args.values() if isinstance(v, torch.Tensor)]

    same_a, same_b, other = tensors(3), tensors(3), tensors(4)
    assert all(torch.equal(a, b) for a, b in zip(same_a, same_b, strict=True))
    assert not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(same_a, other, strict=False))


def _sizes(case) -> dict[str, int]:
    """The sizes the coincidence rules speak of, read here from the case's arguments and tensors."""
    args, hook = case.args, case.hook
    if case.module is not None:
        sizes = {"d_in": args["d_in"], "d_out": args["d_out"]}
        if "context_length" in args:
            sizes["context_length"] = args["context_length"]
        if "num_heads" in args:
            sizes["num_heads"] = args["num_heads"]
            if args["d_out"] % args["num_heads"] == 0:
                sizes["head_dim"] = args["d_out"] // args["num_heads"]
        if case.module.forwards:
            sizes["T"] = case.module.forwards[0].shape[-2]
        return sizes
    if hook in ("dot_product_scores", "scaled_dot_product_scores"):
        q, k = args["queries"].shape, args["keys"].shape
        return {"T": q[-2], "T_k": k[-2], "d_k": q[-1]}
    if hook in ("context_vectors", "plot_attention"):
        w = args["weights"].shape
        v = args["values"].shape if "values" in args else None
        return {"T": w[-2], "T_k": w[-1], **({"d_v": v[-1]} if v is not None else {})}
    if hook == "causal_mask":
        return {"T": args["num_tokens"]} if args["num_tokens"] > 0 else {}
    if hook in ("softmax_weights", "softmax_with_temperature"):
        return {"T": args["scores"].shape[args["dim"]]}
    if hook == "split_heads":
        _, t, d = args["x"].shape
        h = args["num_heads"]
        return {"T": t, "num_heads": h, "d_out": d, **({"head_dim": d // h} if d % h == 0 else {})}
    if hook == "merge_heads":
        _, h, t, hd = args["x"].shape
        return {"num_heads": h, "T": t, "head_dim": hd, "d_out": h * hd}
    if hook == "sliding_window_mask":
        t, w = args["num_tokens"], args["window"]
        return {"T": t, "window": w} if t > 0 and w > 0 else {}
    if hook == "chunked_attention":
        q, k, v = args["queries"].shape, args["keys"].shape, args["values"].shape
        return {"T": q[-2], "T_k": k[-2], "d_k": q[-1], "d_v": v[-1], "chunk_size": args["chunk_size"]}
    tensor = args.get("scores", args.get("weights"))  # masks and dropout: the attention matrix's last size
    return {"T": tensor.shape[-1]}


def _coincidences(sizes: dict[str, int]) -> set[str]:
    names = sorted(sizes)
    found = {f"{a}={b}" for i, a in enumerate(names) for b in names[i + 1 :] if sizes[a] == sizes[b]}
    return found | {f"{name}=6" for name in names if sizes[name] == 6}


def _declared(case) -> set[str]:
    return {"=".join(sorted(item.split("="), key=lambda side: (side.isdigit(), side))) for item in case.coincide}


@pytest.mark.parametrize("seed", [0, 99], ids=["seed0", "seed99"])
def test_sizes_never_coincide_but_where_a_case_declares_it(seed):
    """T, T_k, d_k, d_in, d_out, head_dim, num_heads, context_length: pairwise different, none 6, but the
    equalities a case needs (``Case.coincide``); and every declared equality holds (none is stale).

    The chapter's cases; every other group checks its own sizes (``tests/test_patterns_group.py``)."""
    undeclared, stale = [], []
    for case in (c for c in make_cases(seed) if row(c.hook).group == "chapter"):
        found, declared = _coincidences(_sizes(case)), _declared(case)
        undeclared += [f"{case.hook}[{case.name}]: {c}" for c in sorted(found - declared)]
        stale += [f"{case.hook}[{case.name}]: {c}" for c in sorted(declared - found)]
    assert undeclared == [] and stale == []


def test_the_rules_see_a_coincidence():
    """The rule checker above is not blind: it finds T == d_out and a size of 6."""
    assert _coincidences({"T": 5, "d_out": 5, "d_in": 3}) == {"T=d_out"}
    assert _coincidences({"T": 6, "d_in": 3}) == {"T=6"}


def _shapes(case) -> list:
    """Everything about a case but its values: sizes, shapes, dtypes, the other arguments."""
    out = [case.hook, case.name]
    for name, value in case.args.items():
        out.append((name, (tuple(value.shape), value.dtype) if isinstance(value, torch.Tensor) else
                    value if not hasattr(value, "seed") else "generator"))  # fmt: skip
    if case.module is not None:
        out.append([tuple(x.shape) for x in case.module.forwards])
        out.append((case.module.state_seed is None, case.module.init_seed is None, case.module.train))
    return out


def test_shapes_belong_to_the_suite_and_only_values_to_the_seed():
    """Two seeds: the same cases with the same shapes and sizes (so the same points), other values."""
    first, second = make_cases(0), make_cases(31337)
    assert [_shapes(c) for c in first] == [_shapes(c) for c in second]
    tensors = [(a, b) for ca, cb in zip(first, second) for a, b in zip(ca.args.values(), cb.args.values())
               if isinstance(a, torch.Tensor) and a.is_floating_point()]  # fmt: skip
    assert tensors and all(not torch.equal(a, b) for a, b in tensors if a.unique().numel() > 1)  # not all ones
    seeds = [(ca.module.state_seed, cb.module.state_seed) for ca, cb in zip(first, second) if ca.module]
    assert all(a != b for a, b in seeds if a is not None)


@pytest.mark.slow
def test_a_known_mistake_fails_only_its_own_hook():
    frank = str(KIT / "examples" / "submissions" / "frank.py")
    tally = outcomes(frank, 0)
    written = set(load_solution(frank).functions)
    assert {"apply_causal_mask", "plot_attention", "plot_head_grid"} <= written  # every exercise (issue 27)
    failing = {hook for (hook, status), n in tally.items() if status not in (PASSED, SKIPPED) and n}
    assert failing == {"apply_causal_mask"}


@pytest.mark.slow
def test_the_pytest_entry_point_runs_the_hidden_cases():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "grader/instructor/hidden", "-q", "-p", "no:cacheprovider",
         "--solution", "examples/submissions/bob"],
        cwd=KIT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    written = set(load_solution(str(KIT / "examples" / "submissions" / "bob")).functions)
    assert {"softmax_weights", "plot_attention", "plot_head_grid"} <= written  # every exercise (issue 27)
    failed = [ln for ln in done.stdout.splitlines() if ln.startswith("FAILED")]
    assert failed and all("softmax_weights" in ln for ln in failed)  # his one exercise to fix


# --- the suite version ------------------------------------------------------------------------


def reference_copy(tmp_path: Path, monkeypatch, edit=None) -> Path:
    """``solutions.reference`` replaced by a copy of its file (one line edited by ``edit``), imported from tmp_path."""
    text = (KIT / "solutions" / "reference.py").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if edit is not None:
        (index,) = [i for i, line in enumerate(lines) if line.strip() == edit[0]]
        lines[index] = lines[index].replace(edit[0], edit[1])
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "reference.py"
    path.write_text("".join(lines), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("solutions.reference", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "solutions.reference", module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(solutions, "reference", module)
    return path


ONE_LINE = ("d_k = keys.shape[-1]", "d_k = keys.size(-1)")
"""A fix of one line in the reference (the same value, other code)."""


def test_changing_one_line_of_the_reference_changes_the_suite_version(tmp_path, monkeypatch):
    before = suite_version()
    with monkeypatch.context() as mp:
        reference_copy(tmp_path / "same", mp)  # the same source from another file: the same version
        assert suite_version() == before
    with monkeypatch.context() as mp:
        reference_copy(tmp_path / "edited", mp, ONE_LINE)
        changed = suite_version()
    assert changed != before and len(changed) == 12
    assert suite_version() == before


@pytest.mark.parametrize("name", [m.__name__ for m in verdict_modules()], ids=[m.__name__ for m in verdict_modules()])
def test_the_source_of_every_verdict_module_counts(name, monkeypatch):
    before = suite_version()
    real = inspect.getsource

    def one_more_line(obj):
        return real(obj) + ("\n# one more line\n" if obj.__name__ == name else "")

    monkeypatch.setattr(inspect, "getsource", one_more_line)
    assert suite_version() != before


def test_the_verdict_modules_are_the_ones_imported():
    names = [m.__name__ for m in verdict_modules()]
    for needed in ("solutions.reference", "grader.child.call", "grader.child.load", "grader.hook_table",
                   "grader.instructor.cases", "grader.instructor.case_properties", "grader.instructor.groups.chapter",
                   "grader.instructor.suite", "grader.instructor.verdict", "grader.instructor.replies"):  # fmt: skip
        assert needed in names
    assert all(m is sys.modules[m.__name__] for m in verdict_modules())


def test_self_attention_cases_never_speak_of_a_context_length():
    texts = [f"{c.name}: {c.what}" for c in make_cases(0) if c.hook == "make_self_attention"]
    assert texts and [t for t in texts if "context" in t.lower()] == []


@pytest.mark.slow
def test_module_cases_send_parameters_only_never_the_mask():
    """The learner's own mask is the learner's work: no trial carries a buffer of the reference's."""
    suite = build_suite(0, ("cpu",))
    sent = [key for t in suite.trials if t.case.module is not None for key in (t.call["module"]["state"] or {})]
    assert sent and all(key.endswith((".weight", ".bias")) for key in sent), sorted(set(sent))
    assert "mask" not in {key.rsplit(".", 1)[-1] for key in sent}


def _same_types(got, sent) -> bool:
    """Equal values of the same Python types, all the way down (``(1, 2) != [1, 2]`` here)."""
    if type(got) is not type(sent):
        return False
    if isinstance(sent, (tuple, list)):
        return len(got) == len(sent) and all(_same_types(g, s) for g, s in zip(got, sent))
    return got == sent or got != got  # NaN


def test_every_plain_argument_reaches_the_learner_with_the_type_the_contract_states():
    from grader.child.call import _decode_args

    suite = build_suite(0, ("cpu",), gradients=False)
    plain = 0
    for trial in suite.trials:
        for args in [trial.call["args"], *trial.call.get("also", [])]:
            received = _decode_args(json.loads(json.dumps(args)), trial.tensors, "cpu")  # what the learner gets
            for name, value in trial.case.args.items():
                if "value" in args.get(name, {}):
                    plain += 1
                    assert _same_types(received[name], value), (trial.hook, trial.case.name, name)
    assert plain > 100  # the walk saw the plain arguments (tokens as a tuple of two lists among them)
    assert any(isinstance(t.case.args.get("tokens"), tuple) for t in suite.trials)


LIBRARY_RAISES = '''
import math

import numpy as np
import torch


def softmax_with_temperature(scores, temperature, dim=-1):
    root = math.sqrt(temperature)  # math's ValueError for a negative temperature, raised from C
    return torch.softmax(scores / (root * root), dim=dim)


def plot_attention(weights, tokens=None):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.imshow(weights.detach().double().numpy())
    if tokens is not None:
        rows, cols = tokens if len(tokens) == 2 and not isinstance(tokens[0], str) else (tokens, tokens)
        cols = np.asarray(cols).reshape(weights.shape[1])  # NumPy's ValueError where the lengths differ
        ax.set_xticks(range(len(cols)), list(cols))
        ax.set_yticks(range(len(rows)), list(rows))
    return fig
'''


@pytest.mark.slow
def test_a_raise_counts_only_where_the_learners_own_code_raises(tmp_path):
    (tmp_path / "library_raises.py").write_text(LIBRARY_RAISES, encoding="utf-8")
    solution = load_solution(tmp_path / "library_raises.py")
    suite = build_suite(0, ("cpu",), gradients=False)
    raising = [t for t in suite.trials if t.case.expect_error and t.dtype == "float32" and solution.implements(t.hook)]
    verdicts = {(t.hook, t.case.name): judge_in_process(solution, t) for t in raising}
    library = {case for (hook, case), v in verdicts.items() if "raised inside a library it called" in v.message}
    assert {"T=-1-raises", "wrong-token-count-raises"} <= library
    assert all(v.status != PASSED for (_, case), v in verdicts.items() if case in library)
    reference = load_solution("reference")
    assert all(judge_in_process(reference, t).status == PASSED for t in raising)


@pytest.mark.slow
def test_a_dropout_mask_drawn_on_the_cpu_fails_a_training_case_on_meta():
    """d2l's ``dropout_layer`` draws ``torch.rand(X.shape)``: on the CPU whatever the weights' device."""

    def attention_dropout(weights, p, training=True, generator=None):
        if not training or p == 0:
            return weights
        mask = (torch.rand(weights.shape) > p).float()
        return mask * weights / (1 - p)

    cpu_mask = adopt("cpu-mask", "tests", [types.SimpleNamespace(attention_dropout=attention_dropout)])
    reference = load_solution("reference")
    meta = [t for t in build_suite(0, ("meta",), gradients=False).trials if t.hook == "attention_dropout"]
    training = [t for t in meta if t.case.args["training"]]
    assert training and all(judge_in_process(reference, t).status == PASSED for t in meta)
    assert all("will fail on a GPU" in judge_in_process(cpu_mask, t).message for t in training)


@pytest.mark.slow
def test_a_keep_mask_drawn_with_bernoulli_is_the_exercise_and_f_dropout_is_not():
    def attention_dropout(weights, p, training=True, generator=None):
        if not 0 <= p <= 1:
            raise ValueError(f"p must be in [0, 1], got {p}")
        if not training or p == 0:
            return weights
        if p == 1:
            return torch.zeros_like(weights)
        keep = torch.bernoulli(torch.full_like(weights, 1 - p), generator=generator)  # on the weights' device
        return weights * keep / (1 - p)

    def library_dropout(weights, p, training=True, generator=None):
        return torch.nn.functional.dropout(weights, p, training)

    trials = [t for t in build_suite(0, ("cpu", "meta")).trials if t.hook == "attention_dropout"]
    drawn = adopt("bernoulli", "tests", [types.SimpleNamespace(attention_dropout=attention_dropout)])
    assert [t.case.name for t in trials if judge_in_process(drawn, t).status != PASSED] == []
    library = adopt("f-dropout", "tests", [types.SimpleNamespace(attention_dropout=library_dropout)])
    banned = [judge_in_process(library, t).message for t in trials if t.device == "cpu" and t.case.args["training"]]
    assert banned and all("uses" in message and "dropout" in message for message in banned)


@pytest.mark.parametrize("filename", ["<ipython-input-3-0f1e>", "<string>", "cell.py"])
def test_a_raise_is_the_learners_own_in_a_file_a_cell_or_an_exec_and_never_from_inside_a_call(filename, tmp_path):
    from grader.child.gradients import raised_by_learner

    source = """
import math
import numpy as np

def own(t):
    if t <= 0:
        raise ValueError("t <= 0")

def helper(t):
    own(t)

def inside(t):
    return math.sqrt(t) + np.broadcast_to(np.zeros(3), (4,))

def caught(t):
    try:
        inside(t)
    except ValueError:
        raise

def chained(t):
    try:
        inside(t)
    except ValueError as e:
        raise ValueError("mine") from e
"""
    name = str(tmp_path / filename) if filename.endswith(".py") else filename
    namespace: dict = {}
    exec(compile(source, name, "exec"), namespace)
    owned = {}
    for fn in ("own", "helper", "inside", "caught", "chained"):
        with pytest.raises(ValueError) as raised:
            namespace[fn](-1.0)
        owned[fn] = raised_by_learner(raised.value)
    assert owned == {"own": True, "helper": True, "inside": False, "caught": False, "chained": True}


@pytest.mark.slow  # 4.5-6.3 s: every hidden case on the stubs
def test_the_stubs_as_released_earn_no_case():
    """An untouched stub raises NotImplementedError; no hidden case may pass it, not even one that wants any
    exception (``make_multihead_attention``'s indivisible heads: a newcomer's walk found 0.21 points for a stub)."""
    from grader.instructor.suite import build_suite
    from grader.instructor.verdict import PASSED, judge_in_process, trial_id
    from grader.registry import load_solution

    stubs = load_solution("exercises")
    passed = [trial_id(t) for t in build_suite(3, ("cpu",)).trials if judge_in_process(stubs, t).status == PASSED]
    assert passed == [], f"{len(passed)} hidden cases pass the released stubs"
