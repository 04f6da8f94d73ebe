"""`attnkit check`: the learner's view of the public cases."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from learner_code import answers_of, reference_source

from grader.check import FAILING, NOT_STARTED, PASSING, run_public_cases
from grader.cli import main
from grader.hook_table import GROUPS
from grader.registry import HOOK_NAMES, load_solution
from grader.rules import RuleBroken, RuledSolution

KIT = Path(__file__).resolve().parent.parent


def test_stubs_are_all_not_started():
    results = run_public_cases("exercises")
    assert [r.exercise for r in results] == list(HOOK_NAMES)
    assert [r.status for r in results] == [NOT_STARTED] * len(HOOK_NAMES)
    assert all(r.passed == 0 and r.not_implemented > 0 for r in results)


def test_cli_on_stubs_lists_every_exercise_not_started_and_exits_non_zero():
    result = CliRunner().invoke(main, ["check"], terminal_width=200)
    assert result.exit_code == 1, result.output
    assert result.output.count("not started") == len(HOOK_NAMES)
    assert "Traceback" not in result.output
    assert f"0 of {len(HOOK_NAMES)} exercises passing" in result.output


@pytest.mark.slow
def test_reference_passes_everything():
    results = run_public_cases("reference")
    assert [r.status for r in results] == [PASSING] * len(HOOK_NAMES)


@pytest.mark.parametrize(
    ("mistake", "exercise", "expected"),
    [
        ("examples/submissions/bob", "softmax_weights", r"case '.*', shape \(\d+(, \d+)*\): expected \["),
        ("examples/submissions/frank.py", "apply_causal_mask", r"size of tensor a \(6\)"),
    ],
    ids=["softmax-dim1", "fixed-size-mask"],
)
def test_a_mistake_shows_its_first_failure_in_one_line(mistake, exercise, expected):
    (result,) = run_public_cases(str(KIT / mistake), [exercise])
    assert result.status == FAILING
    assert "\n" not in result.first_failure
    assert re.search(expected, result.first_failure), result.first_failure


def test_a_learner_syntax_error_is_one_line_not_a_traceback(tmp_path):
    broken = tmp_path / "mine.py"
    broken.write_text("import torch\n\ndef softmax_weights(scores, dim=-1)\n    return scores\n")
    result = CliRunner().invoke(main, ["check", "--solution", str(broken)], terminal_width=200)
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "mine.py:3: SyntaxError" in result.output


def test_unknown_exercise_is_refused():
    result = CliRunner().invoke(main, ["check", "softmax"])
    assert result.exit_code == 2
    assert "softmax_weights" in result.output


@pytest.mark.slow
def test_pasting_the_reference_bodies_makes_check_exit_0(tmp_path):
    """A learner's kit with every stub filled in (here: the reference pasted below each stub)."""
    kit = tmp_path / "kit"
    shutil.copytree(KIT / "exercises", kit / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(KIT / "conftest.py", kit / "conftest.py")
    for stub in GROUPS:
        path = kit / "exercises" / f"{stub}.py"
        path.write_text(path.read_text() + "\n\n# --- my answers ---\n" + answers_of(stub))
    env = dict(os.environ, PYTHONPATH=str(kit))
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "check"], cwd=kit, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(HOOK_NAMES)} of {len(HOOK_NAMES)} exercises passing" in done.stdout
    # and the same kit's own pytest agrees
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "exercises", "--solution", "exercises", "-p", "no:cacheprovider"],
        cwd=kit, env=env, capture_output=True, text=True, timeout=300,
    )
    assert tests.returncode == 0, tests.stdout[-2000:]


# --- the local check holds the grader's rules ----------------------------------------------------------------

