"""The review scan reads the text that is run: a hand-in declaring a coding other than UTF-8 is refused at intake.

A ``# -*- coding: utf-7 -*-`` first line makes Python's importer decode the file as UTF-7: what the scan
reads as one comment (``+AAo-`` and the like) is, to the importer, a new line of code.  Such a hand-in gets
its own error row; the class around it is read as ever.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from grader.instructor.handin_reading import coding_problem, read_submission
from grader.instructor.intake import collect

LIE = "import sys\nsys.modules['__main__'].call_hook = None\n"
HIDDEN = "# -*- coding: utf-7 -*-\ndef softmax_weights(scores, dim=-1):\n    return scores.softmax(dim)\n" + (
    "# harmless +AAo-import sys+AAo-sys.modules+AFs-'+AF8AXw-main+AF8AXw-'+AF0-.call+AF8-hook = None\n"
)


def test_the_utf7_route_is_real_code_to_the_importer(tmp_path):
    """The attack this guards against: the comment the scan reads runs when Python imports the file."""
    path = tmp_path / "m.py"
    path.write_bytes(HIDDEN.encode("ascii"))
    probe = "import sys, types; sys.modules['__main__'].call_hook = 1; import m; print(json.dumps(call_hook))"
    run = subprocess.run(
        [sys.executable, "-c", "import json\ncall_hook = 1\n" + probe], cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) is None  # the hidden line ran


@pytest.mark.parametrize(
    "first_lines",
    [
        "# -*- coding: utf-7 -*-\n",
        "#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n",
        "# vim: set fileencoding=latin-1 :\n",
        "# coding=cp1252\n",
        "# coding: utf_16\n",
        "# coding: no-such-codec\n",
    ],
    ids=["utf-7", "second-line", "vim", "equals", "utf-16", "unknown"],
)
def test_a_declared_coding_other_than_utf8_is_refused(first_lines):
    why = coding_problem(first_lines + "x = 1\n")
    assert why is not None and "only UTF-8 is graded" in why


@pytest.mark.parametrize(
    "text",
    [
        "# -*- coding: utf-8 -*-\nx = 1\n",
        "# coding: UTF8\n",
        "# coding=utf_8\n",
        "x = 1\n\n# coding: latin-1 (the third line: Python does not read it)\n",
        "MESSAGE = 'encoding: latin-1'\n",
    ],
    ids=["utf-8", "UTF8", "utf_8", "third-line", "not-a-comment"],
)
def test_utf8_and_what_python_does_not_read_pass(text):
    assert coding_problem(text) is None


def test_a_refused_hand_in_gets_its_own_row_and_the_class_goes_on(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "mallory.py").write_bytes(HIDDEN.encode("ascii"))
    (folder / "bob.py").write_text("def softmax_weights(scores, dim=-1):\n    return scores.softmax(dim)\n")
    with zipfile.ZipFile(folder / "eve.zip", "w") as zf:
        zf.writestr("eve/attention.py", HIDDEN)
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": HIDDEN}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (folder / "nina.ipynb").write_text(json.dumps(notebook))
    intake = collect([folder])
    by_id = {s.student: s for s in intake.submissions}
    assert by_id["bob"].error is None
    assert by_id["nina"].error is None  # a notebook's code starts with the converter's header: no declaration
    assert coding_problem(by_id["nina"].files["nina.py"]) is None
    for student in ("mallory", "eve"):
        error = by_id[student].error or ""
        assert "declares the coding 'utf-7'" in error and "only UTF-8 is graded" in error, (student, error)
    assert "\n" not in by_id["mallory"].error
    assert read_submission(folder / "mallory.py").error == by_id["mallory"].error


def test_a_bom_with_another_declared_coding_is_refused(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nx = 1\n")
    assert "declares the coding 'latin-1'" in (read_submission(path).error or "")
    path.write_bytes(b"\xef\xbb\xbf# -*- coding: utf-8 -*-\nx = 1\n")
    assert read_submission(path).error is None


@pytest.mark.parametrize("separator", ["\x1c", "\x1d", "\x1e", "\x0b", "\x0c"])  # ASCII: utf-7 decodes the line
def test_lines_are_counted_as_the_tokenizer_counts_them(separator):
    """A red team's route: ``str.splitlines`` breaks at these, Python's tokenizer does not, so the real line 2
    (the cookie) was read as line 3 and let through."""
    text = f"#{separator}x\n# -*- coding: utf-7 -*-\nprint(1)\n"
    assert coding_problem(text) is not None
    assert compile(text.encode("utf-8"), "t.py", "exec")  # to Python, the cookie is on line 2 (utf-7 is applied)
