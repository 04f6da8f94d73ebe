"""The gradebook: ``gradebook.sqlite``, written as grading goes, so a stopped run resumes.

Tables (stdlib :mod:`sqlite3`, WAL journal): ``runs`` (start, finish, seed, suite version, devices, kit
version, the learner processes' isolation); ``submissions`` (per run and student: source, sha256 of its files,
format, error, review findings and id notes as JSON lists, its files, what it printed, capped); ``results`` (one
row per case); ``figures`` (each heatmap's hook, label and matrices as safetensors bytes, so a resumed or reused
grading draws the same heatmaps); ``class_settings`` (the out folder's seed, suite version, devices and roster:
the conditions every run into it grades under, see :mod:`grader.instructor.class_grading`).

Each submission is recorded in one transaction, so a run killed part way loses at most the submission in
flight.  :meth:`Gradebook.find_graded` finds an earlier grading of identical input (student, sha256) under
identical conditions (suite version, seed, devices), so a rerun reuses it.  One connection is shared by all
threads behind a lock.

Older schema versions are migrated when opened: v2 added ``submissions.review`` and ``notes``; v3 the
``figures`` table; v4 ``submissions.files``, ``output``, ``printed``, ``results.note`` and ``class_settings``
(an older gradebook's class takes its latest run's conditions); v5 ``results.message_said`` and ``note_said``,
the id and parameters of a message said by id (:func:`~grader.instructor.said.message_data`), so a report of
any language can be written later (``message`` and ``note`` stay English; ``''``: the text as it is).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from grader.instructor.heatmaps import Figure
from grader.instructor.intake import Submission
from grader.instructor.said import message_data, message_from_data
from grader.instructor.verdict import CaseResult

__all__ = ["OUTPUT_STORED", "SCHEMA_VERSION", "ClassSettings", "Gradebook"]

SCHEMA_VERSION = 5
OUTPUT_STORED = 64 * 1024
"""At most this many characters of what a learner's process printed are kept per submission."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    seed TEXT NOT NULL,
    suite_version TEXT NOT NULL,
    devices TEXT NOT NULL,
    kit_version TEXT NOT NULL,
    isolation TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS submissions (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    student TEXT NOT NULL,
    source TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    format TEXT NOT NULL,
    entry TEXT NOT NULL DEFAULT '',
    error TEXT,
    graded_at TEXT NOT NULL,
    review TEXT NOT NULL DEFAULT '[]',
    notes TEXT NOT NULL DEFAULT '[]',
    files TEXT NOT NULL DEFAULT '{}',
    output TEXT NOT NULL DEFAULT '',
    printed TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, student)
);
CREATE INDEX IF NOT EXISTS submissions_by_input ON submissions(student, sha256);
CREATE TABLE IF NOT EXISTS results (
    run_id INTEGER NOT NULL,
    student TEXT NOT NULL,
    hook TEXT NOT NULL,
    case_name TEXT NOT NULL,
    device TEXT NOT NULL,
    dtype TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL,
    seconds REAL NOT NULL,
    mistake TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    message_said TEXT NOT NULL DEFAULT '',
    note_said TEXT NOT NULL DEFAULT '',
    FOREIGN KEY (run_id, student) REFERENCES submissions(run_id, student)
);
CREATE INDEX IF NOT EXISTS results_by_submission ON results(run_id, student);
CREATE TABLE IF NOT EXISTS figures (
    run_id INTEGER NOT NULL,
    student TEXT NOT NULL,
    hook TEXT NOT NULL,
    label TEXT NOT NULL,
    tensors BLOB NOT NULL,
    PRIMARY KEY (run_id, student, hook),
    FOREIGN KEY (run_id, student) REFERENCES submissions(run_id, student)
);
CREATE TABLE IF NOT EXISTS class_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


