"""Messages said by id: one table, every id in every language, and the feedback of a Chinese page all Chinese.

Grading says each message by id with its parameters (:func:`grader.instructor.said.said`); the English is
what grades.csv, junit.xml and the gradebook always wrote, and every other language is rendered from the same
table, so a rewording is one edit in one place, checked here in every language.
"""

from __future__ import annotations

import ast
import copy
import os
import pickle
import re
import socket
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader.instructor.case_words import CASE_WORDS, case_id, case_messages
from grader.instructor.messages import LANGUAGES, MESSAGES
from grader.instructor.said import Message, message_data, message_from_data, message_in, parameters, said
from grader.rule_words import WORDS

KIT = Path(__file__).resolve().parent.parent

SAME_IN_EVERY_LANGUAGE = {
    "case": "a case's description, then its message: nothing but its parameters and a separator",
    "device_skipped": "a device, then why it was skipped: nothing but its parameters and a separator",
    "held.part": "an amount of MiB and where it was held: a number, a unit and a message",
}
"""The ids whose rendering with plain-text parameters is the same in every language, and why."""

CODE_WORDS = {"dtype", "bool", "torch", "Tensor", "True", "NaN", "GPU", "CPU", "meta", "dim"}
"""Words of code a Chinese message keeps (``torch.bool``, ``dtype``…): names, not English."""


def sample(key: str) -> Message:
    """Message ``key`` with a plain-text sample for each parameter (``⟨name⟩``)."""
    return said(key, **{name: f"⟨{name}⟩" for name in parameters(MESSAGES[key]["en"])})


# --- the table -------------------------------------------------------------------------------------------


DESCRIBED = case_messages()
"""The ids of the hidden cases' descriptions: their English is the case's own ``{what}`` (tested below)."""


def group_described() -> set[str]:
    """The ids of the descriptions a group's own cases bring (``Case.what_zh``): the table takes them as the cases
    are made (:func:`grader.instructor.cases.described`); a case made again with fresh values is said by its base's."""
    from grader.instructor.cases import make_cases

    return {case_id(c.hook, c.name) for c in make_cases(0) if c.what_zh and not c.name.endswith("-again")}


def _a_case_s(key: str) -> bool:
    return key in DESCRIBED or (key.startswith("case.") and key.endswith("]"))  # a group's own case's (tested below)


@pytest.mark.parametrize("key", sorted(key for key in MESSAGES if not _a_case_s(key)))
def test_every_message_renders_in_every_language_with_the_english_parameters(key):
    templates = MESSAGES[key]
    assert set(templates) == set(LANGUAGES), f"{key}: {sorted(templates)}"
    for lang, template in templates.items():
        assert parameters(template) == parameters(templates["en"]), f"{key} ({lang}): {template!r}"
    message = sample(key)
    for lang in LANGUAGES:
        shown = message_in(message, lang)
        assert "{" not in shown.replace("{⟨", "") and shown.strip(), f"{key} ({lang}): {shown!r}"
        for name in parameters(templates["en"]):
            assert f"⟨{name}⟩" in shown, f"{key} ({lang}) drops {name}: {shown!r}"
    assert message == message_in(message, "en") == templates["en"].format(**dict(message.params))
    if key in SAME_IN_EVERY_LANGUAGE:
        assert message_in(message, "zh") == message
    else:
        assert message_in(message, "zh") != message, f"{key}: the Chinese is the English"


def test_the_kits_rules_are_in_the_table_in_the_kits_english():
    """grader.rules words the kit's failures (the local check says them); the table says them in every language."""
    assert [key for key in WORDS if key not in MESSAGES] == []
    assert {key: MESSAGES[key]["en"] for key in WORDS} == WORDS


def _literals(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}  # fmt: skip


