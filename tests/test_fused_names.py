"""The parameter-names case names the layout it sees (issue 25): projections under other names, or one fused qkv
Linear sized right.

Fast: no suite is built and nothing is graded.  Each row is the "names" case as the grader reports it (the module's
parameters, how the reference's weights were loaded, the failing check's message id), read with the learner's own
class text; the rules need both.  The end-to-end check on real hand-ins is tests/test_structure_diagnosis.py (slow).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch

from grader.child.modules import map_parameters
from grader.hook_table import CLASS_ALIASES
from grader.instructor.diagnosis import hint
from grader.instructor.learner_source import LearnerSource
from grader.instructor.observations import HookRow, Seen
from grader.instructor.said import said
from grader.instructor.structure_diagnosis import STRUCTURE_IDS, structure_named

SELF, MHA = "make_self_attention", "make_multihead_attention"
D_IN, D_OUT = 5, 12
CJK = re.compile(r"[\u4e00-\u9fff]")

QKV = [(f"W_{r}.weight", (D_OUT, D_IN)) for r in ("query", "key", "value")]
OUT = [("out_proj.weight", (D_OUT, D_OUT)), ("out_proj.bias", (D_OUT,))]


def _trial(contract):
    return SimpleNamespace(
        call={"module": {"state": {name: name for name, _ in contract}}},
        tensors={name: torch.empty(shape) for name, shape in contract},
    )


NAMES = said("names", renamed="…", how="…")


def _names_row(contract, learner, message=NAMES, kind="property"):
    how, _ = map_parameters(learner, contract)
    facts = {"loaded_by": how, "parameters": [{"name": n, "shape": list(s)} for n, s in learner]}
    return HookRow(_trial(contract), Seen(kind, message=message), facts)


def _code(hook, init):
    """A learner's class for ``hook``: ``init`` is its __init__ body (one line a statement)."""
    cls = CLASS_ALIASES[hook]
    body = "\n".join(f"        {line}" for line in init)
    text = f"import torch.nn as nn\n\nclass {cls}(nn.Module):\n    def __init__(self, d_in, d_out):\n{body}\n"
    return LearnerSource({"attn.py": text}).hook_code(hook, cls)


def _named(hook, contract, learner, init, **row):
    named = structure_named(hook, [_names_row(contract, learner, **row)], _code(hook, init))
    return set().union(*named.values(), set())


SHORT = [("W_q.weight", (D_OUT, D_IN)), ("W_k.weight", (D_OUT, D_IN)), ("W_v.weight", (D_OUT, D_IN))]
SHORT_INIT = [f"self.W_{r} = nn.Linear(d_in, d_out, bias=False)" for r in "qkv"]


@pytest.mark.parametrize(
    ("learner", "init"),
    [
        (SHORT, SHORT_INIT),  # by role
        (
            [(f"{r}.weight", (D_OUT, D_IN)) for r in ("query", "key", "value")],
            [f"self.{r} = nn.Linear(d_in, d_out, bias=False)" for r in ("query", "key", "value")],
        ),
        (
            [(f"lin{i}.weight", (D_OUT, D_IN)) for i in range(3)],  # no role in the names: by creation order
            [f"self.lin{i} = nn.Linear(d_in, d_out, bias=False)" for i in range(3)],
        ),
    ],
    ids=["w-q", "query", "lin-i"],
)
def test_projections_the_mapping_tells_apart_under_other_names_are_named(learner, init):
    assert _named(SELF, QKV, learner, init) == {"projections-named-differently"}


def test_the_contracts_names_or_another_case_or_another_message_name_nothing():
    chapter = [f"self.W_{r} = nn.Linear(d_in, d_out, bias=False)" for r in ("query", "key", "value")]
    assert _named(SELF, QKV, QKV, chapter) == set()  # loaded by name: the case passes, nothing to name
    assert _named(SELF, QKV, SHORT, SHORT_INIT, kind="values") == set()
    assert _named(SELF, QKV, SHORT, SHORT_INIT, message=said("mask_buffer.found", buffers="tril")) == set()


def test_names_the_class_text_does_not_show_as_linear_layers_name_nothing():
    params = [f"self.W_{r} = nn.Parameter(torch.rand(d_out, d_in))" for r in "qkv"]
    assert _named(SELF, QKV, SHORT, params) == set()
    assert _named(SELF, QKV, SHORT, SHORT_INIT[:2]) == set()


