"""Review flags: each known evasion construct is found (however it is spelt), and honest learner code never is."""

from __future__ import annotations

import zipfile
from pathlib import Path

import nbformat
import pytest
from learner_code import alice_with, reference_source

from grader.instructor.review_flags import MAX_SCANNED_BYTES, scan_files, scan_source
from grader.notebooks import GROUPS, build_notebook, notebook_to_source

KIT = Path(__file__).resolve().parents[1]
SAMPLE = KIT / "examples" / "submissions"
SNIPPETS = KIT / "tests" / "submissions"
LEARNERS = KIT / "tests" / "learners"  # a corpus of honest learners' work, each with its own mistakes


def constructs(source: str) -> list[str]:
    return sorted({f.construct for f in scan_source(source, "m.py")})


# --- every construct, and the spellings that hide it ------------------------------------------------------

FLAGGED = {
    # torch internals
    "torch._C": ("import torch\nx = torch._C._get_tracing_state\n", "torch._C"),
    "from-torch-import-_C": ("from torch import _C\n", "torch._C"),
    "import-torch._C-as": ("import torch._C as c\n", "torch._C"),
    "private-of-F": (
        "import torch.nn.functional as F\nF._canonical_mask(None)\n", "torch.nn.functional._canonical_mask"
    ),
    "disable": ("import torch\nwith torch._C.DisableTorchFunction():\n    pass\n", "DisableTorchFunction"),
    "disable-subclass": ("from torch._C import DisableTorchFunctionSubclass as D\n", "DisableTorchFunction"),
    "overrides": ("from torch.overrides import TorchFunctionMode\n", "torch.overrides"),
    "jit": ("import torch\n@torch.jit.script\ndef f(x):\n    return x\n", "torch.jit"),
    "torch-dict": ("import torch\ntorch.__dict__['softmax']\n", "torch.__dict__"),
    "cpp-extension": ("from torch.utils.cpp_extension import load_inline\n", "torch.utils.cpp_extension"),
    "torch-library": ("import torch\n@torch.library.custom_op('x::f', mutates_args=())\ndef f(x):\n    pass\n",
                      "torch.library"),
    "load-library": ("import torch\ntorch.ops.load_library('x.so')\n", "torch.ops.load_library"),
    "defines-torch-function": ("class T:\n    def __torch_function__(self, *a):\n        pass\n",
                               "defines __torch_function__"),
    # the interpreter
    "sys.modules": ("import sys\nsys.modules.get('x')\n", "sys.modules"),
    "from-sys-import-modules": ("from sys import modules as m\n", "sys.modules"),
    "main-string": ("d = {}\nd['__main__']\n", '"__main__" as a string'),
    "main-string-built": ("name = '__' + 'main__'\n", '"__main__" as a string'),
    "import-main": ("import __main__\n", "__main__ module"),
    "ctypes": ("import ctypes\n", "ctypes"),
    "cffi": ("from cffi import FFI\n", "ctypes"),
    "gc": ("import gc\ngc.get_objects()\n", "gc.get_objects"),
    "gc-referrers": ("from gc import get_referrers\n", "gc.get_referrers"),
    "getframe": ("import sys\nsys._getframe(1)\n", "frame inspection (sys._getframe)"),
    "inspect-stack": ("import inspect\ninspect.stack()\n", "frame inspection (inspect.stack)"),
    "inspect-outer": ("from inspect import getouterframes\n", "frame inspection (inspect.getouterframes)"),
    "f_back": ("def f(frame):\n    return frame.f_back\n", "frame inspection (f_back)"),
    "f_locals": ("def f(frame):\n    return frame.f_locals\n", "frame inspection (f_locals)"),
    "tb_frame": ("def f(tb):\n    return tb.tb_frame\n", "frame inspection (tb_frame)"),
    "gi_frame": ("def f(g):\n    return g.gi_frame\n", "frame inspection (gi_frame)"),
    "subclasses": ("object.__subclasses__()\n", "__subclasses__"),
    "globals-attr": ("def f(g):\n    return g.__globals__\n", "__globals__"),
    "code-attr": ("def f(g):\n    return g.__code__\n", "__code__"),
    "builtins-name": ("__builtins__['x'] = 1\n", "__builtins__"),
    "settrace": ("import sys\nsys.settrace(None)\n", "sys.settrace"),
    "setprofile-threading": ("import threading\nthreading.setprofile(None)\n", "threading.setprofile"),
    "grader-runtime": ("import grader.child.call\n", "grader.child"),
    "grader-sandbox": ("from grader.instructor import sandbox\n", "grader.instructor.sandbox"),
    # patching
    "assign-torch": ("import torch\ntorch.softmax = len\n", "assignment of torch.softmax"),
    "assign-F": ("import torch.nn.functional as F\nF.softmax = len\n", "assignment of torch.nn.functional.softmax"),
    "assign-nn-unimported": ("nn.Module.state_dict = len\n", "assignment of nn.Module.state_dict"),
    "assign-tensor-method": ("import torch\ntorch.Tensor.__eq__ = len\n", "assignment of torch.Tensor.__eq__"),
    "augassign-torch": ("import torch as t\nt.x += 1\n", "assignment of torch.x"),
    "del-torch": ("import torch\ndel torch.softmax\n", "deletion of torch.softmax"),
    "assign-builtins": ("import builtins\nbuiltins.print = len\n", "assignment of builtins.print"),
    "setattr-torch": ("import torch\nsetattr(torch, 'softmax', len)\n", "assignment of torch.softmax"),
    "setattr-alias": ("import torch\nm = torch.nn\nsetattr(m.Module, 'to', len)\n",
                      "assignment of torch.nn.Module.to"),
    "object-setattr": ("import torch\nobject.__setattr__(torch, 'equal', len)\n", "assignment of torch.equal"),
    "delattr-builtins": ("import builtins\ndelattr(builtins, 'print')\n", "deletion of builtins.print"),
    "vars-torch": ("import torch\nvars(torch)\n", "vars(torch)"),
    # module facts
    "overrides-state-dict": ("from torch import nn\nclass A(nn.Module):\n    def state_dict(self):\n        pass\n",
                             "overrides Module.state_dict"),
    "overrides-named-buffers": ("class A(Base):\n    named_buffers = lambda self: []\n",
                                "overrides Module.named_buffers"),
    "module-internals": ("def f(m):\n    m._buffers['mask'] = None\n", "nn.Module internals (_buffers)"),
    "state-dict-hook": ("def f(m):\n    m.register_state_dict_post_hook(print)\n",
                        "state-dict hook (register_state_dict_post_hook)"),
    # hidden access
    "getattr-string": ("import torch\ngetattr(torch, '_C')\n", "torch._C"),
    "getattr-concat": ("import torch\ngetattr(torch, '_' + 'C')\n", "torch._C"),
    "getattr-computed": (
        "import torch\nname = input()\ngetattr(torch, name)\n", "getattr with a computed name on torch"
    ),
    "getattr-alias": ("import sys\ng = getattr\ng(sys, 'modules')\n", "sys.modules"),
    "builtins-getattr": ("import builtins, sys\nbuiltins.getattr(sys, 'modules')\n", "sys.modules"),
    "import-string": ("s = __import__('sys')\ns.modules\n", "sys.modules"),
    "import-computed": ("__import__(chr(99) + 'types')\n", "__import__ with a computed name"),
    "import-module": ("import importlib\nimportlib.import_module('torch._C')\n", "torch._C"),
    "import-module-from": ("from importlib import import_module as im\nim(x)\n", "__import__ with a computed name"),
    "exec-constant": ("exec('import ctypes')\n", "ctypes"),
    "exec-nested": ("exec(\"exec('import gc; gc.get_objects()')\")\n", "gc.get_objects"),
    "exec-computed": ("exec(open('x').read())\n", "exec of a computed string"),
    "eval-computed": ("eval(input())\n", "eval of a computed string"),
    "compile-computed": ("compile(src, 'x', 'exec')\n", "compile of a computed string"),
    "attrgetter": ("import operator\noperator.attrgetter('f_back')\n", '"f_back" as a string'),
    "string-path": ("import importlib\nNAME = 'torch._C'\n", "torch._C (named in a string)"),
    # a computed name on any object (red team facts3 W1, W2, W5: "__%s__" % "globals" on the runtime's functions)
    "getattr-formatted-dunder": ("def f(fn):\n    return getattr(fn, '__%s__' % 'globals')\n",
                                 "getattr with a computed name that may be private"),
    "getattr-name-variable": ("G = '_' * 2 + 'globals' + '_' * 2\ndef f(fn):\n    return getattr(fn, G)\n",
                              "getattr with a computed name that may be private"),
    "getattr-parameter": ("def f(obj, name):\n    return getattr(obj, name)\n",
                          "getattr with a computed name that may be private"),
    "setattr-format": ("def f(o, v):\n    setattr(o, '{}x'.format('_'), v)\n",
                       "setattr with a computed name that may be private"),
    "getattr-as-value": ("import functools\nfunctools.reduce(getattr, names, obj)\n",
                         "getattr handed on as a value (its name computed elsewhere)"),
    "attrgetter-computed": ("import operator\noperator.attrgetter('_' + x)\n",
                            "operator.attrgetter with a computed name that may be private"),
    # red team 8: private paths read by a string walker, constant or with a computed part
    "private-path-in-a-string": (
        "import operator, torch\noperator.attrgetter('autograd.' + '_disable_profiler')(torch)\n",
        "a path to a private attribute in a string",
    ),
    "get-field-private-path": ("import string, torch\nstring.Formatter().get_field("
                               "'0.utils._python_dispatch._disable_current_modes', (torch,), {})\n",
                               "a path to a private attribute in a string"),
    "get-field-computed": ("import string, torch\nstring.Formatter().get_field(''.join(parts), (torch,), {})\n",
                           "get_field with a computed field name that may be private"),
    "attrgetter-dotted-computed": ("import operator, torch\noperator.attrgetter('utils.' + part)(torch)\n",
                                   "operator.attrgetter with a computed name that may be private"),
    "format-field-private": ("import torch\n'{0.utils._python_dispatch}'.format(torch)\n",
                             "a format field that reads a private attribute"),
    "private-stdlib-module": ("import _thread\n", "private module _thread"),
    "through-torch-sys": ("import torch\ntorch.sys.modules['__ma' + 'in__']\n", "sys.modules"),
    "through-os-sys": ("import os\nm = os.sys\nm.modules\n", "sys.modules"),
    "getattr-parameter-passed-a-dunder": ("def f(o, n):\n    return getattr(o, n)\nf(1, '__' + x)\n",
                                          "getattr with a computed name that may be private"),
    "getattr-parameter-default": ("def f(o, n='_c'):\n    return getattr(o, n)\nf(1)\n",
                                  "getattr with a computed name that may be private"),
    "getattribute-method": ("def f(o, n):\n    return o.__getattribute__(n)\n",
                            "__getattribute__ with a computed name that may be private"),
    # red team facts4: module facts set after the class body, names resolved from one string
    "module-fact-assigned-later": ("class P:\n    pass\nP.state_dict = lambda self: {}\n",
                                   "overrides Module.state_dict"),
    "module-fact-setattr": ("class P:\n    pass\nsetattr(P, 'named_buffers', len)\n",
                            "overrides Module.named_buffers"),
    "module-fact-by-type": ("P = type('P', (object,), {'state_dict': len})\n", "overrides Module.state_dict"),
    # round 5's m2: the name an f-string of constants, or one whose parts the scan follows only in part
    "module-fact-f-string": ("class P:\n    pass\nsetattr(P, f\"named{'_'}buffers\", len)\n",
                             "overrides Module.named_buffers"),
    "module-fact-f-string-name": ("class P:\n    pass\nsep = '_'\nsetattr(P, f'named{sep}buffers', len)\n",
                                  "overrides Module.named_buffers (a computed name that may be it)"),
    "module-fact-f-string-unknown": ("class P:\n    pass\nsetattr(P, f'{kind}_buffers', len)\n",
                                     "overrides Module.named_buffers (a computed name that may be it)"),
    "class-by-type-computed": ("P = type('P', (object,), members)\n",
                               "a class made by type() with members the scan cannot read"),
    "resolve-name-computed": ("import pkgutil\npkgutil.resolve_name('torch:' + chr(95) + 'C')\n",
                              "pkgutil.resolve_name with a computed name"),
    "resolve-name-constant": ("import pkgutil\npkgutil.resolve_name('torch:_C.DisableTorchFunction')\n",
                              "torch._C"),
    # red team 7: members set by computed names in a class body; torch's members listed, one taken by name
    "module-fact-class-vars": ("class P(nn.Module):\n    for k in ('state_' + 'dict',):\n        vars()[k] = len\n",
                               "vars() in a class body (members set by names the scan cannot read)"),
    "module-fact-class-locals": ("class P(nn.Module):\n    locals().update(members)\n",
                                 "locals() in a class body (members set by names the scan cannot read)"),
    "torch-getmembers": ("import inspect\nimport torch\nfound = dict(inspect.getmembers(torch))[name]\n",
                         "getmembers(torch)"),
    "torch-dir": ("import torch\nnames = [n for n in dir(torch) if n.endswith('attention')]\n", "dir(torch)"),
    # red team 12a: a mask made on the CPU unless the input is on the meta device, the grader's stand-in for a GPU
    "meta-attribute": ("def f(s):\n    return torch.ones(3, 3, device=s.device if s.is_meta else 'cpu')\n",
                       "asks whether a tensor is on the meta device (the grader's stand-in for a GPU)"),
    "meta-string": ("def f(s):\n    return s.device.type == 'meta'\n",
                    "asks whether a tensor is on the meta device (the grader's stand-in for a GPU)"),
}