RULE_BREAKERS = {
    # id: (hook, the learner's function(s), pasted below the reference, and a phrase of the grader's reason)
    "banned-softmax": (
        "softmax_weights",
        "def softmax_weights(scores, dim=-1):\n    return torch.nan_to_num(torch.softmax(scores, dim=dim), nan=0.0)\n",
        "uses torch.softmax: ",
    ),
    "cpu-mask-in-apply": (
        "apply_causal_mask",
        "def apply_causal_mask(scores):\n    T = scores.shape[-1]\n"
        "    return scores.masked_fill(torch.ones(T, T).triu(1).bool(), float('-inf'))\n",
        "will fail on a GPU: a tensor is built on the CPU",
    ),
    "mask-ignores-device": (
        "causal_mask",
        "def causal_mask(num_tokens, device=None):\n    return torch.ones(num_tokens, num_tokens).triu(1).bool()\n",
        "will fail on a GPU: given inputs on the meta device (shapes without data, the grader's stand-in for a GPU) it "
        "returned a tensor on cpu: make new tensors on that device",
    ),
    "non-contiguous-merge": (
        "merge_heads",
        "def merge_heads(x):\n    b, h, t, hd = x.shape\n"
        "    return x.transpose(1, 2).reshape(b, t, h * hd).mT.contiguous().mT  # right values, column-major\n",
        "merge_heads must return a contiguous tensor",
    ),
    "cpu-mask-in-module": (
        "make_causal_attention",
        "class CausalAttention(nn.Module):\n"
        "    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):\n"
        "        super().__init__()\n"
        "        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.dropout = nn.Dropout(dropout)\n"
        "    def forward(self, x):\n"
        "        T = x.shape[-2]\n"
        "        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)\n"
        "        s = q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5\n"
        "        s = s.masked_fill(torch.ones(T, T).triu(1).bool(), float('-inf'))\n"
        "        return self.dropout(torch.softmax(s, dim=-1)) @ v\n",
        "will fail on a GPU: a tensor is built on the CPU",
    ),
    "full-scores-in-chunked": (
        "chunked_attention",
        "def chunked_attention(queries, keys, values, chunk_size, causal=False):\n"
        "    s = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])  # every score at once\n"
        "    if causal:\n"
        "        tq, tk = s.shape[-2:]\n"
        "        future = torch.ones(tq, tk, dtype=torch.bool, device=s.device).triu(1 + tk - tq)\n"
        "        s = s.masked_fill(future, -math.inf)\n"
        "    w = torch.exp(s - s.amax(-1, keepdim=True).nan_to_num(neginf=0.0))\n"
        "    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)\n"
        "    return sum(w[..., i : i + chunk_size] @ values[..., i : i + chunk_size, :]\n"
        "               for i in range(0, keys.shape[-2], chunk_size))\n",
        "your call held at once as many elements as a whole ",
    ),
    "plot-shows": (
        "plot_attention",
        "def plot_attention(weights, tokens=None):\n"
        "    import matplotlib.pyplot as plt\n"
        "    fig = _reference_plot(weights, tokens)\n"
        "    plt.show()\n"
        "    return fig\n",
        "uses pyplot.show: ",
    ),
}


@pytest.fixture(scope="module")
def hidden_trials():
    from grader.instructor.suite import build_suite

    return build_suite(5, ("cpu", "meta")).trials