def test_every_id_is_said_somewhere_and_every_literal_id_said_is_in_the_table():
    sources = [p for p in (KIT / "grader" / "instructor").rglob("*.py") if p.name not in ("messages.py", "said.py")]
    sources += [KIT / "grader" / "rules.py", KIT / "grader" / "registry.py"]  # the kit's rules, said by id too
    literals = set().union(*(_literals(p) for p in sources))
    kit_made = {k for k in WORDS}  # worded in grader.rules, some of them by a name it builds ("labels.x_tick")
    kit_made |= set(DESCRIBED) | group_described()  # said by the case's id, built from its hook and name (described)
    assert [key for key in MESSAGES if key not in literals and key not in kit_made] == [], "ids nobody says"
    said_ids = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("said", "say") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant):
                    said_ids.add(first.value)
    assert said_ids and [key for key in said_ids if key not in MESSAGES] == []


def test_an_unknown_id_is_refused_when_it_is_said():
    with pytest.raises(KeyError):
        said("no such message")


# --- a message as a value ------------------------------------------------------------------------------


def nested() -> Message:
    reason = said("timed_out", seconds="10")
    return said("case", what="3 heads", message=said("not_run", hook="merge_heads", case="H3", reason=reason))


def test_a_message_is_its_english_text_and_keeps_its_id_and_parameters():
    message = nested()
    english = "3 heads: not run: an earlier case of merge_heads (H3) failed with: timed out after 10 s (an infinite loop, or far too slow)"  # noqa: E501
    assert message == english and str(message) == english and type(str(message)) is str
    assert message.id == "case" and message.params["message"].id == "not_run"
    chinese = "3 heads: 未运行：merge_heads 的前一个用例（H3）失败了：超时：10 s（死循环，或者太慢）"
    assert message_in(message, "zh") == chinese
    assert message_in("plain text, said by nobody", "zh") == "plain text, said by nobody"
    with pytest.raises(AttributeError):
        message.id = "other"  # type: ignore[misc]


def test_a_message_survives_pickle_copies_and_data():
    message = nested()
    for back in (pickle.loads(pickle.dumps(message)), copy.deepcopy(message), copy.copy(message)):
        assert back == message and message_in(back, "zh") == message_in(message, "zh")
    data = message_data(message)
    assert data is not None and data["params"]["message"]["params"]["reason"]["id"] == "timed_out"
    back = message_from_data(data, str(message))
    assert isinstance(back, Message) and back == message and message_in(back, "zh") == message_in(message, "zh")
    assert message_data("plain") is None and message_from_data(None, "plain") == "plain"
    assert message_from_data({"id": "case", "params": {"what": "x"}}, "x: y") == "x: y"  # a parameter missing
    assert message_in(message_from_data({"id": "gone", "params": {}}, "old words"), "zh") == "old words"
    assert message_from_data({"id": "case", "params": {"what": "x", "message": {"id": "gone"}}}, "x: y") == "x: y"


def test_a_list_parameter_is_joined_in_each_languages_way():
    from grader.rules import spawn_message

    message = spawn_message(["os.fork", "_thread.start_new_thread"], said)
    assert message.startswith("your code started a process (os.fork), a thread: threads and processes")
    assert message_in(message, "zh").startswith("你的代码启动了一个进程（os.fork）、一个线程：")
    assert spawn_message(["os.fork", "_thread.start_new_thread"]) == message  # the kit's local check, in English


# --- messages made by grading, in Chinese ----------------------------------------------------------------


def _plain_parameters(message: Message) -> list[str]:
    """Every parameter of ``message`` at any depth that is text, not a message: values, names, what a learner wrote."""
    found = []
    for value in message.params.values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Message):
                found += _plain_parameters(item)
            elif isinstance(item, str):
                found.append(item)
    return found


def english_left(message: str) -> list[str]:
    """The English words of ``message`` in Chinese, its parameters (and the words of code) aside."""
    assert isinstance(message, Message), f"not said by id: {message!r}"
    text = message_in(message, "zh")
    for value in sorted(_plain_parameters(message), key=len, reverse=True):
        text = text.replace(value, " ")
    return [word for word in re.findall(r"[A-Za-z]{2,}", text) if word not in CODE_WORDS]


@pytest.fixture(scope="module")
def suite():
    from grader.instructor.suite import build_suite

    return build_suite(3, ("cpu", "meta"))


