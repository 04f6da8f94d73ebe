"""Module hooks graded by behaviour, not spelling: parameters mapped onto the learner's layers, the learner's own
mask used, structural cases apart, notes on accepted deviations, and training-mode dropout made observable.

Each variant here is trusted code written for the test (a small change to the reference's class), judged
in-process on the hidden suite's own trials (``judge_in_process``, as the audit does).  The assertions name
the exact set of cases each variant must fail: a structural deviation costs its structural case and nothing
else, a behavioural one costs behaviour cases.
"""

from __future__ import annotations

import math
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from grader.child.modules import map_parameters
from grader.instructor.cases import observable_state, one_hot_tokens
from grader.instructor.suite import build_suite
from grader.instructor.verdict import FAILED, PASSED, judge_in_process
from grader.registry import adopt
from solutions import reference
from solutions.reference import CausalAttention, MultiHeadAttention, causal_mask

SELF, CAUSAL, MHA = "make_self_attention", "make_causal_attention", "make_multihead_attention"
NEG_INF = float("-inf")


@pytest.fixture(scope="module")
def suite():
    return build_suite(4242, ("cpu", "meta"))


def solution_with(**hooks):
    """The reference with ``hooks`` in place of its own."""
    return adopt("variant", "tests/test_module_grading.py", [types.SimpleNamespace(**hooks), reference])


def verdicts(suite, solution, hook):
    """``{(case, device, dtype): InProcessVerdict}`` of every trial of ``hook``."""
    return {
        (t.case.name, t.device, t.dtype): judge_in_process(solution, t) for t in suite.trials if t.hook == hook
    }


def failing(found) -> set[str]:
    return {case for (case, _, _), v in found.items() if v.status == FAILED}


def messages(found, case: str, device: str = "cpu") -> list[str]:
    return [v.message for (name, on, _), v in found.items() if name == case and on == device]


def maker(cls, hook=CAUSAL):
    """The hook function building ``cls`` with the hook's own signature."""
    if hook == SELF:
        return lambda d_in, d_out, qkv_bias=False: cls(d_in, d_out, qkv_bias)
    if hook == CAUSAL:
        return lambda d_in, d_out, context_length, dropout, qkv_bias=False: cls(
            d_in, d_out, context_length, dropout, qkv_bias
        )
    return lambda d_in, d_out, context_length, dropout, num_heads, qkv_bias=False: cls(
        d_in, d_out, context_length, dropout, num_heads, qkv_bias
    )


# --- the mapping rule itself ------------------------------------------------------------------------------

CONTRACT = [("W_query.weight", (4, 3)), ("W_key.weight", (4, 3)), ("W_value.weight", (4, 3))]
BIASED = [(f"{layer}.{kind}", (4, 3) if kind == "weight" else (4,))
          for layer in ("W_query", "W_key", "W_value") for kind in ("weight", "bias")]  # fmt: skip
