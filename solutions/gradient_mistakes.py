"""Known mistakes whose values are right but which cannot train: the graph cut, parameters frozen, a NaN in
backward, a backward that raises.  Each computes exactly the reference's forward; only its gradient pass fails
(:mod:`grader.gradients`).  Entries of :data:`solutions.mistakes.CATALOGUE` (:data:`ENTRIES`).

Instructor-only, like the rest of ``solutions/``.
"""

from __future__ import annotations

import math

import torch

from solutions.reference import CausalAttention, SelfAttention, context_vectors, dropout_scale, split_heads

SEED_002 = "seed 002_5796c8154c5408de.txt"


def softmax_detached(scores, dim=-1):
    peak = scores.amax(dim=dim, keepdim=True)
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    exp = torch.exp(scores - peak)
    total = exp.sum(dim=dim, keepdim=True)
    out = exp / torch.where(total > 0, total, torch.ones_like(total))
    return out.detach()  # "to be safe": the weights leave the graph


def softmax_where_nan(scores, dim=-1):
    peak = scores.amax(dim=dim, keepdim=True)
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    exp = torch.exp(scores - peak)
    total = exp.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, exp / total, 0.0)  # a fully masked row: right zeros, but backward meets 0/0


def context_detaches_weights(weights, values):
    return context_vectors(weights.detach(), values)


def dropout_scale_on_data(weights, keep_mask, p):
    return dropout_scale(weights.data, keep_mask, p)


def split_heads_no_grad(x, num_heads):
    with torch.no_grad():
        return split_heads(x, num_heads).clone()


class CausalNoGrad(CausalAttention):
    def forward(self, x):
        with torch.no_grad():  # "inference only": nothing before it learns
            return super().forward(x)


class FrozenSelfAttention(SelfAttention):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__(d_in, d_out, qkv_bias)
        self.requires_grad_(False)  # the chapter's illustration: nn.Parameter(..., requires_grad=False)


def make_frozen_self_attention(d_in, d_out, qkv_bias=False):
    return FrozenSelfAttention(d_in, d_out, qkv_bias)


def make_causal_no_grad(d_in, d_out, context_length, dropout, qkv_bias=False):
    return CausalNoGrad(d_in, d_out, context_length, dropout, qkv_bias)


def chunked_in_place(queries, keys, values, chunk_size, causal=False):
    """The reference's online softmax, but each block is shifted and exponentiated in place after ``amax`` saved it."""
    if chunk_size < 1:
        raise ValueError(f"chunked_attention needs chunk_size >= 1, got {chunk_size}")
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    q = queries / math.sqrt(queries.shape[-1])
    stats = (*queries.shape[:-1], 1)
    peak = torch.full(stats, float("-inf"), dtype=queries.dtype, device=queries.device)
    total = torch.zeros(stats, dtype=queries.dtype, device=queries.device)
    mixed = torch.zeros((*queries.shape[:-1], values.shape[-1]), dtype=queries.dtype, device=queries.device)
    last_seen = torch.arange(num_queries, device=queries.device).unsqueeze(-1) + (num_keys - num_queries)
    for start in range(0, num_keys, chunk_size):
        block = q @ keys[..., start : start + chunk_size, :].transpose(-2, -1)
        if causal:
            positions = torch.arange(start, start + block.shape[-1], device=queries.device)
            block = block.masked_fill(positions > last_seen, float("-inf"))
        new_peak = torch.maximum(peak, block.amax(dim=-1, keepdim=True))
        shift = torch.where(torch.isfinite(new_peak), new_peak, torch.zeros_like(new_peak))
        rescale = torch.exp(peak - shift)
        exp = block.sub_(shift).exp_()  # in place: amax saved `block` for its backward
        total = total * rescale + exp.sum(dim=-1, keepdim=True)
        mixed = mixed * rescale + exp @ values[..., start : start + chunk_size, :]
        peak = new_peak
    return mixed / torch.where(total > 0, total, torch.ones_like(total))


