"""The hidden cases of the patterns group: sparse masks, the entropy of the weights, one heatmap per head.

Instructor-only.  Built the way :mod:`grader.instructor.groups.chapter` builds the chapter's: sizes from the
suite's own generator (``m.size``, never 6, pairwise different but where a case declares ``coincide``), values from
the run's seed (``m.weights``, ``m.rand``).  Every case says what it checks in English (``what``) and in Chinese
(``what_zh``), with the same numbers in both.
"""

from __future__ import annotations

from typing import Any

import torch

from grader.instructor.cases import DEVICE, KEY_WORDS, QUERY_WORDS, Case, Maker, figure_labelled

__all__ = ["hidden_cases"]


def _case(hook: str, name: str, args: dict[str, Any], what: str, what_zh: str, **kwargs: Any) -> Case:
    return Case(hook, name, args, what, what_zh, **kwargs)


# --- sparse masks ------------------------------------------------------------------------------------------


def _strided_cases(m: Maker) -> list[Case]:
    hook = "strided_mask"

    def mask(name: str, t: int, s: int, what: str, what_zh: str, **kwargs: Any) -> Case:
        args = {"num_tokens": t, "stride": s, "device": DEVICE}
        return _case(hook, name, args, what, what_zh, dtypes=("bool",), **kwargs)

    t, s = m.size(10, 15), m.size(3, 4)
    t1 = m.size(5, 9, avoid=(t,))
    t2 = m.size(7, 11, avoid=(t, t1, 2))
    tt = m.size(3, 5)
    ts = m.size(7, 12, avoid=(tt,))
    te = m.size(5, 9)
    cases = [
        mask("main", t, s, f"T = {t}, stride {s}: a band of {s} tokens and every multiple of {s} back",
             f"T = {t}，步长 {s}：{s} 个词元的局部带，以及往回距离为 {s} 的倍数的词元", meta=True),
        mask("stride=1", t1, 1, f"T = {t1}, stride 1 equals the causal mask", f"T = {t1}，步长 1 等于因果掩码"),
        mask("stride=2", t2, 2, f"T = {t2}, stride 2: the token before and every other token back",
             f"T = {t2}，步长 2：前一个词元，以及往回每隔一个的词元"),
        mask("stride=T", te, te, f"stride = T = {te} equals the causal mask", f"步长 = T = {te} 时等于因果掩码",
             coincide=("T=stride",)),
        mask("stride>T", tt, ts, f"T = {tt}, stride {ts} > T equals the causal mask",
             f"T = {tt}，步长 {ts} > T 时等于因果掩码"),
        mask("T=1", 1, 3, "a single token, stride 3", "单个词元，步长 3"),
    ]  # fmt: skip
    for i in range(2):
        tr = m.size(13, 19)
        sr = m.size(3, 5, avoid=(tr,))
        cases.append(mask(f"random-{i}", tr, sr, f"random T = {tr} and stride {sr}", f"随机的 T = {tr} 和步长 {sr}"))
    for t_bad, s_bad in ((7, 0), (7, -2), (0, 3), (-1, 3)):
        bad, value = ("stride", s_bad) if s_bad < 1 else ("num_tokens", t_bad)
        bad_zh = "步长" if bad == "stride" else "num_tokens"
        cases.append(
            mask(f"T={t_bad}-s={s_bad}-raises", t_bad, s_bad, f"{bad} = {value} raises ValueError",
                 f"{bad_zh} = {value} 抛出 ValueError", expect_error="ValueError")
        )  # fmt: skip
    return cases