MHA_CONTRACT = CONTRACT + [("out_proj.weight", (4, 4)), ("out_proj.bias", (4,))]
Q, K, V = "W_query.weight", "W_key.weight", "W_value.weight"
MAPPINGS = {
    # learner's (name, shape) in creation order, the contract, how, [(learner's, contract's, layout)] or None
    "same-names": ([(Q, (4, 3)), (K, (4, 3)), (V, (4, 3))], CONTRACT, "name", [(Q, Q, ""), (K, K, ""), (V, V, "")]),
    "extra-parameter": ([(Q, (4, 3)), (K, (4, 3)), (V, (4, 3)), ("t", (1,))], CONTRACT, "name", None),
    "renamed-roles": ([("w_query.weight", (4, 3)), ("w_key.weight", (4, 3)), ("w_value.weight", (4, 3))], CONTRACT,
                      "role", [("w_query.weight", Q, ""), ("w_key.weight", K, ""), ("w_value.weight", V, "")]),
    "roles-created-key-first": ([("Wk.weight", (4, 3)), ("Wq.weight", (4, 3)), ("Wv.weight", (4, 3))], CONTRACT,
                                "role", [("Wq.weight", Q, ""), ("Wk.weight", K, ""), ("Wv.weight", V, "")]),
    "proj-names-with-out": ([("q_proj.weight", (4, 3)), ("k_proj.weight", (4, 3)), ("v_proj.weight", (4, 3)),
                             ("W_o.weight", (4, 4)), ("W_o.bias", (4,))], MHA_CONTRACT, "role",
                            [("q_proj.weight", Q, ""), ("k_proj.weight", K, ""), ("v_proj.weight", V, ""),
                             ("W_o.weight", "out_proj.weight", ""), ("W_o.bias", "out_proj.bias", "")]),
    "roleless-in-order": ([("a.weight", (4, 3)), ("b.weight", (4, 3)), ("c.weight", (4, 3))], CONTRACT, "order",
                          [("a.weight", Q, ""), ("b.weight", K, ""), ("c.weight", V, "")]),
    "v1-transposed": ([("W_query", (3, 4)), ("W_key", (3, 4)), ("W_value", (3, 4))], CONTRACT, "role",
                      [("W_query", Q, "transposed"), ("W_key", K, "transposed"), ("W_value", V, "transposed")]),
    "stacked-qkv": ([("qkv.weight", (12, 3)), ("proj.weight", (4, 4)), ("proj.bias", (4,))], MHA_CONTRACT, "order",
                    [("qkv.weight", Q, "rows 0:4"), ("qkv.weight", K, "rows 4:8"), ("qkv.weight", V, "rows 8:12"),
                     ("proj.weight", "out_proj.weight", ""), ("proj.bias", "out_proj.bias", "")]),
    "stacked-qkv-with-bias": ([("qkv.weight", (12, 3)), ("qkv.bias", (12,))], BIASED, "order",
                              [("qkv.weight", Q, "rows 0:4"), ("qkv.weight", K, "rows 4:8"),
                               ("qkv.weight", V, "rows 8:12"), ("qkv.bias", "W_query.bias", "rows 0:4"),
                               ("qkv.bias", "W_key.bias", "rows 4:8"), ("qkv.bias", "W_value.bias", "rows 8:12")]),
    "stacked-two-of-three": ([("qk.weight", (8, 3)), ("c.weight", (4, 3))], CONTRACT, "order",
                             [("qk.weight", Q, "rows 0:4"), ("qk.weight", K, "rows 4:8"), ("c.weight", V, "")]),
    "renamed-and-extra": ([("a.weight", (4, 3)), ("b.weight", (4, 3)), ("c.weight", (4, 3)), ("t", (1,))], CONTRACT,
                          "none", []),
    "a-role-twice": ([("q1.weight", (4, 3)), ("q2.weight", (4, 3)), ("k.weight", (4, 3))], CONTRACT, "order", None),
    "a-shape-that-fits-no-way": ([("a.weight", (4, 3)), ("b.weight", (4, 4)), ("c.weight", (4, 3))], CONTRACT,
                                 "none", []),
    "stacked-of-another-size": ([("qkv.weight", (10, 3))], CONTRACT, "none", []),
    "same-name-other-shape": ([(Q, (3, 4)), (K, (4, 3)), (V, (4, 3))], CONTRACT, "role",
                              [(Q, Q, "transposed"), (K, K, ""), (V, V, "")]),
}  # fmt: skip


@pytest.mark.parametrize(("learner", "contract", "how", "pairs"), list(MAPPINGS.values()), ids=list(MAPPINGS))
def test_parameters_map_by_name_else_role_else_creation_order_and_shape(learner, contract, how, pairs):
    found, mapped = map_parameters(learner, contract)
    assert found == how
    if pairs is not None:
        assert mapped == pairs
    if how != "none":  # every contract parameter is loaded exactly once, into a parameter that can hold it
        assert sorted(theirs for _, theirs, _ in mapped) == sorted(name for name, _ in contract)
        assert {mine for mine, _, _ in mapped} <= {name for name, _ in learner}


def test_a_square_weight_is_never_transposed():
    """With d_in == d_out a transposed layout cannot be told from the plain one: the mapping never guesses."""
    how, pairs = map_parameters([("q", (4, 4))], [("W_query.weight", (4, 4))])
    assert (how, pairs) == ("role", [("q", "W_query.weight", "")])


