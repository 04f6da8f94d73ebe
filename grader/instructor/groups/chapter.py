"""The hidden cases of the chapter's groups: scores, softmax, the causal mask, dropout, heads, the modules, long
sequences, plots.

Instructor-only.  Built on :mod:`grader.instructor.cases`: sizes from the suite's own generator (``m.size``, never 6,
pairwise different but where a case declares ``coincide``), values from the run's seed (``m.randn``, ``m.weights``,
``m.seed``).  Every case says what it checks in English (``what``); its Chinese is in
:mod:`grader.instructor.case_words`.  What a case checks beyond its values is in
:mod:`grader.instructor.case_properties`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from grader.instructor.case_properties import (
    bounded_memory,
    causal_prefix,
    contiguous,
    dropout_values,
    drops_attention_weights,
    exact_zeros_where_masked,
    extras_noted,
    held_below,
    mask_is_a_buffer,
    named_like_contract,
    prefer,
    zero_rows,
)
from grader.instructor.cases import (
    CHAPTER_TOKENS,
    DEVICE,
    KEY_WORDS,
    QUERY_WORDS,
    Case,
    GeneratorSeed,
    Maker,
    ModuleSpec,
    figure_labelled,
    one_hot_tokens,
)
from grader.rules import MEASURED_CALL_FACTOR

__all__ = ["LONG", "LONGEST", "LONGEST_CALL_FACTOR", "PREFER_VALUE_ERROR", "hidden_cases"]


def _maker(hook: str, *names: str, **defaults: Any) -> Callable[..., Case]:
    """``case(name, *values, what, **fields)``: a case of ``hook`` whose arguments ``names`` take ``values``, its
    fields ``defaults`` unless given."""

    def case(name: str, *values: Any, **kw: Any) -> Case:
        *args, what = values
        return Case(hook, name, dict(zip(names, args)), what, **{**defaults, **kw})

    return case


def _score_cases(hook: str, m: Maker) -> list[Case]:
    case = _maker(hook, "queries", "keys")
    tq, d, tk = m.distinct((3, 9), (3, 9), (3, 11))
    cases = [case("2d-Tq!=Tk", m.randn(tq, d), m.randn(tk, d), "2-D, Tq != Tk")]
    b, t = m.size(2, 4), m.size(4, 9)
    d = m.size(3, 11, avoid=(t,))
    square = ("T=T_k",)  # self-attention's square scores
    cases.append(case("3d-batched", m.randn(b, t, d), m.randn(b, t, d), "batched 3-D", meta=True, half=True,
                      coincide=square))  # fmt: skip
    b, h = m.size(2, 3), m.size(2, 5)
    tq, tk, d = m.distinct((3, 7), (3, 7), (3, 9))
    cases.append(case("4d-heads", m.randn(b, h, tq, d), m.randn(b, h, tk, d), "4-D heads", half=True))
    cases.append(case("T=1", m.randn(2, 1, 5), m.randn(2, 1, 5), "a single token", coincide=square))
    cases.append(case("Tq=1", m.randn(3, 1, 5), m.randn(3, 7, 5), "one query, many keys"))
    cases.append(case("d=1", m.randn(2, 5, 1), m.randn(2, 3, 1), "d_k = 1"))
    b = m.size(2, 3)
    t, tk, d = m.distinct((4, 7), (4, 8), (3, 9))
    cases.append(case("non-contiguous", m.randn(b, t, d), m.randn(b, tk, d), "non-contiguous (transposed view) inputs",
                      transposed=frozenset({"queries", "keys"})))  # fmt: skip
    for trial in range(3):
        rank = m.size(2, 4)
        lead = [m.size(1, 3) for _ in range(rank - 2)]
        tq, tk, d = m.distinct((1, 12), (1, 12), (1, 13))
        cases.append(case(f"random-{trial}", m.randn(*lead, tq, d), m.randn(*lead, tk, d), f"random {rank}-D shape"))
    return cases


def _softmax_cases(m: Maker) -> list[Case]:
    case = _maker("softmax_weights", "scores", "dim")
    b, t = m.size(2, 4), m.size(5, 9)
    scores = m.randn(b, t, t)
    masked = scores.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
    fully = m.randn(3, 7)
    fully[1] = float("-inf")
    exact = (exact_zeros_where_masked,)
    return [
        case("2d-rows", m.randn(m.size(3, 7), m.size(4, 9)), -1, "2-D, last dim", half=True),
        case("3d-batched", m.randn(b, t, t + 2), -1, "batched 3-D, dim=-1", meta=True, half=True),
        case("dim=0", m.randn(m.size(3, 7), m.size(2, 5), 4), 0, "positive dim=0"),
        case("dim=1", m.randn(2, m.size(3, 7), 5), 1, "positive dim=1 on 3-D"),
        case("dim=-2", m.randn(3, 4, m.size(5, 8)), -2, "negative dim=-2"),
        case("4d", m.randn(2, 3, 5, 7), -1, "4-D heads"),
        case("large-logits", m.randn(b, t, t, scale=1e4), -1, "logits around ±1e4"),
        case("logits-20-to-100", _overflowing_logits(m, 3, 5, 7), -1,
             "logits from 20 to 100: exp overflows unless the max is subtracted (float16 above 11)", half=True),
        case("masked", masked, -1, "-inf entries (a causal mask)", properties=exact, half=True),
        case("all-masked-row", fully, -1, "a row that is all -inf", properties=exact),
    ] + [
        case(f"random-{i}", m.randn(m.size(1, 4), m.size(1, 9), m.size(1, 9), scale=3.0), -1, "random 3-D")
        for i in range(2)
    ]  # fmt: skip


def _overflowing_logits(m: Maker, *shape: int) -> torch.Tensor:
    """Logits in [20, 80] with one in [90, 100] per row: ``exp`` overflows in every dtype unless the row's max
    is subtracted first (float16 above 11, bfloat16 and float32 above 88), and every dtype holds them."""
    scores = 20.0 + 60.0 * m.rand(*shape)
    rows = scores.reshape(-1, shape[-1])
    rows[torch.arange(rows.shape[0]), torch.arange(rows.shape[0]) % shape[-1]] = 90.0 + 10.0 * m.rand(rows.shape[0])
    return scores


def _one_hot_rows(scores: torch.Tensor, gap: float = 0.05) -> torch.Tensor:
    """``scores`` with each row's largest raised ``gap`` over the rest: at temperature 1e-4 each row is one-hot to
    the last bit.  A near tie would not be: there ``scores / T`` is about 1e4, rounded to 1e-3 in float32, so dividing
    first (the chapter's way, as right as the reference's subtracting first) moves a weight by 1e-3 of itself."""
    top = scores.argmax(-1, keepdim=True)
    return scores.scatter_add(-1, top, torch.full_like(top, gap, dtype=scores.dtype))


def _temperature_cases(m: Maker) -> list[Case]:
    hook = "softmax_with_temperature"
    masked = m.randn(2, 7, 7).masked_fill(torch.triu(torch.ones(7, 7, dtype=torch.bool), 1), float("-inf"))
    fully = m.randn(4, 9)
    fully[2] = float("-inf")
    exact = (exact_zeros_where_masked,)

    def case(name: str, scores: torch.Tensor, temperature: float, what: str, dim: int = -1, **kw: Any) -> Case:
        return Case(hook, name, {"scores": scores, "temperature": temperature, "dim": dim}, what, **kw)

    return [
        case("T=1", m.randn(3, 5, 7), 1.0, "temperature 1: the plain softmax", meta=True, half=True),
        case("T=0.4", m.randn(4, 9, scale=2.0), 0.4, "temperature 0.4 sharpens", half=True),
        case("T=2.5-4d", m.randn(2, 3, 5, 7, scale=2.0), 2.5, "temperature 2.5 flattens, 4-D heads", half=True),
        case("T=1e-4", _one_hot_rows(m.randn(3, 8, 11)), 1e-4, "temperature 1e-4: (near) one-hot rows, no NaN"),
        case("T=1e4", m.randn(3, 8, 11, scale=3.0), 1e4, "temperature 1e4: near-uniform rows"),
        case("dim=0", m.randn(7, 3, 4), 1.7, "temperature 1.7 along dim=0", dim=0),
        case("dim=-2", m.randn(3, 9, 5), 0.7, "temperature 0.7 along dim=-2", dim=-2),
        case("masked", masked, 0.6, "-inf entries (a causal mask) at temperature 0.6", properties=exact, half=True),
        case("all-masked-row", fully, 0.8, "a row that is all -inf, temperature 0.8", properties=exact),
        case("logits-20-to-100", _overflowing_logits(m, 3, 5, 7), 0.9,
             "logits from 20 to 100 at temperature 0.9: exp overflows unless the max is subtracted", half=True),
        case("T=0-raises", m.randn(3, 4), 0.0, "temperature 0 raises ValueError", expect_error="ValueError"),
        case("T=-1-raises", m.randn(3, 4), -1.0, "temperature -1 raises ValueError", expect_error="ValueError"),
    ] + [
        case(f"random-{i}", m.randn(2, tq, tk, scale=3.0), t, f"random 3-D, temperature {t}")
        for i, (tq, tk, t) in enumerate(((5, 11, 0.55), (9, 4, 3.2)))
    ]  # fmt: skip


def _context_cases(m: Maker) -> list[Case]:
    case = _maker("context_vectors", "weights", "values")
    t, dv = m.distinct((3, 7), (3, 11))
    cases = [case("2d", m.weights(t, t), m.randn(t, dv), "2-D, dv != T", coincide=("T=T_k",))]
    b = m.size(2, 4)
    tq, tk, dv = m.distinct((3, 8), (3, 8), (2, 9))
    cases.append(case("3d-batched", m.weights(b, tq, tk), m.randn(b, tk, dv), "batched, Tq != Tk", meta=True,
                      half=True))  # fmt: skip
    cases.append(case("4d", m.weights(2, 3, 5, 7), m.randn(2, 3, 7, 4), "4-D heads", half=True))
    cases.append(case("T=1", m.weights(2, 1, 1), m.randn(2, 1, 3), "a single token", coincide=("T=T_k",)))
    for i in range(2):
        tq, tk, dv = m.distinct((1, 9), (1, 9), (1, 9))
        cases.append(case(f"random-{i}", m.weights(3, tq, tk), m.randn(3, tk, dv), "random shapes"))
    return cases


def _mask_cases(m: Maker) -> list[Case]:
    case = _maker("causal_mask", "num_tokens", "device", dtypes=("bool",))
    cases = [case(f"T={t}", t, DEVICE, f"T = {t}", meta=(t == 5)) for t in (1, 2, 5, m.size(7, 13, avoid=(8,)))]
    return cases + [
        case(f"T={t}-raises", t, DEVICE, f"num_tokens = {t} raises ValueError", expect_error="ValueError")
        for t in (0, -3)
    ]


def _apply_mask_cases(m: Maker) -> list[Case]:
    case = _maker("apply_causal_mask", "scores")
    t, t3 = m.distinct((3, 9), (3, 10))
    cases = [
        case("2d", m.randn(t, t), f"2-D, T = {t}", half=True),
        case("3d-batched", m.randn(2, t3, t3), "batched 3-D", meta=True, half=True),
        case("4d-heads", m.randn(2, 3, 5, 5), "4-D heads"),
        case("T=1", m.randn(3, 1, 1), "a single token"),
        case("T=11", m.randn(2, 11, 11), "T larger than the chapter's 6"),
        case("non-square-raises", m.randn(2, 4, 5), "(…, 4, 5) scores raise ValueError", expect_error="ValueError"),
    ]
    sizes = (m.size(2, 13), m.size(2, 13))
    return cases + [case(f"random-{i}", m.randn(m.size(1, 3), tt, tt), "random T") for i, tt in enumerate(sizes)]


def _renormalize_cases(m: Maker) -> list[Case]:
    case = _maker("renormalize_masked_weights", "weights")
    t, t3 = m.distinct((4, 9), (4, 11))
    return [
        case("2d", m.weights(t, t), f"2-D, T = {t}", half=True),
        case("3d-batched", m.weights(3, t3, t3), "batched", meta=True),
        case("4d-heads", m.weights(2, 3, 5, 5), "4-D heads"),
        case("T=1", m.weights(2, 1, 1), "a single token"),
    ] + [case(f"random-{i}", m.weights(2, tt, tt), "random T") for i, tt in enumerate((m.size(2, 12), m.size(2, 12)))]


def _dropout_scale_cases(m: Maker) -> list[Case]:
    case = _maker("dropout_scale", "weights", "keep_mask", "p")

    def keep(*shape: int) -> torch.Tensor:
        return m.rand(*shape) >= 0.3

    # not p = 0.1 in half: unscaled dropout is 1/0.9 off, which on weights near 0.2 is within bfloat16's
    # 4 eps (its points would move with the seed); p = 0.5 is 2x off and holds the half pass
    cases = [
        case(f"p={p}", m.weights(3, 5, 5), keep(3, 5, 5), p, f"p = {p}", meta=(p == 0.1), half=(p != 0.1))
        for p in (0.1, 0.5, 0.0)
    ]
    cases.append(case("p=1", m.weights(2, 4, 4), keep(2, 4, 4), 1.0, "p = 1 gives zeros, never inf or NaN"))
    cases.append(case("float-keep-mask", m.weights(4, 7), keep(4, 7).double(), 0.25, "a 0/1 float keep mask"))
    return cases + [
        case(f"p={p}-raises", m.weights(2, 3), keep(2, 3), p, f"p = {p} raises ValueError", expect_error="ValueError")
        for p in (-0.1, 1.5)
    ]


def _attention_dropout_cases(m: Maker) -> list[Case]:
    case = _maker("attention_dropout", "weights", "p", "training", "generator")
    cases = [
        case("eval", m.weights(3, 7, 7), 0.3, False, None, "eval: dropout is off", meta=True),
        case("p=0", m.weights(2, 5, 5), 0.0, True, None, "p = 0 keeps everything"),
        case("p=1", m.weights(2, 5, 5), 1.0, True, None, "p = 1 drops everything"),
    ]
    for p, shape in ((0.2, (4, 40, 40)), (0.5, (2, 3, 30, 30))):
        seed = m.seed()
        what = f"training with p = {p}, twice from the same generator state and once from another"
        # the other seed is not drawn from `m`: the other cases' inputs stay as they were; meta in training too: a
        # mask drawn on the CPU whatever the weights' device fails there
        cases.append(case(f"train-p={p}", m.weights(*shape), p, True, GeneratorSeed(seed), what, compare_gold=False,
                          repeat=2, reseeds=((seed + 1) % (2**31 - 1),), properties=(dropout_values(p),), half=True,
                          meta=p == 0.2))  # fmt: skip
    return cases


def _split_cases(m: Maker) -> list[Case]:
    case = _maker("split_heads", "x", "num_heads")
    h, t, hd = 3, 5, 4  # heads != tokens != head_dim
    cases = [
        case("H3-T5-hd4", m.randn(2, t, h * hd), h, "3 heads, 5 tokens, head_dim 4", meta=True, half=True),
        case("H1", m.randn(2, 4, 5), 1, "one head", coincide=("d_out=head_dim",)),
        case("hd1", m.randn(1, 3, 5), 5, "head_dim 1", coincide=("d_out=num_heads",)),
        case("non-contiguous", m.randn(2, 7, 10), 2, "non-contiguous input", transposed=frozenset({"x"})),
        case("indivisible-raises", m.randn(2, 3, 10), 4, "d % H != 0 raises ValueError", expect_error="ValueError"),
    ]
    for i in range(2):
        h = m.size(2, 5)
        hd = m.size(2, 7, avoid=(h, *((CHAPTER_TOKENS // h,) if CHAPTER_TOKENS % h == 0 else ())))
        t = m.size(2, 9, avoid=(h, hd, h * hd))
        cases.append(case(f"random-{i}", m.randn(m.size(1, 3), t, h * hd), h, "random"))
    return cases


def _merge_cases(m: Maker) -> list[Case]:
    case = _maker("merge_heads", "x", properties=(contiguous,))
    cases = [
        case("H3-T5-hd4", m.randn(2, 3, 5, 4), "3 heads, 5 tokens, head_dim 4", meta=True, half=True),
        case("H1", m.randn(2, 1, 4, 5), "one head", coincide=("d_out=head_dim",)),
        case("non-contiguous", m.randn(2, 3, 7, 5), "non-contiguous input", transposed=frozenset({"x"})),
    ]
    for i in range(2):
        h, hd, t = m.distinct((2, 5), (2, 7), (2, 9))
        cases.append(case(f"random-{i}", m.randn(2, h, t, hd), "random"))
    return cases


def _sliding_window_cases(m: Maker) -> list[Case]:
    def mask(t: int, w: int, what: str, suffix: str = "", **kwargs: Any) -> Case:
        args = {"num_tokens": t, "window": w, "device": DEVICE}
        return Case("sliding_window_mask", f"T={t}-w={w}{suffix}", args, what, dtypes=("bool",), **kwargs)

    cases = [
        mask(9, 3, "T = 9, window 3: the future and more than 2 back are masked", meta=True),
        mask(7, 1, "window 1: each token sees only itself"),
        mask(5, 2, "window 2: itself and the token before"),
        mask(8, 8, "window = T equals the causal mask", coincide=("T=window",)),
        mask(4, 11, "window > T equals the causal mask"),
        mask(1, 3, "a single token"),
    ]
    for _ in range(2):
        t = m.size(10, 17)
        cases.append(mask(t, m.size(2, t - 1, avoid=(t,)), "random T and window"))
    return cases + [
        mask(t, w, f"{'window' if w < 1 else 'num_tokens'} = {min(t, w)} raises ValueError", "-raises",
             expect_error="ValueError")
        for t, w in ((5, 0), (5, -2), (0, 3), (-1, 3))
    ]  # fmt: skip


LONG = (1, 2, 2048, 16, 12, 8)
"""The long case's batch dims (1, 2), Tq = Tk = 2048, d = 16, dv = 12 and chunk_size = 8: one batch-head's scores are
(2048, 2048), four million elements, the memory rule's bound; a chunked version holds about a ninth of that
(:func:`grader.rules.memory_bound`: two batch-heads of narrow blocks and sums leave room for twice it even in float64
bytes, under the bytes of the float32 triangle a causal call keeps, so that triangle packed two scores to a float64
fails too (red team 12a: at dv = 24 it did not); at Tq = Tk = 1024 they did not, and a float64 version failed)."""

LONGEST = (1, 1, 2048, 16384, 16, 12, 32)
"""The case measured from outside the learner's process (:mod:`grader.instructor.held_memory`): batch dims (1, 1), Tq
= 2048 queries over Tk = 16384 keys, d = 16, dv = 12, chunk_size 32. Its scores are 33.6 million elements, 128 MiB in
float32, where an honest chunked version raises the peak by 36-47 MiB and adds 8-25 MiB of anonymous memory
(``benchmarks/held_memory.py``; the meter of the long case, which would weigh 100 MiB of its own, stays off). Not
causal: a causal call of as many kept scores computes twice the scores. Narrow blocks and values keep a version that
broadcasts (Tq, chunk, dv) in float64 small too; at the long case's size honest versions and the scores weigh the
same."""

LONGEST_CALL_FACTOR = 6
"""The longest case may take this many times the call limit: 512 blocks of 32 keys, some 0.5 s for the reference on
one loaded core, where a learner's plainer loop may take several times as long (no meter runs inside it)."""


