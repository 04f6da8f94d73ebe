"""The fixed words of a student's feedback, per language: one dict per language, and the standard messages' parts.

:data:`TEXTS` holds every heading, table header, status word and sentence the
feedback templates (``feedback.md.j2``, ``feedback.html.j2``) and the
Gradescope ``results.json`` write; :func:`texts` gives a language's (English
where a language or a key is missing).  :func:`translate` translates the fixed
parts of grading's standard messages (``values differ: max abs diff …``,
``returned shape …``); the values in them, and anything a learner wrote, stay
as they are.  The hints come in the report's language from the mistakes'
catalogue, not from here.
"""

from __future__ import annotations

import re

__all__ = ["LANGUAGES", "TEXTS", "texts", "translate"]

EN: dict[str, str] = {
    "html_lang": "en",
    "title": "Feedback for {student}",
    "score": "Score: {earned} / {possible} points",
    "error_title": "Your submission could not be graded.",
    "error_body": "Every exercise scores 0 until this is fixed:",
    "cases_passed": "{passed} of {ran} cases passed.",
    "devices_ran": "Devices that ran",
    "devices_skipped": "Not run on this machine (no points lost): {devices}; {count} cases skipped.",
    "none": "none",
    "overview": "Overview",
    "exercise": "exercise",
    "points": "points",
    "passed_h": "passed",
    "failed_h": "failed",
    "result": "result",
    "cases": "cases",
    "why": "why",
    "failing": "Exercises to fix",
    "passing": "Exercises that pass",
    "passed": "passed",
    "failed": "failed",
    "skipped": "skipped",
    "counts": "{passed} passed, {failed} failed.",
    "counts_skipped": "{passed} passed, {failed} failed, {skipped} skipped.",
    "all_passed": "All {passed} cases passed.",
    "one_passed": "The case passed.",
    "known_mistake": "This looks like a known mistake",
    "hint": "Hint",
    "case_one": "1 case",
    "case_many": "{count} cases",
    "failed_in": "Failed in",
    "skipped_in": "Skipped in",
    "note_on": "Note on {cases} ({where}), for no points",
    "first_case": "first case",
    "no_message": "failed (no message)",
    "note_nothing_ran_skipped": "No case of this exercise ran (all skipped), so it earns 0 points.",
    "note_nothing_ran": "No case of this exercise ran, so it earns 0 points.",
    "note_all_or_nothing": "All or nothing: a failed case means 0 points.",
    "figure_caption": "The failing case {label}: expected, what your code returned, and where they differ.",
    "figure_alt_weights": "Heatmaps of the expected and the returned attention weights of the failing case {label}",
    "figure_alt_mask": "Pictures of the expected and the returned boolean mask of the failing case {label} "
    "(True = masked, drawn yellow)",
    "printed": "What your code printed",
    "more": "… and {rest} more (see feedback.html)",
    "more_problems": "… and {rest} more kinds of failure",
    "looks_like": "Looks like the known mistake '{mistake}'",
}

ZH: dict[str, str] = {
    "html_lang": "zh",
    "title": "{student} 的反馈",
    "score": "得分：{earned} / {possible} 分",
    "error_title": "你的提交无法评分。",
    "error_body": "在修复之前，每道练习都是 0 分：",
    "cases_passed": "{ran} 个用例中通过了 {passed} 个。",
    "devices_ran": "运行的设备",
    "devices_skipped": "本机未运行（不扣分）：{devices}；跳过了 {count} 个用例。",
    "none": "无",
    "overview": "总览",
    "exercise": "练习",
    "points": "得分",
    "passed_h": "通过",
    "failed_h": "失败",
    "result": "结果",
    "cases": "用例",
    "why": "原因",
    "failing": "需要修改的练习",
    "passing": "已通过的练习",
    "passed": "通过",
    "failed": "失败",
    "skipped": "跳过",
    "counts": "通过 {passed} 个，失败 {failed} 个。",
    "counts_skipped": "通过 {passed} 个，失败 {failed} 个，跳过 {skipped} 个。",
    "all_passed": "全部 {passed} 个用例通过。",
    "one_passed": "该用例通过。",
    "known_mistake": "这看起来是一个常见错误",
    "hint": "提示",
    "case_one": "1 个用例",
    "case_many": "{count} 个用例",
    "failed_in": "失败的用例",
    "skipped_in": "跳过的用例",
    "note_on": "关于 {cases}（{where}）的说明，不影响得分",
    "first_case": "第一个用例",
    "no_message": "失败（没有说明）",
    "note_nothing_ran_skipped": "这道练习没有运行任何用例（全部跳过），所以得 0 分。",
    "note_nothing_ran": "这道练习没有运行任何用例，所以得 0 分。",
    "note_all_or_nothing": "全对才得分：有一个用例失败就是 0 分。",
    "figure_caption": "失败的用例 {label}：期望值、你的代码返回的值，以及两者的差别。",
    "figure_alt_weights": "失败用例 {label} 的期望注意力权重与返回的注意力权重的热力图",
    "figure_alt_mask": "失败用例 {label} 的期望布尔掩码与返回的布尔掩码（True = 被遮蔽，黄色）",
    "printed": "你的代码打印的内容",
    "more": "……还有 {rest} 条（见 feedback.html）",
    "more_problems": "……还有 {rest} 种失败",
    "looks_like": "看起来是常见错误 '{mistake}'",
}