def graded(suite, hook: str, case: str, fn, device: str = "cpu", dtype: str = "float32"):
    """The result of one case as grading makes it (the case's description first), for ``fn`` as the hook."""
    from grader.instructor.submission_grading import _Verdicts
    from grader.instructor.verdict import judge_in_process

    trial = next(t for t in suite.trials if (t.hook, t.case.name, t.device, t.dtype) == (hook, case, device, dtype))
    verdict = judge_in_process(SimpleNamespace(functions={hook: fn}), trial)
    return _Verdicts("ada", False, None).judge(trial, verdict.reply, verdict.outputs)


def _not_implemented(scores, dim=-1):
    raise NotImplementedError("write softmax_weights")


def _raises(scores, dim=-1):
    raise RuntimeError("The size of tensor a (6) must match the size of tensor b (7)")


def _built_on_the_cpu(scores, dim=-1):
    return torch.softmax(scores - torch.zeros(scores.shape, dtype=scores.dtype), dim=dim)


GRADED = {
    "values-differ": ("softmax_weights", "2d-rows", lambda scores, dim=-1: torch.exp(scores), "cpu"),
    "wrong-shape": ("softmax_weights", "2d-rows", lambda scores, dim=-1: scores[..., :1], "cpu"),
    "wrong-dtype": ("softmax_weights", "2d-rows", lambda scores, dim=-1: scores.double(), "cpu"),
    "raised": ("softmax_weights", "2d-rows", _raises, "cpu"),
    "not-implemented": ("softmax_weights", "2d-rows", _not_implemented, "cpu"),
    "should-raise": ("softmax_with_temperature", "T=0-raises", lambda scores, temperature, dim=-1: scores, "cpu"),
    "meta-device": ("softmax_weights", "3d-batched", _built_on_the_cpu, "meta"),
    "mask-dtype": ("causal_mask", "T=5", lambda num_tokens, device=None: torch.ones(num_tokens, num_tokens), "cpu"),
}


@pytest.mark.parametrize("name", list(GRADED))
def test_a_message_made_by_grading_is_all_chinese_but_its_parameters(suite, name):
    hook, case, fn, device = GRADED[name]
    dtype = "bool" if hook == "causal_mask" else "float32"
    result = graded(suite, hook, case, fn, device, dtype)
    assert result.status == "failed" and isinstance(result.message, Message), result
    assert english_left(result.message) == [], (str(result.message), message_in(result.message, "zh"))


def test_the_chinese_of_graded_messages_reads_as_expected(suite):
    def zh(name):
        hook, case, fn, device = GRADED[name]
        dtype = "bool" if hook == "causal_mask" else "float32"
        return message_in(graded(suite, hook, case, fn, device, dtype).message, "zh")

    assert re.search(r": 数值不符：最大绝对误差 \S+ 位于 \(\d+, \d+\) （得到 \S+，应为 \S+）$", zh("values-differ"))
    assert re.search(r": 返回的形状是 \(\d+, 1\)，应为 \(\d+, \d+\)$", zh("wrong-shape"))
    assert zh("wrong-dtype").endswith(": 返回的 dtype 是 float64，应为 float32（保持输入的 dtype）")
    assert ": 抛出了 RuntimeError: The size of tensor a (6) must match the size of tensor b (7)（位于 " in zh("raised")
    assert zh("not-implemented").endswith(": 尚未实现 (write softmax_weights)")
    assert zh("should-raise").endswith("，却正常返回了") and ": 应当抛出 ValueError (" in zh("should-raise")
    assert ": 在 GPU 上会失败：无论输入在哪个设备上，都在 CPU 上创建了张量 (抛出了 " in zh("meta-device")
    assert zh("mask-dtype").endswith("返回的 dtype 是 float32，应为 bool（掩码是 torch.bool：True 表示查询不能看的位置）")  # noqa: E501


