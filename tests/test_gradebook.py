"""The gradebook: WAL, one transaction per submission, reuse of identical gradings, threads."""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch

from grader.instructor.gradebook import OUTPUT_STORED, SCHEMA_VERSION, ClassSettings, Gradebook
from grader.instructor.heatmaps import Figure
from grader.instructor.intake_model import Submission
from grader.instructor.said import Message, message_in, said
from grader.instructor.verdict import FAILED, PASSED, SKIPPED, CaseResult
from grader.registry import HOOK_NAMES

KIT_ROOT = Path(__file__).resolve().parents[1]
CONDITIONS = dict(suite_version="suite-1", seed=1234, devices=["cpu", "meta"])


def sub(student: str, sha: str | None = None, error: str | None = None) -> Submission:
    return Submission(student, f"class/{student}.py", "py", {f"{student}.py": "X = 1\n"}, f"{student}.py",
                      sha or f"sha-{student}", error)


def results(student: str, n: int = 3) -> list[CaseResult]:
    statuses = [PASSED, FAILED, SKIPPED]
    return [
        CaseResult(student, HOOK_NAMES[i % len(HOOK_NAMES)], f"case-{i}", "cpu", "float32", statuses[i % 3],
                   f"message {i}" if i % 3 else "", 0.25 * i, "mistake-id" if i % 3 == 1 else "",
                   "a note, for no points" if i % 3 == 0 else "")
        for i in range(n)
    ]


@pytest.fixture
def book(tmp_path):
    with Gradebook(tmp_path / "out" / "gradebook.sqlite") as gb:
        yield gb


def start(gb: Gradebook, **overrides) -> int:
    c = {**CONDITIONS, **overrides}
    return gb.start_run(c["seed"], c["suite_version"], c["devices"], "0.1.0", "namespaces")


def test_wal_mode_and_tables(book):
    conn = sqlite3.connect(book.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "submissions", "results", "figures"} <= tables
    columns = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    assert columns >= {"run_id", "student", "hook", "case_name", "device", "dtype", "status", "message", "seconds",
                       "mistake"}
    conn.close()


def test_runs_start_finish_and_latest_unfinished(book):
    assert book.latest_unfinished_run() is None
    first = start(book)
    assert isinstance(first, int)
    run = book.latest_unfinished_run()
    assert run is not None
    assert (run["id"], run["seed"], run["suite_version"], run["devices"]) == (first, 1234, "suite-1", ["cpu", "meta"])
    assert (run["kit_version"], run["isolation"], run["finished_at"]) == ("0.1.0", "namespaces", None)
    book.finish_run(first)
    assert book.latest_unfinished_run() is None
    assert book.get_run(first)["finished_at"] is not None


def test_a_seed_too_big_for_sqlite_integers_survives(book):
    run_id = book.start_run(2**64 + 7, "s", ["cpu"], "k", "none")
    assert book.get_run(run_id)["seed"] == 2**64 + 7


def test_record_and_results_for_run_round_trip(book):
    run_id = start(book)
    book.record(run_id, sub("bob"), results("bob", 5))
    book.record(run_id, sub("alice", error="refused zip: too big"), [])
    got = book.results_for_run(run_id)
    assert list(got) == ["alice", "bob"]
    alice, alice_results = got["alice"]
    assert (alice.student, alice.error, alice_results) == ("alice", "refused zip: too big", [])
    bob, bob_results = got["bob"]
    assert (bob.source, bob.format, bob.sha256, bob.entry) == ("class/bob.py", "py", "sha-bob", "bob.py")
    assert bob_results == results("bob", 5)