ADDED_COLUMNS = {
    "submissions": {"review": "'[]'", "notes": "'[]'", "files": "'{}'", "output": "''", "printed": "'{}'"},
    "results": {"note": "''", "message_said": "''", "note_said": "''"},
}
"""Columns added since version 1 (``TEXT NOT NULL`` with this default), added to an older gradebook when opened."""


@dataclass(frozen=True)
class ClassSettings:
    """The conditions an out folder's class is graded under: every run into it uses them."""

    seed: int | str
    suite_version: str
    devices: list[str]  # sorted, every device of the run (those that ran and those skipped)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _seed_out(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def _loads(text: str | None) -> Any:
    """JSON from the gradebook; None for none or for anything unreadable."""
    try:
        return json.loads(text or "null")
    except ValueError:
        return None


def _strings(text: str | None) -> list[str]:
    """A JSON list of strings from the gradebook (anything else reads as empty)."""
    value = _loads(text)
    return [str(v) for v in value] if isinstance(value, list) else []


def _string_dict(text: str | None) -> dict[str, str]:
    """A JSON object of strings from the gradebook (anything else reads as empty)."""
    value = _loads(text)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _said(message: str) -> str:
    """A message's id and parameters as JSON, ``""`` for text not said by id."""
    data = message_data(message)
    return "" if data is None else json.dumps(data, ensure_ascii=False)


def _read_said(text: str, said: str | None) -> str:
    """The message recorded as ``text`` (its English) and ``said`` (:func:`_said`)."""
    data = _loads(said)
    return text if data is None else message_from_data(data, text)


SUBMISSION_COLUMNS = "student, source, format, entry, sha256, error, review, notes"


def _submission(row: tuple, files: str | None = None) -> Submission:
    """A submission from its :data:`SUBMISSION_COLUMNS` and its files (JSON; none: ``{}``)."""
    student, source, fmt, entry, sha, error, review, notes = row
    return Submission(
        student, source, fmt, _string_dict(files), entry, sha, error, review=_strings(review), notes=_strings(notes)
    )


def _text_rows(rows: Iterable[Mapping[str, object]]) -> list[dict[str, str]]:
    return [{str(k): "" if v is None else str(v) for k, v in row.items()} for row in rows]


def _figure_row(run_id: int, student: str, hook: str, figure: Figure) -> tuple[int, str, str, str, bytes]:
    tensors = save_tensors({"expected": figure.expected.contiguous(), "received": figure.received.contiguous()})
    return run_id, student, hook, figure.label, tensors


def _devices_key(devices: Iterable[str]) -> list[str]:
    """Devices compared as a set: ``["cuda", "cpu"]`` and ``["cpu", "cuda"]`` are the same conditions."""
    return sorted(set(devices))


