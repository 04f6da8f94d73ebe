"""The Chinese of every hidden case's description, by the case's id: its hook and its name.

A case's English is declared with the case (``Case.what``, in :mod:`grader.instructor.groups.chapter`); this table
holds only its other languages.  :func:`case_messages` makes each an entry of
:data:`~grader.instructor.messages.MESSAGES` whose English is the case's own (the parameter ``{what}``), so the
case's description is said by id (``case.<hook>[<name>]``) and rendered in a report's language.  A case's sizes
are the suite's (drawn from ``SHAPES_SEED``), the same under every run's seed, so they are written here as they
are; numbers, shapes and code stay as they are in every language.  ``tests/test_messages.py`` checks that every
case has its Chinese, that no entry names a case that does not exist, and that the Chinese keeps the numbers.
"""

from __future__ import annotations

__all__ = ["CASE_WORDS", "case_id", "case_messages"]

_SCORES = {
    "2d-Tq!=Tk": "2 维，Tq != Tk",
    "3d-batched": "带批次的 3 维输入",
    "4d-heads": "4 维（多头）",
    "T=1": "单个词元",
    "Tq=1": "一个查询、多个键",
    "d=1": "d_k = 1",
    "non-contiguous": "不连续的输入（转置视图）",
}

_REFERENCE = "参考实现的权重"
_BUILT = "像本章一样在 torch.manual_seed 之后构建：W_query、W_key、W_value（然后是 out_proj）依次创建为 nn.Linear 层"
_TRAINED = "：每个注意力权重或被丢弃、或按 1/(1-p) 放大，这发生在权重与值相乘之前"
_CAUSAL = "改变位置 4 的词元不影响更早位置的输出"
_MASK_BUFFER = "因果掩码是名为 mask 的缓冲区（在 state_dict 中，随 .to(device) 移动）"

