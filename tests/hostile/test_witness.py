"""The witness (``grader.child.witness``): what a learner's code does to its own process, heard where no reply can
take it back.

The invariant: code that reaches the child runtime by a route the review scan cannot read (a code runner, an
unpickled payload, a module written at run time) is flagged ``(while graded)``; honest code never is (the
corpus, in ``tests/test_learner_grading.py``, and the controls here).  And a process that silences the witness
first (closes its pipe, puts another there, fills it) has the event refused, not unheard.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap

import learner_code
import pytest

from grader.instructor.witnessed import FORGED, OVERFLOWED, WHERE, witnessed_findings

PAYLOAD = """
import sys
g = sys.modules["__main__"].serve_template.__globals__
real = g["call_hook"]
def lying(hooks, call, tensors):
    reply, outputs = real(hooks, call, tensors)
    reply["banned"] = []
    return reply, outputs
g["call_hook"] = lying
"""
"""Clears the banned-call list of every reply: ``torch.softmax`` in ``softmax_weights`` would go unseen."""

HIDDEN = base64.b64encode(PAYLOAD.encode()).decode()
BANNED = f"""
import base64
import torch

TEXT = base64.b64decode("{HIDDEN}").decode()


def softmax_weights(scores, dim=-1):
    return torch.softmax(scores, dim=dim)

"""

CLEARS_RECORDERS = """
import torch
from torch.overrides import _get_current_function_mode_stack
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack


def softmax_weights(scores, dim=-1):
    out = torch.softmax(scores, dim=dim)
    for mode in [*_get_current_function_mode_stack(), *_get_current_dispatch_mode_stack()]:
        seen = vars(mode).get("seen")
        if isinstance(seen, list):
            seen.clear()  # every reply would say: no banned call
    return out
"""
"""Clears what both recorders saw after the call: the witness was told of ``torch.softmax`` as it was recorded."""

WITNESS_PIPE = """
import os
import stat

PIPE = next(fd for fd in range(3, 64) if _is_fifo(fd)) if (_is_fifo := lambda fd: (
    os.path.exists(f"/proc/self/fd/{fd}") and stat.S_ISFIFO(os.fstat(fd).st_mode))) else None
"""
FORGES = WITNESS_PIPE + "os.write(PIPE, b'banned 900000000 torch.softmax\\n')\n"
"""A line for a call no child was sent (red team facts4 A8)."""
FLOODS = WITNESS_PIPE + "os.write(PIPE, b''.join(b'banned %d a\\n' % (900000000 + i) for i in range(5000)))\n"
"""More lines than the witness ever writes, so that what it writes next would be cut (facts4 A1)."""

CRASHES_FIRST = """
import os


def dot_product_scores(queries, keys):
    os._exit(3)  # the grader starts another child for the hooks after this one