def _learner(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "mine.py"
    keep = "_reference_plot = plot_attention  # the reference's, for a learner's plot to build on\n"
    path.write_text(reference_source() + "\n\n" + keep + "\n# --- mine ---\n" + code, encoding="utf-8")
    return path


PLOT_MISTAKES = {
    # id: (the learner's plot_attention, what the check's first failure says)
    "transposed": ("fig = plt.figure(); ax = fig.gca(); fig.colorbar(ax.imshow(w.T), ax=ax)\n"
                   "    ax.set_xlabel('Key positions'); ax.set_ylabel('Query positions')",
                   "the image is the transpose of the weights"),  # the grader's words
    "no-colorbar": ("fig, ax = plt.subplots(); ax.imshow(w)\n"
                    "    ax.set_xlabel('Key positions'); ax.set_ylabel('Query positions')", "colorbar"),
    "returns-axes": ("fig, ax = plt.subplots(); fig.colorbar(ax.imshow(w), ax=ax)\n"
                     "    ax.set_xlabel('Key positions'); ax.set_ylabel('Query positions'); fig = ax",
                     "expected a matplotlib Figure"),
}  # fmt: skip


@pytest.mark.parametrize("mistake", PLOT_MISTAKES, ids=list(PLOT_MISTAKES))
def test_the_check_reads_a_figure_as_the_grader_does(tmp_path, mistake):
    pytest.importorskip("matplotlib", reason="plot_attention needs matplotlib")
    body, phrase = PLOT_MISTAKES[mistake]
    code = (
        "def plot_attention(weights, tokens=None):\n"
        "    import matplotlib.pyplot as plt\n"
        "    if weights.dim() != 2:\n"
        "        raise ValueError('one matrix')\n"
        "    if tokens is not None:\n"
        "        return _reference_plot(weights, tokens)\n"
        "    w = weights.detach().cpu().numpy()\n"
        f"    {body}\n"
        "    return fig\n"
    )
    (result,) = run_public_cases(str(_learner(tmp_path, code)), ["plot_attention"])
    assert result.status == FAILING, result
    assert phrase in result.first_failure, result.first_failure


def test_the_rules_read_a_figure_like_the_verdict():
    """The local check's figure rule (rules.RuledSolution) fails a passing-looking plot on what the grader fails."""
    plt = pytest.importorskip("matplotlib.pyplot", reason="plot_attention needs matplotlib")
    import torch

    from grader.rules import RuledSolution

    class Learner:
        @staticmethod
        def call(hook, weights, tokens=None):
            fig, ax = plt.subplots()
            fig.colorbar(ax.imshow(weights.numpy()), ax=ax)
            ax.set_xlabel("Query positions")
            ax.set_ylabel("Key positions")
            return fig

    ruled = RuledSolution(Learner())
    ruled.plot_attention(torch.rand(3, 5))
    plt.close("all")
    assert ruled.pending == ['the axis labels are swapped: keys go across ("Key positions" on x), queries down (y)']


@pytest.mark.slow
@pytest.mark.parametrize("breaker", RULE_BREAKERS, ids=list(RULE_BREAKERS))
def test_the_check_fails_what_the_grader_fails_with_the_graders_reason(tmp_path, hidden_trials, breaker):
    from grader.instructor.verdict import FAILED, judge_in_process
    from grader.registry import load_solution

    hook, code, phrase = RULE_BREAKERS[breaker]
    path = _learner(tmp_path, code)
    (result,) = run_public_cases(str(path), [hook])
    assert result.status == FAILING, result
    assert "\n" not in result.first_failure
    case, _, reason = result.first_failure.partition(": ")
    assert case.startswith("test_") or case.startswith("case '"), result.first_failure  # it names the case
    assert phrase in reason, result.first_failure
    # the grader, judging the hidden cases of the same code, fails it for the same reason, worded the same
    solution = load_solution(path)
    messages = {judge_in_process(solution, t).message for t in hidden_trials if t.hook == hook}
    failed = [m for m in messages if phrase in m]
    assert failed, messages
    grader_reason = failed[0].split(" (")[0]
    assert reason.split(" (")[0] == grader_reason, (reason, grader_reason)
    assert {judge_in_process(solution, t).status for t in hidden_trials if t.hook == hook} >= {FAILED}


def test_an_in_place_change_fails_the_check(tmp_path):
    code = (
        "def softmax_weights(scores, dim=-1):\n"
        "    scores.sub_(scores.amax(dim=dim, keepdim=True).nan_to_num(neginf=0.0))\n"
        "    e = scores.exp()\n"
        "    return e / e.sum(dim=dim, keepdim=True).clamp_min(1e-30)\n"
    )
    (result,) = run_public_cases(str(_learner(tmp_path, code)), ["softmax_weights"])
    assert result.status == FAILING
    assert "modified in place" in result.first_failure


def test_the_rules_fail_a_test_whose_own_checks_pass(tmp_path):
    """test_merge_heads_literal compares values only: the contiguity rule fails it all the same (every test does)."""
    (result,) = run_public_cases(str(_learner(tmp_path, RULE_BREAKERS["non-contiguous-merge"][1])), ["merge_heads"])
    assert result.passed == 0, result
    assert result.failed == len(result.nodeids) // 3  # setup, call and teardown reports: every test failed
@pytest.mark.slow
def test_the_reference_breaks_no_rule():
    from grader.rules import RuledSolution

    results = run_public_cases("reference")
    assert [r.status for r in results] == [PASSING] * len(HOOK_NAMES), [r.first_failure for r in results]
    assert RuledSolution  # the check above ran under it (run_public_cases wraps every loaded solution)


@pytest.mark.parametrize("hook", HOOK_NAMES, ids=HOOK_NAMES)
def test_the_contiguity_rule_is_the_hidden_cases_one(hook):
    """A hook whose row asks for a contiguous result has the contiguity property on its value cases, and only then."""
    from grader.hook_table import row
    from grader.instructor.case_properties import contiguous
    from grader.instructor.cases import make_cases

    cases = [c for c in make_cases(5) if c.hook == hook and not c.expect_error]
    held = [contiguous in c.properties for c in cases]
    assert held == [row(hook).contiguous_result] * len(cases)


def test_a_wrong_signature_is_failing_signature_with_the_expected_one(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("def softmax_weights(x, axis=-1):\n    return x\n", encoding="utf-8")
    (result,) = run_public_cases(str(path), ["softmax_weights"])
    assert result.status == FAILING
    assert result.first_failure.startswith("signature: "), result.first_failure
    assert "mine.py:1" in result.first_failure and "softmax_weights(scores, dim=-1)" in result.first_failure


def test_an_exception_names_the_case_and_the_learners_line(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("import torch\n\n\ndef context_vectors(weights, values):\n    return weights @ values.T\n")
    (result,) = run_public_cases(str(path), ["context_vectors"])
    assert result.status == FAILING
    assert re.match(r"test_context_vectors\S*: raised RuntimeError: .* \(at .*mine\.py:5\)$", result.first_failure), (
        result.first_failure
    )


def test_group_names_are_accepted_and_a_typo_gets_did_you_mean():
    result = CliRunner().invoke(main, ["check", "softmx"], terminal_width=200)
    assert result.exit_code == 2
    assert "did you mean softmax_weights?" in result.output
    assert len(result.output.splitlines()[-1]) < 120
    groups = CliRunner().invoke(main, ["check", "heads", "--solution", "reference"], terminal_width=200)
    assert groups.exit_code == 0, groups.output
    assert "split_heads" in groups.output and "merge_heads" in groups.output and "softmax_weights" not in groups.output
    assert "2 of 2 exercises passing" in groups.output


@pytest.mark.slow
def test_a_kit_with_one_broken_module_checks_the_others(tmp_path):
    """A SyntaxError in scores.py: its exercises fail with the error in one line, the others still run."""
    kit = tmp_path / "kit"
    shutil.copytree(KIT / "exercises", kit / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(KIT / "conftest.py", kit / "conftest.py")
    scores = kit / "exercises" / "scores.py"
    scores.write_text(scores.read_text().replace("def softmax_weights(scores, dim=-1):", "def softmax_weights(scores)"))
    heads = kit / "exercises" / "heads.py"
    heads.write_text(heads.read_text() + "\n\n" + reference_source(("merge_heads",)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(kit), str(KIT)]), COLUMNS="250")
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "check", "scores", "heads"],
        cwd=kit, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if line.count("│") > 3}
    assert "could not load exercises/scores.py:" in lines["softmax_weights"], done.stdout
    assert "SyntaxError" in lines["softmax_weights"]
    assert "passing" in lines["merge_heads"], done.stdout
    assert "not started" in lines["split_heads"], done.stdout


# --- check --watch, and no NumPy warning ----------------------------------------------------------------------


def _kit_copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    kit = tmp_path / "kit"
    shutil.copytree(KIT / "exercises", kit / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(KIT / "conftest.py", kit / "conftest.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(kit), str(KIT)]), COLUMNS="200")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the stale-bytecode case below needs the .pyc files written
    return kit, env


def test_forget_drops_the_learners_modules_and_their_stale_bytecode(tmp_path, monkeypatch):
    """Two saves within one second that keep the size: Python's .pyc check alone would run the old code."""
    import importlib

    import torch  # noqa: F401 - loaded, as in a watch: it must stay

    from grader.watch import forget

    folder = tmp_path / "mine"
    folder.mkdir()
    module = folder / "watched_helper.py"
    module.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "watched_helper", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert importlib.import_module("watched_helper").X == 1  # compiled, and cached in __pycache__
    first = module.stat()
    module.write_text("X = 2\n")
    os.utime(module, ns=(first.st_atime_ns, first.st_mtime_ns + (1 if first.st_mtime_ns % 10**9 < 10**9 - 1 else -1)))

    del sys.modules["watched_helper"]  # dropping the module alone: the same-second, same-size .pyc is trusted
    importlib.invalidate_caches()
    assert importlib.import_module("watched_helper").X == 1

    for name, loaded in [(k, v) for k, v in sys.modules.items() if k.split(".")[0] == "exercises"]:
        monkeypatch.setitem(sys.modules, name, loaded)  # forget drops the exercises package too: back after the test
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], child):
            monkeypatch.setattr(sys.modules[parent], child, loaded)
    dropped = forget([folder], [str(module)])
    assert [n for n in dropped if n.split(".")[0] != "exercises"] == ["watched_helper"]
    assert "torch" in sys.modules and "grader.check" in sys.modules  # the warm part stays
    assert importlib.import_module("watched_helper").X == 2
    monkeypatch.delitem(sys.modules, "watched_helper")


def test_changed_files_names_saved_added_and_removed_files():
    from grader.watch import changed_files

    before = {"a.py": (1, 10), "b.py": (1, 10), "c.py": (1, 10)}
    after = {"a.py": (1, 10), "b.py": (2, 10), "d.py": (1, 3)}
    assert changed_files(before, after) == ["b.py", "c.py", "d.py"]
    assert changed_files(before, dict(before)) == []


class _Lines:
    """The lines a subprocess prints, read by a thread, waited for by pattern."""

    def __init__(self, stream) -> None:
        import queue
        import threading

        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=lambda: [self._queue.put(line) for line in stream], daemon=True)
        self._reader.start()

    def rest(self) -> str:
        """Every line, once the process has ended (its stream closed)."""
        self._reader.join(10)
        while not self._queue.empty():
            self.seen.append(self._queue.get_nowait())
        return "".join(self.seen)

    def wait_for(self, pattern: str, timeout: float) -> str:
        import queue
        import time

        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                so_far = "".join(self.seen)
                raise AssertionError(f"no line matching {pattern!r} in {timeout} s; so far:\n{so_far}") from None
            self.seen.append(line)
            if re.search(pattern, line):
                return line