def test_resume_finds_what_was_recorded_and_nothing_else(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as gb:
        run_id = start(gb)
        gb.record(run_id, sub("alice"), results("alice"))
        gb.record(run_id, sub("bob"), results("bob", 4))
    with Gradebook(path) as gb:
        assert gb.latest_unfinished_run()["id"] == run_id
        assert gb.earlier_grading("alice", "sha-alice", **CONDITIONS).results == results("alice")
        assert gb.earlier_grading("bob", "sha-bob", **CONDITIONS).results == results("bob", 4)
        assert gb.earlier_grading("carol", "sha-carol", **CONDITIONS) is None


@pytest.mark.parametrize(
    "change",
    [
        {"sha256": "sha-changed"},
        {"seed": 99},
        {"suite_version": "suite-2"},
        {"devices": ["cpu"]},
        {"devices": ["cpu", "meta", "cuda"]},
        {"student": "someone-else"},
    ],
    ids=["other-input", "other-seed", "other-suite", "fewer-devices", "more-devices", "other-student"],
)
def test_earlier_grading_needs_identical_input_and_conditions(book, change):
    book.record(start(book), sub("alice"), results("alice"))
    query = {"student": "alice", "sha256": "sha-alice", **CONDITIONS, **change}
    assert book.earlier_grading(**query) is None


def test_device_order_does_not_matter(book):
    book.record(start(book, devices=["meta", "cpu"]), sub("alice"), results("alice"))
    assert book.earlier_grading("alice", "sha-alice", "suite-1", 1234, ["cpu", "meta"]).results == results("alice")


def test_error_rows_and_empty_hashes_are_never_reused(book):
    run_id = start(book)
    book.record(run_id, sub("alice", error="alice.py: SyntaxError: invalid syntax"), [])
    book.record(run_id, sub("bob", sha=""), results("bob"))
    assert book.earlier_grading("alice", "sha-alice", **CONDITIONS) is None
    assert book.earlier_grading("alice", "sha-alice", **CONDITIONS) is None
    assert book.earlier_grading("bob", "", **CONDITIONS) is None


def test_last_run_with_names_the_latest_run_of_a_hand_in_never_an_unread_one(book):
    first = start(book)
    book.record(first, sub("alice"), results("alice"))
    book.record(first, sub("bob", sha=""), results("bob"))
    book.finish_run(first)
    second = start(book)
    book.record(second, sub("alice"), results("alice"))
    book.record(second, sub("bob", sha=""), results("bob"))
    assert book.last_run_with("alice", "sha-alice") == second
    assert book.last_run_with("alice", "sha-other") is None and book.last_run_with("bob", "") is None


def test_latest_grading_wins(book):
    first = start(book)
    book.record(first, sub("alice"), results("alice", 2))
    second = start(book)
    book.record(second, sub("alice"), results("alice", 6))
    assert book.earlier_grading("alice", "sha-alice", **CONDITIONS).results == results("alice", 6)


def test_recording_again_in_the_same_run_replaces(book):
    run_id = start(book)
    book.record(run_id, sub("alice"), results("alice", 6))
    book.record(run_id, sub("alice", sha="sha-new"), results("alice", 2))
    got = book.results_for_run(run_id)
    assert got["alice"][0].sha256 == "sha-new"
    assert got["alice"][1] == results("alice", 2)


def test_a_failed_record_leaves_nothing_half_written(book):
    run_id = start(book)
    book.record(run_id, sub("alice"), results("alice"))
    broken = results("bob", 3) + [CaseResult("bob", "merge_heads", "x", "cpu", "float32", PASSED, object())]
    with pytest.raises(sqlite3.Error):
        book.record(run_id, sub("bob"), broken)
    got = book.results_for_run(run_id)
    assert list(got) == ["alice"]
    conn = sqlite3.connect(book.path)
    assert conn.execute("SELECT COUNT(*) FROM results WHERE student = 'bob'").fetchone()[0] == 0
    conn.close()


def test_a_killed_process_keeps_every_committed_submission(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(KIT_ROOT)!r})
        from grader.instructor.gradebook import Gradebook
        from grader.instructor.intake_model import Submission
        from grader.instructor.verdict import CaseResult
        gb = Gradebook({str(path)!r})
        run = gb.start_run(1234, "suite-1", ["cpu", "meta"], "0.1.0", "none")
        for name in ("alice", "bob"):
            gb.record(run, Submission(name, name, "py", {{}}, "", "sha-" + name),
                      [CaseResult(name, "merge_heads", "c", "cpu", "float32", "passed")])
        os.kill(os.getpid(), 9)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr.decode()
    with Gradebook(path) as gb:
        run = gb.latest_unfinished_run()
        assert run is not None
        assert sorted(gb.results_for_run(run["id"])) == ["alice", "bob"]
        assert gb.earlier_grading("bob", "sha-bob", **CONDITIONS).results == [
            CaseResult("bob", "merge_heads", "c", "cpu", "float32", "passed")
        ]