def _chunked_cases(m: Maker) -> list[Case]:
    hook = "chunked_attention"

    def attend(name: str, what: str, sizes: tuple[Any, ...], causal: bool = False, scale: float = 1.0,
               **kwargs: Any) -> Case:  # fmt: skip
        lead, tq, tk, d, dv, chunk = sizes  # batch dims, Tq, Tk, d, dv, chunk_size
        q, k = m.randn(*lead, tq, d, scale=scale), m.randn(*lead, tk, d, scale=scale)
        args = {"queries": q, "keys": k, "values": m.randn(*lead, tk, dv), "chunk_size": chunk, "causal": causal}
        return Case(hook, name, args, what, **kwargs)

    cases = [
        attend("main", "batched, chunk_size 3 does not divide Tk = 11", ((2,), 9, 11, 5, 4, 3), meta=True, half=True),
        attend("chunk=1", "chunk_size 1: one key per block", ((2,), 5, 7, 4, 3, 1)),
        attend("chunk>Tk", "chunk_size > Tk: one block", ((3,), 4, 7, 5, 3, 16)),
        attend("chunk=Tk", "chunk_size = Tk: one block", ((2,), 5, 8, 3, 4, 8), coincide=("T_k=chunk_size",)),
        attend("causal", "causal, Tq = Tk", ((3,), 10, 10, 4, 7, 3), causal=True, coincide=("T=T_k",), half=True),
        attend("causal-Tq<Tk", "causal, 4 queries at the end of 9 keys", ((2,), 4, 9, 5, 3, 2), causal=True),
        attend("causal-Tq>Tk", "causal, 8 queries and 5 keys: the first 3 queries see no key and give zeros",
               ((2,), 8, 5, 3, 4, 2), causal=True, properties=(zero_rows(slice(0, 3)),)),
        attend("unbatched", "no batch dims: (Tq, d) queries", ((), 7, 10, 3, 5, 4)),
        attend("4d-heads", "two batch dims (batch, heads)", ((2, 3), 5, 9, 4, 7, 2)),
        attend("large-logits", "scores in the hundreds: exp overflows without a running max", ((2,), 5, 9, 4, 3, 2),
               scale=12.0),  # fmt: skip
    ]
    q = (m.rand(2, 5, 4) + 0.5) * 40.0  # every score below -800: exp(score - 0) is 0 even in float64
    k, v = -(m.rand(2, 9, 4) + 0.5) * 40.0, m.randn(2, 9, 3)
    # float64 only: exp(-800) is 0 there too, and float32 scores of that size carry rounding errors of 1e-4 that say
    # nothing about the learner's algorithm
    cases.append(Case(hook, "negative-logits", {"queries": q, "keys": k, "values": v, "chunk_size": 2, "causal": False},
                      "every score far below zero: a running max that starts at 0 underflows", dtypes=("float64",)))
    batch, heads, tokens, d, dv, chunk = LONG
    what = (f"long sequences, Tq = Tk = {tokens}, d = {d}, chunk_size {chunk}, causal: never holding as much as "
            "one batch-head's (Tq, Tk) scores at once")
    # one dtype: the rule counts elements, whatever their dtype, and one dtype keeps the suite quick
    cases.append(attend("long", what, ((batch, heads), tokens, tokens, d, dv, chunk), causal=True, dtypes=("float32",),
                        coincide=("T=T_k",), measure_memory=True, call_factor=MEASURED_CALL_FACTOR,
                        properties=(bounded_memory,)))
    batch, heads, tq, tk, d, dv, chunk = LONGEST
    what = (f"longer sequences, Tq = {tq}, Tk = {tk}, d = {d}, chunk_size {chunk}, measured from outside your "
            "process: never holding as much as its (Tq, Tk) scores at once")
    cases.append(attend("longest", what, ((batch, heads), tq, tk, d, dv, chunk), dtypes=("float32",), measure_held=True,
                        call_factor=LONGEST_CALL_FACTOR, properties=(held_below,)))
    for i in range(2):
        lead = tuple(m.size(1, 3) for _ in range(m.size(0, 2)))
        tq, tk, d, dv = m.distinct((2, 12), (3, 14), (2, 9), (2, 9))
        chunk = m.size(2, tk - 1, avoid=(tq, tk, d, dv))
        cases.append(attend(f"random-{i}", f"random shapes, {len(lead)} batch dims", (lead, tq, tk, d, dv, chunk),
                            causal=bool(i)))  # fmt: skip
    return cases