# --- renamed layers, the chapter's v1 parameters, no mapping ---------------------------------------------------


class Renamed(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.w_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.w_query(x), self.w_key(x), self.w_value(x)
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1) @ v


class ChapterV1(nn.Module):
    """The chapter's SelfAttention_v1: (d_in, d_out) parameters used as x @ W, no bias whatever qkv_bias says."""

    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        q, k, v = x @ self.W_query, x @ self.W_key, x @ self.W_value
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1) @ v


class RenamedWithExtra(Renamed):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__(d_in, d_out, qkv_bias)
        self.temperature = nn.Parameter(torch.ones(()))


class KeyFirstRoles(nn.Module):
    """Correct, with layers named by role but created key first: the roles decide, not the order."""

    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.Wk = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.Wq = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.Wv = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q, k, v = self.Wq(x), self.Wk(x), self.Wv(x)
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1) @ v


class Roleless(nn.Module):
    """Layers whose names say nothing (a, b, c) plus an extra parameter: no mapping can be told."""

    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.a = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.b = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.c = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.temperature = nn.Parameter(torch.ones(()))

    def forward(self, x):
        q, k, v = self.a(x), self.b(x), self.c(x)
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]) / self.temperature, dim=-1) @ v


class StackedQKV(nn.Module):
    """The chapter's multi-head attention with query, key and value in one nn.Linear(d_in, 3 * d_out)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads})")
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        b, T, _ = x.shape
        qkv = self.qkv(x).view(b, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)  # (3, b, H, T, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.mask[:T, :T], -torch.inf)
        w = self.dropout(torch.softmax(scores / self.head_dim**0.5, dim=-1))
        return self.proj((w @ v).transpose(1, 2).reshape(b, T, -1))


@pytest.mark.slow
def test_renamed_layers_lose_only_the_names_case(suite):
    found = verdicts(suite, solution_with(make_self_attention=maker(Renamed, SELF)), SELF)
    assert failing(found) == {"names"}
    (message,) = messages(found, "names")
    for mine, theirs in (("w_query", "W_query"), ("w_key", "W_key"), ("w_value", "W_value")):
        assert f"{mine}.weight → {theirs}.weight" in message


def test_the_chapters_v1_parameters_are_loaded_transposed(suite):
    found = verdicts(suite, solution_with(make_self_attention=maker(ChapterV1, SELF)), SELF)
    # names: not the contract's; init-seed: torch.rand, not nn.Linear; qkv-bias: no biases, so no mapping
    assert failing(found) == {"names", "init-seed", "qkv-bias"}
    assert "W_query → W_query.weight (transposed)" in messages(found, "names")[0]
    assert all("W_query (4, 10)" in m and "W_query.bias (10,)" in m for m in messages(found, "qkv-bias"))


def test_renamed_layers_with_an_extra_parameter_are_mapped_by_role(suite):
    found = verdicts(suite, solution_with(make_self_attention=maker(RenamedWithExtra, SELF)), SELF)
    assert failing(found) == {"names"}
    assert "w_key.weight → W_key.weight" in messages(found, "names")[0]


def test_roles_decide_over_creation_order(suite):
    """Wk, Wq, Wv created key first: by order the query's weight would go into Wk (a wrong mapping)."""
    found = verdicts(suite, solution_with(make_self_attention=maker(KeyFirstRoles, SELF)), SELF)
    assert failing(found) == {"names", "init-seed"}
    (message,) = messages(found, "names")
    assert "Wq.weight → W_query.weight" in message and "Wk.weight → W_key.weight" in message
    assert "by the roles your names give them" in message


def test_a_stacked_qkv_layer_is_loaded_block_by_block(suite):
    found = verdicts(suite, solution_with(make_multihead_attention=maker(StackedQKV, MHA)), MHA)
    assert failing(found) == {"names"}
    (message,) = messages(found, "names")
    assert "qkv.weight → W_key.weight (rows " in message and "proj.weight → out_proj.weight" in message


