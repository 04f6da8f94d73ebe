"""The words of a student's feedback, per language: the page's fixed texts, and every message grading says, by id.

:data:`TEXTS` holds every fixed word the feedback templates and Gradescope's ``results.json`` write; :func:`texts`
gives a language's (English where a language or a key is missing).  :data:`MESSAGES` is what grading says about a
case: an id, and its template in each language with the same named ``{parameters}`` (a value, a name, anything a
learner wrote, or a message).  Grading says a message by id (:func:`grader.instructor.said.said`); the report
renders it in its language (:func:`grader.instructor.said.message_in`).  The kit's rules take their English from
the kit (:data:`grader.rules.WORDS`), which says them in the local check; hints come from the mistakes' catalogue.
"""

from __future__ import annotations

from grader.cell_places import CELL_PLACE
from grader.hook_table import TABLE
from grader.instructor.case_words import case_messages
from grader.rule_words import WORDS as KIT

__all__ = ["LANGUAGES", "MESSAGES", "TEXTS", "texts"]

_TEXTS: dict[str, tuple[str, str]] = {  # key: (English, Chinese)
    "html_lang": ("en", "zh"),
    "title": ("Feedback for {student}", "{student} 的反馈"),
    "score": ("Score: {earned} / {possible} points", "得分：{earned} / {possible} 分"),
    "error_title": ("Your submission could not be graded.", "你的提交无法评分。"),
    "error_body": ("Every exercise scores 0 until this is fixed:", "在修复之前，每道练习都是 0 分："),
    "cases_passed": ("{passed} of {ran} cases passed.", "{ran} 个用例中通过了 {passed} 个。"),
    "devices_ran": ("Devices that ran", "运行的设备"),
    "device_why": ("{device}: {reason}", "{device}：{reason}"),
    "none": ("none", "无"),
    "overview": ("Overview", "总览"),
    "exercise": ("exercise", "练习"),
    "points": ("points", "得分"),
    "passed_h": ("passed", "通过"),
    "failed_h": ("failed", "失败"),
    "result": ("result", "结果"),
    "cases": ("cases", "用例"),
    "why": ("why", "原因"),
    "failing": ("Exercises to fix", "需要修改的练习"),
    "passing": ("Exercises that pass", "已通过的练习"),
    "passed": ("passed", "通过"),
    "failed": ("failed", "失败"),
    "skipped": ("skipped", "跳过"),
    "counts": ("{passed} passed, {failed} failed.", "通过 {passed} 个，失败 {failed} 个。"),
    "counts_skipped": (
        "{passed} passed, {failed} failed, {skipped} skipped.",
        "通过 {passed} 个，失败 {failed} 个，跳过 {skipped} 个。",
    ),
    "all_passed": ("All {passed} cases passed.", "全部 {passed} 个用例通过。"),
    "one_passed": ("The case passed.", "该用例通过。"),
    "known_mistake": ("This looks like a known mistake", "这看起来是一个常见错误"),
    "hint": ("Hint", "提示"),
    "case_one": ("1 case", "1 个用例"),
    "case_many": ("{count} cases", "{count} 个用例"),
    "failed_in": ("Failed in", "失败的用例"),
    "skipped_in": ("Skipped in", "跳过的用例"),
    "note_on": ("Note on {cases} ({where}), for no points", "关于 {cases}（{where}）的说明，不影响得分"),
    "first_case": ("first case", "第一个用例"),
    "no_message": ("failed (no message)", "失败（没有说明）"),
    "note_nothing_ran_skipped": (
        "No case of this exercise ran (all skipped), so it earns 0 points.",
        "这道练习没有运行任何用例（全部跳过），所以得 0 分。",
    ),
    "note_nothing_ran": (
        "No case of this exercise ran, so it earns 0 points.",
        "这道练习没有运行任何用例，所以得 0 分。",
    ),
    "adjusted": (
        "Adjusted by the instructor: {change} ({was} -> {now} points). Why: {reason}",
        "教师已调整分数：{change}（{was} -> {now} 分）。原因：{reason}",
    ),
    "note_all_or_nothing": ("All or nothing: a failed case means 0 points.", "全对才得分：有一个用例失败就是 0 分。"),
    "figure_caption": (
        "The failing case {label}: expected, what your code returned, and where they differ.",
        "失败的用例 {label}：期望值、你的代码返回的值，以及两者的差别。",
    ),
    "figure_alt_weights": (
        "Heatmaps of the expected and the returned attention weights of the failing case {label}",
        "失败用例 {label} 的期望注意力权重与返回的注意力权重的热力图",
    ),
    "figure_alt_mask": (
        "Pictures of the expected and the returned boolean mask of the failing case {label} (True = masked, drawn "
        "yellow)",
        "失败用例 {label} 的期望布尔掩码与返回的布尔掩码（True = 被遮蔽，黄色）",
    ),
    "printed": ("What your code printed", "你的代码打印的内容"),
    "more": ("… and {rest} more (see feedback.html)", "……还有 {rest} 条（见 feedback.html）"),
    "more_problems": ("… and {rest} more kinds of failure", "……还有 {rest} 种失败"),
    "and_more": (" and {more} more", "，另有 {more} 个"),
    "looks_like": ("Looks like the known mistake '{mistake}'", "看起来是常见错误 '{mistake}'"),
}
EN: dict[str, str] = {key: words[0] for key, words in _TEXTS.items()}
ZH: dict[str, str] = {key: words[1] for key, words in _TEXTS.items()}

