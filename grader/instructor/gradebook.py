"""The gradebook: ``gradebook.sqlite`` (stdlib :mod:`sqlite3`, WAL), written as grading goes, so a stopped run resumes.

``figures`` keeps each heatmap's matrices as safetensors bytes, so a resumed or reused grading draws the same;
``class_settings`` the out folder's conditions and roster (:mod:`grader.instructor.class_grading`).  Each
submission is recorded in one transaction: a run killed part way loses at most the submission in flight.
:meth:`Gradebook.earlier_grading` finds an earlier grading of identical input under identical conditions (suite
version, seed, devices), so a rerun reuses it.  One connection is shared by all threads behind a lock.

Older schemas are migrated when opened (:data:`ADDED_COLUMNS`; v3 added ``figures``, v4 ``class_settings``: an
older gradebook's class takes its latest run's conditions).  ``results.message_said`` and ``note_said`` (v5) hold
the id and parameters of a message said by id (:func:`~grader.instructor.said.message_data`), so a report of any
language can be written later (``message`` and ``note`` stay English; ``''``: the text as it is).  ``runs.rubric``
(v6) holds the points each run's reports were written under (:func:`~grader.instructor.rubric.rubric_json`; ``''``:
not recorded), so two gradings can be compared (:mod:`grader.instructor.grading_diff`); ``overrides`` (v6) the
instructor's grades that replace computed points (:class:`~grader.instructor.rubric.Override`), kept apart from any
run so that every regrade keeps them; undoing one only marks it undone; ``runs.overrides`` those in force when a
run wrote its reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from grader.instructor.heatmaps import Figure
from grader.instructor.intake_model import Submission
from grader.instructor.rubric import Override
from grader.instructor.said import message_data, message_from_data
from grader.instructor.verdict import CaseResult

__all__ = ["OUTPUT_STORED", "SCHEMA_VERSION", "ClassSettings", "Gradebook"]

SCHEMA_VERSION = 6
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
    isolation TEXT NOT NULL,
    rubric TEXT NOT NULL DEFAULT '',
    overrides TEXT NOT NULL DEFAULT '[]'
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
CREATE TABLE IF NOT EXISTS overrides (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL,
    exercise TEXT NOT NULL,
    points REAL NOT NULL,
    reason TEXT NOT NULL,
    made_by TEXT NOT NULL,
    made_at TEXT NOT NULL,
    undone_at TEXT
);
CREATE TABLE IF NOT EXISTS class_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


RUN_COLUMNS = "id, started_at, finished_at, seed, suite_version, devices, kit_version, isolation, rubric, overrides"

ADDED_COLUMNS = {
    "runs": {"rubric": "''", "overrides": "'[]'"},
    "submissions": {"review": "'[]'", "notes": "'[]'", "files": "'{}'", "output": "''", "printed": "'{}'"},
    "results": {"note": "''", "message_said": "''", "note_said": "''"},
}
"""Columns added since version 1 (``TEXT NOT NULL`` with this default), added to an older gradebook when opened."""


@dataclass(frozen=True)
class EarlierGrading:
    """What :meth:`Gradebook.earlier_grading` brings back, for a rerun to reuse."""

    results: list[CaseResult]
    figures: dict[str, Figure]
    review: list[str]
    output: str
    printed: dict[str, str]


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
RESULT_COLUMNS = (
    "student, hook, case_name, device, dtype, status, message, seconds, mistake, note, message_said, note_said"
)


def _submission(row: tuple, files: str | None = None) -> Submission:
    """A submission from its :data:`SUBMISSION_COLUMNS` and its files (JSON; none: ``{}``)."""
    student, source, fmt, entry, sha, error, review, notes = row
    return Submission(
        student, source, fmt, _string_dict(files), entry, sha, error, review=_strings(review), notes=_strings(notes)
    )


def _text_rows(rows: Iterable[Mapping[str, object]]) -> list[dict[str, str]]:
    return [{str(k): "" if v is None else str(v) for k, v in row.items()} for row in rows]


def _devices_key(devices: Iterable[str]) -> list[str]:
    """Devices compared as a set: ``["cuda", "cpu"]`` and ``["cpu", "cuda"]`` are the same conditions."""
    return sorted(set(devices))


class Gradebook:
    """``gradebook.sqlite`` at ``path`` (created if missing); safe to share between threads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
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
            self._add_columns()
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _add_columns(self) -> None:
        """The columns an older gradebook lacks (:data:`ADDED_COLUMNS`); tables made now have them."""
        for table, columns in ADDED_COLUMNS.items():
            have = {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}
            for name, default in columns.items():
                if name not in have:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} TEXT NOT NULL DEFAULT {default}")

    def _rows(self, sql: str, *args: Any) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _row(self, sql: str, *args: Any) -> Any:
        with self._lock:
            return self._conn.execute(sql, args).fetchone()

    def _insert(self, table: str, columns: str, rows: Iterable[tuple]) -> None:
        marks = ", ".join("?" * len(columns.split(",")))
        self._conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

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
        self._rows("UPDATE runs SET isolation = ? WHERE id = ?", str(isolation), run_id)

    def finish_run(self, run_id: int) -> None:
        self._rows("UPDATE runs SET finished_at = ? WHERE id = ?", _now(), run_id)

    def set_rubric(self, run_id: int, rubric: str) -> None:
        """Record the rubric the run's reports are written under (:func:`~grader.instructor.rubric.rubric_json`)."""
        self._rows("UPDATE runs SET rubric = ? WHERE id = ?", str(rubric), run_id)

    def set_run_overrides(self, run_id: int) -> None:
        """Record the overrides in force as the ones the run's reports show."""
        snapshot = [dataclasses.asdict(o) for o, _ in self.overrides()]
        self._rows("UPDATE runs SET overrides = ? WHERE id = ?", json.dumps(snapshot), run_id)

    def run_overrides(self, run: Mapping[str, Any]) -> tuple[Override, ...]:
        """The overrides a run's reports showed (:meth:`set_run_overrides`)."""
        return tuple(Override(**o) for o in json.loads(run.get("overrides") or "[]"))

    def _run(self, where: str, *args: Any) -> dict[str, Any] | None:
        """The run's row as a dict (``devices`` a list, ``seed`` an int where it is one)."""
        row = self._row(f"SELECT {RUN_COLUMNS} FROM runs WHERE {where}", *args)
        if row is None:
            return None
        return {**dict(zip(RUN_COLUMNS.split(", "), row)), "seed": _seed_out(row[3]), "devices": json.loads(row[5])}

    def finished_runs(self) -> list[dict[str, Any]]:
        """Every finished run, oldest first, as :meth:`get_run` gives it, with ``students``: how many it graded."""
        ids = [int(i) for (i,) in self._rows("SELECT id FROM runs WHERE finished_at IS NOT NULL ORDER BY id")]
        counts = dict(self._rows("SELECT run_id, COUNT(*) FROM submissions GROUP BY run_id"))
        return [{**(self.get_run(i) or {}), "students": int(counts.get(i, 0))} for i in ids]

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        return self._run("id = ?", run_id)

    def latest_unfinished_run(self) -> dict[str, Any] | None:
        """The most recent run that never finished (a run that was stopped), or None."""
        return self._run("finished_at IS NULL ORDER BY id DESC LIMIT 1")

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
        sub, student = submission, submission.student
        figure_rows = [
            (run_id, student, hook, f.label, save_tensors({"expected": f.expected.contiguous(),
                                                            "received": f.received.contiguous()}))
            for hook, f in sorted((figures or {}).items())
        ]  # fmt: skip
        rows = [
            (run_id, student, r.hook, r.case, r.device, r.dtype, r.status, r.message, float(r.seconds), r.mistake,
             r.note, _said(r.message), _said(r.note))
            for r in results
        ]  # fmt: skip
        with self._transaction():
            for table in ("figures", "results", "submissions"):
                self._conn.execute(f"DELETE FROM {table} WHERE run_id = ? AND student = ?", (run_id, student))
            self._insert("submissions", f"run_id, {SUBMISSION_COLUMNS}, graded_at, files, output, printed", [(
                run_id, student, sub.source, sub.format, sub.entry, sub.sha256, sub.error,
                json.dumps([str(f) for f in sub.review]), json.dumps([str(n) for n in sub.notes]), _now(),
                json.dumps(dict(sub.files)), str(output), printed_json,
            )])  # fmt: skip
            self._insert("results", f"run_id, {RESULT_COLUMNS}", rows)
            self._insert("figures", "run_id, student, hook, label, tensors", figure_rows)

    def _results(self, run_id: int, student: str) -> list[CaseResult]:
        rows = self._rows(
            f"SELECT {RESULT_COLUMNS} FROM results WHERE run_id = ? AND student = ? ORDER BY rowid", run_id, student
        )
        return [
            CaseResult(student, hook, case, device, dtype, status, _read_said(message, message_said), seconds, mistake,
                       _read_said(note, note_said))
            for student, hook, case, device, dtype, status, message, seconds, mistake, note, message_said, note_said
            in rows
        ]  # fmt: skip

    def figures(self, run_id: int, student: str) -> dict[str, Figure]:
        """The heatmaps' data recorded with a submission in a run, ``hook -> Figure`` (``{}`` for none)."""
        rows = self._rows(
            "SELECT hook, label, tensors FROM figures WHERE run_id = ? AND student = ? ORDER BY hook", run_id, student
        )
        loaded = [(hook, label, load_tensors(bytes(blob))) for hook, label, blob in rows]
        return {hook: Figure(label, t["expected"], t["received"]) for hook, label, t in loaded}

    def _latest_grading(
        self, student: str, sha256: str, suite_version: str, seed: int | str, devices: Iterable[str]
    ) -> tuple[int, str | None] | None:
        """``(run id, error)`` of the latest grading of this exact input under these conditions, or None."""
        if not sha256:
            return None
        rows = self._rows(
            "SELECT s.run_id, s.error, r.devices FROM submissions s JOIN runs r ON r.id = s.run_id"
            " WHERE s.student = ? AND s.sha256 = ? AND r.suite_version = ? AND r.seed = ?"
            " ORDER BY s.graded_at DESC, s.run_id DESC",
            student, sha256, str(suite_version), str(seed),
        )  # fmt: skip
        wanted = _devices_key(devices)
        found = ((int(run_id), error) for run_id, error, devices in rows if _devices_key(json.loads(devices)) == wanted)
        return next(found, None)

    def earlier_grading(
        self, student: str, sha256: str, suite_version: str, seed: int | str, devices: Iterable[str]
    ) -> EarlierGrading | None:
        """What an earlier grading of identical input under identical conditions recorded, or None: its results,
        heatmaps' data, review findings (what was heard while it ran included), what the learner's process printed and
        what each exercise printed.  Never one recorded with an error (refused, failed to import): reading it again is
        cheap and the error comes back fresh."""
        found = self._latest_grading(student, sha256, suite_version, seed, devices)
        if found is None or found[1] is not None:
            return None
        run = found[0]
        return EarlierGrading(
            self._results(run, student), self.figures(run, student),
            _strings(self._column("review", run, student)), self.output(run, student), self.printed(run, student),
        )  # fmt: skip

    def _column(self, name: str, run_id: int, student: str) -> Any:
        """One column of a submission's row, or None where the run holds no such submission."""
        row = self._row(f"SELECT {name} FROM submissions WHERE run_id = ? AND student = ?", run_id, student)
        return None if row is None else row[0]

    # --- the class: its conditions, its roster, its latest gradings ----------------------------

    def _setting(self, key: str) -> str | None:
        row = self._row("SELECT value FROM class_settings WHERE key = ?", key)
        return None if row is None else str(row[0])

    def _set(self, key: str, value: str) -> None:
        self._rows(
            "INSERT INTO class_settings (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            key, value,
        )  # fmt: skip

    def report_choices(self) -> dict[str, Any]:
        """The last ``attnkit grade``'s choices for the files (``lang``, ``lms``, ``assignment``, ``show_output``)."""
        return dict(_loads(self._setting("report_choices")) or {})

    def set_report_choices(self, choices: Mapping[str, Any]) -> None:
        self._set("report_choices", json.dumps(dict(choices), sort_keys=True))

    def class_settings(self) -> ClassSettings | None:
        """The out folder's conditions; for a gradebook from before they were kept, its latest run's; else None."""
        with self._lock:
            seed = self._setting("seed")
            if seed is not None:
                return ClassSettings(
                    _seed_out(seed), self._setting("suite_version") or "", json.loads(self._setting("devices") or "[]")
                )
            row = self._row("SELECT seed, suite_version, devices FROM runs ORDER BY id DESC LIMIT 1")
        return None if row is None else ClassSettings(_seed_out(row[0]), str(row[1]), _devices_key(json.loads(row[2])))

    def set_class_settings(self, settings: ClassSettings) -> None:
        with self._transaction():
            self._set("seed", str(settings.seed))
            self._set("suite_version", str(settings.suite_version))
            self._set("devices", json.dumps(_devices_key(settings.devices)))

    def add_override(self, student: str, exercise: str, points: float, reason: str, by: str) -> int:
        """Record the instructor's grade of ``student`` on ``exercise`` (or ``"total"``); returns its id."""
        with self._lock:
            cur = self._conn.execute(
                "INSERT INTO overrides (student, exercise, points, reason, made_by, made_at) VALUES (?, ?, ?, ?, ?, ?)",
                (str(student), str(exercise), float(points), str(reason), str(by), _now()),
            )
            return int(cur.lastrowid or 0)

    def undo_override(self, override_id: int) -> bool:
        """Mark an override in force undone; False where there is none of that id in force."""
        with self._lock:
            cur = self._conn.execute(
                "UPDATE overrides SET undone_at = ? WHERE id = ? AND undone_at IS NULL", (_now(), int(override_id))
            )
            return cur.rowcount == 1

    def overrides(self, undone: bool = False) -> list[tuple[Override, str | None]]:
        """``(override, undone at)`` in the order made: those in force, or (``undone``) all of them."""
        where = "" if undone else " WHERE undone_at IS NULL"
        columns = "id, student, exercise, points, reason, made_by, made_at, undone_at"
        rows = self._rows(f"SELECT {columns} FROM overrides{where} ORDER BY id")
        return [(Override(int(r[0]), r[1], r[2], float(r[3]), r[4], r[5], r[6]), r[7]) for r in rows]

    def roster_rows(self) -> list[dict[str, str]] | None:
        """The class's roster as stored (``id``, ``name``, ``email``, ``pattern`` per row), or None."""
        text = self._setting("roster")
        return None if text is None else _text_rows(json.loads(text))

    def set_roster_rows(self, rows: Iterable[Mapping[str, object]]) -> None:
        self._set("roster", json.dumps(_text_rows(rows)))

    def class_results(
        self, settings: ClassSettings, up_to: int | None = None
    ) -> dict[str, tuple[int, Submission, list[CaseResult]]]:
        """``student -> (run id, submission with its files, results)``: the latest grading of every student
        recorded under ``settings`` (the class of this out folder), students sorted; with ``up_to``, the class as
        it stood after that run (runs after it left out)."""
        wanted = _devices_key(settings.devices)
        with self._lock:
            rows = self._rows(
                "SELECT s.run_id, s.student, r.devices FROM submissions s JOIN runs r ON r.id = s.run_id"
                " WHERE r.suite_version = ? AND r.seed = ? AND r.id <= ? ORDER BY s.graded_at, s.run_id",
                str(settings.suite_version), str(settings.seed), 2**62 if up_to is None else up_to,
            )  # fmt: skip
            latest = {
                student: int(run_id) for run_id, student, devices in rows if _devices_key(json.loads(devices)) == wanted
            }
            return {student: (latest[student], *self._stored(latest[student], student)) for student in sorted(latest)}

    def stored_submissions(self) -> dict[str, Submission]:
        """The latest hand-in recorded of every student ever graded into this gradebook (with its files)."""
        with self._lock:
            rows = self._rows("SELECT run_id, student FROM submissions ORDER BY graded_at, run_id")
            latest = {student: int(run_id) for run_id, student in rows}
            return {student: self._stored(run_id, student)[0] for student, run_id in sorted(latest.items())}

    def last_run_with(self, student: str, sha256: str) -> int | None:
        """The latest run that graded this exact hand-in (by its sha256) as ``student``'s, or None (never for an
        unread hand-in, whose sha256 is empty)."""
        if not sha256:
            return None
        row = self._row("SELECT MAX(run_id) FROM submissions WHERE student = ? AND sha256 = ?", student, sha256)
        return None if row is None or row[0] is None else int(row[0])

    def output(self, run_id: int, student: str) -> str:
        """What the submission's learner process printed in that run (capped), or ``""``."""
        return str(self._column("output", run_id, student) or "")

    def printed(self, run_id: int, student: str) -> dict[str, str]:
        """What each exercise's calls printed in that run (``hook -> text``, capped), or ``{}``."""
        return _string_dict(self._column("printed", run_id, student))

    def _stored(self, run_id: int, student: str) -> tuple[Submission, list[CaseResult]]:
        row = self._row(
            f"SELECT {SUBMISSION_COLUMNS}, files FROM submissions WHERE run_id = ? AND student = ?", run_id, student
        )
        return _submission(row[:-1], row[-1]), self._results(run_id, student)

    def results_for_run(self, run_id: int) -> dict[str, tuple[Submission, list[CaseResult]]]:
        """Every submission recorded in a run (``files`` left empty) with its results, by student."""
        with self._lock:
            subs = self._rows(f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE run_id = ? ORDER BY student", run_id)
            return {row[0]: (_submission(row), self._results(run_id, row[0])) for row in subs}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