def test_records_from_many_threads(book):
    run_id = start(book)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for j in range(5):
                name = f"s{k}-{j}"
                book.record(run_id, sub(name), results(name, 4))
                book.earlier_grading(name, f"sha-{name}", **CONDITIONS)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    got = book.results_for_run(run_id)
    assert len(got) == 40
    assert all(len(rs) == 4 for _, rs in got.values())


def test_record_needs_a_real_run(book):
    with pytest.raises(sqlite3.IntegrityError):
        book.record(424242, sub("alice"), results("alice"))


# --- review findings and id notes (schema version 2) -----------------------------------------------------------


def test_review_findings_and_id_notes_round_trip(book):
    run_id = start(book)
    flagged = sub("mallory")
    flagged.review = ["mallory.py:3: sys.modules", 'mallory.py:3: "__main__" as a string']
    flagged.notes = ["'Mallory.py' was given the id 'Mallory-1a2b3c4d': 'mallory' is claimed by 2 submissions"]
    book.record(run_id, flagged, results("mallory"))
    book.record(run_id, sub("bob"), results("bob"))
    got = book.results_for_run(run_id)
    assert (got["mallory"][0].review, got["mallory"][0].notes) == (flagged.review, flagged.notes)
    assert (got["bob"][0].review, got["bob"][0].notes) == ([], [])


VERSION_1 = """
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, finished_at TEXT,
    seed TEXT NOT NULL, suite_version TEXT NOT NULL, devices TEXT NOT NULL, kit_version TEXT NOT NULL,
    isolation TEXT NOT NULL);
CREATE TABLE submissions (run_id INTEGER NOT NULL REFERENCES runs(id), student TEXT NOT NULL, source TEXT NOT NULL,
    sha256 TEXT NOT NULL, format TEXT NOT NULL, entry TEXT NOT NULL DEFAULT '', error TEXT, graded_at TEXT NOT NULL,
    PRIMARY KEY (run_id, student));
CREATE TABLE results (run_id INTEGER NOT NULL, student TEXT NOT NULL, hook TEXT NOT NULL, case_name TEXT NOT NULL,
    device TEXT NOT NULL, dtype TEXT NOT NULL, status TEXT NOT NULL, message TEXT NOT NULL, seconds REAL NOT NULL,
    mistake TEXT NOT NULL);
INSERT INTO runs VALUES (1, '2026-01-01T00:00:00', NULL, '7', 'suite-1', '["cpu", "meta"]', '0.1.0', 'none');
INSERT INTO submissions VALUES (1, 'ada', 'class/ada.py', 'sha-ada', 'py', 'ada.py', NULL, '2026-01-01T00:00:01');
INSERT INTO results VALUES (1, 'ada', 'softmax_weights', 'c0', 'cpu', 'float32', 'passed', '', 0.5, '');
PRAGMA user_version = 1;
"""


