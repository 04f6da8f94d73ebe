"""Hostile intake and outputs (issue 10): links, notebook bombs, ids, control characters, reports, the three lies.

- **Intake never follows a link**: a notebook (and a ``.py``) linked from a class to a file outside is an
  error row naming the link, never read, never graded.
- **Notebook bombs** (a 700 kB cell, 8 MB of outputs, a 20 MB notebook in a 20 KB zip, 100k cells,
  millions of JSON values, too much code) are each refused or converted in seconds with modest memory.
- **Ids** do not depend on the order files come in; the file whose name is the id keeps it.
- **Everything a submission wrote is inert**: an import error made of OSC 52 / clear-screen sequences never
  reaches the console or any file raw; heatmaps of extreme values never stop the class.
- **The three lies** (faking ``inputs_unchanged`` through the child runtime, a banned call under
  ``DisableTorchFunction``, a plain-attribute mask reported as a buffer) and their variants are flagged for
  review, so lying about a reported property gains nothing unflagged.

The end-to-end part runs ``attnkit grade`` once as a subprocess on a small hostile class (its output a pipe,
so rich writes no control codes of its own and any there would be the learner's), and reads its console
output and every file it wrote.  ``tests/test_reports.py`` checks the same with a terminal's colours on.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import subprocess
import sys
import tracemalloc
import unicodedata
import zipfile
from pathlib import Path

import learner_code
import pytest
from learner_code import alice_with

from grader.instructor.handin_reading import read_submission
from grader.instructor.intake import collect_submissions
from grader.instructor.review_flags import scan_files
from grader.instructor.rubric import load_rubric, score, total
from grader.registry import HOOK_NAMES

HERE = Path(__file__).resolve().parent
SNIPPETS = learner_code.HOSTILE_SNIPPETS
KIT_ROOT = HERE.parents[1]
ALICE = KIT_ROOT / "examples" / "submissions" / "alice.py"
SEED = "11"

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # sets the clipboard to `rm -rf ~`
CLEAR = "\x1b[2J\x1b[3J\x1bc"  # clears the screen and the scrollback, resets the terminal
HOSTILE_TEXT = OSC52 + CLEAR + "\r\x9b31m\u202e"


def assemble(snippet: str, folder: Path = SNIPPETS) -> str:
    """Alice's solution with the hooks a snippet defines renamed out of her way, then the snippet."""
    return alice_with(snippet, folder)


def notebook_of(source: str, outputs: list | None = None) -> str:
    cell = {"cell_type": "code", "id": "c0", "metadata": {}, "source": source, "outputs": outputs or [],
            "execution_count": None}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]})


def dangerous(ch: str) -> bool:
    """From Unicode's own categories: a control character other than tab and newline, a surrogate, a bidi control."""
    return (unicodedata.category(ch) in ("Cc", "Cs") and ch not in "\t\n") or unicodedata.bidirectional(ch) in (
        "LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI")


# --- intake never follows a link ----------------------------------------------------------------------------


def test_a_notebook_linked_from_the_class_to_a_file_outside_is_never_read(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "answers.ipynb").write_text(notebook_of(ALICE.read_text(encoding="utf-8")), encoding="utf-8")
    (outside / "answers.py").write_text(ALICE.read_text(encoding="utf-8"), encoding="utf-8")
    klass = tmp_path / "class"
    (klass / "mallory").mkdir(parents=True)
    os.symlink(outside / "answers.ipynb", klass / "mallory" / "work.ipynb")  # a member folder holding a link
    os.symlink(outside / "answers.ipynb", klass / "trudy.ipynb")  # a member that is a link
    os.symlink(outside / "answers.py", klass / "oscar.py")
    os.symlink(outside, klass / "peggy")  # a member folder that is a link
    (klass / "alice.py").write_text(ALICE.read_text(encoding="utf-8"), encoding="utf-8")
    found = {s.student: s for s in collect_submissions([str(klass)])}
    assert sorted(found) == ["alice", "mallory", "oscar", "peggy", "trudy"]
    assert found["alice"].error is None
    assert found["mallory"].error == "refused folder: work.ipynb is a symbolic link"
    assert found["trudy"].error == "trudy.ipynb is a symbolic link, not followed"
    assert found["oscar"].error == "oscar.py is a symbolic link, not followed"
    assert found["peggy"].error == "peggy is a symbolic link, not followed"
    for student in ("mallory", "trudy", "oscar", "peggy"):
        assert found[student].files == {} and found[student].sha256 == ""