def test_a_timed_out_call_and_the_cases_after_it_are_said_in_chinese(tmp_path):
    """The sandbox's own words when a call does not answer in time (a real process, its group killed)."""
    from grader.instructor.sandbox import Child, ChildGone, Limits

    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    ours, theirs = socket.socketpair()
    try:
        child = Child(sleeper.pid, ours, tmp_path, Limits(), time.monotonic() + 60)
        with pytest.raises(ChildGone) as gone:
            child.receive(0.05)
        assert sleeper.wait(timeout=10) != 0  # killed with its group
    finally:
        ours.close()
        theirs.close()
        if sleeper.poll() is None:
            os.killpg(sleeper.pid, 9)
    reason = gone.value.reason
    assert reason == "timed out after 0.05 s (an infinite loop, or far too slow)"
    later = said("not_run", hook="merge_heads", case="H3-T5-hd4", reason=reason)
    assert english_left(reason) == english_left(later) == []
    chinese = "未运行：merge_heads 的前一个用例（H3-T5-hd4）失败了：超时：0.05 s（死循环，或者太慢）"
    assert message_in(later, "zh") == chinese


def test_the_english_of_a_message_counts_in_the_suite_version_its_other_languages_do_not(monkeypatch):
    """A result keeps its message's English, so a new English is a new suite (a regrade); a new Chinese is not."""
    from grader.instructor import messages
    from grader.instructor.suite_version import suite_version

    before = suite_version()
    monkeypatch.setitem(messages.MESSAGES, "returned_nothing", {**MESSAGES["returned_nothing"], "zh": "没有返回值"})
    assert suite_version() == before
    monkeypatch.setitem(messages.MESSAGES, "returned_nothing", {**MESSAGES["returned_nothing"], "en": "gave nothing"})
    assert suite_version() != before


# --- the hidden cases' descriptions, by the case's id ----------------------------------------------------------

DESCRIPTION_WORDS = {
    "ValueError": "the exception a case expects raised, a Python name",
    "NaN": "a float value, as torch prints it",
    "inf": "a float value, as torch prints it",
    "exp": "torch.exp, the function that overflows",
    "softmax": "the function the hooks compute, named so in the course's Chinese too",
    "dropout": "the modules' argument and nn.Dropout, named so in the course's Chinese too",
    "eval": "module.eval(), the mode a module is put in",
    "mask": "the name of the causal mask's buffer",
    "window": "sliding_window_mask's argument (window = 0)",
    "device": "the argument of .to(device)",
    "True": "the value of qkv_bias=True",
    "dim": "the hooks' argument (dim=-1, dim=0)",
}
"""English words a case's Chinese description keeps, and why: names of code and values, none of them prose.
Code with ``_``, ``.`` or a digit in it (``d_in``, ``torch.manual_seed``, ``float16``) is code on its face."""


def _descriptions(suite) -> list:
    """Every case of the suite once, in its order."""
    seen: dict = {}
    for trial in suite.trials:
        seen.setdefault((trial.hook, trial.case.name), trial.case)
    return list(seen.values())


def _english_words(text: str) -> list[str]:
    tokens = re.findall(r"[A-Za-z_][\w.]*", text)
    return [t for t in tokens if len(t) >= 3 and not re.search(r"[_.\d]", t) and t not in DESCRIPTION_WORDS]


def test_every_case_of_every_hook_is_described_by_its_id_in_chinese(suite):
    cases = _descriptions(suite)
    own_words = {case.hook for case in cases if case.what_zh}  # a group's cases bring their Chinese
    assert {case.hook for case in cases} == set(CASE_WORDS) | own_words and len(cases) > 150
    assert not own_words & set(CASE_WORDS), "a hook's Chinese is in case_words or on its cases, not both"
    for case in cases:
        what = case.what
        assert isinstance(what, Message), f"{case.hook}[{case.name}]: not said by id: {what!r}"
        if what.id == "case.again":  # a derived description: the base case's, said by its id, nested
            base = what.params["what"]
            assert isinstance(base, Message) and base.id == case_id(case.hook, case.name.removesuffix("-again"))
        else:
            assert what.id == case_id(case.hook, case.name) and what == what.params["what"]
        chinese = message_in(what, "zh")
        if chinese == what:  # nothing to translate: arguments and their values ("T = 5", "qkv_bias=True, d_in=4")
            assert _english_words(what) == [], f"{what.id}: the Chinese is the English: {chinese!r}"
        else:
            assert re.search(r"[\u4e00-\u9fff]", chinese), f"{what.id}: {chinese!r}"