TEXTS: dict[str, dict[str, str]] = {"en": EN, "zh": ZH}
LANGUAGES = tuple(TEXTS)


class Texts(dict):  # type: ignore[type-arg]
    """A language's texts; a key it lacks falls back to English (a template never shows a raw key)."""

    def __missing__(self, key: str) -> str:
        return EN[key]


def texts(lang: str | None) -> Texts:
    """The texts of ``lang`` (English for an unknown language)."""
    return Texts(TEXTS.get(str(lang or "en"), EN))


# --- grading's messages, by id ---------------------------------------------------------------------------------

_ADVICE = "逐块遍历键，并维护滚动的最大值与和"
_TRY_AGAIN = "哪一步需要一次拿到全部？"
_EXTRAS = ("that the contract's module does not have: the cases leave them as your module makes them",
           "约定的模块中没有的额外参数 {names}：用例会保持它们在你的模块中创建时的样子")
_RUNNING = (
    " your call started (or your code started before it) still ran as it returned: the grader cannot weigh what they "
    "hold. Start no process",
    "你的调用（或在它之前你的代码）启动的 {n} 个进程在调用返回时仍在运行：评分程序无法衡量它们持有多少内存。不要启"
    "动进程",
)

_PAIRS: dict[str, tuple[str, str]] = {  # id: (English, Chinese)
    # how messages nest
    "case": ("{what}: {message}", "{what}: {message}"),
    "case.again": ("{what}, again with fresh values of the same shapes", "{what}，再换一组同样形状的新值"),
    "output": ("output {n}: {problem}", "输出 {n}：{problem}"),
    "at": ("{message} (at {where})", "{message}（位于 {where}）"),
    "cell_place": (CELL_PLACE, "第 {cell} 个单元格（`{first}`）第 {line} 行"),  # a place in a notebook hand-in
    "none": ("none", "无"),
    "something": ("something", "某个对象"),
    # a value, a shape, a dtype (grader.instructor.verdict)
    "values_differ": (
        "values differ: max abs diff {diff} at {index} (got {got}, expected {expected})",
        "数值不符：最大绝对误差 {diff} 位于 {index} （得到 {got}，应为 {expected}）",
    ),
    "values_shown": ("{values}; got {got}, expected {expected}", "{values}；得到 {got}，应为 {expected}"),
    "shape": ("returned shape {got}, expected {expected}", "返回的形状是 {got}，应为 {expected}"),
    "dtype.meta": ("returned dtype {got}, expected {expected}", "返回的 dtype 是 {got}，应为 {expected}"),
    "wrong_entries": (
        "wrong entries, first at {index}: got {got}, expected {expected}",
        "元素错误，第一个在 {index}：得到 {got}，应为 {expected}",
    ),
    "nan": ("NaN in the output, first at {index}, where no NaN belongs", "输出中有不该出现的 NaN，第一个在 {index}"),
    "not_a_tensor": ("returned {kind}, expected a torch.Tensor", "返回了 {kind}，应为 torch.Tensor"),
    "wrong_device": (
        "returned a tensor on {device} for inputs on {expected}",
        "输入在 {expected} 上，返回的张量却在 {device} 上",
    ),
    "tensor_unread": ("returned a tensor the grader could not read", "返回了一个评分程序无法读取的张量"),
    "returned_nothing": ("returned nothing", "什么也没有返回"),
    "figure.unread": ("returned a figure whose image the grader could not read", "返回的图中的图像评分程序无法读取"),
    "image_array": ("the image's array: {problem}", "图像的数组：{problem}"),
    "image_arrays": ("the images' arrays: {problem}", "各个图像的数组：{problem}"),
    # what was raised, or should have been
    "raised": ("raised {error}", "抛出了 {error}"),
    "grad.values": ("the gradient of {input} is wrong: {problem}", "{input} 的梯度不对：{problem}"),
    "grad.missing": ("sent back no gradient for {input}", "没有发回 {input} 的梯度"),
    "not_implemented": ("not implemented yet ({text})", "尚未实现 ({text})"),
    "inconclusive": ("inconclusive on the meta device: {message}", "在 meta 设备上无法判断：{message}"),
    "should_raise.raised": (
        "should raise {wanted} ({what}), raised {kind}: {text}",
        "应当抛出 {wanted} ({what})，却抛出了 {kind}: {text}",
    ),
    "should_raise.not_own": (
        "should raise {wanted} ({what}) with a raise of its own; this {kind} was raised inside a library it called: "
        "{text}",
        "应当用自己的 raise 抛出 {wanted} ({what})；这个 {kind} 是在它调用的库内部抛出的：{text}",
    ),
    "should_raise.returned": (
        "should raise {wanted} ({what}), returned normally",
        "应当抛出 {wanted} ({what})，却正常返回了",
    ),
    "an_exception": ("an exception", "一个异常"),
    "unloadable": (
        "the reference's weights cannot be loaded into your module: its parameters are {mine}; the contract's are "
        "{contract}. They match neither by name, nor by the roles the names give (Wq, w_key, value_proj…), nor one by "
        "one in creation order and shape (a stacked nn.Linear(d_in, 3 * d_out) counts as three), so no case can run "
        "your module with the reference's weights",
        "参考实现的权重无法加载到你的模块中：它的参数是 {mine}；约定的参数是 {contract}。两者既不能按名字对应，也不能按"
        "名字所表示的角色对应（Wq、w_key、value_proj…），也不能按创建顺序和形状逐一对应（一个堆叠的 nn.Linear(d_in, 3 "
        "* d_out) 算作三个），所以没有用例能用参考实现的权重运行你的模块",
    ),
    # the hidden cases' properties (grader.instructor.case_properties)
    "exact_zeros": (
        "-inf scores must give exactly 0 weight, got small non-zero values",
        "-inf 的分数必须给出恰好为 0 的权重，得到的却是很小的非零值",
    ),
    "dropout.scale": (
        "kept entries must be w/(1-p) = w*{scale} for p={p}, got about w*{ratio}",
        "保留的元素必须是 w/(1-p) = w*{scale}（p={p}），得到的大约是 w*{ratio}",
    ),
    "dropout.fraction": (
        "kept {fraction} of the entries; with p={p} expect {keep} ± {bound} (keep with 1-p)",
        "保留了 {fraction} 的元素；p={p} 时应为 {keep} ± {bound}（以 1-p 的概率保留）",
    ),
    "dropout.same_state": (
        "two calls with the same generator state gave different masks: draw from `generator`",
        "两次调用的 generator 状态相同，掩码却不同：请从 `generator` 中抽取",
    ),
    "dropout.other_seed": (
        "a generator seeded differently gave the same mask: draw the mask from `generator`, not a fixed one",
        "换了种子的 generator 给出了相同的掩码：请从 `generator` 中抽取掩码，不要用固定的掩码",
    ),
    "causal_prefix": (
        "changing token {t} changed the outputs before it: the future leaks through the mask",
        "改变第 {t} 个词元改变了它之前的输出：未来的信息透过掩码泄漏了",
    ),
    "zero_rows": (
        "a query that sees no key at all (every key masked) must give exactly 0, got other values",
        "看不到任何键的查询（所有键都被遮蔽）必须给出恰好为 0 的结果，得到的却是其他值",
    ),
    "memory.unmeasured": (
        "the grader could not measure the memory your call used (no record of it came back)",
        "评分程序无法度量你的调用使用的内存（没有收到相应的记录）",
    ),
    "names": (
        "your layers are named otherwise than the contract's ({renamed}), so the chapter's state_dict would not load "
        "into your module. Every other case loads the reference's weights {how}: only this case counts the names",
        "你的层的名字与约定的不同（{renamed}），所以本章的 state_dict 无法加载到你的模块中。其他用例都{how}加载参考实现"
        "的权重：只有这个用例计较名字",
    ),
    "names.role": ("by the roles your names give them", "按你的名字所表示的角色"),
    "names.order": ("by creation order and shape", "按创建顺序和形状"),
    "training.none_dropped": (
        "in training mode with dropout={p} no attention weight was dropped: apply the dropout (nn.Dropout(dropout), "
        "called in forward) to the attention weights, after the softmax",
        "在训练模式下 dropout={p}，却没有丢弃任何注意力权重：在 softmax 之后，对注意力权重应用 "
        "dropout（nn.Dropout(dropout)，在 forward 中调用）",
    ),
    "training.seen_as": (
        "at (batch, head, query, key) = {at}: got {got}, w = {w}",
        "在 (batch, head, query, key) = {at} 处：得到 {got}，w = {w}",
    ),
    "training.unscaled": (
        "in training mode the kept attention weights are not scaled ({seen_as}): inverted dropout divides what it "
        "keeps by 1 - p = {keep}, as nn.Dropout does",
        "在训练模式下，保留的注意力权重没有缩放（{seen_as}）：inverted dropout 会把保留的值除以 1 - p = "
        "{keep}，nn.Dropout 就是这样做的",
    ),
    "training.not_dropout": (
        "in training mode with dropout={p} the attention weights are not each 0 or w/(1-p) of the eval-mode weights w "
        "({seen_as}): dropout belongs on the softmax's weights, scaled by 1/(1-p), with nothing after it (not on the "
        "scores, no renormalising). Where the eval-mode cases fail too, fix those first",
        "在训练模式下 dropout={p}，注意力权重并不都是评估模式权重 w 的 0 或 w/(1-p)（{seen_as}）：dropout 应作用于 "
        "softmax 得到的权重，乘以 1/(1-p)，之后不再做别的（不作用于分数，也不重新归一化）。如果评估模式的用例也失败，先"
        "修复那些",
    ),
    "training.context": (
        "in training mode the context vectors are not the dropped attention weights times the values: apply dropout to "
        "the attention weights, not to the context vectors (or the values)",
        "在训练模式下，上下文向量不等于丢弃后的注意力权重乘以值：dropout 应作用于注意力权重，而不是上下文向量（或值）",
    ),
    "training.fraction": (
        "in training mode {fraction} of the attention weights were kept; with dropout={p} expect {keep} ± {bound} "
        "(each weight is dropped with probability p)",
        "在训练模式下保留了 {fraction} 的注意力权重；dropout={p} 时应为 {keep} ± {bound}（每个权重以概率 p 被丢弃）",
    ),
    "training.same": (
        "every forward in training mode dropped the same weights: draw a new dropout mask for each call",
        "训练模式下每次 forward 丢弃的都是相同的权重：每次调用都要抽取新的 dropout 掩码",
    ),
    "extras.one": ("your module has {first}", "你的模块有{first}"),
    "extras.both": ("your module has {first}; and {then}", "你的模块有{first}；还有{then}"),
    "extras.parameter": ("extra parameter {names} " + _EXTRAS[0], _EXTRAS[1]),
    "extras.parameters": ("extra parameters {names} " + _EXTRAS[0], _EXTRAS[1]),
    "extras.buffer": ("an extra buffer {names}: fine, noted", "一个额外的 buffer {names}：没问题，记下了"),
    "extras.buffers": ("an extra buffers {names}: fine, noted", "额外的 buffer {names}：没问题，记下了"),
    # what the kernel says a measured call held (grader.instructor.held_memory)
    "held.unread": (
        "the grader could not read the kernel's record of your process after your call; nothing was measured",
        "调用结束后，评分程序无法读取内核对你的进程的记录；什么也没有度量到",
    ),
    "held.running": ("{n} process" + _RUNNING[0], _RUNNING[1]),
    "held.running_many": ("{n} processes" + _RUNNING[0], _RUNNING[1]),
    "held.too_much": (
        "the kernel's record of your process (read by the grader, outside it) says your call held {amount} MiB "
        "({where}): room for {scores}, {allowed} MiB{form}; a chunked version holds a few blocks of ({tq}, {block}). "
        "Walk the keys block by block, keeping a running max and sum",
        "内核对你的进程的记录（由评分程序在进程外读取）显示你的调用持有了 {amount} MiB（{where}）：足以容纳{scores}，"
        "{allowed} MiB{form}；分块的版本只持有几个 ({tq}, {block}) 的块。" + _ADVICE,
    ),
    "held.part": ("{mib} MiB {what}", "{mib} MiB {what}"),
    "held.new": ("in new memory", "在新内存中"),
    "held.earlier": ("in memory made before the call", "在调用之前创建的内存中"),
    "held.reused": (
        "in new memory, in room made by giving back other pages (the grader's samples while it ran)",
        "在新内存中，用的是归还其他页面腾出的空间（评分程序在运行期间的采样）",
    ),
    "held.written": ("written out to a file or a pipe", "写到了文件或管道中"),
    "held.others": ("in processes it started", "在它启动的进程中"),
    "held.scores": ("the ({tq}, {tk}) scores of one batch-head", "一个批次-头的 ({tq}, {tk}) 分数"),
    "held.causal_scores": (
        "the ({tq}, {tk}) scores of one batch-head a causal call keeps",
        "因果调用保留的一个批次-头的 ({tq}, {tk}) 分数",
    ),
    "held.packed": (
        ", {bytes} bytes a score (a 16-bit copy keeps the answers)",
        "，每个分数 {bytes} 字节（16 位的副本就能保住答案）",
    ),
    # a submission, an exercise or a case that could not be judged (grader.instructor.submission_grading, sandbox)
    "not_graded": ("not graded: {error}", "未评分：{error}"),
    "grading_stopped": ("grading stopped: {error}", "评分中止：{error}"),
    "could_not_load": ("could not load the submission: {reason}", "无法加载提交：{reason}"),
    "does_not_import": ("the submission does not import: {error}", "提交的代码无法导入：{error}"),
    "no_function": ("no function {hook}; the hook is {signature}", "没有函数 {hook}；应为 {signature}"),
    "bad_signature": ("{where}: {problem}; the hook is {signature}", "{where}：{problem}；应为 {signature}"),
    "device_skipped": ("{device}: {reason}", "{device}: {reason}"),
    "not_available": ("not available", "不可用"),
    "not_run": (
        "not run: an earlier case of {hook} ({case}) failed with: {reason}",
        "未运行：{hook} 的前一个用例（{case}）失败了：{reason}",
    ),
    "time_limit": ("the submission used up its {seconds} s time limit", "提交用完了 {seconds} s 的时间限制"),
    "gone": ("the process is gone ({why})", "进程已经不在了（{why}）"),
    "ended": (
        "the process ended during this call (sys.exit, os._exit, a crash, or a resource limit)",
        "进程在这次调用中结束了（sys.exit、os._exit、崩溃或资源限制）",
    ),
    "unreadable": (
        "the process sent something unreadable ({kind}: {error})",
        "进程发来了无法读取的内容（{kind}: {error}）",
    ),
    "restarts": ("stopped after {n} restarts of the learner's process", "学习者的进程重启 {n} 次后停止了"),
    "malformed": ("sent a malformed reply: {why}", "发回了格式错误的回复：{why}"),
    "malformed.reading": ("sent a malformed reply: {kind} while reading it", "发回了格式错误的回复：读取时出现 {kind}"),
    "out_of_order": (
        "answered out of order (expected call {expected}, got {got})",
        "回复的顺序错乱（应为调用 {expected}，收到的是 {got}）",
    ),
    "data_unread": ("sent back unreadable data ({kind})", "发回了无法读取的数据（{kind}）"),
    "not_judged": ("the grader could not judge what came back ({kind})", "评分程序无法判断返回的内容（{kind}）"),
    "not_kept": (
        "[message not kept: this submission's messages passed the {budget} bytes the gradebook keeps]",
        "[说明未保留：此提交的说明超过了成绩册保留的 {budget} 字节]",
    ),
}
MESSAGES: dict[str, dict[str, str]] = {key: {"en": en, "zh": zh} for key, (en, zh) in _PAIRS.items()}
_CUTS_ZH = "`.detach()`、`.data`、`torch.no_grad()`、经过 NumPy 的来回转换，或对张量调用 `torch.tensor(...)`"
_KIT_ZH: dict[str, str] = {  # the kit's rules: their English is the kit's own (grader.rules.WORDS)
    "in_place": "原地修改了输入；请返回一个新张量，不要改动输入",
    "grad.cut": f"梯度到达不了 {{inputs}}：你的结果不需要梯度，计算图被切断了（{_CUTS_ZH}），基于它的模型无法训练",
    "grad.unreached": f"梯度到达不了 {{inputs}}：你的结果没有通过自动求导依赖于它（途中有{_CUTS_ZH}），基于它的模型"
    "无法训练它",
    "grad.cut_at": f"梯度到达不了 {{inputs}}：你的结果不需要梯度，计算图被切断了（{_CUTS_ZH}；最后一处：{{where}}），"
    "基于它的模型无法训练",
    "grad.unreached_at": f"梯度到达不了 {{inputs}}：你的结果没有通过自动求导依赖于它（途中有{_CUTS_ZH}；最后一处："
    "{where}），基于它的模型无法训练它",
    "grad.frozen": "被冻结的参数（requires_grad=False）：{names}；训练无法改变它们：请保留 nn.Parameter 和 nn.Linear "
    "默认的 requires_grad=True",
    "grad.raised": "对你的结果做反向传播时抛出了 {error}",
    "grad.raised_at": "对你的结果做反向传播时抛出了 {error}（位于 {where}）",
    "grad.call_raised": "在需要梯度的输入上（模型中的输入正是如此）调用时，你的代码抛出了 {error}",
    "grad.call_raised_at": "在需要梯度的输入上（模型中的输入正是如此）调用时，你的代码抛出了 {error}（位于 {where}）",
    "raised_in_library": "{kind} 是在你的代码调用的库内部抛出的（位置 {where}），不是你自己的 raise：{text}；"
    "输入不对时，请自己检查并抛出 {kind}",
    "grad.not_finite": "{input} 的梯度中有 {value}，第一个在 {index}，这里的梯度必须是有限值：基于它的模型会停止学习",
    "banned": "使用了 {calls}：{why}",
    "not_allowed_here": "这里不允许使用",
    "why_banned.softmax_weights": "这道练习要你自己写出数值稳定的 softmax（减去最大值、取指数、归一化）",
    "why_banned.softmax_with_temperature": "这道练习要你自己写出数值稳定的 softmax，并先把分数除以温度",
    "why_banned.attention_dropout": "这道练习要你自己写出 inverted dropout（抽取保留掩码，再乘以 1/(1-p)）",
    "why_banned.make_self_attention": "这道练习要你自己用分数、softmax 和值构建注意力",
    "why_banned.make_causal_attention": "这道练习要你自己用分数、掩码、softmax 和值构建注意力",
    "why_banned.make_multihead_attention": "这道练习要你自己拆分注意力头，并逐个头计算注意力",
    "why_banned.chunked_attention": "这道练习要你自己逐块计算注意力，并维护滚动的最大值与和",
    "why_banned.plot_attention": "返回 Figure，由调用者决定是否显示；评分程序在无界面的环境中把它当作数据读取",
    "spawned": "你的代码启动了{kinds}：评分的代码中不允许使用线程和进程，无论是在导入时还是在调用中（评分程序只在调用线"
    "程中检查被禁止的调用和内存）；请在调用线程中计算",
    "spawn.thread": "一个线程",
    "spawn.thread_running": "一个线程（仍在运行）",
    "spawn.process": "一个进程（{how}）",
    "spawn.process_running": "一个进程（仍在运行）",
    "spawn.process_ended": "一个进程（已经结束）",
    "spawn.program": "另一个程序（{how}）",
    "spawn.unknown": "一个线程或进程",
    "gpu_error": "在 GPU 上会失败：无论输入在哪个设备上，都在 CPU 上创建了张量 ({error})",
    "gpu_device": "在 GPU 上会失败：输入在 meta 设备上（只有形状、没有数据，评分程序用它代替 GPU），"
    "返回的张量却在 {device} 上：新建的张量要放在那个设备上",
    "contiguous": "{hook} 必须返回一个连续的张量（在 .view 之前调用 .contiguous()）",
    "memory.converted": "你的调用使用了 {calls}：评分程序度量的是 torch 张量占用的内存，numpy 数组、Python 列表、原始存"
    "储或打包的权重都会逃过度量；请用 torch 计算",
    "memory.held": "你的调用同时持有的元素不少于一个批次-头的完整 ({tq}, {tk}) 分数矩阵：峰值为 {peak}（上限："
    "{bound}）",
    "memory.needs": "分块的版本大约持有 {needed} 个（块 {block} 与累加和 {sums}）",
    "memory.elements": "{held}；{needs}。" + _ADVICE,
    "memory.alone": "{held}；你的张量 {shape} 单独就有这么多；{needs}。" + _TRY_AGAIN + _ADVICE,
    "memory.alone_made": "{held}；由 {op} 创建的张量 {shape} 单独就有这么多；{needs}。" + _TRY_AGAIN + _ADVICE,
    "memory.some": "{held}，尽管其中没有一个张量有这么大（最大的是 {shape}）；{needs}。生成下一块时，你还留着之前的块的"
    "哪些东西？" + _ADVICE,
    "memory.some_made": "{held}，尽管其中没有一个张量有这么大（最大的是由 {op} 创建的 {shape}）；{needs}。生成下一块"
    "时，你还留着之前的块的哪些东西？" + _ADVICE,
    "memory.kept": "你的调用同时持有的元素不少于因果调用对一个批次-头保留的全部分数：峰值为 {peak}（上限：{bound}，即 ("
    "{tq}, {tk}) 中未被遮蔽的部分）；{needs}。" + _ADVICE,
    "memory.bytes": "你的调用同时持有的字节数不少于按查询的 dtype 存放的{held}：峰值为 {peak}（上限：{bound}），用的是"
    "比查询更宽的元素；{needs}。" + _ADVICE,
    "memory.matrix": "一个批次-头的完整 ({tq}, {tk}) 分数矩阵",
    "memory.causal_scores": "因果调用对一个批次-头保留的全部分数",
    "memory.profiler": "记录你的调用分配了什么的 torch profiler 在调用期间被关闭或重启了：评分程序无法得知它持有了多"
    "少；不要动 profiler",
    "memory.foreign": "你的调用使用了 {calls}：建立在不是 torch 分配的内存上的张量（bytearray、mmap、numpy 数组），或把"
    "张量的内存交出 torch 的做法（DLPack capsule），都会逃过评分程序的度量；请用 torch 计算",
    "memory.allocator": "torch 的分配器在峰值时给了你的调用 {allocated} 字节，与{held}一样多（{bound} 字节），无论它跳"
    "出了哪种记录：请逐块遍历键",
    "memory.cuda": "你的调用在 GPU 上的峰值分配为 {peak} 字节，与完整的 (..., Tq, Tk) 分数一样多（{bound} 字节）：请逐"
    "块遍历键",
    "dtype": "返回的 dtype 是 {got}，应为 {expected}（保持输入的 dtype）",
    "dtype.mask": "返回的 dtype 是 {got}，应为 bool（掩码是 torch.bool：True 表示查询不能看的位置）",
    "subclass": "返回了一个 {kind}，应为确切的 torch.Tensor（不能是子类）",
    "figure.axes": "返回了一个 {kind}，应为它的 matplotlib Figure（返回 ax.figure，或 plt.subplots() 给出的 fig）",
    "figure.not_a_figure": "返回了 {kind}，应为一个 matplotlib Figure（fig, ax = plt.subplots() 会创建一个：在 ax 上"
    "画，返回 fig）",
    "figure.no_image": "图中没有图像：用 ax.imshow(...) 画出权重",
    "figure.images": "图中有 {images} 个图像；只用一次 imshow 画出权重",
    "figure.image_count": "图中画了 {images} 个图像；应为 {expected} 个，每个头一个（每个头一次 imshow，按坐标轴的顺"
    "序）",
    "figure.image_count_one": "图中只画了 1 个图像；应为 {expected} 个，每个头一个（每个头一次 imshow，按坐标轴的顺"
    "序）",
    "figure.image_shapes": "图中各个图像的形状不同（{shapes}）；应为 {expected} 个同样形状的图像：按原样画出每个头的 "
    "(Tq, Tk) 权重",
    "figure.not_numbers": "图像的数据无法读成数字（{why}）",
    "figure.transposed": "图像是权重的转置：图像的第 i 行必须是查询 i（按原样 imshow (Tq, Tk) 权重）",
    "figure.heads_transposed": "各个图像是各个头的权重的转置：每个图像的第 i 行必须是查询 i（按原样 imshow 每个头的 "
    "(Tq, Tk) 权重）",
    "figure.head_transposed": "头 {head} 的图像是它的权重的转置：图像的第 i 行必须是查询 i（按原样 imshow "
    "weights[{head}]）",
    "figure.head_order": "头的顺序不对：图像 {image} 画的是头 {head}（两者都从 0 开始数，图像按坐标轴的顺序）；头 h 应"
    "画成图像 h",
    "labels.swapped": '坐标轴的标签弄反了：键沿横轴（x 轴上是 "Key positions"），查询沿纵轴（y）',
    "labels.x": 'x 轴的标签是 {label}，应为 "Key positions"（ax.set_xlabel）',
    "labels.y": 'y 轴的标签是 {label}，应为 "Query positions"（ax.set_ylabel）',
    "labels.tokens_swapped": "词元放错了坐标轴：键的词元标在 x 轴的刻度上，查询的词元标在 y 轴的刻度上",
    "labels.x_tick": "x 轴的位置 {position} 上是{shown}，应为键的词元 "
    "{token}（每个位置一个刻度，标上它的词元：ax.set_xticks）",
    "labels.y_tick": "y 轴的位置 {position} 上是{shown}，应为查询的词元 "
    "{token}（每个位置一个刻度，标上它的词元：ax.set_yticks）",
    "labels.no_tick": "没有刻度",
    "labels.the_tick": "刻度 {tick}",
    "labels.colorbar": "图中没有图像的颜色条：加一个（fig.colorbar(image, ax=ax)）",
    "signature.positional_only": "仅限位置的参数 {names}",
    "signature.unknown": "未知的参数 {names}",
    "signature.missing": "缺少参数 {names}",
    "and_then": "{first}；{then}",
    "timed_out": "超时：{seconds} s（死循环，或者太慢）",
    "mask_buffer.missing": "你的模块没有名为 `mask` 的 buffer{found}：约定用 self.register_buffer('mask', ...) 保存因果"
    "掩码，这样 state_dict 会保存它，.to(device) 会移动它。在 forward 中于 x.device 上构建的掩码计算结果相同，只会失去"
    "这一个用例",
    "mask_buffer.found": "（你的模块的 buffer：{buffers}）",
    "mask_buffer.not_saved": "`mask` buffer 不在 state_dict 中（persistent=False？）：用 register_buffer('mask', …) "
    "注册它",
    "mask_buffer.device": "调用 .to({device}) 之后，`mask` buffer 仍留在 {where} 上",
    "prefer": "在这里抛出 {kind} 是可以接受的。{why}",
    "prefer.value_error": "更好的做法是 `raise ValueError(...)`：python -O 会去掉 assert 语句，检查就会消失；"
    "而且错误的参数是调用者的错，不是你代码中的 bug（那才是 assert 的用途）。",
}
MESSAGES.update({key: {"en": KIT[key], "zh": zh} for key, zh in _KIT_ZH.items()})
"""Every message grading says: ``id -> {language: template}``, the templates' ``{parameters}`` the same in every
language (``tests/test_messages.py`` renders each one in each language), but a case's description (its English
the case's own ``{what}``, :mod:`grader.instructor.case_words`)."""
MESSAGES.update(case_messages())  # each hidden case's description, said by the case's id (case_words)
MESSAGES.update(  # why a group's own row bans its calls, in the words the row brings (grader.groups)
    {
        f"why_banned.{r.hook}": {"en": r.why_banned, "zh": r.why_banned_zh}
        for r in TABLE
        if r.why_banned and f"why_banned.{r.hook}" not in MESSAGES
    }
)