def test_where_no_mapping_exists_every_behaviour_case_says_so(suite):
    found = verdicts(suite, solution_with(make_self_attention=maker(Roleless, SELF)), SELF)
    behaviour = {case for (case, device, _) in found if device == "cpu" and case not in ("names", "init-seed")}
    assert behaviour <= failing(found)
    assert "its parameters are temperature (), a.weight (12, 5)" in messages(found, "reference-weights")[0]
    for case in behaviour:
        for message in messages(found, case):
            assert "cannot be loaded into your module" in message and "temperature ()" in message, message
            assert "c.weight (" in message and "the contract's are W_query.weight (" in message


# --- the learner's own mask, buffers, extras -----------------------------------------------------------------


class MaskInForward(CausalAttention):
    """No buffer: the mask is built in forward on x's device (correct, GPU-safe)."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        nn.Module.__init__(self)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = dropout

    def forward(self, x):
        t = x.shape[-2]
        self.mask = causal_mask(t, device=x.device)  # a plain attribute, rebuilt every call
        return super().forward(x)


class OwnDiagonalMask(CausalAttention):
    """The learner's own buffer is wrong (triu with diagonal 0): every behaviour case must see it."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        self.mask = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool))


class WithExtras(CausalAttention):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        self.register_buffer("inv_sqrt_dk", torch.tensor(1.0))  # unused
        self.gain = nn.Parameter(torch.ones(()))

    def forward(self, x):
        return super().forward(x) * self.gain


def test_a_mask_built_in_forward_on_the_inputs_device_loses_only_the_buffer_case(suite):
    found = verdicts(suite, solution_with(make_causal_attention=maker(MaskInForward)), CAUSAL)
    assert failing(found) == {"mask-buffer"}
    (message,) = messages(found, "mask-buffer")
    assert "no buffer named `mask`" in message and "register_buffer('mask'" in message


def test_the_learners_own_mask_is_used(suite):
    found = verdicts(suite, solution_with(make_causal_attention=maker(OwnDiagonalMask)), CAUSAL)
    assert {"reference-weights", "T=context", "causality", "random-0", "init-seed"} <= failing(found)
    assert "names" not in failing(found) and "mask-buffer" not in failing(found)