def _dilated_cases(m: Maker) -> list[Case]:
    hook = "dilated_window_mask"

    def mask(name: str, twd: tuple[int, int, int], what: str, what_zh: str, **kwargs: Any) -> Case:
        t, w, d = twd
        args = {"num_tokens": t, "window": w, "dilation": d, "device": DEVICE}
        return _case(hook, name, args, what, what_zh, dtypes=("bool",), **kwargs)

    t, w, d = m.size(13, 18), 3, 2
    t1 = m.size(7, 11)
    w1 = m.size(3, 5, avoid=(t1,))
    t2 = m.size(7, 11, avoid=(t1, w1))
    d2 = m.size(3, 4, avoid=(t2, w1))
    tl = m.size(9, 13)
    wl = m.size(tl + 1, tl + 4)
    te = m.size(7, 10)
    cases = [
        mask("main", (t, w, d), f"T = {t}, window {w}, dilation {d}: keys i, i - {d}, i - {2 * d}",
             f"T = {t}，window {w}，扩张率 {d}：键 i、i - {d}、i - {2 * d}", meta=True),
        mask("dilation=1", (t1, w1, 1), f"T = {t1}, window {w1}, dilation 1 equals the sliding window",
             f"T = {t1}，window {w1}，扩张率 1 等于滑动窗口"),
        mask("window=1", (t2, 1, d2), f"T = {t2}, window 1, dilation {d2}: each token sees only itself",
             f"T = {t2}，window 1，扩张率 {d2}：每个词元只看到自己"),
        mask("dilation>T", (5, 3, 9), "T = 5, window 3, dilation 9 > T: each token sees only itself",
             "T = 5，window 3，扩张率 9 > T：每个词元只看到自己"),
        mask("dilation=T", (te, 2, te), f"T = {te}, window 2, dilation = T: each token sees only itself",
             f"T = {te}，window 2，扩张率 = T：每个词元只看到自己", coincide=("T=dilation",)),
        mask("window>T", (tl, wl, 2), f"T = {tl}, window {wl} > T, dilation 2: every other token back to the start",
             f"T = {tl}，window {wl} > T，扩张率 2：往回每隔一个词元，直到开头"),
        mask("T=1", (1, 2, 3), "a single token, window 2, dilation 3", "单个词元，window 2，扩张率 3"),
    ]  # fmt: skip
    for i in range(2):
        tr = m.size(14, 20)
        wr = m.size(2, 5, avoid=(tr,))
        dr = m.size(2, 4, avoid=(tr, wr))
        cases.append(
            mask(f"random-{i}", (tr, wr, dr), f"random T = {tr}, window {wr}, dilation {dr}",
                 f"随机的 T = {tr}，window {wr}，扩张率 {dr}")
        )  # fmt: skip
    for t_bad, w_bad, d_bad in ((7, 0, 2), (7, 3, 0), (7, 3, -1), (0, 3, 2)):
        if w_bad < 1:
            bad, bad_zh, value = "window", "window", w_bad
        elif d_bad < 1:
            bad, bad_zh, value = "dilation", "扩张率", d_bad
        else:
            bad, bad_zh, value = "num_tokens", "num_tokens", t_bad
        cases.append(
            mask(f"T={t_bad}-w={w_bad}-d={d_bad}-raises", (t_bad, w_bad, d_bad), f"{bad} = {value} raises ValueError",
                 f"{bad_zh} = {value} 抛出 ValueError", expect_error="ValueError")
        )  # fmt: skip
    return cases


# --- entropy --------------------------------------------------------------------------------------------------


def _one_hot_rows(m: Maker, *shape: int) -> torch.Tensor:
    """Rows with all their weight on one key, drawn from the run's seed."""
    keys = shape[-1]
    where = (m.rand(*shape[:-1]) * keys).long().clamp(max=keys - 1)
    return torch.nn.functional.one_hot(where, keys).to(torch.float64)


def _causal_weights(m: Maker, *shape: int) -> torch.Tensor:
    """Row-normalised weights with exact zeros on the future, as a causal softmax gives."""
    t = shape[-1]
    w = (m.rand(*shape) + 0.05) * torch.ones(t, t, dtype=torch.float64).tril()
    return w / w.sum(dim=-1, keepdim=True)


def _entropy_cases(m: Maker) -> list[Case]:
    hook = "attention_entropy"

    def rows(name: str, weights: torch.Tensor, what: str, what_zh: str, **kwargs: Any) -> Case:
        return _case(hook, name, {"weights": weights}, what, what_zh, **kwargs)

    b, tq = m.size(2, 4), m.size(3, 8)
    tk = m.size(3, 9, avoid=(tq,))
    t2q = m.size(3, 9)
    t2k = m.size(3, 11, avoid=(t2q,))
    hq = m.size(3, 7)
    hk = m.size(3, 8, avoid=(hq,))
    tu = m.size(3, 7)
    ku = m.size(4, 11, avoid=(tu,))
    tc = m.size(4, 9)
    zero_rows = m.weights(2, 5, 9)
    zero_rows[0, 1] = 0.0
    zero_rows[1, 3:] = 0.0
    cases = [
        rows("3d-batched", m.weights(b, tq, tk), f"batched ({b}, {tq}, {tk}) weights",
             f"带批次的 ({b}, {tq}, {tk}) 权重", meta=True, half=True),
        rows("2d", m.weights(t2q, t2k), f"2-D ({t2q}, {t2k}) weights, Tq != Tk", f"2 维 ({t2q}, {t2k}) 权重，Tq != Tk"),
        rows("4d-heads", m.weights(2, 3, hq, hk), f"4-D heads (2, 3, {hq}, {hk})", f"4 维（多头）(2, 3, {hq}, {hk})",
             half=True),
        rows("one-hot", _one_hot_rows(m, 3, tq, tk), "one-hot rows give 0, with no NaN from the zeros",
             "独热的行熵为 0，零权重不产生 NaN"),
        rows("uniform", torch.full((2, tu, ku), 1.0 / ku, dtype=torch.float64),
             f"uniform rows over {ku} keys give ln({ku})", f"在 {ku} 个键上均匀分布的行，熵为 ln({ku})"),
        rows("causal-zeros", _causal_weights(m, 2, tc, tc), "causal weights: exact zeros on the future, no NaN",
             "因果权重：未来位置恰好为零，不产生 NaN", coincide=("T=T_k",), half=True),
        rows("all-zero-rows", zero_rows, "a row of zeros (a query that sees no key) gives 0, never NaN",
             "全为零的行（看不到任何键的查询）熵为 0，不会是 NaN"),
        rows("non-contiguous", m.weights(2, tk, tq), "non-contiguous weights (a transposed view)",
             "不连续的权重（转置视图）", transposed=frozenset({"weights"})),
        rows("Tq=1", m.weights(3, 1, tk), "one query, many keys", "一个查询、多个键"),
        rows("Tk=1", m.weights(3, tq, 1), "a single key: every row is one-hot", "只有一个键：每一行都是独热的"),
    ]  # fmt: skip
    for i in range(2):
        rq = m.size(2, 12)
        rk = m.size(2, 12, avoid=(rq,))
        cases.append(rows(f"random-{i}", m.weights(m.size(1, 3), rq, rk), "random shapes", "随机形状"))
    return cases


