"""The feedback a student reads: what matters first, said once, in their language; and what their code printed."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import replace

import pytest
import torch

from grader.child import call as child_call
from grader.instructor import heatmaps
from grader.instructor.feedback import render_feedback_html, render_feedback_md
from grader.instructor.gradebook import Gradebook
from grader.instructor.heatmaps import Figure
from grader.instructor.intake_model import Submission
from grader.instructor.output_txt import output_text
from grader.instructor.replies import PRINTED_CHARS, CallReply, MalformedReply, decode
from grader.instructor.report_model import ClassRoll, ReportOptions, student_report
from grader.instructor.reports import write_reports
from grader.instructor.results_json import gradescope_results
from grader.instructor.rubric import load_rubric, parse_rubric
from grader.instructor.said import message_in, said
from grader.instructor.submission_grading import PRINTED_PER_HOOK, Stats
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, CaseResult
from grader.registry import HOOK_NAMES
from grader.rules import dtype_message

OPTIONS = ReportOptions(devices=("cpu", "meta"), skipped_devices={"cuda": said("not_available")}, suite_version="s-1")
FAILING = "softmax_weights"  # the hook that fails below; it comes third in hook order, after two passing ones
MISTAKE = "softmax-wrong-dim"


def case(hook, status, name, device="cpu", message="", mistake=""):
    return CaseResult("ada", hook, name, device, "float32", status, message, 0.01, mistake)


def one_failing() -> list[CaseResult]:
    """Every hook passes 3 cases and skips 20 on cuda; ``FAILING`` fails 5 cases with one mistake, values apart."""
    out = []
    for hook in HOOK_NAMES:
        skipped = said("device_skipped", device="cuda", reason=said("not_available"))
        out += [case(hook, SKIPPED, f"k{i}", "cuda", skipped) for i in range(20)]
        if hook == FAILING:
            out += [case(hook, FAILED, f"w{i}", message=said("values_differ", diff=f"0.{i + 1}", index=f"(0, {i})",
                         got="0.5", expected="0.25"), mistake=MISTAKE) for i in range(5)]  # fmt: skip
        out += [case(hook, PASSED, f"p{i}") for i in range(3)]
    return out


def sub(error=None) -> Submission:
    return Submission("ada", "ada.py", "py", {}, "ada.py", "sha-ada", error)


@pytest.fixture
def rubric():
    return load_rubric()


def _headings(html: str) -> list[str]:
    return re.findall(r'<section class="exercise (\w+)" id="(\w+)"', html)


# --- what comes first, and said once -----------------------------------------------------------------


def test_the_failing_exercise_comes_first_its_mistake_once_and_no_device_tables(rubric):
    report = student_report(sub(), one_failing(), rubric, replace(OPTIONS, isolation="user namespaces", kit="k-1"))
    html = render_feedback_html(report)
    sections = _headings(html)
    assert sections[0] == ("failing", FAILING), sections
    assert [kind for kind, _ in sections[1:]] == ["passing"] * (len(HOOK_NAMES) - 1)
    assert html.index(f'id="{FAILING}"') < html.index(f'id="{HOOK_NAMES[0]}"'), "failing before passing"
    # the devices not present here, the isolation, the versions: the instructor's class report, not the learner's page
    assert "not available" not in html and "skipped" not in html and "isolation" not in html
    # the mistake: named once, with its five cases folded into one kind of failure
    failing = html.split(f'id="{FAILING}"', 1)[1].split("</section>", 1)[0]
    assert failing.count(f"<code>{MISTAKE}</code>") == 1
    assert failing.count('<td class="failed">') == 1 and "5: w0 (cpu, float32)" in failing
    assert "first case:" in failing and "0.1 at (0, 0)" in failing
    md = render_feedback_md(report)
    assert md.index("## Exercises to fix") < md.index(f"`{HOOK_NAMES[0]}") < md.index("## Exercises that pass") or (
        md.index("## Exercises to fix") < md.index("## Exercises that pass")
    )
    fix = md.split("## Exercises to fix", 1)[1].split("## Exercises that pass", 1)[0]
    assert "### `softmax_weights" in fix and HOOK_NAMES[0] not in fix
    assert "not available" not in md and "isolation" not in md and md.count(f"`{MISTAKE}`") == 1
    assert "Skipped in" not in md


def test_an_exercise_not_attempted_is_said_once_not_once_per_case(rubric):
    stub = said("not_implemented", text="exercise softmax_weights: not implemented yet")
    results = [r for r in one_failing() if r.hook != FAILING] + [
        case(FAILING, FAILED, f"c{i}", message=said("case", what=f"shape {i}", message=stub)) for i in range(7)
    ]
    (exercise,) = [e for e in student_report(sub(), results, rubric, OPTIONS).exercises if e.hook == FAILING]
    (problem,) = exercise.failures
    assert len(problem.cases) == 7 and "shape" not in problem.message
    md = render_feedback_md(student_report(sub(), results, rubric, OPTIONS))
    assert md.count("exercise softmax_weights: not implemented yet") == 1


def test_a_known_mistakes_code_spans_are_code_in_html_and_nothing_else_is_markup(rubric):
    results = [replace(r, mistake="triu-diagonal-0") if r.mistake else r for r in one_failing()]
    html = render_feedback_html(student_report(sub(), results, rubric, OPTIONS))
    assert "<code>torch.triu(ones)</code> with diagonal 0" in html and "`torch.triu" not in html


MODULE = "make_causal_attention"
WHATS = ("one token", "padded batch", "long context", "float64 inputs", "qkv bias", "eval mode", "no batch", "wide")


def many_kinds(values: int = 7) -> list[CaseResult]:
    """``MODULE`` fails ``values`` cases each with a bare value difference (each case its own words, so its own
    kind), then a case with no weight dropped and one with no ``mask`` buffer: kinds that name their cause."""
    out = [
        case(MODULE, FAILED, f"v{i}", message=said("case", what=WHATS[i], message=said(
            "values_differ", diff="0.3", index="(0, 1)", got="0.5", expected="0.2")))
        for i in range(values)
    ]  # fmt: skip
    out.append(case(MODULE, FAILED, "train", message=said("training.none_dropped", p="0.5")))
    out.append(case(MODULE, FAILED, "buffer", message=said("mask_buffer.missing", found="")))
    return out


def test_every_kind_that_names_its_cause_is_shown_before_bare_value_differences(rubric):
    report = student_report(sub(), many_kinds(), rubric, OPTIONS)
    (ex,) = [e for e in report.exercises if e.hook == MODULE]
    assert len(ex.failures) == 9
    for page in (render_feedback_md(report), render_feedback_html(report)):
        dropped, buffer = page.find("no attention weight was dropped"), page.find("no buffer named")
        assert dropped > 0 and buffer > 0, "a kind that names its cause is hidden"
        assert max(dropped, buffer) < page.find("values differ"), "a bare value difference before a named cause"
        shown = page.count("values differ")
        assert shown == 6 - 2, "the other kinds fill what is left of the six"
        assert "3 more kinds of failure" in page
    lines = gradescope_results(report)["tests"]
    (output,) = [t["output"] for t in lines if t["name"] == MODULE]
    assert output.index("no attention weight was dropped") < output.index("values differ")


def test_kinds_that_name_a_cause_are_never_hidden_however_many(rubric):
    buffers = [f" (your module's buffers: m{chr(97 + i)})" for i in range(8)]  # letters: each its own kind
    causes = [case(MODULE, FAILED, f"b{i}", message=said("mask_buffer.missing", found=b))
              for i, b in enumerate(buffers)]
    report = student_report(sub(), many_kinds(2) + causes, rubric, OPTIONS)
    md = render_feedback_md(report)
    assert all(f"buffers: m{chr(97 + i)}" in md for i in range(8)) and "no attention weight was dropped" in md
    assert md.count("values differ") == 1, "one bare kind still shows what the values look like"


TEMPERATURE = "softmax_with_temperature"


def value_and_contract(values: int, contracts: int) -> list[CaseResult]:
    """``TEMPERATURE`` with its contract cases first: a missing ValueError, then wrong values (NaN, differences)."""
    unchecked = [case(TEMPERATURE, FAILED, f"T={-i}-raises", message=said("case", what=f"temperature {-i} raises",
        message=said("should_raise.returned", wanted="ValueError", what=f"temperature {-i}")),
        mistake="temperature-unchecked") for i in range(contracts)]  # fmt: skip
    wrong = [case(TEMPERATURE, FAILED, f"v{i}", message=said("nan", index="(0, 1)"), mistake="temperature-without-max")
             for i in range(values)]  # fmt: skip
    return unchecked + wrong


@pytest.mark.parametrize(("values", "contracts"), [(6, 2), (2, 4)], ids=["more-values", "fewer-values"])
def test_the_hint_for_wrong_values_comes_before_the_one_for_a_missing_value_error(rubric, values, contracts):
    report = student_report(sub(), value_and_contract(values, contracts), rubric, OPTIONS)
    (ex,) = [e for e in report.exercises if e.hook == TEMPERATURE]
    assert [k.mistake for k in ex.known_mistakes] == ["temperature-without-max", "temperature-unchecked"]
    for page in (render_feedback_md(report), render_feedback_html(report)):
        assert page.index("temperature-without-max") < page.index("temperature-unchecked")
    (output,) = [t["output"] for t in gradescope_results(report)["tests"] if t["name"] == TEMPERATURE]
    assert output.index("temperature-without-max") < output.index("temperature-unchecked")


def test_of_two_value_mistakes_the_one_that_explains_more_cases_comes_first(rubric):
    results = [case(TEMPERATURE, FAILED, "a", message=said("nan", index="(0, 1)"), mistake="temperature-without-max")]
    results += [case(TEMPERATURE, FAILED, f"b{i}", message=said("values_differ", diff="0.3", index="(0, 1)", got="0.5",
                     expected="0.2"), mistake="temperature-multiplied") for i in range(3)]  # fmt: skip
    (ex,) = [e for e in student_report(sub(), results, rubric, OPTIONS).exercises if e.hook == TEMPERATURE]
    assert [k.mistake for k in ex.known_mistakes] == ["temperature-multiplied", "temperature-without-max"]


def test_a_submission_wide_error_is_the_first_thing_on_the_page(rubric):
    message = "the submission does not import: SyntaxError: invalid syntax (ada.py, line 3)"
    results = [case(h, FAILED, "c0", message=message) for h in HOOK_NAMES]
    report = student_report(sub(), results, rubric, OPTIONS)
    html = render_feedback_html(report)
    body = html.split("<body>", 1)[1]
    assert body.index('id="submission-error"') < body.index('class="score"') < body.index('class="overview"')
    assert "SyntaxError: invalid syntax (ada.py, line 3)" in body.split('class="score"', 1)[0]
    md = render_feedback_md(report)
    assert md.index("could not be graded") < md.index("**Score:")
    refused = student_report(sub("refused zip: nothing to grade"), [], rubric, OPTIONS)
    assert render_feedback_html(refused).split("<body>", 1)[1].index("refused zip") < 400


def test_passing_exercises_are_compact_and_failing_ones_stand_out(rubric):
    html = render_feedback_html(student_report(sub(), one_failing(), rubric, OPTIONS))
    assert "section.failing { border: 2px solid #cf222e" in html
    passing = html.split('id="passing"', 1)[1]
    assert "<table" not in passing and "3 passed, 0 failed." in passing


# --- results.json -----------------------------------------------------------------------------------


def test_results_json_has_no_skip_noise(rubric):
    data = gradescope_results(student_report(sub(), one_failing(), rubric, OPTIONS))
    tests = {t["name"]: t for t in data["tests"]}
    assert all("skip" not in t["output"].lower() and "cuda" not in t["output"] for t in data["tests"])
    assert tests[HOOK_NAMES[0]]["output"] == "All 3 cases passed."
    assert tests[FAILING]["status"] == "failed" and MISTAKE in tests[FAILING]["output"]
    assert "cuda" not in data["output"] and "isolation" not in data["output"]  # the instructor's class report


def test_results_json_honours_the_rubrics_visibility():
    rubric = parse_rubric({"visibility": {"default": "after_due_date", FAILING: "hidden", "merge_heads": "visible"}})
    data = gradescope_results(student_report(sub(), one_failing(), rubric, OPTIONS))
    seen = {t["name"]: t["visibility"] for t in data["tests"]}
    assert seen[FAILING] == "hidden" and seen["merge_heads"] == "visible"
    assert {seen[h] for h in HOOK_NAMES if h not in (FAILING, "merge_heads")} == {"after_due_date"}
    assert data["visibility"] == "after_due_date"
    plain = gradescope_results(student_report(sub(), one_failing(), parse_rubric({}), OPTIONS))
    assert {t["visibility"] for t in plain["tests"]} == {"visible"} and plain["visibility"] == "visible"


@pytest.mark.parametrize(
    "table, fragment",
    [
        ({"visibility": "hidden"}, "visibility must be a table"),
        ({"visibility": {"default": "secret"}}, "'secret': a visibility is one of visible, after_due_date"),
        ({"visibility": {"softmax": "hidden"}}, "'softmax' is not a hook nor 'default'"),
        ({"visibility": {FAILING: 1}}, "a visibility is one of"),
    ],
    ids=["not-a-table", "unknown-visibility", "unknown-hook", "not-a-string"],
)
def test_a_bad_visibility_is_a_clear_error(table, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_rubric(table, "my-rubric.toml")


def test_the_packaged_rubric_documents_visibility():
    text = (load_rubric().source and open(load_rubric().source, encoding="utf-8").read()) or ""
    assert "[visibility]" in text and "after_due_date" in text


# --- --lang zh ---------------------------------------------------------------------------------------


def test_the_zh_page_is_chinese_throughout(rubric):
    report = student_report(sub(), one_failing(), rubric, replace(OPTIONS, lang="zh"))
    html = render_feedback_html(report)
    assert '<html lang="zh">' in html
    assert '"Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif' in html
    for heading in ("ada 的反馈", "需要修改的练习", "已通过的练习", "得分：", "<th>练习</th>", "运行的设备"):
        assert heading in html, heading
    for english in ("Exercises to fix", "Exercises that pass", "Feedback for", "<th>exercise</th>", "Devices that"):
        assert english not in html, english
    assert "数值不符：最大绝对误差 0.1" in html and "not available" not in html
    assert '<span class="failed">失败</span>' in html and '<span class="passed">通过</span>' in html
    md = render_feedback_md(report)
    assert md.startswith("# ada 的反馈") and "## 需要修改的练习" in md
    data = gradescope_results(report)
    assert next(t for t in data["tests"] if t["name"] == HOOK_NAMES[0])["output"] == "全部 3 个用例通过。"


@pytest.mark.parametrize(
    "message, english, chinese",
    [
        (
            said("values_differ", diff="0.5", index="(0, 1)", got="0.25", expected="0.75"),
            "values differ: max abs diff 0.5 at (0, 1) (got 0.25, expected 0.75)",
            "数值不符：最大绝对误差 0.5 位于 (0, 1) （得到 0.25，应为 0.75）",
        ),
        (
            said("case", what="causal rows", message=said("shape", got="(2, 3)", expected="(3, 3)")),
            "causal rows: returned shape (2, 3), expected (3, 3)",
            "causal rows: 返回的形状是 (2, 3)，应为 (3, 3)",
        ),
        (
            said("no_function", hook="merge_heads", signature="merge_heads(x)"),
            "no function merge_heads; the hook is merge_heads(x)",
            "没有函数 merge_heads；应为 merge_heads(x)",
        ),
        ("my own words: raised here", "my own words: raised here", "my own words: raised here"),
        (
            said("case", what="my own words", message=said("raised", error="ValueError: values differ: raised")),
            "my own words: raised ValueError: values differ: raised",
            "my own words: 抛出了 ValueError: values differ: raised",
        ),
        (
            dtype_message("float32", "float64", said),
            "returned dtype float32, expected float64 (keep the input's dtype)",
            "返回的 dtype 是 float32，应为 float64（保持输入的 dtype）",
        ),
        (
            said("case", what="window 1", message=dtype_message("float32", "bool", said)),
            "window 1: returned dtype float32, expected bool (a mask is torch.bool: True where a query may not look)",
            "window 1: 返回的 dtype 是 float32，应为 bool（掩码是 torch.bool：True 表示查询不能看的位置）",
        ),
    ],
    ids=["values", "shape-after-what", "no-function", "plain-text-untouched", "learner-text-untouched", "dtype",
         "mask-dtype"],
)  # fmt: skip
def test_the_standard_messages_are_said_by_id_in_each_language(message, english, chinese):
    assert message == english and message_in(message, "en") == english
    assert message_in(message, "zh") == chinese


def test_a_class_graded_in_english_gets_its_chinese_page_from_the_gradebook(tmp_path, rubric):
    """A later run with --lang zh reuses what a --lang en run recorded: its messages are in the gradebook by id."""
    notes = {"w0": said("extras.one", first=said("extras.buffer", names="cache"))}
    results = [replace(r, note=notes.get(r.case, "")) for r in one_failing()]
    english = student_report(sub(), results, rubric, OPTIONS)
    with Gradebook(tmp_path / "gradebook.sqlite") as book:
        run = book.start_run(1, "s-1", ["cpu", "meta"], "0", "none")
        book.record(run, sub(), results)
        ((_, recorded, again),) = book.class_results(book.class_settings()).values()
    assert again == results
    assert student_report(recorded, again, rubric, OPTIONS) == english
    chinese = render_feedback_md(student_report(recorded, again, rubric, replace(OPTIONS, lang="zh")))
    assert "数值不符：最大绝对误差 0.1 位于 (0, 0) （得到 0.5，应为 0.25）" in chinese
    assert "你的模块有一个额外的 buffer cache：没问题，记下了" in chinese
    for english_words in ("values differ", "max abs diff", "your module has", "not available"):
        assert english_words not in chinese, english_words


# --- the heatmap ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes, best",
    [
        ([(1, 1), (6, 6), (2, 2)], (6, 6)),
        ([(1, 1), (2, 2)], (2, 2)),
        ([(64, 64), (8, 8), (4, 4)], (8, 8)),
        ([(3, 3), (2, 4, 5, 5)], (2, 4, 5, 5)),
    ],
    ids=["4x4-over-1x1", "none-4x4-the-larger", "nearest-8", "batched"],
)
def test_the_most_informative_case_is_drawn(shapes, best):
    assert max(shapes, key=heatmaps.informative) == best


def test_grading_keeps_the_most_informative_failing_case_not_the_first():
    from grader.instructor.submission_grading import _Verdicts

    class Trial:
        def __init__(self, name, t):
            self.hook, self.device, self.dtype = FAILING, "cpu", "float32"
            self.case = type("Case", (), {"name": name})()
            self.golds = [torch.rand(t, t)]

    verdicts = _Verdicts("ada", False, None)
    for name, t in (("one-token", 1), ("six", 6), ("two", 2)):
        trial = Trial(name, t)
        verdicts._keep_figure(trial, torch.rand(t, t))
    assert verdicts.figures[FAILING].label.startswith("six") and verdicts.figures[FAILING].expected.shape == (6, 6)


def test_each_panel_has_its_own_scale_and_small_matrices_show_values():
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure as MplFigure

    texts: list[str] = []
    bars: list[str] = []
    real_colorbar = MplFigure.colorbar

    def colorbar(self, mappable, *args, **kwargs):
        bar = real_colorbar(self, mappable, *args, **kwargs)
        bars.append(f"{mappable.norm.vmin:.3g}..{mappable.norm.vmax:.3g}")
        return bar

    expected = torch.full((5, 5), 0.2)
    expected[0, 0] = 0.1
    received = torch.full((5, 5), 40.0)
    received[0, 0] = 30.0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MplFigure, "colorbar", colorbar)
        import matplotlib.axes

        real_text = matplotlib.axes.Axes.text

        def text(self, x, y, s, *a, **k):
            texts.append(s)
            return real_text(self, x, y, s, *a, **k)

        mp.setattr(matplotlib.axes.Axes, "text", text)
        png = heatmaps.render("t", expected, received)
    assert png.startswith(b"\x89PNG")
    assert bars == ["0.1..0.2", "30..40", "29.9..39.8"], "expected, received and difference each on their own scale"
    assert texts.count("0.20") == 24 and texts.count("40.00") == 24, "values in the cells of a 5x5 matrix"
    texts.clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matplotlib.axes.Axes, "text", text)
        heatmaps.render("t", torch.rand(12, 12), torch.rand(12, 12))
    assert texts == [], "no values in the cells of a 12x12 matrix"


def test_a_mask_heatmap_says_it_is_a_mask(tmp_path, rubric):
    pytest.importorskip("matplotlib")
    want = torch.triu(torch.ones(6, 6, dtype=torch.bool), 1)
    got = torch.triu(torch.ones(6, 6, dtype=torch.bool), 0)
    results = [r if r.hook != "causal_mask" or r.status != PASSED else
               case("causal_mask", FAILED, r.case, message="wrong entries, first at (0, 0): got True, expected False")
               for r in one_failing()]  # fmt: skip
    figures = {
        "ada": {"causal_mask": Figure.of("T6 (cpu, bool)", want, got), FAILING: Figure.of("w3", *torch.rand(2, 5, 5))}
    }
    assert write_reports(tmp_path, [(sub(), results)], rubric, OPTIONS, figures) == []
    html = (tmp_path / "ada" / "feedback.html").read_text(encoding="utf-8")
    found = re.findall(r'<section class="exercise failing" id="(\w+)">.*?<img class="figure" alt="([^"]+)"', html, re.S)
    alts = dict(found)
    assert "boolean mask" in alts["causal_mask"] and "True = masked" in alts["causal_mask"]
    assert "attention weights" in alts[FAILING] and "mask" not in alts[FAILING]
    md = (tmp_path / "ada" / "feedback.md").read_text(encoding="utf-8")
    assert "True = masked" in md and "(heatmap-causal_mask.png)" in md


# --- what the learner printed ---------------------------------------------------------------------------


def test_the_child_keeps_what_each_call_printed_capped(capfd):
    def noisy(x):
        print("inside the call", x)
        print("x" * (2 * PRINTED_CHARS))
        return x

    def quiet(x):
        return x

    calls = {"noisy": noisy, "quiet": quiet}
    reply, _ = child_call.call_hook(calls, {"id": 0, "hook": "noisy", "args": {"x": {"value": 3}}}, {})
    assert reply["printed"].startswith("inside the call 3\n")
    assert len(reply["printed"]) < PRINTED_CHARS + 100 and "more characters not kept" in reply["printed"]
    assert "inside the call 3" in capfd.readouterr().out, "the print still reaches the process's output"
    reply, _ = child_call.call_hook(calls, {"id": 1, "hook": "quiet", "args": {"x": {"value": 3}}}, {})
    assert "printed" not in reply
    import sys

    assert not isinstance(sys.stdout, child_call._Tee), "stdout is given back after the call"


def test_the_reply_declaration_refuses_more_printed_than_its_cap():
    with pytest.raises(MalformedReply, match="reply.printed"):
        decode({"id": 1, "printed": "y" * (10 * PRINTED_CHARS)}, CallReply, "reply")


def test_stats_keep_what_each_exercise_printed_capped():
    stats = Stats()
    stats.keep_printed("merge_heads", "one")
    stats.keep_printed("merge_heads", "two\n")
    stats.keep_printed("split_heads", "")
    for _ in range(10):
        stats.keep_printed("causal_mask", "z" * 4000)
    assert stats.printed["merge_heads"] == "one\ntwo\n" and "split_heads" not in stats.printed
    assert len(stats.printed["causal_mask"]) < PRINTED_PER_HOOK + 100


def test_the_gradebook_keeps_what_each_exercise_printed(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as book:
        run = book.start_run(1, "s-1", ["cpu"], "0", "none")
        book.record(run, sub(), one_failing(), output="all of it", printed={"merge_heads": "in merge\n", "x": ""})
        assert book.printed(run, "ada") == {"merge_heads": "in merge\n"}
        assert book.output(run, "ada") == "all of it"


def test_an_older_gradebook_gets_the_printed_column(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as book:
        run = book.start_run(1, "s-1", ["cpu"], "0", "none")
        book.record(run, sub(), [], output="old")
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE submissions DROP COLUMN printed")  # as a gradebook written before it existed
    conn.commit()
    conn.close()
    with Gradebook(path) as book:
        assert book.printed(run, "ada") == {} and book.output(run, "ada") == "old"
        book.record(run, sub(), [], printed={"merge_heads": "now\n"})
        assert book.printed(run, "ada") == {"merge_heads": "now\n"}


PRINTED = {FAILING: "debug: weights sum to 0.5 \x1b[31m<b>\n", "merge_heads": "merge says hi\n"}


def test_show_output_puts_a_print_in_its_exercises_section_and_not_without_the_flag(tmp_path, rubric):
    roll = ClassRoll(graded=[(sub(), one_failing())], outputs={"ada": "at import\n"}, printed={"ada": PRINTED})
    write_reports(tmp_path, roll.graded, rubric, replace(OPTIONS, show_output=True), roll=roll)
    html = (tmp_path / "ada" / "feedback.html").read_text(encoding="utf-8")
    failing = html.split(f'id="{FAILING}"', 1)[1].split("</section>", 1)[0]
    merge = html.split('id="merge_heads"', 1)[1].split("</section>", 1)[0]
    assert "debug: weights sum to 0.5 \\x1b[31m&lt;b&gt;" in failing, "escaped and inert"
    assert "merge says hi" in merge and "merge says hi" not in failing and "debug:" not in merge
    assert "\x1b" not in html and "<b>" not in html
    md = (tmp_path / "ada" / "feedback.md").read_text(encoding="utf-8")
    assert "merge says hi" in md and "debug: weights sum" in md
    # the class side always has it, per exercise
    output = (tmp_path / "ada" / "output.txt").read_text(encoding="utf-8")
    assert output.index(f"== {FAILING} ==") < output.index("== merge_heads ==") < output.index("at import")
    class_html = (tmp_path / "class.html").read_text(encoding="utf-8")
    assert "<code>softmax_weights</code>, <code>merge_heads</code>" in class_html

    write_reports(tmp_path, roll.graded, rubric, OPTIONS, roll=roll)  # without --show-output
    html = (tmp_path / "ada" / "feedback.html").read_text(encoding="utf-8")
    md = (tmp_path / "ada" / "feedback.md").read_text(encoding="utf-8")
    assert "debug:" not in html and "merge says hi" not in html and "merge says hi" not in md
    assert "== merge_heads ==" in (tmp_path / "ada" / "output.txt").read_text(encoding="utf-8")


def test_output_text_sections():
    assert output_text("", {}) == ""
    assert output_text("only import\n", {}) == "only import\n"
    text = output_text("all\n", {"merge_heads": "m\n", "causal_mask": "c"})
    assert text.index("== causal_mask ==") < text.index("== merge_heads ==") < text.index("== everything")


def test_grade_help_says_show_output_is_off_by_default():
    from click.testing import CliRunner

    from grader.cli import main

    text = CliRunner().invoke(main, ["grade", "--help"]).output
    assert "--show-output" in text and "hidden inputs" in " ".join(text.split())


# --- a real browser ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_chromium_shows_the_failing_exercise_above_the_passing_ones(tmp_path, rubric):
    from browser import dump_dom, screenshot

    pytest.importorskip("matplotlib")
    PIL_Image = pytest.importorskip("PIL.Image")
    import numpy as np

    figures = {"ada": {FAILING: Figure.of("w3 (cpu, float32)", torch.softmax(torch.rand(6, 6), -1), torch.rand(6, 6))}}
    assert write_reports(tmp_path, [(sub(), one_failing())], rubric, OPTIONS, figures) == []
    page = tmp_path / "ada" / "feedback.html"
    shot = PIL_Image.open(screenshot(page, tmp_path / "shot")).convert("RGB")
    pixels = np.asarray(shot)
    assert pixels.std() > 10 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50, "a blank page"
    # the failing section's red frame (#cf222e) is drawn, and above every passing section's grey one (#d0d7de)
    red_rows = np.where((np.abs(pixels.astype(int) - [0xCF, 0x22, 0x2E]).max(axis=2) <= 12).sum(axis=1) > 300)[0]
    grey_rows = np.where((np.abs(pixels.astype(int) - [0xD0, 0xD7, 0xDE]).max(axis=2) <= 6).sum(axis=1) > 500)[0]
    assert len(red_rows) and len(grey_rows)
    assert red_rows.min() < grey_rows.max()
    dom = dump_dom(page, tmp_path / "dom")
    order = re.findall(r'<section class="exercise (\w+)" id="(\w+)"', dom)
    assert order[0] == ("failing", FAILING) and all(kind == "passing" for kind, _ in order[1:])
    assert len(re.findall(r'<img class="figure"', dom)) == 1