TEXTS: dict[str, dict[str, str]] = {"en": EN, "zh": ZH}
LANGUAGES = tuple(TEXTS)


class Texts(dict):  # type: ignore[type-arg]
    """A language's texts; a key it lacks falls back to English (a template never shows a raw key)."""

    def __missing__(self, key: str) -> str:
        return EN[key]


def texts(lang: str | None) -> Texts:
    """The texts of ``lang`` (English for an unknown language)."""
    return Texts(TEXTS.get(str(lang or "en"), EN))


START = r"(?:^|(?<=: ))"
"""Where a standard message starts: the text's start, or after a case's ``what: ``."""

# The fixed parts of grading's standard messages (grader.instructor.verdict, submission_grading), in order.
_ZH_PARTS: tuple[tuple[str, str], ...] = (
    (START + r"values differ: max abs diff ", "数值不符：最大绝对误差 "),
    (r" at (\([\d, ]*\)) ", r" 位于 \1 "),
    (r"\(got (\S+), expected (\S+)\)", r"（得到 \1，应为 \2）"),
    (r"; got (.+), expected (.+)$", r"；得到 \1，应为 \2"),
    (START + r"returned shape (.+), expected (.+)$", r"返回的形状是 \1，应为 \2"),
    (
        START + r"returned dtype (\S+), expected (\S+) \(keep the input's dtype\)",
        r"返回的 dtype 是 \1，应为 \2（保持输入的 dtype）",
    ),
    (
        START + r"returned dtype (\S+), expected bool \(a mask is torch.bool: True where a query may not look\)",
        r"返回的 dtype 是 \1，应为 bool（掩码是 torch.bool：True 表示查询不能看的位置）",
    ),
    (START + r"wrong entries, first at (.+): got (\S+), expected (\S+)$", r"元素错误，第一个在 \1：得到 \2，应为 \3"),
    (START + r"NaN in the output, first at (.+), where no NaN belongs", r"输出中有不该出现的 NaN，第一个在 \1"),
    (START + r"will fail on a GPU: ", "在 GPU 上会失败："),
    (r"a tensor is built on the CPU whatever the input's device", "无论输入在哪个设备上，都在 CPU 上创建了张量"),
    (START + r"not implemented yet ", "尚未实现 "),
    (START + r"should raise (\S+)", r"应当抛出 \1"),
    (r", returned normally$", "，却正常返回了"),
    (START + r"raised ([A-Za-z_][\w.]*): ", r"抛出了 \1: "),
    (START + r"returned nothing$", "什么也没有返回"),
    (START + r"no function (\S+); the hook is ", r"没有函数 \1；应为 "),
    (START + r"the submission does not import: ", "提交的代码无法导入："),
    (START + r"could not load the submission: ", "无法加载提交："),
    (START + r"not graded: ", "未评分："),
    (START + r"timed out after ", "超时："),
    (START + r"not run: an earlier case of (\S+) \((.+?)\) failed with: ", r"未运行：\1 的前一个用例（\2）失败了："),
    (r": not available$", "：不可用"),
)
_ZH = [(re.compile(pattern), replacement) for pattern, replacement in _ZH_PARTS]


def translate(message: str, lang: str | None) -> str:
    """``message`` with the fixed parts of grading's standard messages in ``lang`` (values and names unchanged)."""
    if lang != "zh" or not message:
        return message
    for pattern, replacement in _ZH:
        message = pattern.sub(replacement, message)
    return message