class MaskNamedOtherwise(CausalAttention):
    """The mask as a buffer, under another name: the buffer case asks for `mask`; no note calls it a fine extra."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        self.register_buffer("causal_mask", self.mask)
        del self.mask

    def forward(self, x):
        self.mask = self.causal_mask
        return super().forward(x)


def test_a_mask_buffer_under_another_name_is_named_once_and_never_called_fine(suite):
    found = verdicts(suite, solution_with(make_causal_attention=maker(MaskNamedOtherwise)), CAUSAL)
    assert failing(found) == {"mask-buffer"}
    (message,) = messages(found, "mask-buffer")
    assert "no buffer named `mask` (your module's buffers: causal_mask)" in message
    assert not any("fine, noted" in v.note for v in found.values())


def test_extra_buffers_and_parameters_are_a_note_never_a_failure(suite):
    found = verdicts(suite, solution_with(make_causal_attention=maker(WithExtras)), CAUSAL)
    assert failing(found) == set()
    (names,) = [v for (case, _, _), v in found.items() if case == "names"]
    assert names.status == PASSED
    assert "extra buffer inv_sqrt_dk: fine, noted" in names.note and "gain ()" in names.note
    assert all(not v.note for (case, _, _), v in found.items() if case != "names")


# --- loading: nothing is silently left unloaded, errors are shown whole ------------------------------------------


class IgnoresWeights(CausalAttention):
    def load_state_dict(self, state_dict, strict=True, assign=False):  # loads nothing, reports nothing missing
        return types.SimpleNamespace(missing_keys=[], unexpected_keys=[])


class LoudLoader(CausalAttention):
    def load_state_dict(self, state_dict, strict=True, assign=False):
        raise RuntimeError("Error(s) in loading state_dict:\n\tfirst key is wrong\n\tsecond key is wrong")


def test_weights_that_did_not_load_fail_the_case_naming_them(suite):
    found = verdicts(suite, solution_with(make_causal_attention=maker(IgnoresWeights)), CAUSAL)
    for message in messages(found, "reference-weights"):
        assert "did not load the reference's weights into W_query.weight, W_key.weight, W_value.weight" in message


def test_a_load_state_dict_error_is_shown_whole(suite):
    found = verdicts(suite, solution_with(make_causal_attention=maker(LoudLoader)), CAUSAL)
    for message in messages(found, "reference-weights"):
        assert "first key is wrong" in message and "second key is wrong" in message, message


# --- the chapter's assert ------------------------------------------------------------------------------------


class Asserts(MultiHeadAttention):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        assert d_out % num_heads == 0, "whatever the message says"
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


class NeverChecks(MultiHeadAttention):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        nn.Module.__init__(self)
        self.num_heads = num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = dropout
        self.register_buffer("mask", causal_mask(context_length))


def test_the_chapters_assert_passes_with_a_note(suite):
    found = verdicts(suite, solution_with(make_multihead_attention=maker(Asserts, MHA)), MHA)
    assert failing(found) == set()
    raising = [v for (case, _, _), v in found.items() if case == "indivisible-raises"]
    assert raising and all(v.status == PASSED for v in raising)
    assert all("AssertionError" in v.note and "ValueError" in v.note and "python -O" in v.note for v in raising)


@pytest.mark.slow
def test_value_error_gets_no_note_and_no_error_fails(suite):
    plain = verdicts(suite, solution_with(), MHA)
    assert failing(plain) == set() and all(not v.note for v in plain.values())
    unchecked = verdicts(suite, solution_with(make_multihead_attention=maker(NeverChecks, MHA)), MHA)
    assert failing(unchecked) == {"indivisible-raises"}
    assert all("returned normally" in m for m in messages(unchecked, "indivisible-raises"))


# --- training mode: dropout on the attention weights ------------------------------------------------------------


def _drop(w, p, how, training):
    """The attention weights after one of the ways learners write (or miswrite) dropout."""
    if how == "always":
        return F.dropout(w, p, training=True)
    if not training or how in ("never", "context", "scores"):
        return w
    if how == "weights":
        return F.dropout(w, p, training=True)
    if how == "unscaled":
        return w * (torch.rand_like(w) >= p)
    if how == "renormalised":
        kept = F.dropout(w, p, training=True)
        return kept / kept.sum(dim=-1, keepdim=True)
    if how == "keeps-with-p":
        return w * (torch.rand_like(w) < p) / (1 - p)
    if how == "fixed":
        draws = torch.rand(w.shape, generator=torch.Generator().manual_seed(0), dtype=w.dtype)
        return w * (draws >= p) / (1 - p)
    raise AssertionError(how)


class Dropping(CausalAttention):
    how = "weights"

    def forward(self, x):
        t = x.shape[-2]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = q @ k.transpose(-2, -1)
        if self.how == "scores" and self.training:
            scores = F.dropout(scores, self.dropout)
        scores = scores.masked_fill(self.mask[:t, :t], NEG_INF) / math.sqrt(k.shape[-1])
        w = _drop(torch.softmax(scores, dim=-1), self.dropout, self.how, self.training)
        context = w @ v
        return F.dropout(context, self.dropout) if self.how == "context" and self.training else context


class HeadsDropping(MultiHeadAttention):
    how = "weights"

    def forward(self, x):
        b, t, d_out = x.shape[0], x.shape[1], self.out_proj.in_features
        h = self.num_heads

        def heads(y):
            return y.view(b, t, h, d_out // h).transpose(1, 2)

        q, k, v = heads(self.W_query(x)), heads(self.W_key(x)), heads(self.W_value(x))
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.mask[:t, :t], NEG_INF) / math.sqrt(d_out // h)
        w = _drop(torch.softmax(scores, dim=-1), self.dropout, self.how, self.training)
        context = (w @ v).transpose(1, 2)
        if self.how == "context" and self.training:
            context = F.dropout(context, self.dropout)
        return self.out_proj(context.contiguous().view(b, t, d_out))


def dropping(cls, how, hook):
    variant = type(f"{cls.__name__}_{how}", (cls,), {"how": how})
    return solution_with(**{hook: maker(variant, hook)})


DROPOUT_WAYS = [
    # (id, class, how, the case that must fail, what its message says)
    ("causal-weights", Dropping, "weights", None, ""),
    ("causal-never-applied", Dropping, "never", "train-dropout", "no attention weight was dropped"),
    ("causal-on-context", Dropping, "context", "train-dropout", "not to the context vectors"),
    ("causal-on-scores", Dropping, "scores", "train-dropout", "not each 0 or w/(1-p)"),
    ("causal-unscaled", Dropping, "unscaled", "train-dropout", "are not scaled"),
    ("causal-renormalised", Dropping, "renormalised", "train-dropout", "not each 0 or w/(1-p)"),
    ("causal-keeps-with-p", Dropping, "keeps-with-p", "train-dropout", "were kept"),
    ("causal-same-mask", Dropping, "fixed", "train-dropout", "dropped the same weights"),
    ("causal-active-in-eval", Dropping, "always", "eval-dropout", "values differ"),
    ("heads-weights", HeadsDropping, "weights", None, ""),
    ("heads-never-applied", HeadsDropping, "never", "train-dropout", "no attention weight was dropped"),
    ("heads-on-context", HeadsDropping, "context", "train-dropout", "not to the context vectors"),
    ("heads-unscaled", HeadsDropping, "unscaled", "train-dropout", "are not scaled"),
    ("heads-active-in-eval", HeadsDropping, "always", "eval-dropout", "values differ"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cls", "how", "case", "phrase"), [d[1:] for d in DROPOUT_WAYS], ids=[d[0] for d in DROPOUT_WAYS]
)
def test_training_mode_tells_dropout_on_the_weights_from_every_other_way(suite, cls, how, case, phrase):
    hook = CAUSAL if cls is Dropping else MHA
    found = verdicts(suite, dropping(cls, how, hook), hook)
    assert failing(found) == ({case} if case else set()), {k: v.message for k, v in found.items() if v.message}
    if case:
        assert all(phrase in m for m in messages(found, case)), messages(found, case)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8), ids=[f"seed{s}" for s in range(8)])
def test_the_reference_passes_the_training_cases_whatever_its_draws(seed, monkeypatch):
    """The learner's RNG is its own: the reference passes under any global RNG state, for any suite seed."""
    import grader.instructor.suite

    # The suite of this seed with its train-dropout cases only: every case of the seed is made, as the full
    # suite makes them, and only these get their gold answers computed (a case's trials depend on the case alone).
    every = grader.instructor.suite.make_cases
    monkeypatch.setattr(
        grader.instructor.suite, "make_cases", lambda s: [c for c in every(s) if c.name == "train-dropout"]
    )
    suite = build_suite(seed, ("cpu",))
    trials = [t for t in suite.trials if t.case.name == "train-dropout"]
    assert {t.hook for t in trials} == {CAUSAL, MHA}
    solution = solution_with()
    for trial in trials:
        for draw in range(3):
            torch.manual_seed(1000 * seed + draw)  # judge_in_process forks the RNG from here
            verdict = judge_in_process(solution, trial)
            assert (verdict.status, verdict.message) == (PASSED, ""), (trial.hook, trial.dtype)