@pytest.mark.slow
def test_watch_checks_again_on_every_save_and_stops_cleanly_on_ctrl_c(tmp_path):
    import signal

    kit, env = _kit_copy(tmp_path)
    heads = kit / "exercises" / "heads.py"
    # Ctrl-C's KeyboardInterrupt even where this test runs with SIGINT ignored (a background job's: Python then
    # installs no handler of its own, and the watcher slept on through the signal in a CI run started with `&`)
    ctrl_c = "import signal, grader.cli; signal.signal(signal.SIGINT, signal.default_int_handler); grader.cli.main()"
    watcher = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", ctrl_c, "check", "--watch", "heads"],
        cwd=kit, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        out = _Lines(watcher.stdout)
        err = _Lines(watcher.stderr)  # read all along, so a full pipe never blocks the watcher
        out.wait_for(r"Watching .*exercises", 60)
        out.wait_for(r"^0 of 2 exercises passing\.", 180)  # the first round: both stubs not started

        heads.write_text(heads.read_text() + "\n\n" + reference_source(("merge_heads",)))
        out.wait_for(r"\d\d:\d\d:\d\d exercises/heads\.py changed", 10)
        passing = out.wait_for(r"merge_heads|exercises passing", 60)  # a check takes 3 s here, 13 s loaded
        assert "passing" in passing and "│" in passing, passing
        out.wait_for(r"^1 of 2 exercises passing\.", 10)

        # a second save within the same second, keeping the size: the new code runs, not the cached bytecode
        saved = heads.stat()
        wrong = tmp_path / "heads.py"
        wrong.write_text(heads.read_text().replace("x = x.transpose(1, 2)  #", "x = x.transpose(1, 3)  #"))
        assert wrong.stat().st_size == saved.st_size
        nudge = 1 if saved.st_mtime_ns % 10**9 < 10**9 - 1 else -1
        os.utime(wrong, ns=(saved.st_atime_ns, saved.st_mtime_ns + nudge))
        os.replace(wrong, heads)
        out.wait_for(r"exercises/heads\.py changed", 10)
        failing = out.wait_for(r"merge_heads", 60)
        assert "failing" in failing, failing
        out.wait_for(r"^0 of 2 exercises passing\.", 10)

        watcher.send_signal(signal.SIGINT)
        try:
            code = watcher.wait(timeout=180)  # a loaded 2-core machine: CI runs here took over 30 s, once over 90
        except subprocess.TimeoutExpired:  # where it hangs: faulthandler writes every thread's stack on SIGABRT
            watcher.send_signal(signal.SIGABRT)
            watcher.wait(timeout=30)
            pytest.fail(f"no exit 180 s after Ctrl-C; the watcher's threads:\n{err.rest()[-8000:]}")
        assert code == 0
        out.wait_for(r"^Stopped watching\.", 5)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    errors = err.rest()
    assert "Traceback" not in errors and "Aborted" not in errors, errors
    assert not any("Traceback" in line for line in out.seen), "".join(out.seen)