def test_transposed_weights_under_the_contracts_names_are_not_called_renamed():
    transposed = [(name, (D_IN, D_OUT)) for name, _ in QKV]
    params = [f"self.W_{r} = nn.Parameter(torch.rand(d_in, d_out))" for r in ("query", "key", "value")]
    assert _named(SELF, QKV, transposed, params) == set()


def test_only_the_output_projection_renamed_is_not_the_three_projections():
    learner = [*QKV, ("o_proj.weight", (D_OUT, D_OUT)), ("o_proj.bias", (D_OUT,))]
    init = [f"self.W_{r} = nn.Linear(d_in, d_out, bias=False)" for r in ("query", "key", "value")]
    assert _named(MHA, QKV + OUT, learner, [*init, "self.o_proj = nn.Linear(d_out, d_out)"]) == set()


FUSED_INIT = ["self.qkv = nn.Linear(d_in, 3 * d_out, bias=False)", "self.proj = nn.Linear(d_out, d_out)"]
PROJ = [("proj.weight", (D_OUT, D_OUT)), ("proj.bias", (D_OUT,))]


def test_one_fused_linear_sized_by_d_out_is_named_fused_qkv_projection_only():
    learner = [("qkv.weight", (3 * D_OUT, D_IN)), *PROJ]
    assert map_parameters(learner, QKV + OUT)[0] == "order"
    assert _named(MHA, QKV + OUT, learner, FUSED_INIT) == {"fused-qkv-projection"}


def test_a_fused_weight_needs_the_fused_linear_in_the_text():
    learner = [("qkv.weight", (3 * D_OUT, D_IN)), *PROJ]
    unfused = ["self.qkv = nn.Linear(d_in, d_out + d_out + d_out, bias=False)", FUSED_INIT[1]]
    assert _named(MHA, QKV + OUT, learner, unfused) == set()
    assert _named(MHA, QKV + OUT, learner, FUSED_INIT, kind="values") == set()


def test_a_square_case_cannot_tell_a_fused_linear_sized_by_d_in_from_one_sized_by_d_out():
    square = [(f"W_{r}.weight", (D_IN, D_IN)) for r in ("query", "key", "value")]
    out = [("out_proj.weight", (D_IN, D_IN)), ("out_proj.bias", (D_IN,))]
    learner = [("qkv.weight", (3 * D_IN, D_IN)), ("proj.weight", (D_IN, D_IN)), ("proj.bias", (D_IN,))]
    assert _named(MHA, square + out, learner, FUSED_INIT) == set()


def test_the_two_fused_ids_are_never_named_on_one_module():
    """A module sized by d_in on one case (it cannot load) and, say, by d_out on the names case: the d_in one wins."""
    learner = [("qkv.weight", (3 * D_OUT, D_IN)), *PROJ]
    by_d_in = [("c_attn.weight", (3 * D_IN, D_IN)), ("c_proj.weight", (D_IN, D_IN)), ("c_proj.bias", (D_IN,))]
    unloadable = _names_row(QKV + OUT, by_d_in, message=said("unloadable", mine="…", contract="…"), kind="other")
    assert unloadable.facts["loaded_by"] == "none"
    rows = [_names_row(QKV + OUT, learner), unloadable]
    code = _code(MHA, ["self.c_attn = nn.Linear(d_in, 3 * d_in)", "self.c_proj = nn.Linear(d_in, d_in)",
                       *FUSED_INIT])  # fmt: skip
    named = structure_named(MHA, rows, code)
    assert named == {1: frozenset({"fused-qkv-sized-by-d-in"})}
    assert structure_named(MHA, rows[:1], code) == {0: frozenset({"fused-qkv-projection"})}


def test_the_fused_hint_says_what_the_module_has_and_what_the_contract_expects_asking():
    assert "fused-qkv-projection" in STRUCTURE_IDS
    (_, en), (_, zh) = hint("fused-qkv-projection", "en"), hint("fused-qkv-projection", "zh")
    assert "fused" in en and "contract" in en and "W_query" in en and en.rstrip().endswith("?")
    assert not CJK.search(en) and "约定" in zh and "融合" in zh and zh.rstrip().endswith("？")