@pytest.mark.parametrize(("source", "construct"), list(FLAGGED.values()), ids=list(FLAGGED))
def test_each_construct_is_flagged(source, construct):
    assert construct in constructs(source), constructs(source)


def test_a_finding_is_file_line_construct():
    source = "import torch\n\n\ndef f(x):\n    with torch._C.DisableTorchFunction():\n        return x\n"
    assert scan_files({"pkg/mod.py": source, "pkg/ok.py": "X = 1\n"}) == [
        "pkg/mod.py:5: DisableTorchFunction",
        "pkg/mod.py:5: torch._C",
    ]


def test_exec_findings_are_reported_at_the_exec_line():
    assert scan_files({"m.py": "X = 1\n\nexec('import ctypes')\n"}) == ["m.py:3: ctypes"]


@pytest.mark.slow
def test_too_much_source_is_flagged_as_not_scanned():
    big = "X = 1\n" * (MAX_SCANNED_BYTES // 6 + 1)
    assert scan_files({"a.py": big}) == ["a.py:1: not scanned (over 4 MB of source in all)"]


def test_too_many_syntax_nodes_are_flagged_as_not_scanned(monkeypatch):
    from grader.instructor import review_flags

    monkeypatch.setattr(review_flags, "MAX_SCANNED_NODES", 50)
    assert scan_files({"a.py": "X = 1\n" * 5, "b.py": "import ctypes\n" + "Y = 2\n" * 30}) == [
        "b.py:1: not scanned (over 50 syntax nodes in all)"
    ]


@pytest.mark.timeout(60)
def test_aliases_that_feed_on_themselves_stay_bounded():
    """``a = a.x1; a = a.x2 …`` doubles what ``a`` may stand for at each line: 30 lines never finished before."""
    source = "import torch as a\n" + "".join(f"a = a.x{i}\n" for i in range(3000)) + "a._C\n"
    found = scan_files({"m.py": source})
    assert "m.py:3002: torch._C" in found and len(found) <= 32


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_the_scan_stops_after_a_hundred_findings():
    source = "import torch as a\nimport torch as b\n" + "".join(f"a = b._x{i}\nb = a._y{i}\n" for i in range(40_000))
    found = scan_files({"m.py": source, "z.py": "import ctypes\n"})
    assert len(found) == 100 and found[0] == "m.py:3: torch._x0" and found[-1].endswith(": more findings, not listed")


def test_code_that_does_not_parse_is_not_flagged_and_absurd_nesting_is():
    assert scan_files({"m.py": "def (:\n"}) == []
    assert scan_files({"m.py": "x = " + "-" * 200_000 + "1\n"})[0].startswith("m.py:1: ")


# --- honest learner code is never flagged ------------------------------------------------------------------

HONEST_IDIOMS = '''
"""My attention exercises.  Not using torch._C or sys.modules, I promise."""
import math
import sys
import gc
import inspect
import traceback
import operator

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.backends.cudnn.deterministic = True
DEBUG = "__main__" == __name__
PROJECTIONS = ("W_query", "W_key", "W_value")


def softmax_weights(scores, dim=-1):
    print("scores", scores.shape, scores.dtype, file=sys.stderr)
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    return shifted.exp() / shifted.exp().sum(dim=dim, keepdim=True)


class Attention(nn.Module):
    def __init__(self, d_in, d_out, context_length):
        super().__init__()
        nn.Module.__init__(self)
        self.W = nn.Linear(d_in, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())
        for i in range(2):
            setattr(self, f"extra{i}", nn.Linear(d_out, d_out))
        for part in ("query", "key"):
            setattr(self, "W_" + part, getattr(self, f"extra{0}"))
        for name in PROJECTIONS:  # red team facts4 A10: names from a tuple of the module's
            setattr(self, name, nn.Linear(d_in, d_out))
        self.layers = [operator.attrgetter("W_" + part)(self) for part in ("query", "key")]
        print("{0.shape} {1:.3f} {2[0]}".format(self.W.weight, 1.0, [f"w_{i}" for i in range(2)]))

    def _heads(self, projection, x):  # red team facts4 A11: the name from the file's own calls
        return getattr(self, projection)(x)
        object.__setattr__(self, "note", "fine")

    def forward(self, x):
        print(f"{self.__class__.__name__}: {type(x).__name__} {x.shape}")
        w = getattr(self, "extra0")
        name = "extra" + str(1)
        layer = getattr(self, name)
        x = self._heads("W_query", x) + self._heads(projection="W_key", x=x)
        return layer(w(F.softmax(self.W(x), dim=-1)))

    def extra_repr(self):
        return "attention"

    print(vars(nn.Linear(2, 2))["in_features"], dir(math)[:1])  # bare in a class body reads; of a module it lists


def helper(fn):
    print(inspect.signature(fn), operator.add(1, 2), math.sqrt(2.0), torch.finfo(torch.float32).tiny)
    try:
        return fn()
    except Exception:
        traceback.print_exc()
        gc.collect()
        sys.exit(1)


if __name__ == "__main__":
    print(helper(lambda: softmax_weights(torch.randn(2, 3))))
'''


def test_honest_idioms_are_not_flagged():
    assert scan_files({"honest.py": HONEST_IDIOMS}) == []


EXPECTED_FLAGS = {
    "examples/submissions/ivan.py": {"assignment of torch.allclose", "assignment of torch.equal",
                                     "assignment of torch.Tensor.allclose", "assignment of torch.Tensor.equal",
                                     "assignment of torch.testing.assert_close"},
    "tests/submissions/patch_comparisons.py": {"assignment of torch.allclose", "assignment of torch.equal",
                                               "assignment of torch.isclose", "assignment of torch.Tensor.allclose",
                                               "assignment of torch.Tensor.equal",
                                               "assignment of torch.testing.assert_close"},
    "tests/submissions/tensor_subclass.py": {"defines __torch_function__"},
    # reads reference.py, as a thief would; grades in the grader's sandbox (graded_snippet)
    "tests/learner_code.py": {"a code file named in a string", "grader.instructor.sandbox"},
}
"""The only learner-style files of the repository that use a construct: each is a cheat on purpose."""


def learner_files() -> dict[str, str]:
    """Every sample-class and learner-style file of the repository, and the sources the tests build from them."""
    files: dict[str, str] = {}
    for root in (SAMPLE, SNIPPETS, LEARNERS, KIT / "exercises", KIT / "solutions"):
        for path in sorted(root.rglob("*.py")):
            files[path.relative_to(KIT).as_posix()] = path.read_text(encoding="utf-8")
    for path in sorted(LEARNERS.rglob("*.ipynb")):  # the learners' own notebooks, as they are graded
        files[path.relative_to(KIT).as_posix()] = notebook_to_source(path.read_text(encoding="utf-8"))
    files["tests/learner_code.py"] = (KIT / "tests" / "learner_code.py").read_text(encoding="utf-8")
    with zipfile.ZipFile(SAMPLE / "carol.zip") as zf:
        for name in zf.namelist():
            if name.endswith(".py"):
                files[f"carol.zip/{name}"] = zf.read(name).decode("utf-8")
    files["reference_source()"] = reference_source()
    for snippet in sorted(p.stem for p in SNIPPETS.glob("*.py")):
        if f"tests/submissions/{snippet}.py" not in EXPECTED_FLAGS:
            files[f"alice_with({snippet})"] = alice_with(snippet)
    for group in GROUPS:
        files[f"notebooks/{group}.ipynb"] = notebook_to_source(nbformat.writes(build_notebook(group)))
    return files


LEARNER_FILES = learner_files()


@pytest.mark.parametrize("name", sorted(LEARNER_FILES), ids=sorted(LEARNER_FILES))
def test_no_honest_file_of_the_repository_is_flagged(name):
    found = {f.construct for f in scan_source(LEARNER_FILES[name], name)}
    assert found == EXPECTED_FLAGS.get(name, set())


def test_the_honest_corpus_is_the_whole_repository():
    """Nothing silently left out: the sample class, the snippets, the kit's exercises, stubs and reference."""
    names = set(LEARNER_FILES)
    assert {"examples/submissions/alice.py", "examples/submissions/bob/modules.py", "carol.zip/carol/layers.py",
            "tests/submissions/banned_softmax.py", "solutions/reference.py", "exercises/scores.py",
            "alice_with(mutates_input)", "notebooks/modules.ipynb"} <= names
    assert len(names) > 50


# --- code the scan cannot read: written and imported, unpickled, in strings -----------------------------------

LIE = "import sys\nsys.modules['__main__'].call_hook = None\n"  # the known in-place lie, in short


@pytest.mark.parametrize(
    "source, construct",
    [
        (f"open('helper.py', 'w').write({LIE!r})\nimport helper\n", "sys.modules (in a string)"),
        (f"open('helper.py', 'w').write({LIE!r})\nimport helper\n", "a code file named in a string"),
        ("import pathlib\npathlib.Path('h' + 'elper.py').write_text(CODE)\n", "a code file named in a string"),
        ("CODE = open('x').read()\nimport helper\n", "imports helper, a module the hand-in does not hold"),
        ("from helper import softmax_weights\n", "imports helper, a module the hand-in does not hold"),
        ("import importlib.util\nspec = importlib.util.spec_from_file_location('m', path)\n",
         "code loaded from a file (importlib.util.spec_from_file_location)"),
        ("from importlib.machinery import SourceFileLoader\n", "code loaded from a file"),
        ("import importlib, m\nimportlib.reload(m)\n", "code loaded from a file (importlib.reload)"),
        ("import runpy\nrunpy.run_path(p)\n", "code loaded from a file (runpy)"),
        ("import sys\nsys.path.insert(0, '/tmp')\n", "sys.path"),
        ("import sys\nsys.meta_path.append(F())\n", "sys.meta_path"),
        ("import pickle\npickle.loads(BLOB)\n", "unpickling (pickle)"),
        ("from pickle import loads\nloads(BLOB)\n", "unpickling (pickle)"),
        ("import pickle as p\np.load(fh)\n", "unpickling (pickle)"),
        ("getattr(__import__('pickle'), 'loads')(BLOB)\n", "unpickling (pickle)"),
        ("import importlib\nimportlib.import_module('pickle').loads(BLOB)\n", "unpickling (pickle)"),
        ("import importlib\nimportlib.import_module('_pickle').loads(BLOB)\n", "unpickling (_pickle)"),
        ("import marshal\nexec(marshal.loads(BLOB))\n", "unpickling (marshal)"),
        ("import shelve\nshelve.open('db')\n", "unpickling (shelve)"),
        ("import torch\ntorch.load(fh)\n", "unpickling (torch.load without weights_only=True)"),
        ("import torch\ntorch.load(fh, weights_only=False)\n", "unpickling (torch.load without weights_only=True)"),
        ("import base64\nexec(base64.b64decode(TEXT))\n", "exec of a computed string"),
        ("import base64\nexec(compile(base64.b64decode(TEXT), 'x', 'exec'))\n", "compile of a computed string"),
        (f"HIDDEN = {LIE!r}\n", "sys.modules (in a string)"),
        ("import _thread\nstart = _thread.start_new_thread.__closure__[0].cell_contents\n", "__closure__"),
    ],
    ids=["written-lie", "written-name", "written-computed-name", "unheld-import", "unheld-from-import",
         "spec-from-file", "source-loader", "reload", "runpy", "sys-path", "meta-path", "pickle-loads",
         "from-pickle", "pickle-alias", "getattr-import", "import-module", "_pickle", "marshal", "shelve",
         "torch-load", "torch-load-unsafe", "base64-exec", "base64-compile", "code-in-a-constant",
         "the-child's-thread-entry-unwrapped"],
)  # fmt: skip
def test_code_the_scan_cannot_read_is_flagged(source, construct):
    found = scan_files({"m.py": source})
    assert any(construct in line for line in found), found


def test_what_the_scan_can_read_is_not_flagged():
    assert scan_files({"m.py": "import torch\nw = torch.load(fh, weights_only=True)\n"}) == []
    assert scan_files({"m.py": "from helper import f\n", "helper.py": "def f():\n    return 1\n"}) == []
    assert scan_files({"m.py": "from pkg.sub import f\n", "pkg/sub.py": "f = 1\n"}) == []
    prose = "MESSAGE = 'walk the keys block by block; keep a = running max'\nNOTE = 'scores = q @ k.T'\n"
    assert scan_files({"m.py": prose}) == []
    assert scan_files({"m.py": "import numpy, matplotlib.pyplot, torch, math, json\n"}) == []