@pytest.mark.parametrize("num_heads", [1, 3], ids=["one-head", "three-heads"])
def test_the_observable_state_shows_the_attention_weights(num_heads):
    """Against an independent answer: softmax(q k^T / sqrt(head_dim)) with a causal mask, per head, from the
    very W_query / W_key the state holds, and the sum column equal to 1."""
    d_in, head_dim, tokens = 7, 5, 4
    d_out = num_heads * head_dim
    module = reference.make_multihead_attention(d_in, d_out, 9, 0.0, num_heads).double()
    params = observable_state(dict(module.named_parameters()), tokens, num_heads, seed=3)
    module.load_state_dict(params, strict=False)
    x = one_hot_tokens(2, tokens, d_in)
    with torch.no_grad():
        out = module.eval()(x).reshape(2, tokens, num_heads, head_dim).transpose(1, 2)
    q = (x @ params["W_query.weight"].T).reshape(2, tokens, num_heads, head_dim).transpose(1, 2)
    k = (x @ params["W_key.weight"].T).reshape(2, tokens, num_heads, head_dim).transpose(1, 2)
    future = torch.ones(tokens, tokens, dtype=torch.bool).triu(1)
    expected = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(head_dim)).masked_fill(future, NEG_INF), dim=-1)
    torch.testing.assert_close(out[..., :tokens], expected)
    torch.testing.assert_close(out[..., tokens], torch.ones(2, num_heads, tokens, dtype=torch.float64))
    assert bool((expected[..., ~future] > 1e-3).all()), "the weights are not vanishing: each can be seen dropped"
    assert not torch.allclose(expected[..., 1, :2], torch.full((2, num_heads, 2), 0.5, dtype=torch.float64))