def test_a_version_1_gradebook_gains_the_columns_and_keeps_its_rows(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(VERSION_1)
    conn.close()
    with Gradebook(path) as gb:
        (ada, ada_results), = gb.results_for_run(1).values()
        assert (ada.student, ada.sha256, ada.review, ada.notes) == ("ada", "sha-ada", [], [])
        assert [r.status for r in ada_results] == [PASSED]
        assert [r.note for r in ada_results] == [""]  # results.note (version 4) came with the upgrade, empty
        assert not any(isinstance(r.message, Message) for r in ada_results)  # version 5: said by id, none yet
        unfinished = gb.latest_unfinished_run()
        assert unfinished is not None and unfinished["id"] == 1  # the stopped run resumes after the upgrade
        flagged = sub("bo")
        flagged.review = ["bo.py:1: ctypes"]
        gb.record(1, flagged, [])
        assert gb.results_for_run(1)["bo"][0].review == ["bo.py:1: ctypes"]
        assert gb.figures(1, "ada") == {}  # the figures table came with the upgrade, empty
        # version 4: the class of an older gradebook is its latest run's, and its students are in it
        assert gb.class_settings() == ClassSettings(7, "suite-1", ["cpu", "meta"])
        assert list(gb.class_results(gb.class_settings())) == ["ada", "bo"]
        assert gb.stored_submissions()["ada"].files == {}  # graded before hand-ins were kept
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    assert conn.execute("SELECT message_said, note_said FROM results").fetchall() == [("", "")]
    conn.close()


# --- messages said by id (schema version 5) ---------------------------------------------------------------------


def test_a_message_said_by_id_comes_back_said_by_id_in_every_language(book):
    message = said("case", what="2-D", message=said("shape", got="(2, 3)", expected="(3, 3)"))
    note = said("extras.one", first=said("extras.buffers", names="cache, scale"))
    recorded = [
        CaseResult("ada", "merge_heads", "c0", "cpu", "float32", FAILED, message, 0.5, "", note),
        CaseResult("ada", "merge_heads", "c1", "cpu", "float32", FAILED, "a learner's words: raised here", 0.5),
    ]
    run_id = start(book)
    book.record(run_id, sub("ada"), recorded)
    back = book.results_for_run(run_id)["ada"][1]
    assert back == recorded  # the English, byte for byte
    said_back, plain = back
    assert isinstance(said_back.message, Message) and isinstance(said_back.note, Message)
    assert message_in(said_back.message, "zh") == "2-D: 返回的形状是 (2, 3)，应为 (3, 3)"
    assert message_in(said_back.note, "zh") == message_in(note, "zh") == "你的模块有额外的 buffer cache, scale：没问题，记下了"  # noqa: E501
    assert not isinstance(plain.message, Message) and message_in(plain.message, "zh") == plain.message
    conn = sqlite3.connect(book.path)
    (stored,) = conn.execute("SELECT message FROM results WHERE case_name = 'c0'").fetchone()
    conn.close()
    assert stored == "2-D: returned shape (2, 3), expected (3, 3)"  # the message column stays the English text


def test_a_recorded_message_keeps_the_english_it_was_recorded_with(book, monkeypatch):
    """A result keeps the English it was graded with; an id or a template the table no longer has says that."""
    from grader.instructor import messages

    run_id = start(book)
    book.record(run_id, sub("ada"), [CaseResult("ada", "merge_heads", "c0", "cpu", "float32", FAILED,
                                                said("returned_nothing"), 0.5)])  # fmt: skip
    monkeypatch.setitem(messages.MESSAGES, "returned_nothing", {"en": "gave back nothing", "zh": "没有返回值"})
    (result,) = book.results_for_run(run_id)["ada"][1]
    assert result.message == "returned nothing" and message_in(result.message, "zh") == "没有返回值"
    monkeypatch.delitem(messages.MESSAGES, "returned_nothing")
    (result,) = book.results_for_run(run_id)["ada"][1]
    assert message_in(result.message, "zh") == "returned nothing"


# --- the heatmaps' data (schema version 3) ------------------------------------------------------------------------


def figure(seed: int, dtype: torch.dtype = torch.float32) -> Figure:
    g = torch.Generator().manual_seed(seed)
    expected, received = torch.rand(3, 4, 5, generator=g), torch.rand(4, 5, generator=g)
    return Figure.of(f"case-{seed} (cpu, {dtype})", expected.to(dtype), received.to(dtype))


def same_figures(a: dict[str, Figure], b: dict[str, Figure]) -> bool:
    return list(a) == list(b) and all(
        a[h].label == b[h].label
        and a[h].expected.dtype == b[h].expected.dtype
        and torch.equal(a[h].expected, b[h].expected)
        and torch.equal(a[h].received, b[h].received)
        for h in a
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.bool], ids=str)
def test_figures_round_trip_with_their_submission(book, dtype):
    run_id = start(book)
    figures = {"softmax_weights": figure(1, dtype), "causal_mask": figure(2, dtype)}
    book.record(run_id, sub("bob"), results("bob"), figures)
    book.record(run_id, sub("alice"), results("alice"))
    got = book.figures(run_id, "bob")
    assert list(got) == ["causal_mask", "softmax_weights"]
    assert same_figures(got, dict(sorted(figures.items())))
    assert got["softmax_weights"].expected.shape == (4, 5), "a figure is stored as its first matrix"
    assert book.figures(run_id, "alice") == {}