def test_the_table_describes_only_cases_that_exist(suite):
    own = {case_id(case.hook, case.name) for case in _descriptions(suite) if case.what.id != "case.again"}
    assert sorted(set(DESCRIBED) - own) == [], "words for cases the suite does not have"
    assert sorted(own - set(DESCRIBED) - group_described()) == [], "cases without their words"
    assert all(key in MESSAGES and MESSAGES[key]["en"] == "{what}" for key in DESCRIBED)


def test_a_case_description_in_chinese_is_chinese_but_its_code_and_keeps_its_numbers(suite):
    for case in _descriptions(suite):
        english, chinese = str(case.what), message_in(case.what, "zh")
        assert _english_words(chinese) == [], f"{case.what.id}: {chinese!r}"
        numbers = r"\d+(?:\.\d+)?"
        assert sorted(re.findall(numbers, chinese)) == sorted(re.findall(numbers, english)), (english, chinese)
    assert _english_words("d_in=5, torch.manual_seed, float16, ValueError, 参数名") == []
    assert _english_words("the reference's weights") == ["the", "reference", "weights"]


def test_a_case_description_is_said_in_chinese_in_a_failure_and_in_a_should_raise(suite):
    failed = graded(suite, *GRADED["values-differ"])
    assert str(failed.message).startswith("2-D, last dim: values differ")
    assert message_in(failed.message, "zh").startswith("2 维，沿最后一维: 数值不符")
    raised = message_in(graded(suite, *GRADED["should-raise"]).message, "zh")
    assert raised.startswith("温度 0 抛出 ValueError: 应当抛出 ValueError (温度 0 抛出 ValueError)"), raised
    again = next(c for c in _descriptions(suite) if (c.hook, c.name) == ("apply_causal_mask", "3d-batched-again"))
    assert again.what == "batched 3-D, again with fresh values of the same shapes"
    assert message_in(again.what, "zh") == "带批次的 3 维输入，再换一组同样形状的新值"


def test_a_case_description_recorded_in_english_is_said_in_chinese_when_the_run_resumes(suite, tmp_path):
    """The gradebook keeps a result's English and its message's id and parameters: a resumed run's Chinese
    report says the case's description in Chinese, a derived one too."""
    from grader.instructor.gradebook import Gradebook
    from grader.instructor.intake_model import Submission
    from grader.instructor.verdict import FAILED, CaseResult

    again = next(case for case in _descriptions(suite) if case.what.id == "case.again")
    recorded = [
        graded(suite, *GRADED["values-differ"]),
        CaseResult("ada", again.hook, again.name, "cpu", "float32", FAILED,
                   said("case", what=again.what, message=said("returned_nothing")), 0.5),
    ]  # fmt: skip
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        run_id = book.start_run(3, "suite-1", ["cpu"], "0.1.0", "namespaces")
        book.record(run_id, Submission("ada", "ada.py", "py", {"ada.py": "X = 1\n"}, "ada.py", "sha-ada", None),
                    recorded)  # fmt: skip
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        back = book.results_for_run(run_id)["ada"][1]
    assert [r.message for r in back] == [r.message for r in recorded]  # the English, byte for byte
    assert message_in(back[0].message, "zh").startswith("2 维，沿最后一维: 数值不符")
    base = message_in(again.what.params["what"], "zh")
    assert message_in(back[1].message, "zh") == f"{base}，再换一组同样形状的新值: 什么也没有返回"


def test_a_case_descriptions_chinese_is_no_new_suite_its_english_is(monkeypatch):
    from grader.instructor import messages
    from grader.instructor import suite_version as version
    from grader.instructor.groups import chapter

    before = version.suite_version()
    key = case_id("softmax_weights", "2d-rows")
    monkeypatch.setitem(messages.MESSAGES, key, {"en": "{what}", "zh": "二维，最后一个维度"})
    assert version.suite_version() == before
    monkeypatch.delitem(messages.MESSAGES, key)  # a case without its Chinese yet: said in English, the same suite
    assert version.suite_version() == before
    source = version.inspect.getsource

    def reworded(module):
        text = source(module)
        return text.replace('"2-D, last dim"', '"2-D, along the last dim"') if module is chapter else text

    monkeypatch.setattr(version.inspect, "getsource", reworded)
    assert version.suite_version() != before