"""

RUNNERS = {
    # runner -> (how the hand-in runs TEXT, the construct the witness must report)
    "timeit": ("import timeit\ntimeit.timeit(TEXT, number=1)\n", "code made from text at run time (compile)"),
    "interactive": (
        "import code\ncode.InteractiveInterpreter().runsource(TEXT, symbol='exec')\n",
        "code made from text at run time (compile)",
    ),
    "cprofile": ("import cProfile\ncProfile.run(TEXT)\n", "code made from text at run time (compile)"),
    "numpy-pickle": (
        textwrap.dedent(
            """
            import numpy as np


            class Payload:
                def __reduce__(self):
                    return (__builtins__["ex" "ec"] if isinstance(__builtins__, dict) else __builtins__.exec, (TEXT,))


            np.save("weights.npy", np.array([Payload()], dtype=object), allow_pickle=True)
            np.load("weights.npy", allow_pickle=True)
            """
        ),
        "unpickling at run time (pickle.find_class)",
    ),
    "written-module": (
        "import pathlib\npathlib.Path(__file__).with_name('helpers_mod.py').write_text(TEXT)\nimport helpers_mod\n",
        "code made from text at run time (compile)",
    ),
}


@pytest.fixture(scope="module")
def graded_runners(tmp_path_factory):
    """Each runner's hand-in and the honest banned one, graded for real (the cpu cases) in sandboxed children."""
    from grader.instructor.handin_reading import files_sha256
    from grader.instructor.intake_model import Submission
    from grader.instructor.review_flags import scan_files
    from grader.instructor.sandbox import Limits, Template
    from grader.instructor.submission_grading import grade_submission
    from grader.instructor.suite import build_suite

    suite = build_suite(11, ("cpu",))
    graded = {}
    with Template() as template:
        hand_ins = {"honest": BANNED, "reference": learner_code.reference_source(), "clears": CLEARS_RECORDERS,
                    "forges": BANNED + FORGES, "floods": BANNED + FLOODS,
                    "crashes": CRASHES_FIRST + BANNED,
                    "clears-after-crash": CRASHES_FIRST + CLEARS_RECORDERS}  # fmt: skip
        for name, source in {**hand_ins, **{r: BANNED + run for r, (run, _) in RUNNERS.items()}}.items():
            files = {f"{name}.py": source}
            sub = Submission(name, f"{name}.py", "py", files, f"{name}.py", files_sha256(files),
                             review=scan_files(files))  # fmt: skip
            outcome = grade_submission(sub, suite, template, Limits(call_seconds=10))
            softmax = [r for r in outcome.results if r.hook == "softmax_weights"]
            graded[name] = (outcome.submission.review, sum(r.status == "passed" for r in softmax), len(softmax))
            graded[f"{name} messages"] = {r.message for r in softmax}
    return graded


@pytest.mark.slow
@pytest.mark.parametrize(("hand_in", "finding"), [("forges", FORGED), ("floods", OVERFLOWED)])
def test_lines_written_into_the_witness_pipe_are_flagged(graded_runners, hand_in, finding):
    review, passed, _ = graded_runners[hand_in]
    assert f"{WHERE}:0: {finding}" in review, review
    assert passed == 0  # and the banned calls are still caught


def test_a_child_started_after_a_crash_is_heard_for_its_own_calls(graded_runners):
    """The calls a restarted child is sent are its own: its banned lines are neither forged nor lost."""
    review, passed, cases = graded_runners["crashes"]
    assert passed == 0 < cases and not [f for f in review if f.startswith(WHERE)], review
    review, passed, _ = graded_runners["clears-after-crash"]
    assert passed == 0, review
    assert f"{WHERE}:0: a reply that hid the banned calls the witness heard (torch.softmax)" in review, review
    assert f"{WHERE}:0: {FORGED}" not in review, review


def test_a_reply_that_hides_a_banned_call_fails_for_it_and_is_flagged(graded_runners):
    """Whatever clears the recorders' lists (here torch's private stacks; facts3 W1/W2 reached them through
    ``__globals__``), the witness heard each banned call as it was recorded, with its call's id."""
    review, passed, cases = graded_runners["clears"]
    assert passed == 0 < cases
    assert f"{WHERE}:0: a reply that hid the banned calls the witness heard (torch.softmax)" in review, review
    assert all("uses torch.softmax" in m for m in graded_runners["clears messages"])


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_a_lie_run_by_a_runner_the_scan_cannot_read_is_heard(graded_runners, runner):
    review, _, _ = graded_runners[runner]
    heard = [f for f in review if f.startswith(WHERE)]
    assert f"{WHERE}:0: {RUNNERS[runner][1]}" in heard, review


def test_the_reference_is_heard_doing_nothing(graded_runners):
    """Its chunked_attention makes torch import modules it generates from text (``<_remote_module_...>``)."""
    review, passed, cases = graded_runners["reference"]
    assert review == [] and passed == cases > 0