PREFER_VALUE_ERROR = "prefer.value_error"
"""Why ``raise ValueError`` beats ``assert`` for a bad argument (an id of ``grader.instructor.messages.MESSAGES``)."""


def _module_cases(hook: str, m: Maker) -> list[Case]:
    """A module hook's cases: behaviour with the reference's parameters loaded, and the module's form.

    Sizes per case are written out (d_in, d_out, num_heads, head_dim, context_length, T): all different and none 6,
    but where a case says what it needs equal.  Self-attention has no context length, and its cases never mention one.
    """
    causal, heads = hook != "make_self_attention", hook == "make_multihead_attention"

    def config(d_in: int, d_out: int, ctx: int = 0, dropout: float = 0.0, h: int = 1, bias: bool = False) -> dict:
        args: dict[str, Any] = {"d_in": d_in, "d_out": d_out}
        if causal:
            args.update(context_length=ctx, dropout=dropout)
        if heads:
            args["num_heads"] = h
        args["qkv_bias"] = bias
        return args

    def sizes(d_in: int, d_out: int, t: int | None = None, ctx: int = 0, h: int = 1) -> str:
        text = f"d_in={d_in}, d_out={d_out}"
        if heads:
            text += f", {h} head{'s' if h > 1 else ''}" + (f" of {d_out // h}" if d_out % h == 0 else "")
        if t is not None:
            text += f", T={t}"
        if causal:
            text += f", context_length={ctx}"
        return text

    def behaviour(name: str, what: str, cfg: dict, xs: list[torch.Tensor], **kwargs: Any) -> Case:
        return Case(hook, name, cfg, what, module=ModuleSpec(xs, state_seed=m.seed()), **kwargs)

    d_in, h, hd, ctx, t = 5, 3, 4, 11, 7
    d_out = h * hd
    form: dict[str, Any] = {"dtypes": ("float32",), "structural": True}  # the module's form, in one dtype
    cases = [
        Case(hook, "names", config(d_in, d_out, ctx, h=h), "parameter names",
             module=ModuleSpec([], state_seed=m.seed()), properties=(named_like_contract,), notes=(extras_noted,),
             **form),
        behaviour("reference-weights", f"the reference's weights, {sizes(d_in, d_out, t, ctx, h)}",
                  config(d_in, d_out, ctx, h=h), [m.randn(2, t, d_in)], meta=True),
        behaviour("qkv-bias", f"qkv_bias=True, {sizes(4, 10, 3, 9, 2)}", config(4, 10, 9, h=2, bias=True),
                  [m.randn(3, 3, 4)]),
        Case(hook, "init-seed", config(3, 8 if heads else 2, 6, h=2),
             "built under torch.manual_seed, as the chapter does: W_query, W_key, W_value (then out_proj) in that "
             "order, as nn.Linear layers", module=ModuleSpec([m.randn(2, 6, 3)], init_seed=m.seed()),
             coincide=("T=6",) + (("T=context_length", "context_length=6") if causal else ()), structural=True),
        behaviour("T=1", f"a single token, {sizes(4, 10, 1, 9, 2)}", config(4, 10, 9, h=2), [m.randn(3, 1, 4)]),
    ]  # fmt: skip
    if not causal:
        cases.append(behaviour("unbatched", f"unbatched (T, d_in) input, {sizes(7, 4, 5)}", config(7, 4),
                               [m.randn(5, 7)]))  # fmt: skip
    else:
        cases.append(behaviour("T=context", f"T equal to context_length, {sizes(4, 15, 8, 8, 3)}",
                               config(4, 15, 8, h=3), [m.randn(2, 8, 4)], coincide=("T=context_length",)))
        x, t_change = m.randn(2, 9, 5), 4
        changed = torch.cat([x[:, :t_change], m.randn(2, 9 - t_change, 5)], dim=1)
        cases.append(behaviour("causality", f"changing token {t_change} leaves earlier outputs alone, "
                               f"{sizes(5, 8, 9, 10, 2)}", config(5, 8, 10, h=2), [x, changed],
                               properties=(causal_prefix(t_change),)))
        x = m.randn(2, 7, 5)
        cases.append(behaviour("eval-dropout", f"eval with dropout=0.5 is deterministic, {sizes(5, 12, 7, 9, 3)}",
                               config(5, 12, 9, dropout=0.5, h=3), [x, x]))
        cases.append(_training_case(hook, m, config))
        cases.append(Case(hook, "mask-buffer", config(d_in, d_out, ctx, h=h),
                          "the causal mask is a buffer named mask (in state_dict, moved by .to(device))",
                          module=ModuleSpec([]), properties=(mask_is_a_buffer,), **form))
    if heads:
        cases.append(behaviour("one-head", f"num_heads = 1, {sizes(4, 5, 3, 7, 1)}", config(4, 5, 7, h=1),
                               [m.randn(2, 3, 4)], coincide=("d_out=head_dim",)))
        cases.append(Case(hook, "indivisible-raises", config(5, 10, 7, h=4),
                          "d_out % num_heads != 0 raises an exception when the module is built "
                          "(ValueError recommended)",
                          module=ModuleSpec([]), expect_error="Exception",
                          notes=(prefer("ValueError", PREFER_VALUE_ERROR),)))
    for i in range(2):
        hh = m.size(2, 4)
        hd = m.size(2, 5, avoid=(hh, *((CHAPTER_TOKENS // hh,) if CHAPTER_TOKENS % hh == 0 else ())))
        dd = hh * hd
        din, tt = m.distinct((2, 9), (2, 8), avoid=(hh, hd, dd))
        cc = m.size(tt + 1, tt + 5, avoid=(hh, hd, dd, din))
        batch = m.size(1, 3)
        cases.append(behaviour(f"random-{i}", f"random sizes, {sizes(din, dd, tt, cc, hh)}",
                               config(din, dd, cc, h=hh), [m.randn(batch, tt, din)]))  # fmt: skip
    return cases


TRAIN_SIZES = {
    # hook: (d_in, d_out, num_heads, T, context_length, dropout): d_in > T and head_dim > T, for observable_state
    "make_causal_attention": (8, 7, 1, 5, 9, 0.3),
    "make_multihead_attention": (7, 15, 3, 4, 9, 0.25),
}
TRAIN_BATCH, TRAIN_FORWARDS = 16, 4
"""Enough weights to count: the kept fraction's bound is six standard deviations over all of them."""


def _training_case(hook: str, m: Maker, config: Callable[..., dict]) -> Case:
    """Training mode: the dropped attention weights made observable (see :func:`drops_attention_weights`)."""
    d_in, d_out, h, t, ctx, p = TRAIN_SIZES[hook]
    heads = f"{h} heads of {d_out // h}, " if hook == "make_multihead_attention" else ""
    what = (f"training mode with dropout={p} ({heads}T={t}, {TRAIN_FORWARDS} forwards): each attention weight is "
            "dropped or scaled by 1/(1-p), before the weights meet the values")
    x = one_hot_tokens(TRAIN_BATCH, t, d_in)
    spec = ModuleSpec([x] * TRAIN_FORWARDS, state_seed=m.seed(), train=True, observable=True)
    # meta: a dropout mask drawn on the CPU whatever the input's device fails there
    return Case(hook, "train-dropout", config(d_in, d_out, ctx, dropout=p, h=h), what, module=spec, meta=True,
                compare_gold=False, properties=(drops_attention_weights(p, t, h),))


def _plot_cases(m: Maker) -> list[Case]:
    # one dtype: a figure drawn from float64 weights shows nothing float32's does not (issue 26: half the trials)
    case = _maker("plot_attention", "weights", "tokens", dtypes=("float32",))
    drawn = (figure_labelled,)
    t, tq, tk, t2 = m.distinct((3, 9), (2, 7), (3, 11), (3, 9))
    pair = (list(QUERY_WORDS[:tq]), list(KEY_WORDS[:tk]))
    square_pair = (list(QUERY_WORDS[:t2]), list(KEY_WORDS[:t2]))
    square, raises = ("T=T_k",), "ValueError"
    return [
        case("square", m.weights(t, t), None, f"({t}, {t}) weights, no tokens", properties=drawn, coincide=square),
        case("rectangular", m.weights(tq, tk), None, f"({tq}, {tk}) weights, Tq != Tk", properties=drawn),
        case("tokens", m.weights(t2, t2), list(KEY_WORDS[:t2]), f"({t2}, {t2}) weights and one sequence of {t2} tokens",
             properties=drawn, coincide=square),
        case("token-pair", m.weights(tq, tk), pair, f"({tq}, {tk}) weights, {tq} query and {tk} key tokens",
             properties=drawn),
        case("token-pair-square", m.weights(t2, t2), square_pair, f"({t2}, {t2}) weights, different query and key "
             "tokens", properties=drawn, coincide=square),
        case("requires-grad", m.weights(tq, tk), None, "weights that require grad (a model's)",
             requires_grad=frozenset({"weights"}), properties=drawn),
        case("batched-raises", m.weights(2, tq, tk), None, f"(2, {tq}, {tk}) batched weights raise ValueError",
             expect_error=raises),
        case("heads-raises", m.weights(2, 3, t, t), None, f"(2, 3, {t}, {t}) heads raise ValueError",
             expect_error=raises, coincide=square),
        case("wrong-token-count-raises", m.weights(tq, tk), (pair[0], pair[1][:-1]),
             f"{tk - 1} key tokens for {tk} keys raise ValueError", expect_error=raises),
    ] + [
        case(f"random-{i}", m.weights(a, b), None, "random shapes", properties=drawn)
        for i, (a, b) in enumerate(((m.size(1, 4), m.size(7, 12)), (m.size(8, 12), m.size(1, 4))))
    ]  # fmt: skip


def hidden_cases(m: Maker) -> dict[str, list[Case]]:
    """The chapter's hooks' own cases, drawn from ``m`` in this order (:func:`make_cases` checks and completes them)."""
    return {
        "dot_product_scores": _score_cases("dot_product_scores", m),
        "scaled_dot_product_scores": _score_cases("scaled_dot_product_scores", m),
        "softmax_weights": _softmax_cases(m),
        "softmax_with_temperature": _temperature_cases(m),
        "context_vectors": _context_cases(m),
        "causal_mask": _mask_cases(m),
        "apply_causal_mask": _apply_mask_cases(m),
        "renormalize_masked_weights": _renormalize_cases(m),
        "dropout_scale": _dropout_scale_cases(m),
        "attention_dropout": _attention_dropout_cases(m),
        "split_heads": _split_cases(m),
        "merge_heads": _merge_cases(m),
        "make_self_attention": _module_cases("make_self_attention", m),
        "make_causal_attention": _module_cases("make_causal_attention", m),
        "make_multihead_attention": _module_cases("make_multihead_attention", m),
        "sliding_window_mask": _sliding_window_cases(m),
        "chunked_attention": _chunked_cases(m),
        "plot_attention": _plot_cases(m),
    }