# --- one heatmap per head --------------------------------------------------------------------------------------


def _grid_cases(m: Maker) -> list[Case]:
    hook = "plot_head_grid"
    drawn = (figure_labelled,)

    def grid(name: str, weights: torch.Tensor, tokens: Any, what: str, what_zh: str, **kwargs: Any) -> Case:
        kwargs.setdefault("properties", () if "expect_error" in kwargs else drawn)
        kwargs.setdefault("dtypes", ("float32",))  # a figure of float64 weights shows nothing float32's does not
        return _case(hook, name, {"weights": weights, "tokens": tokens}, what, what_zh, **kwargs)

    h = m.size(2, 4)
    t = m.size(3, 9, avoid=(h,))
    tq = m.size(2, 7, avoid=(h, t))
    tk = m.size(3, 11, avoid=(h, t, tq))
    t2 = m.size(3, 9, avoid=(h, t, tq, tk))
    pair = (list(QUERY_WORDS[:tq]), list(KEY_WORDS[:tk]))
    cases = [
        grid("heads", m.weights(h, t, t), None, f"{h} heads of ({t}, {t}) weights, no tokens",
             f"{h} 个头的 ({t}, {t}) 权重，没有词元", coincide=("T=T_k",)),
        grid("rectangular", m.weights(h, tq, tk), None, f"{h} heads of ({tq}, {tk}) weights, Tq != Tk",
             f"{h} 个头的 ({tq}, {tk}) 权重，Tq != Tk"),
        grid("one-head", m.weights(1, tq, tk), None, f"H = 1: one head of ({tq}, {tk}) weights",
             f"H = 1：一个头的 ({tq}, {tk}) 权重"),
        grid("tokens", m.weights(h, t2, t2), list(KEY_WORDS[:t2]), f"{h} heads of ({t2}, {t2}) weights and {t2} tokens",
             f"{h} 个头的 ({t2}, {t2}) 权重和 {t2} 个词元", coincide=("T=T_k",)),
        grid("token-pair", m.weights(h, tq, tk), pair, f"{h} heads, {tq} query and {tk} key tokens",
             f"{h} 个头，{tq} 个查询词元和 {tk} 个键词元"),
        grid("requires-grad", m.weights(h, tq, tk), None, "weights that require grad (a model's)",
             "需要梯度的权重（来自模型）", requires_grad=frozenset({"weights"})),
        grid("matrix-raises", m.weights(tq, tk), None, f"one ({tq}, {tk}) matrix raises ValueError",
             f"单个 ({tq}, {tk}) 矩阵抛出 ValueError", expect_error="ValueError"),
        grid("batched-raises", m.weights(2, h, t, t), None, f"batched (2, {h}, {t}, {t}) heads raise ValueError",
             f"带批次的 (2, {h}, {t}, {t}) 多头权重抛出 ValueError", expect_error="ValueError", coincide=("T=T_k",)),
        grid("wrong-token-count-raises", m.weights(h, tq, tk), (pair[0], pair[1][:-1]),
             f"{tk - 1} key tokens for {tk} keys raise ValueError",
             f"{tk} 个键只给了 {tk - 1} 个键词元，抛出 ValueError", expect_error="ValueError"),
    ]  # fmt: skip
    for i in range(2):
        hr = m.size(2, 5)
        rq = m.size(2, 9, avoid=(hr,))
        rk = m.size(2, 9, avoid=(hr, rq))
        cases.append(grid(f"random-{i}", m.weights(hr, rq, rk), None, "random shapes", "随机形状"))
    return cases


def hidden_cases(m: Maker) -> dict[str, list[Case]]:
    """Each hook's own cases, in the rows' order (:data:`grader.groups.patterns.ROWS`), drawn from ``m``."""
    return {
        "strided_mask": _strided_cases(m),
        "dilated_window_mask": _dilated_cases(m),
        "attention_entropy": _entropy_cases(m),
        "plot_head_grid": _grid_cases(m),
    }