_CUT_HINT = (
    "Your values are right, but no gradient flows back through {what}. Which step takes the result out of the "
    "graph (`.detach()`, `.data`, `torch.no_grad()`, a NumPy round trip)? A model built on it would never learn.",
    "你的数值是对的，但梯度无法沿{what_zh}反向传播。是哪一步把结果移出了计算图（`.detach()`、`.data`、"
    "`torch.no_grad()`、经过 NumPy 的转换）？基于它的模型永远学不到东西。",
)


def _cut(what: str, what_zh: str) -> tuple[str, str]:
    return _CUT_HINT[0].format(what=what), _CUT_HINT[1].format(what_zh=what_zh)


ENTRIES = (
    (
        "softmax-detached",
        "returns the weights `.detach()`ed: right values, but nothing before the softmax can learn",
        *_cut("your softmax", "你的 softmax "),
        {"softmax_weights": softmax_detached},
    ),
    (
        "softmax-where-nan-grad",
        "guards the division with one `torch.where(total > 0, exp / total, 0)`: a fully masked row gives the right "
        "zeros forward, but NaN gradients (the untaken branch's 0/0 is still differentiated)",
        "On a fully masked row your weights are right, but the gradient is NaN. `torch.where` differentiates both "
        "branches: what does the branch you did not take compute there? Make the division itself safe first.",
        "在完全被掩盖的行上你的权重是对的，但梯度是 NaN。`torch.where` 会对两个分支都求导：你没有选用的那个分支在"
        "那里算的是什么？先让除法本身变得安全。",
        {"softmax_weights": softmax_where_nan},
        SEED_002,
    ),
    (
        "context-detaches-weights",
        "multiplies `weights.detach()` by the values: the attention weights never learn",
        *_cut("the weights in your context vectors", "上下文向量中的权重"),
        {"context_vectors": context_detaches_weights},
    ),
    (
        "dropout-scale-on-data",
        "scales `weights.data`: right values, but dropout cuts the graph",
        *_cut("your dropout", "你的 dropout "),
        {"dropout_scale": dropout_scale_on_data},
    ),
    (
        "split-heads-no-grad",
        "splits the heads under `torch.no_grad()`: right shapes and values, but no gradient reaches the input",
        *_cut("your head split", "你的多头拆分"),
        {"split_heads": split_heads_no_grad},
    ),
    (
        "causal-forward-no-grad",
        "runs CausalAttention's forward under `torch.no_grad()`: right outputs, but none of its weights can learn",
        *_cut("your module's forward", "你的模块的 forward "),
        {"make_causal_attention": make_causal_no_grad},
    ),
    (
        "frozen-parameters",
        "freezes SelfAttention's weights (`requires_grad=False`, as the chapter's illustration does): right "
        "outputs, but training cannot change them",
        "Your outputs are right, but your weight matrices do not require grad, so training cannot change them. "
        "The chapter freezes them only to illustrate; where do you set requires_grad=False?",
        "你的输出是对的，但权重矩阵不需要梯度，训练无法改变它们。书中冻结它们只是为了演示；你在哪里设置了 "
        "requires_grad=False？",
        {"make_self_attention": make_frozen_self_attention},
        "the chapter",
    ),
    (
        "chunked-in-place-after-amax",
        "shifts and exponentiates each block in place after `amax` saved it: right values, but backward raises "
        "'modified by an inplace operation'",
        "Your values are right, but backward fails: a tensor autograd saved (the block you took the max of) was "
        "changed in place afterwards. Which `_` method (`sub_`, `exp_`) writes into it? Make a new tensor instead.",
        "你的数值是对的，但反向传播失败了：自动求导保存的一个张量（你取最大值的那个块）之后被原地修改了。是哪个带 "
        "`_` 的方法（`sub_`、`exp_`）写入了它？请改为生成新张量。",
        {"chunked_attention": chunked_in_place},
    ),
)
"""``(id, description, hint, hint_zh, overrides[, source])`` of each entry (``solutions.mistakes._m``'s order)."""