# --- notebook bombs -------------------------------------------------------------------------------------------


def _code(source: str, i: int, outputs: list | None = None) -> dict:
    return {"cell_type": "code", "id": f"c{i}", "metadata": {}, "source": source, "outputs": outputs or [],
            "execution_count": None}


def _nb(cells: list[dict], metadata: dict | None = None) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata or {}, "cells": cells})


GOOD = "import torch\n\n\ndef softmax_weights(scores, dim=-1):\n    return scores.softmax(dim)\n"


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def write_bomb(case: str, folder: Path) -> Path:
    if case == "zip-20mb":
        path = folder / "bomb.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            zf.writestr("bomb/work.ipynb", _nb([_code(GOOD, 0, [_stream("z" * 20_000_000)])]))
        assert path.stat().st_size < 100_000  # 20 MB of notebook in a small zip, well inside the zip caps
        return path
    text = {
        "cell-700k": lambda: _nb([_code(GOOD, 0), _code("x = 1; " * 100_000, 1)]),
        "outputs-8mb": lambda: _nb([_code(GOOD, 0, [_stream("y" * 79 + "\n") for _ in range(100_000)])]),
        "cells-100k": lambda: _nb([_code(GOOD, 0)] + [_code("a = 1", i) for i in range(1, 100_000)]),
        "json-values": lambda: _nb([_code(GOOD, 0)], {"junk": [[] for _ in range(4_000_000)]}),
        "code-600k": lambda: _nb([_code(GOOD, 0)] + [_code("x = 1  # " + "#" * 200_000, i) for i in range(1, 4)]),
        "escaped-quotes": lambda: '{"cells": ["' + '\\"' * 5_000_000,  # 10 MB inside one unterminated string
    }[case]()
    path = folder / "bomb.ipynb"
    path.write_text(text, encoding="utf-8")
    return path