@pytest.mark.slow
def test_check_prints_no_numpy_warning_where_numpy_is_missing(tmp_path):
    """torch warns "Failed to initialize NumPy" at import without numpy; the learner's kit does not need numpy."""
    fake = tmp_path / "no_numpy" / "numpy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n")
    kit, env = _kit_copy(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), env["PYTHONPATH"]])
    bare = subprocess.run(
        [sys.executable, "-c", "import torch"], cwd=kit, env=env, capture_output=True, text=True, timeout=300
    )
    assert "Failed to initialize NumPy" in bare.stderr, bare.stderr  # the setting does provoke the warning
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "check", "heads"],
        cwd=kit, env=env, capture_output=True, text=True, timeout=300,
    )
    assert "0 of 2 exercises passing" in done.stdout, done.stdout + done.stderr
    assert "NumPy" not in done.stderr + done.stdout, done.stderr


def test_the_local_check_counts_a_raise_only_from_the_learners_own_code(tmp_path):
    (tmp_path / "library_raises.py").write_text(
        "import math\nimport torch\n\n\ndef softmax_with_temperature(scores, temperature, dim=-1):\n"
        "    root = math.sqrt(temperature)  # math's ValueError for a negative temperature\n"
        "    return torch.softmax(scores / (root * root), dim=dim)\n",
        encoding="utf-8",
    )
    ruled = RuledSolution(load_solution(tmp_path / "library_raises.py"))
    with pytest.raises(RuleBroken, match=r"ValueError was raised inside a library your code called \(at .*:6\)"):
        ruled.call("softmax_with_temperature", torch.randn(2, 3), -1.0)
    with pytest.raises(ValueError, match="temperature"):  # the reference's own raise
        RuledSolution(load_solution("reference")).call("softmax_with_temperature", torch.randn(2, 3), -1.0)