class Gradebook:
    """``gradebook.sqlite`` at ``path`` (created if missing); safe to share between threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")  # durable across a killed process in WAL mode
            self._conn.execute("PRAGMA foreign_keys=ON")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if not 0 <= version <= SCHEMA_VERSION:
                self._conn.close()
                raise ValueError(
                    f"{self.path}: gradebook schema version {version}, this attnkit reads {SCHEMA_VERSION}"
                )
            self._conn.executescript(SCHEMA)
            self._migrate()
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _migrate(self) -> None:
        """Add the columns an older gradebook lacks (each with its default); tables created now have them."""
        for table, columns in ADDED_COLUMNS.items():
            have = {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}
            for name, default in columns.items():
                if name not in have:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} TEXT NOT NULL DEFAULT {default}")

    # --- runs ------------------------------------------------------------------------

    def start_run(
        self, seed: int | str, suite_version: str, devices: Iterable[str], kit_version: str, isolation: str
    ) -> int:
        """Record a new run and return its id."""
        with self._lock:
            cur = self._conn.execute(
                "INSERT INTO runs (started_at, seed, suite_version, devices, kit_version, isolation)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (_now(), str(seed), str(suite_version), json.dumps(list(devices)), str(kit_version), str(isolation)),
            )
            return int(cur.lastrowid or 0)

    def set_isolation(self, run_id: int, isolation: str) -> None:
        """Record what the learner's processes of this run were isolated with (known once one has started)."""
        with self._lock:
            self._conn.execute("UPDATE runs SET isolation = ? WHERE id = ?", (str(isolation), run_id))

    def finish_run(self, run_id: int) -> None:
        with self._lock:
            self._conn.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (_now(), run_id))

    def _run_dict(self, row: tuple) -> dict[str, Any]:
        keys = ("id", "started_at", "finished_at", "seed", "suite_version", "devices", "kit_version", "isolation")
        run = dict(zip(keys, row))
        run["seed"] = _seed_out(run["seed"])
        run["devices"] = json.loads(run["devices"])
        return run

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        """The run's row as a dict (``devices`` a list, ``seed`` an int where it is one)."""
        with self._lock:
            row = self._conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return self._run_dict(row) if row else None

    def latest_unfinished_run(self) -> dict[str, Any] | None:
        """The most recent run that never finished (a run that was stopped), or None."""
        with self._lock:
            row = self._conn.execute("SELECT * FROM runs WHERE finished_at IS NULL ORDER BY id DESC LIMIT 1").fetchone()
        return self._run_dict(row) if row else None

    # --- submissions -----------------------------------------------------------------------

    def record(
        self, run_id: int, submission: Submission, results: Iterable[CaseResult],
        figures: Mapping[str, Figure] | None = None, output: str = "", printed: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        """Record one submission, all its results and its heatmaps' data (``hook -> Figure``) in one transaction.

        Its files are kept (to regrade the class under a new suite), with ``output``, what its learner process
        printed, and ``printed``, what each exercise's calls printed (``hook -> text``), each up to
        :data:`OUTPUT_STORED` characters.  An earlier record of the same student in this run is replaced.
        """
        if len(output) > OUTPUT_STORED:
            output = output[:OUTPUT_STORED] + f"\n[... {len(output) - OUTPUT_STORED} more characters not kept]"
        printed_json = json.dumps({str(h): str(t)[:OUTPUT_STORED] for h, t in sorted((printed or {}).items()) if t})
        student = submission.student
        figure_rows = [_figure_row(run_id, student, hook, figure) for hook, figure in sorted((figures or {}).items())]
        rows = [
            (run_id, student, r.hook, r.case, r.device, r.dtype, r.status, r.message, float(r.seconds), r.mistake,
             r.note, _said(r.message), _said(r.note))
            for r in results
        ]  # fmt: skip
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for table in ("figures", "results", "submissions"):
                    self._conn.execute(f"DELETE FROM {table} WHERE run_id = ? AND student = ?", (run_id, student))
                self._conn.execute(
                    f"INSERT INTO submissions (run_id, {SUBMISSION_COLUMNS}, graded_at, files, output, printed)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id, student, submission.source, submission.format, submission.entry, submission.sha256,
                        submission.error, json.dumps([str(f) for f in submission.review]),
                        json.dumps([str(n) for n in submission.notes]), _now(), json.dumps(dict(submission.files)),
                        str(output), printed_json,
                    ),
                )  # fmt: skip
                self._conn.executemany(
                    "INSERT INTO results (run_id, student, hook, case_name, device, dtype, status, message, seconds,"
                    " mistake, note, message_said, note_said) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._conn.executemany(
                    "INSERT INTO figures (run_id, student, hook, label, tensors) VALUES (?, ?, ?, ?, ?)", figure_rows
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _results(self, run_id: int, student: str) -> list[CaseResult]:
        rows = self._conn.execute(
            "SELECT student, hook, case_name, device, dtype, status, message, seconds, mistake, note, message_said,"
            " note_said FROM results WHERE run_id = ? AND student = ? ORDER BY rowid",
            (run_id, student),
        ).fetchall()
        return [
            CaseResult(student, hook, case, device, dtype, status, _read_said(message, message_said), seconds, mistake,
                       _read_said(note, note_said))
            for student, hook, case, device, dtype, status, message, seconds, mistake, note, message_said, note_said
            in rows
        ]  # fmt: skip

    def figures(self, run_id: int, student: str) -> dict[str, Figure]:
        """The heatmaps' data recorded with a submission in a run, ``hook -> Figure`` (``{}`` for none)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT hook, label, tensors FROM figures WHERE run_id = ? AND student = ? ORDER BY hook",
                (run_id, student),
            ).fetchall()
        loaded = [(hook, label, load_tensors(bytes(blob))) for hook, label, blob in rows]
        return {hook: Figure(label, t["expected"], t["received"]) for hook, label, t in loaded}

    def _latest_grading(
        self, student: str, sha256: str, suite_version: str, seed: int | str, devices: Iterable[str]
    ) -> tuple[int, str | None] | None:
        """``(run id, error)`` of the latest grading of this exact input under these conditions, or None."""
        if not sha256:
            return None
        wanted = _devices_key(devices)
        with self._lock:
            rows = self._conn.execute(
                "SELECT s.run_id, s.error, r.devices FROM submissions s JOIN runs r ON r.id = s.run_id"
                " WHERE s.student = ? AND s.sha256 = ? AND r.suite_version = ? AND r.seed = ?"
                " ORDER BY s.graded_at DESC, s.run_id DESC",
                (student, sha256, str(suite_version), str(seed)),
            ).fetchall()
        for run_id, error, devices_json in rows:
            if _devices_key(json.loads(devices_json)) == wanted:
                return int(run_id), error
        return None

    def find_previous(
        self, student: str, sha256: str, suite_version: str, seed: int | str, devices: Iterable[str]
    ) -> tuple[str | None, list[CaseResult]] | None:
        """``(error, results)`` of the latest grading of this exact input under these conditions, or None."""
        found = self._latest_grading(student, sha256, suite_version, seed, devices)
        if found is None:
            return None
        with self._lock:
            return found[1], self._results(found[0], student)

    def find_graded(
        self, student: str, sha256: str, suite_version: str, seed: int | str, devices: Iterable[str]
    ) -> list[CaseResult] | None:
        """Results of an earlier grading of identical input under identical conditions, or None.

        A submission recorded with an error (refused, failed to import) is never
        reused: reading it again is cheap and the error comes back fresh.
        """
        found = self.find_graded_with_figures(student, sha256, suite_version, seed, devices)
        return None if found is None else found[0]

    def find_graded_with_figures(
        self, student: str, sha256: str, suite_version: str, seed: int | str, devices: Iterable[str]
    ) -> tuple[list[CaseResult], dict[str, Figure]] | None:
        """:meth:`find_graded`'s results and the heatmaps' data recorded with them, or None."""
        found = self._latest_grading(student, sha256, suite_version, seed, devices)
        if found is None or found[1] is not None:
            return None
        with self._lock:
            results = self._results(found[0], student)
        return results, self.figures(found[0], student)

    def review_of_grading(
        self, student: str, sha256: str, suite_version: str, seed: int | str, devices: Iterable[str]
    ) -> list[str]:
        """The review findings recorded with :meth:`find_graded`'s grading (what was heard while it ran included)."""
        found = self._latest_grading(student, sha256, suite_version, seed, devices)
        return [] if found is None else _strings(self._column("review", found[0], student))

    def _column(self, name: str, run_id: int, student: str) -> Any:
        """One column of a submission's row, or None where the run holds no such submission."""
        with self._lock:
            row = self._conn.execute(
                f"SELECT {name} FROM submissions WHERE run_id = ? AND student = ?", (run_id, student)
            ).fetchone()
        return None if row is None else row[0]

    # --- the class: its conditions, its roster, its latest gradings ----------------------------

    def _setting(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM class_settings WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO class_settings (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def class_settings(self) -> ClassSettings | None:
        """The out folder's conditions; for a gradebook from before they were kept, its latest run's; else None."""
        with self._lock:
            seed = self._setting("seed")
            if seed is not None:
                return ClassSettings(
                    _seed_out(seed), self._setting("suite_version") or "", json.loads(self._setting("devices") or "[]")
                )
            row = self._conn.execute(
                "SELECT seed, suite_version, devices FROM runs ORDER BY id DESC LIMIT 1"
            ).fetchone()
        if row is None:
            return None
        return ClassSettings(_seed_out(row[0]), str(row[1]), _devices_key(json.loads(row[2])))

    def set_class_settings(self, settings: ClassSettings) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            self._set("seed", str(settings.seed))
            self._set("suite_version", str(settings.suite_version))
            self._set("devices", json.dumps(_devices_key(settings.devices)))
            self._conn.execute("COMMIT")

    def roster_rows(self) -> list[dict[str, str]] | None:
        """The class's roster as stored (``id``, ``name``, ``email``, ``pattern`` per row), or None."""
        with self._lock:
            text = self._setting("roster")
        return None if text is None else _text_rows(json.loads(text))

    def set_roster_rows(self, rows: Iterable[Mapping[str, object]]) -> None:
        value = json.dumps(_text_rows(rows))
        with self._lock:
            self._set("roster", value)

    def class_results(self, settings: ClassSettings) -> dict[str, tuple[int, Submission, list[CaseResult]]]:
        """``student -> (run id, submission with its files, results)``: the latest grading of every student
        recorded under ``settings`` (the class of this out folder), students sorted."""
        wanted = _devices_key(settings.devices)
        with self._lock:
            rows = self._conn.execute(
                "SELECT s.run_id, s.student, r.devices FROM submissions s JOIN runs r ON r.id = s.run_id"
                " WHERE r.suite_version = ? AND r.seed = ? ORDER BY s.graded_at, s.run_id",
                (str(settings.suite_version), str(settings.seed)),
            ).fetchall()
            latest = {
                student: int(run_id) for run_id, student, devices in rows if _devices_key(json.loads(devices)) == wanted
            }
            return {student: (latest[student], *self._stored(latest[student], student)) for student in sorted(latest)}

    def stored_submissions(self) -> dict[str, Submission]:
        """The latest hand-in recorded of every student ever graded into this gradebook (with its files)."""
        with self._lock:
            rows = self._conn.execute("SELECT run_id, student FROM submissions ORDER BY graded_at, run_id").fetchall()
            latest = {student: int(run_id) for run_id, student in rows}
            return {student: self._stored(run_id, student)[0] for student, run_id in sorted(latest.items())}

    def output(self, run_id: int, student: str) -> str:
        """What the submission's learner process printed in that run (capped), or ``""``."""
        return str(self._column("output", run_id, student) or "")

    def printed(self, run_id: int, student: str) -> dict[str, str]:
        """What each exercise's calls printed in that run (``hook -> text``, capped), or ``{}``."""
        return _string_dict(self._column("printed", run_id, student))

    def _stored(self, run_id: int, student: str) -> tuple[Submission, list[CaseResult]]:
        row = self._conn.execute(
            f"SELECT {SUBMISSION_COLUMNS}, files FROM submissions WHERE run_id = ? AND student = ?", (run_id, student)
        ).fetchone()
        return _submission(row[:-1], row[-1]), self._results(run_id, student)

    def results_for_run(self, run_id: int) -> dict[str, tuple[Submission, list[CaseResult]]]:
        """Every submission recorded in a run (``files`` left empty) with its results, by student."""
        with self._lock:
            subs = self._conn.execute(
                f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE run_id = ? ORDER BY student", (run_id,)
            ).fetchall()
            return {row[0]: (_submission(row), self._results(run_id, row[0])) for row in subs}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