BOMBS = {
    "cell-700k": "bomb.ipynb: refused: cell 2 holds 684 KB of code, over the 256 KB limit",
    "outputs-8mb": None,  # converted: the outputs are dropped unread
    "zip-20mb": None,
    "cells-100k": "bomb.ipynb: refused: 100000 cells is over the 1000 cell limit",
    "json-values": "bomb.ipynb: refused: about 8000015 JSON values is over the 1000000 value limit",
    "code-600k": "bomb.ipynb: refused: the code cells hold more than 512 KB, over the limit",
    "escaped-quotes": "bomb.ipynb: not a notebook: invalid JSON at line 1",
}
PEAK_MIB = 250
"""Python's own allocations while reading any bomb stay under this (measured: 38 to 85 MiB; the old converter took
GBs).  ``benchmarks/notebook_bombs.py`` prints the times and the peak RSS."""


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BOMBS), ids=list(BOMBS))
@pytest.mark.timeout(120)  # refused or converted in seconds (each well under 10 s here, traced); 448 s before
def test_a_notebook_bomb_is_refused_or_converted_cheaply(tmp_path, case):
    path = write_bomb(case, tmp_path)
    tracemalloc.start()
    try:
        sub = read_submission(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < PEAK_MIB << 20, f"{peak / 2**20:.0f} MiB"
    assert sub.format == "ipynb" and sub.error == BOMBS[case]
    if BOMBS[case] is None:
        (code,) = sub.files.values()
        assert "def softmax_weights(scores, dim=-1):" in code and "yyyy" not in code and "zzzz" not in code


# --- ids ---------------------------------------------------------------------------------------------------


ID_FILES = ["a b.py", "a_b.py", "alice.PY", "alice.py", "Alice.py", "grades.csv.py", "bob.zip", "Bob.py", "carol.py"]


def test_ids_do_not_depend_on_the_order_and_the_real_name_keeps_its_id(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ID_FILES:
        if name.endswith(".zip"):
            with zipfile.ZipFile(folder / name, "w") as zf:
                zf.writestr("scores.py", GOOD)
        else:
            (folder / name).write_text(GOOD, encoding="utf-8")
    paths = [str(folder / name) for name in ID_FILES]
    reference = {s.source: (s.student, s.notes) for s in collect_submissions(paths)}
    shuffled = random.Random(10)
    for _ in range(25):
        order = shuffled.sample(paths, len(paths))
        assert {s.source: (s.student, s.notes) for s in collect_submissions(order)} == reference
    assert {s.source: (s.student, s.notes) for s in collect_submissions([str(folder)])} == reference
    ids = {Path(source).name: student for source, (student, _) in reference.items()}
    assert ids["a_b.py"] == "a_b" and ids["alice.py"] == "alice" and ids["carol.py"] == "carol"
    assert ids["a b.py"].startswith("a_b-") and ids["alice.PY"].startswith("alice-")
    assert ids["Alice.py"].startswith("Alice-") and ids["grades.csv.py"].startswith("grades.csv-")
    assert ids["bob.zip"] == "bob" and ids["Bob.py"].startswith("Bob-")
    assert len({i.lower() for i in ids.values()}) == len(ids)
    notes = {Path(source).name: n for source, (_, n) in reference.items()}
    assert [len(notes[name]) for name in ID_FILES] == [1, 0, 1, 0, 1, 1, 0, 1, 0]


# --- the three lies, and variants ------------------------------------------------------------------------------

LIES = {
    # snippet -> (the honest version it lies about, a construct it must be flagged for)
    "lie_inputs_unchanged": ("mutates_input", "sys.modules"),
    "lie_inputs_unchanged_hidden": ("mutates_input", "sys.modules"),
    "lie_inputs_unchanged_torch_equal": ("mutates_input", "assignment of torch.equal"),
    "lie_inputs_unchanged_frames": ("mutates_input", "frame inspection (f_globals)"),
    "lie_disable_torch_function": ("banned_softmax", "DisableTorchFunction"),
    "lie_disable_torch_function_hidden": ("banned_softmax", "torch._C"),
    "lie_disable_torch_function_import": ("banned_softmax", "DisableTorchFunction"),
    "lie_jit_script": ("banned_softmax", "torch.jit"),
    "lie_mask_buffer": ("plain_mask_attribute", "overrides Module.state_dict"),
    "lie_mask_buffer_patched": ("plain_mask_attribute", "assignment of torch.nn.Module.state_dict"),
    "lie_mask_buffer_hook": ("plain_mask_attribute", "state-dict hook (register_state_dict_post_hook)"),
}


UNGAINFUL_LIES = {
    # snippet -> the honest version: a banned kernel run with the recording modes switched off, by routes the
    # review scan need not see (round 5's f1, f2); the kernel itself is heard, so each gains nothing
    "lie_switches_by_formatter": "banned_softmax",
    "lie_switches_by_configurator": "banned_softmax",
    "lie_redispatch": "banned_softmax",
    "lie_python_key_excluded": "banned_softmax",
    # red team 7's 1: a fused attention kernel whose name holds neither banned name: banned by its word
    "lie_fused_attention": "banned_sdpa",
    "lie_compiled_softmax": "banned_softmax",  # traced by torch.compile, run as inductor's code
    "lie_flex_attention": "banned_sdpa",  # red team 12's 2: a higher-order operator, with its own backward
}


def honest_source(name: str) -> str:
    """The honest version: ``banned_*`` live with the grader's own snippets, the others here."""
    folder = learner_code.SNIPPETS if name.startswith("banned_") else SNIPPETS
    return assemble(name, folder)


@pytest.mark.parametrize("lie", list(LIES), ids=list(LIES))
def test_every_lie_is_flagged_and_its_honest_version_is_not(lie):
    honest, construct = LIES[lie]
    found = scan_files({f"{lie}.py": assemble(lie)})
    assert construct in {f.rsplit(": ", 1)[1] for f in found}, found
    assert scan_files({f"{honest}.py": honest_source(honest)}) == []


@pytest.fixture(scope="module")
def lie_grades():
    """Points of each lie and of its honest version, graded for real (the cpu cases) in sandboxed children."""
    from grader.instructor.handin_reading import files_sha256
    from grader.instructor.intake_model import Submission
    from grader.instructor.sandbox import Limits, Template
    from grader.instructor.submission_grading import grade_submission
    from grader.instructor.suite import build_suite

    rubric = load_rubric()
    suite = build_suite(int(SEED), ("cpu",))
    points: dict[str, tuple[float, list[str]]] = {}
    names = [*LIES, *UNGAINFUL_LIES] + sorted({honest for honest, _ in LIES.values()} | set(UNGAINFUL_LIES.values()))
    with Template() as template:
        for name in names:
            source = assemble(name) if name.startswith("lie_") else honest_source(name)
            files = {f"{name}.py": source}
            sub = Submission(name, f"{name}.py", "py", files, f"{name}.py", files_sha256(files),
                             review=scan_files(files))
            results = grade_submission(sub, suite, template, Limits(call_seconds=10)).results
            points[name] = (total(score(results, rubric))[0], sub.review)
    return points


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("lie", list(LIES), ids=list(LIES))
def test_a_lie_gets_its_honest_points_or_is_flagged(lie_grades, lie):
    honest, _ = LIES[lie]
    lied, review = lie_grades[lie]
    truth, honest_review = lie_grades[honest]
    assert honest_review == [], "the honest version must not be flagged"
    assert lied <= truth or review, f"{lie}: {lied} points against {truth} honest, and not flagged"
    assert review, f"{lie} is not flagged"
    if honest == "mutates_input":  # the inputs come back and are compared by the grader: the lie gains nothing
        assert lied <= truth, f"{lie}: {lied} points against {truth} honest"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("lie", list(UNGAINFUL_LIES), ids=list(UNGAINFUL_LIES))
def test_a_banned_kernel_run_with_the_modes_switched_off_gains_nothing(lie_grades, lie):
    lied, _ = lie_grades[lie]
    truth, _ = lie_grades[UNGAINFUL_LIES[lie]]
    assert lied <= truth, f"{lie}: {lied} points against {truth} honest"


# --- one run of `attnkit grade` on a hostile class: console, files, statuses ---------------------------------

OSC_IMPORT = f'raise ImportError("{(OSC52 + CLEAR).encode("unicode_escape").decode()}")\n'
EXTREME = """
import torch


def softmax_weights(scores, dim=-1):
    big = torch.finfo(scores.dtype).max  # 1.7e308 in float64: matplotlib's colour bar overflowed on it
    out = torch.full_like(scores, big)
    out[..., 0] = -big
    out[..., -1] = float("nan")
    return out
"""


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("intake-outputs")
    outside = root / "outside"
    outside.mkdir()
    (outside / "answers.ipynb").write_text(notebook_of(ALICE.read_text(encoding="utf-8")), encoding="utf-8")
    klass = root / "class"
    klass.mkdir()
    alice = ALICE.read_text(encoding="utf-8")
    (klass / "alice.py").write_text(alice, encoding="utf-8")
    (klass / "Alice.py").write_text(alice, encoding="utf-8")
    (klass / "mallory").mkdir()
    os.symlink(outside / "answers.ipynb", klass / "mallory" / "work.ipynb")
    (klass / "osc.py").write_text(OSC_IMPORT, encoding="utf-8")
    (klass / f"ev{OSC52}il.py").write_text(alice, encoding="utf-8")  # a file name made of escapes
    (klass / "liar.py").write_text(assemble("lie_inputs_unchanged"), encoding="utf-8")
    source = ALICE.read_text(encoding="utf-8").replace("def softmax_weights(", "def _alice_softmax_weights(")
    source = re.sub(r"\bsoftmax_weights\b", "_alice_softmax_weights", source)
    (klass / "extreme.py").write_text(source + EXTREME, encoding="utf-8")
    out = root / "OUT"
    env = {**os.environ, "TMPDIR": str(root), "COLUMNS": "200"}  # not a terminal: rich adds no codes of its own
    env.pop("FORCE_COLOR", None)
    command = [sys.executable, "-m", "grader.cli", "grade", str(klass), "--out", str(out), "--seed", SEED,
               "--devices", "cpu,meta", "--timeout", "5"]
    done = subprocess.run(command, cwd=KIT_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=600)
    with (out / "grades.csv").open(newline="", encoding="utf-8") as fh:
        rows = {r[0]: r for r in csv.reader(fh)}
    return done, out, rows


@pytest.mark.slow
def test_the_run_completes_and_writes_every_report(hostile_run):
    done, out, rows = hostile_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert rows["student"][:2] == ["student", "status"]
    students = [s for s in rows if s != "student"]
    assert len(students) == 7
    for student in students:
        assert {"results.json", "feedback.md", "feedback.html"} <= {p.name for p in (out / student).iterdir()}


@pytest.mark.slow
def test_nothing_a_submission_wrote_reaches_the_console_raw(hostile_run):
    done, _, _ = hostile_run
    console = done.stdout.decode("utf-8")
    assert "does not import" in console and "ImportError" in console  # the error is shown (as inert text)
    assert not [hex(ord(c)) for c in console if dangerous(c)]  # so every control character would be the learner's
    assert b"\x1b" not in done.stdout + done.stderr and b"\x07" not in done.stdout + done.stderr


@pytest.mark.slow
def test_nothing_a_submission_wrote_reaches_a_file_raw(hostile_run):
    _, out, _ = hostile_run
    checked = 0
    for path in out.rglob("*"):
        if not path.is_file() or path.suffix in (".sqlite", ".png") or "sqlite" in path.name:
            continue
        text = path.read_bytes().decode("utf-8")
        assert not [hex(ord(c)) for c in text if dangerous(c)], path
        checked += 1
    assert checked >= 7 * 3 + 2


@pytest.mark.slow
def test_statuses_say_graded_review_or_error(hostile_run):
    done, out, rows = hostile_run
    status = {student: row[1] for student, row in rows.items() if student != "student"}
    assert status["alice"] == "graded" and status["extreme"] == "graded"
    assert status["mallory"] == "error: refused folder: work.ipynb is a symbolic link"
    assert status["osc"].startswith("error: the submission does not import: ")
    assert "52;c;cm0gLXJmIH4=" in status["osc"]
    assert status["liar"] == 'review: "__main__" as a string; __globals__; sys.modules'
    alice_id = next(s for s in status if s.startswith("Alice-"))
    escaped_id = next(s for s in status if s.startswith("ev_"))
    assert status[alice_id] == status[escaped_id] == "graded"
    rubric = load_rubric()
    assert float(rows["alice"][-2]) == float(rows[alice_id][-2]) == rubric.max_total
    # the lie gains nothing (the grader compares the inputs sent back), and the flag takes nothing more
    assert float(rows["liar"][-2]) == rubric.max_total - rubric.points["softmax_weights"]
    console = done.stdout.decode("utf-8")
    assert "flagged for review" in console and "liar: liar.py:" in console
    assert f"'Alice.py' was given the id '{alice_id}'" in console


@pytest.mark.slow
def test_extreme_values_draw_a_heatmap_and_stop_nothing(hostile_run):
    _, out, rows = hostile_run
    heatmap = out / "extreme" / "heatmap-softmax_weights.png"
    assert heatmap.read_bytes().startswith(b"\x89PNG")
    assert "data:image/png;base64," in (out / "extreme" / "feedback.html").read_text(encoding="utf-8")
    assert float(rows["extreme"][2 + HOOK_NAMES.index("softmax_weights")]) == 0.0