def test_recording_a_submission_again_replaces_its_figures(book):
    run_id = start(book)
    book.record(run_id, sub("bob"), results("bob"), {"softmax_weights": figure(1), "causal_mask": figure(2)})
    book.record(run_id, sub("bob", sha="sha-new"), results("bob"), {"causal_mask": figure(3)})
    assert same_figures(book.figures(run_id, "bob"), {"causal_mask": figure(3)})


def test_earlier_grading_brings_back_its_figures_review_and_printed_text(book):
    first = start(book)
    heard = dataclasses.replace(sub("bob"), review=["heard while it ran: a thread left running"])
    book.record(first, heard, results("bob"), {"softmax_weights": figure(1)}, "hello\n", {"softmax_weights": "hi\n"})
    book.finish_run(first)
    found = book.earlier_grading("bob", "sha-bob", **CONDITIONS)
    assert found is not None
    assert found.results == results("bob") and same_figures(found.figures, {"softmax_weights": figure(1)})
    assert (found.review, found.output, found.printed) == (heard.review, "hello\n", {"softmax_weights": "hi\n"})
    assert book.earlier_grading("bob", "sha-other", **CONDITIONS) is None
    assert book.earlier_grading("bob", "sha-bob", **{**CONDITIONS, "seed": 99}) is None


# --- the class of an out folder (schema version 4) ------------------------------------------------------------


def test_class_settings_are_none_until_set_and_then_kept(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    with Gradebook(path) as gb:
        assert gb.class_settings() is None
        gb.set_class_settings(ClassSettings(99, "suite-9", ["meta", "cpu"]))
    with Gradebook(path) as gb:  # a later run reads what the first one kept
        assert gb.class_settings() == ClassSettings(99, "suite-9", ["cpu", "meta"])


def test_class_results_hold_the_latest_grading_of_every_student_under_the_class_conditions(book):
    first = start(book)
    book.record(first, sub("ada", sha="a1"), results("ada", 2))
    book.record(first, sub("bob"), results("bob", 3))
    other = start(book, suite_version="suite-2")  # another suite: not this class's gradings
    book.record(other, sub("cy"), results("cy"))
    book.finish_run(first)
    late = start(book)
    book.record(late, sub("ada", sha="a2"), results("ada", 4))  # a late, new hand-in of ada
    got = book.class_results(ClassSettings(CONDITIONS["seed"], "suite-1", ["meta", "cpu"]))
    assert list(got) == ["ada", "bob"]
    assert (got["ada"][0], got["ada"][1].sha256, len(got["ada"][2])) == (late, "a2", 4)
    assert (got["bob"][0], got["bob"][1].sha256, len(got["bob"][2])) == (first, "sha-bob", 3)
    assert got["bob"][1].files == {"bob.py": "X = 1\n"}  # the hand-in is kept, to regrade the class
    assert set(book.stored_submissions()) == {"ada", "bob", "cy"}


def test_the_output_of_a_submission_is_kept_capped(book):
    run_id = start(book)
    book.record(run_id, sub("ada"), results("ada"), output="hello\n")
    book.record(run_id, sub("bob"), results("bob"), output="x" * (OUTPUT_STORED + 10))
    assert book.output(run_id, "ada") == "hello\n"
    kept = book.output(run_id, "bob")
    assert kept.startswith("x" * OUTPUT_STORED) and kept.endswith("[... 10 more characters not kept]")
    assert book.output(run_id, "nobody") == ""


def test_the_roster_is_kept_as_rows(book):
    assert book.roster_rows() is None
    rows = [{"id": "s1", "name": "Jane Doe", "email": "jd@uni.example", "pattern": "doe*"}]
    book.set_roster_rows(rows)
    assert book.roster_rows() == rows