@pytest.fixture
def warm_check() -> None:
    """The first check in a process imports torch's and pytest's parts: paid in the setup, not the test's call."""
    run_public_cases("reference", ["merge_heads"])


def test_the_kit_where_check_runs_wins_over_an_importable_exercises(tmp_path, monkeypatch, warm_check):
    """An instructor's checkout installed editable makes its own ``exercises`` importable (this test's process has
    this checkout's): in a kit's folder, ``attnkit check`` checks the kit's, and its title names the folder."""
    import importlib

    kit, _ = _kit_copy(tmp_path)
    (kit / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")  # as a release's: pytest's root is the kit
    heads = kit / "exercises" / "heads.py"
    heads.write_text(heads.read_text() + "\n\n" + reference_source(("merge_heads",)))
    assert importlib.util.find_spec("exercises").submodule_search_locations[0] == str(KIT / "exercises")
    monkeypatch.chdir(kit / "exercises")  # anywhere in the kit
    monkeypatch.setenv("COLUMNS", "400")  # the title on one line
    path, modules = sys.path[:], {k: m for k, m in sys.modules.items() if k.split(".")[0] == "exercises"}
    try:
        result = CliRunner().invoke(main, ["check", "merge_heads"], terminal_width=400)
    finally:  # this process's exercises and public tests as they were: later tests import them
        sys.path[:] = path
        for name in [k for k in sys.modules if k.split(".")[0] == "exercises"]:
            del sys.modules[name]
        sys.modules.update(modules)
        importlib.invalidate_caches()
    assert f"attnkit check — {(kit / 'exercises').resolve()}" in result.output, result.output
    assert "1 of 1 exercise passing" in result.output, result.output  # the kit's merge_heads, not the stub


def test_the_local_check_fails_a_dropout_mask_drawn_on_the_cpu_as_the_grader_does(tmp_path):
    (tmp_path / "cpu_mask.py").write_text(
        "import torch\n\n\ndef attention_dropout(weights, p, training=True, generator=None):\n"
        "    if not training or p == 0:\n        return weights\n"
        "    keep = (torch.rand(weights.shape, generator=generator) > p).float()  # on the CPU, whatever the device\n"
        "    return keep * weights / (1 - p)\n",
        encoding="utf-8",
    )
    ruled = RuledSolution(load_solution(tmp_path / "cpu_mask.py"))
    generator = torch.Generator().manual_seed(3)
    state = generator.get_state()
    ruled.call("attention_dropout", torch.rand(2, 4, 4), 0.5, True, generator)
    assert any("will fail on a GPU" in problem for problem in ruled.pending), ruled.pending
    reference, plain = RuledSolution(load_solution("reference")), load_solution("reference")
    generator.set_state(state)
    ruled_out = reference.call("attention_dropout", torch.ones(2, 4, 4), 0.5, True, generator)
    after_ruled = generator.get_state()
    generator.set_state(state)
    plain_out = plain.call("attention_dropout", torch.ones(2, 4, 4), 0.5, True, generator)
    assert reference.pending == [] and torch.equal(ruled_out, plain_out)  # the meta pass drew from a copy
    assert torch.equal(after_ruled, generator.get_state())


@pytest.mark.slow  # the check names the mistake: its diagnosis builds the hidden cases of the exercise (6 s)
def test_a_chinese_hint_is_folded_in_a_narrow_table_never_cut(tmp_path):
    """Chinese has no spaces to wrap at: the hint's cell folds it over lines, whole, at 80 columns."""
    from solutions.mistakes import by_id

    path = tmp_path / "mask.py"
    path.write_text(
        "import torch\n\n\ndef causal_mask(num_tokens, device=None):\n    if num_tokens < 1:\n"
        "        raise ValueError('at least one token')\n"
        "    return torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device))\n",
        encoding="utf-8",
    )
    args = ["check", "causal_mask", "--solution", str(path), "--lang", "zh"]
    result = CliRunner().invoke(main, args, terminal_width=80, env={"COLUMNS": "80"})  # rich reads COLUMNS
    assert result.exit_code == 1 and "looks like triu-diagonal-0" in result.output, result.output
    cells = "".join(line.split("│")[-2].strip() for line in result.output.splitlines() if line.count("│") == 5)
    assert by_id("triu-diagonal-0").hint_zh in cells and "…" not in result.output, result.output