class ScaledByDinDropping(Dropping):
    """Scales the scores by sqrt(d_in), not sqrt(d_k): every eval-mode case fails; the dropout is its own matter."""

    def forward(self, x):
        t = x.shape[-2]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = (q @ k.transpose(-2, -1)).masked_fill(self.mask[:t, :t], NEG_INF) / math.sqrt(x.shape[-1])
        context = _drop(torch.softmax(scores, dim=-1), self.dropout, self.how, self.training) @ v
        return F.dropout(context, self.dropout) if self.how == "context" and self.training else context


@pytest.mark.parametrize(
    ("how", "phrase"),
    [("weights", None), ("never", "no attention weight was dropped"), ("context", "not to the context vectors"),
     ("unscaled", "are not scaled")],
    ids=["right-dropout", "never-applied", "on-context", "unscaled"],
)  # fmt: skip
def test_the_dropout_is_judged_on_the_modules_own_weights_behind_another_mistake(suite, how, phrase):
    """A scaling mistake changes the weights: a right dropout of them passes, a wrong one is named as itself."""
    found = verdicts(suite, dropping(ScaledByDinDropping, how, CAUSAL), CAUSAL)
    assert {"reference-weights", "causality"} <= failing(found)  # the eval-mode cases count the scaling
    train = [v for (case, device, _), v in found.items() if case == "train-dropout" and device == "cpu"]
    assert train
    if phrase is None:
        assert all(v.status == PASSED for v in train), [v.message for v in train]
    else:
        assert all(v.status == FAILED and phrase in v.message for v in train), [v.message for v in train]
        assert not any("fix those first" in v.message for v in train)


@pytest.mark.slow  # every trial of a module hook: 4.5 s idle, 5.6 s while the other worker grades
def test_a_module_that_changes_its_input_in_place_fails_for_it(suite):
    """Its forwards' inputs come back and are compared, as a function's arguments are (red team facts3 I1)."""
    from grader.rules import IN_PLACE

    class Mutating(CausalAttention):
        def forward(self, x):
            out = super().forward(x)
            x.mul_(1.5)  # the right output, and the caller's tensor changed
            return out

    found = verdicts(suite, solution_with(make_causal_attention=maker(Mutating)), CAUSAL)
    on_cpu = {case: v.message for (case, device, _), v in found.items() if device == "cpu" and v.status == FAILED}
    assert on_cpu and set(on_cpu.values()) == {IN_PLACE}, on_cpu
    honest = verdicts(suite, solution_with(make_causal_attention=maker(CausalAttention)), CAUSAL)
    assert failing(honest) == set()


class RenamedParameters(MultiHeadAttention):
    """The chapter's class with its parameters named as some learners name them."""

    def __init__(self, d_in, d_out, context_len, dropout_rate, n_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_len, dropout_rate, n_heads, qkv_bias)


class ReorderedParameters(MultiHeadAttention):
    """The contract's names in another order: built by name, never positionally."""

    def __init__(self, d_in, d_out, num_heads, context_length, dropout, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)


@pytest.mark.parametrize("cls", [RenamedParameters, ReorderedParameters], ids=["renamed", "reordered"])
def test_an_adopted_class_is_built_in_the_contracts_order_or_by_its_names(suite, cls):
    solution = adopt("variant", "tests/test_module_grading.py", [types.SimpleNamespace(MultiHeadAttention=cls)])
    assert solution.implements(MHA), solution.problems
    trials = [t for t in suite.trials if t.hook == MHA and t.dtype == "float32" and t.device == "cpu"]
    assert trials and [t.case.name for t in trials if judge_in_process(solution, t).status == FAILED] == []