CASE_WORDS: dict[str, dict[str, str]] = {
    "dot_product_scores": {
        **_SCORES,
        "random-0": "随机的 2 维形状",
        "random-1": "随机的 4 维形状",
        "random-2": "随机的 2 维形状",
    },
    "scaled_dot_product_scores": {
        **_SCORES,
        "random-0": "随机的 3 维形状",
        "random-1": "随机的 2 维形状",
        "random-2": "随机的 4 维形状",
    },
    "softmax_weights": {
        "2d-rows": "2 维，沿最后一维",
        "3d-batched": "带批次的 3 维输入，dim=-1",
        "dim=0": "正的 dim=0",
        "dim=1": "3 维输入上正的 dim=1",
        "dim=-2": "负的 dim=-2",
        "4d": "4 维（多头）",
        "large-logits": "约为 ±1e4 的分数",
        "logits-20-to-100": "从 20 到 100 的分数：不先减去最大值，exp 就会溢出（float16 下超过 11 即溢出）",
        "masked": "-inf 元素（因果掩码）",
        "all-masked-row": "整行都是 -inf",
        "random-0": "随机的 3 维输入",
        "random-1": "随机的 3 维输入",
    },
    "softmax_with_temperature": {
        "T=1": "温度 1：即普通的 softmax",
        "T=0.4": "温度 0.4 使分布更尖锐",
        "T=2.5-4d": "温度 2.5 使分布更平坦，4 维（多头）",
        "T=1e-4": "温度 1e-4：（近似）独热的行，不出现 NaN",
        "T=1e4": "温度 1e4：近乎均匀的行",
        "dim=0": "温度 1.7，沿 dim=0",
        "dim=-2": "温度 0.7，沿 dim=-2",
        "masked": "温度 0.6 下的 -inf 元素（因果掩码）",
        "all-masked-row": "整行都是 -inf，温度 0.8",
        "logits-20-to-100": "温度 0.9 下从 20 到 100 的分数：不先减去最大值，exp 就会溢出",
        "T=0-raises": "温度 0 抛出 ValueError",
        "T=-1-raises": "温度 -1 抛出 ValueError",
        "random-0": "随机的 3 维输入，温度 0.55",
        "random-1": "随机的 3 维输入，温度 3.2",
    },
    "context_vectors": {
        "2d": "2 维，dv != T",
        "3d-batched": "带批次，Tq != Tk",
        "4d": "4 维（多头）",
        "T=1": "单个词元",
        "random-0": "随机形状",
        "random-1": "随机形状",
    },
    "causal_mask": {
        "T=1": "T = 1",
        "T=2": "T = 2",
        "T=5": "T = 5",
        "T=13": "T = 13",
        "T=0-raises": "num_tokens = 0 抛出 ValueError",
        "T=-3-raises": "num_tokens = -3 抛出 ValueError",
    },
    "apply_causal_mask": {
        "2d": "2 维，T = 7",
        "3d-batched": "带批次的 3 维输入",
        "4d-heads": "4 维（多头）",
        "T=1": "单个词元",
        "T=11": "T 大于本章的 6",
        "non-square-raises": "形状为 (…, 4, 5) 的分数抛出 ValueError",
        "random-0": "随机的 T",
        "random-1": "随机的 T",
    },
    "renormalize_masked_weights": {
        "2d": "2 维，T = 4",
        "3d-batched": "带批次",
        "4d-heads": "4 维（多头）",
        "T=1": "单个词元",
        "random-0": "随机的 T",
        "random-1": "随机的 T",
    },
    "dropout_scale": {
        "p=0.1": "p = 0.1",
        "p=0.5": "p = 0.5",
        "p=0.0": "p = 0.0",
        "p=1": "p = 1 得到全零，绝不出现 inf 或 NaN",
        "float-keep-mask": "浮点型的 0/1 保留掩码",
        "p=-0.1-raises": "p = -0.1 抛出 ValueError",
        "p=1.5-raises": "p = 1.5 抛出 ValueError",
    },
    "attention_dropout": {
        "eval": "eval 模式：dropout 关闭",
        "p=0": "p = 0 全部保留",
        "p=1": "p = 1 全部丢弃",
        "train-p=0.2": "训练模式，p = 0.2：从同一个生成器状态调用两次，再从另一个状态调用一次",
        "train-p=0.5": "训练模式，p = 0.5：从同一个生成器状态调用两次，再从另一个状态调用一次",
    },
    "split_heads": {
        "H3-T5-hd4": "3 个头，5 个词元，head_dim 4",
        "H1": "单个头",
        "hd1": "head_dim 为 1",
        "non-contiguous": "不连续的输入",
        "indivisible-raises": "d % H != 0 时抛出 ValueError",
        "random-0": "随机",
        "random-1": "随机",
    },
    "merge_heads": {
        "H3-T5-hd4": "3 个头，5 个词元，head_dim 4",
        "H1": "单个头",
        "non-contiguous": "不连续的输入",
        "random-0": "随机",
        "random-1": "随机",
    },
    "make_self_attention": {
        "names": "参数名",
        "reference-weights": f"{_REFERENCE}，d_in=5, d_out=12, T=7",
        "qkv-bias": "qkv_bias=True, d_in=4, d_out=10, T=3",
        "init-seed": _BUILT,
        "T=1": "单个词元，d_in=4, d_out=10, T=1",
        "unbatched": "不带批次的 (T, d_in) 输入，d_in=7, d_out=4, T=5",
        "random-0": "随机尺寸，d_in=8, d_out=12, T=7",
        "random-1": "随机尺寸，d_in=7, d_out=10, T=4",
    },
    "make_causal_attention": {
        "names": "参数名",
        "reference-weights": f"{_REFERENCE}，d_in=5, d_out=12, T=7, context_length=11",
        "qkv-bias": "qkv_bias=True, d_in=4, d_out=10, T=3, context_length=9",
        "init-seed": _BUILT,
        "T=1": "单个词元，d_in=4, d_out=10, T=1, context_length=9",
        "T=context": "T 等于 context_length，d_in=4, d_out=15, T=8, context_length=8",
        "causality": f"{_CAUSAL}，d_in=5, d_out=8, T=9, context_length=10",
        "eval-dropout": "eval 模式下 dropout=0.5 的输出是确定的，d_in=5, d_out=12, T=7, context_length=9",
        "train-dropout": "训练模式，dropout=0.3（T=5，4 次前向传播）" + _TRAINED,
        "mask-buffer": _MASK_BUFFER,
        "random-0": "随机尺寸，d_in=7, d_out=10, T=3, context_length=4",
        "random-1": "随机尺寸，d_in=5, d_out=12, T=2, context_length=7",
    },
    "make_multihead_attention": {
        "names": "参数名",
        "reference-weights": f"{_REFERENCE}，d_in=5, d_out=12，3 个头、每个 4 维，T=7, context_length=11",
        "qkv-bias": "qkv_bias=True, d_in=4, d_out=10，2 个头、每个 5 维，T=3, context_length=9",
        "init-seed": _BUILT,
        "T=1": "单个词元，d_in=4, d_out=10，2 个头、每个 5 维，T=1, context_length=9",
        "T=context": "T 等于 context_length，d_in=4, d_out=15，3 个头、每个 5 维，T=8, context_length=8",
        "causality": f"{_CAUSAL}，d_in=5, d_out=8，2 个头、每个 4 维，T=9, context_length=10",
        "eval-dropout": "eval 模式下 dropout=0.5 的输出是确定的，d_in=5, d_out=12，3 个头、每个 4 维，T=7, "
        "context_length=9",
        "train-dropout": "训练模式，dropout=0.25（3 个头、每个 5 维，T=4，4 次前向传播）" + _TRAINED,
        "mask-buffer": _MASK_BUFFER,
        "one-head": "num_heads = 1, d_in=4, d_out=5，1 个头、每个 5 维，T=3, context_length=7",
        "indivisible-raises": "d_out % num_heads != 0 时，构建模块就抛出异常（建议用 ValueError）",
        "random-0": "随机尺寸，d_in=3, d_out=20，4 个头、每个 5 维，T=2, context_length=7",
        "random-1": "随机尺寸，d_in=7, d_out=8，2 个头、每个 4 维，T=3, context_length=5",
    },
    "sliding_window_mask": {
        "T=9-w=3": "T = 9，窗口 3：未来的位置和往前超过 2 个的位置都被遮蔽",
        "T=7-w=1": "窗口 1：每个词元只看到自己",
        "T=5-w=2": "窗口 2：自己和前一个词元",
        "T=8-w=8": "窗口 = T 时等于因果掩码",
        "T=4-w=11": "窗口 > T 时等于因果掩码",
        "T=1-w=3": "单个词元",
        "T=10-w=8": "随机的 T 和窗口",
        "T=11-w=8": "随机的 T 和窗口",
        "T=5-w=0-raises": "window = 0 抛出 ValueError",
        "T=5-w=-2-raises": "window = -2 抛出 ValueError",
        "T=0-w=3-raises": "num_tokens = 0 抛出 ValueError",
        "T=-1-w=3-raises": "num_tokens = -1 抛出 ValueError",
    },
    "chunked_attention": {
        "main": "带批次，chunk_size 3 不能整除 Tk = 11",
        "chunk=1": "chunk_size 1：每块一个键",
        "chunk>Tk": "chunk_size > Tk：只有一块",
        "chunk=Tk": "chunk_size = Tk：只有一块",
        "causal": "因果，Tq = Tk",
        "causal-Tq<Tk": "因果，4 个查询位于 9 个键的末尾",
        "causal-Tq>Tk": "因果，8 个查询、5 个键：前 3 个查询看不到任何键，输出为零",
        "unbatched": "没有批次维：形状为 (Tq, d) 的查询",
        "4d-heads": "两个批次维（批次、头）",
        "large-logits": "数百量级的分数：不维护逐块更新的最大值，exp 就会溢出",
        "negative-logits": "每个分数都远小于零：逐块更新的最大值若从 0 开始就会下溢",
        "long": "长序列，Tq = Tk = 2048，d = 16，chunk_size 8，因果：任何时刻持有的都不能达到一个批次-头的完整 "
        "(Tq, Tk) 分数那么多",
        "longest": "更长的序列，Tq = 2048，Tk = 16384，d = 16，chunk_size 32，从你的进程外部测量：任何时刻持有的都"
        "不能达到它的完整 (Tq, Tk) 分数那么多",
        "random-0": "随机形状，2 个批次维",
        "random-1": "随机形状，1 个批次维",
    },
    "plot_attention": {
        "square": "(8, 8) 的权重，没有词元",
        "rectangular": "(4, 10) 的权重，Tq != Tk",
        "tokens": "(9, 9) 的权重和一个含 9 个词元的序列",
        "token-pair": "(4, 10) 的权重，4 个查询词元和 10 个键词元",
        "token-pair-square": "(9, 9) 的权重，查询与键的词元不同",
        "requires-grad": "需要梯度的权重（来自模型）",
        "batched-raises": "带批次的 (2, 4, 10) 权重抛出 ValueError",
        "heads-raises": "多头的 (2, 3, 8, 8) 权重抛出 ValueError",
        "wrong-token-count-raises": "10 个键只给了 9 个键词元，抛出 ValueError",
        "random-0": "随机形状",
        "random-1": "随机形状",
    },
}
"""Each hook's cases, by name: the Chinese of the case's description (its English is ``Case.what``)."""


def case_id(hook: str, name: str) -> str:
    """The id a case's description is said by: ``case.<hook>[<name>]`` (a hook and a case name never change)."""
    return f"case.{hook}[{name}]"


def case_messages() -> dict[str, dict[str, str]]:
    """An entry of the messages' table for each case of :data:`CASE_WORDS`: its English the case's own (``{what}``)."""
    return {
        case_id(hook, name): {"en": "{what}", "zh": chinese}
        for hook, cases in CASE_WORDS.items()
        for name, chinese in cases.items()
    }