def test_the_honest_banned_call_is_caught_and_not_heard(graded_runners):
    review, passed, cases = graded_runners["honest"]
    assert passed == 0 < cases  # the recorder sees torch.softmax: the rule the payload would lift
    assert not [f for f in review if f.startswith(WHERE)], review


# --- the witness alone, in a fresh interpreter (an audit hook is for the life of its process) -----------------


def run_witnessed(tmp_path, body: str, others: dict[str, str] | None = None):
    """Run ``body`` as a submission's file (beside ``others``, path -> text) under a witness on a pipe; the lines it
    wrote, and the process."""
    submission = tmp_path / "work" / "submission"
    submission.mkdir(parents=True)
    for rel, text in (others or {}).items():
        (submission / rel).parent.mkdir(parents=True, exist_ok=True)
        (submission / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    learner = submission / "hand_in.py"
    learner.write_text(textwrap.dedent(body), encoding="utf-8")
    driver = textwrap.dedent(
        f"""
        import importlib.util, os, sys
        from grader.child.witness import witness
        fd = int(sys.argv[1])
        witness(fd, {str(submission)!r}, {[str(learner), *(str(submission / r) for r in (others or {}))]!r})
        sys.path.insert(0, {str(submission)!r})
        spec = importlib.util.spec_from_file_location("hand_in", {str(learner)!r})
        module = sys.modules["hand_in"] = importlib.util.module_from_spec(spec)  # as the child loads it
        spec.loader.exec_module(module)
        print("survived", getattr(module, "RESULT", None))
        module.__dict__.clear()  # what the hand-in left behind runs now, with none of its frames on the stack
        import gc; gc.collect()
        """
    )
    read, write = os.pipe()
    done = subprocess.run([sys.executable, "-c", driver, str(write)], pass_fds=(write,), capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    os.close(write)
    data = b""
    while part := os.read(read, 65536):
        data += part
    os.close(read)
    return data.decode().splitlines(), done


HONEST = """
import collections, dataclasses, enum, logging, traceback, typing, warnings, inspect
import torch

Pair = collections.namedtuple("Pair", "a b")
class Shape(typing.NamedTuple):
    rows: int
T = typing.TypeVar("T")
Colour = enum.Enum("Colour", "RED GREEN")
@dataclasses.dataclass(frozen=True)
class Config:
    heads: int = 2
logging.getLogger("attn").warning("a note")
warnings.warn("careful")
try:
    raise ValueError("x")
except ValueError:
    traceback.format_exc()
inspect.signature(torch.nn.Linear.__init__)
@dataclasses.dataclass
class Layer:  # round 5's h_dc2 and h_sd: honest dataclasses and string annotations evaluated by typing
    d_in: "int"
    dropout: "float | None" = None
typing.get_type_hints(Layer)
import functools
@functools.singledispatch
def describe(x):
    return "thing"
@describe.register
def _(x: "torch.Tensor"):
    return "tensor"
describe(torch.ones(1))
import fractions, decimal, statistics  # libraries imported now, at the hand-in's top level
torch.nn.MultiheadAttention(4, 2)(torch.ones(1, 3, 4), torch.ones(1, 3, 4), torch.ones(1, 3, 4))
torch.vmap(lambda row: row.exp())(torch.ones(2, 3))  # red team 10's h_vmap: torch.library notes where it is made
RESULT = "ok"
"""


@pytest.mark.slow
def test_honest_code_writes_nothing(tmp_path):
    lines, done = run_witnessed(tmp_path, HONEST)
    assert done.returncode == 0 and "survived ok" in done.stdout, done.stderr
    assert lines == []


REACHES = {
    "import sys\nsys._getframe(0)\n": "reaches-frames sys._getframe",
    "import inspect\ninspect.currentframe()\n": "reaches-frames sys._getframe",
    "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.__traceback__.tb_frame\n": (
        "reaches-frames object.__getattr__"
    ),
    "import gc\ngc.get_objects()\n": "reaches-objects gc.get_objects",
    "import sys\nsys.settrace(None)\n": "traces sys.settrace",
    "import ctypes\nctypes.string_at(id(1), 8)\n": "ctypes ctypes.string_at",
    "def f():\n    pass\nf.__code__ = (lambda: None).__code__\n": "replaces-code object.__setattr__",
    "exec('RESULT = 1')\n": "runs-code compile",
    "import marshal\nmarshal.loads(marshal.dumps(compile('1', 'x', 'eval')))\n": "runs-code marshal.loads",
    # round 3: a loader of the hand-in's own under a library's path, a function of its own named findCaller,
    # code run by a callback once the hand-in's frames are gone
    textwrap.dedent(
        """
        import importlib.abc, importlib.util
        class Loader(importlib.abc.SourceLoader):
            def get_filename(self, name):
                return "/usr/lib/python3/dist-packages/helper.py"
            def get_data(self, path):
                return b"RESULT = 3"
        spec = importlib.util.spec_from_loader("helper", Loader())
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        """
    ): "runs-code compile",
    "import logging\ndef findCaller():\n    return logging.currentframe()\nfindCaller()\n": (
        "reaches-frames sys._getframe"
    ),
    "import weakref\nclass Holder:\n    pass\nHOLDER = Holder()\nweakref.finalize(HOLDER, exec, 'X = 1')\n": (
        "runs-code compile"
    ),
    # red team facts4 A6: typing compiles a string annotation (its own use) and evaluates it (the hand-in's)
    "import typing\ndef holder(f: \"print('run') or int\"):\n    pass\ntyping.get_type_hints(holder)\n": (
        "runs-code exec"
    ),
}


REACHES.update({
    # round 5's f3: code in a dataclass field's name, which dataclasses pastes into __eq__'s source
    textwrap.dedent(
        """
        import dataclasses
        class Sneaky:
            __annotations__ = {"x or print('run') or self.x": int}
        dataclasses.dataclass(Sneaky, init=False, repr=False)
        """
    ): "runs-code compile",
    # round 6's a2: code run by a callable the hand-in left where a library's import runs it (no frame of its own)
    textwrap.dedent(
        """
        import email.mime, functools
        BOX = {}
        class Gone:
            __del__ = functools.partial(exec, "X = 1", BOX)
        email.mime.nonmultipart = Gone()  # importlib replaces it inside email.mime.text's top level
        import email.mime.text
        """
    ): "runs-code compile",
    textwrap.dedent(
        """
        import email.mime, functools, gc
        class Gone:
            __del__ = functools.partial(gc.get_objects)
        email.mime.nonmultipart = Gone()
        import email.mime.text
        """
    ): "reaches-objects gc.get_objects",
})


@pytest.mark.parametrize("body", list(REACHES), ids=[v.replace(" ", "-") for v in REACHES.values()])
def test_each_way_in_is_heard(tmp_path, body):
    lines, done = run_witnessed(tmp_path, body)
    assert done.returncode == 0, done.stderr
    assert REACHES[body] in lines, lines


def test_a_file_of_the_hand_in_named_as_a_library_is_still_the_hand_in(tmp_path):
    """The callers the witness lets be (``torch/library.py``'s ``__init__`` …) are matched by the file's tail: one of
    the hand-in's own files under such a name is the hand-in's, whatever its name."""
    helper = "import sys\n\nclass Library:\n    def __init__(self):\n        self.frame = sys._getframe(1)\n"
    body = "from torch.library import Library\nLibrary()\n"  # the hand-in's own torch/library.py, first on the path
    lines, done = run_witnessed(tmp_path, body, {"torch/__init__.py": "", "torch/library.py": helper})
    assert done.returncode == 0, done.stderr
    assert "reaches-frames sys._getframe" in lines, lines


SILENCED = {
    "closed": "import os\nos.close(FD)\n",
    "replaced": "import os\nr, w = os.pipe()\nos.dup2(w, FD)\n",
    "filled": "import os\nos.set_blocking(FD, False)\ntry:\n    while True:\n        os.write(FD, b'x' * 4096)\n"
              "except BlockingIOError:\n    pass\n",
}


@pytest.mark.parametrize("how", list(SILENCED))
def test_a_silenced_witness_refuses_the_event(tmp_path, how):
    body = "import sys\nFD = int(sys.argv[1])\n" + SILENCED[how] + "exec('RESULT = \"unheard\"')\n"
    lines, done = run_witnessed(tmp_path, body)
    assert done.returncode != 0 and "refused: the grader's witness of this process is gone" in done.stderr
    assert "survived" not in done.stdout


def test_lines_the_witness_does_not_write_are_a_finding_of_their_own():
    assert witnessed_findings(["runs-code compile", "runs-code compile"]) == [
        f"{WHERE}:0: code made from text at run time (compile)"
    ]
    forged = witnessed_findings(["graded fine", "reaches-frames compile", "ctypes ctypes.\u202e", "x" * 5000])
    assert forged == [f"{WHERE}:0: {FORGED}"]


@pytest.mark.slow
def test_what_was_heard_stays_flagged_when_the_grading_is_reused(tmp_path):
    """A second run into the same out folder reuses the recorded grading: the heard finding comes with it."""
    from click.testing import CliRunner

    from grader.cli import main

    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "mallory.py").write_text(BANNED + RUNNERS["timeit"][0], encoding="utf-8")
    out = tmp_path / "out"
    statuses = []
    for _ in range(2):
        args = ["grade", str(klass), "--out", str(out), "--seed", "11", "--devices", "cpu", "--timeout", "10"]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output[-2000:]
        statuses.append((out / "grades.csv").read_text(encoding="utf-8").splitlines()[1].split(",")[1])
    assert statuses == ["review: code made from text at run time (compile)"] * 2


# --- the serve loop holds what it calls (facts3 W1, W5 replaced serve.call_hook in the module's globals) ----------


def test_the_serve_loop_reads_no_global_once_learner_code_may_run():
    """Invariant, by the bytecode: from the line that starts the spawn watch (before the hand-in loads) on,
    ``child_main`` loads no name from its module's globals, only builtins; what it calls was bound before."""
    import builtins
    import dis
    import inspect

    from grader.child import serve

    source, first = inspect.getsourcelines(serve.child_main)
    start = first + next(i for i, line in enumerate(source) if "_watch_spawns()" in line)
    read = {
        ins.argval
        for ins in dis.get_instructions(serve.child_main)
        if ins.opname == "LOAD_GLOBAL" and ins.positions and (ins.positions.lineno or 0) > start
    }
    assert read, "no global read at all: the bytecode walk found nothing to check"  # the walk itself works ...
    assert read <= set(dir(builtins)), sorted(read - set(dir(builtins)))  # ... and sees builtins only


def _globals_read(code) -> set[str]:
    """The global (and builtin) names ``code`` and the code nested in it read when they run."""
    import dis
    import types

    found = {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _globals_read(const)
    return found


@pytest.mark.parametrize("maker", ["witness", "_input_checks"])
def test_the_hook_reads_no_global_once_learner_code_may_run(maker):
    """The invariant behind "everything the hook needs is bound here": a function of the witness's module is
    reachable by code in the process (``tell.__globals__``, without an audited step), so a table or builtin the
    hook looked up at run time (``KINDS``, ``_STDLIB_CALLERS``, ``type``) could be rewritten to silence it."""
    import types

    from grader.child import witness as module

    nested = [c for c in getattr(module, maker).__code__.co_consts if isinstance(c, types.CodeType)]
    assert nested and {c.co_name: _globals_read(c) for c in nested} == {c.co_name: set() for c in nested}
