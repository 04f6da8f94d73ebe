"""The trusted side trusts no byte (issue 10): malformed and oversized replies from a learner's process.

Three levels, all through the real code that reads replies:

- the schema and the safetensors pre-check alone (:mod:`grader.instructor.replies`), with
  hypothesis generating arbitrary JSON and bytes;
- :func:`grader.instructor.submission_grading.grade_submission` against a :class:`ScriptedTemplate`:
  each "child" is a real :class:`grader.instructor.sandbox.Child` on a socket pair, served
  by a thread that answers like the child runtime (the reference's answers,
  through the real ``call_hook`` and ``send_message``) except for one reply a
  test scripts as raw bytes -- so the bytes go through the real
  ``recv_message``, ``Child.receive``, validator, judge and diagnosis;
- end to end: hostile submissions that write such replies to their own socket,
  graded by ``attnkit grade`` in one class with Alice.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
import torch
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from grader.child.call import call_hook
from grader.child.load import describe_parameters
from grader.child.wire import HelloReply, ProtocolError, fit, recv_message, send_message
from grader.cli import main as cli_main
from grader.instructor import class_grading
from grader.instructor.fingerprints import Fingerprints
from grader.instructor.gradebook import Gradebook
from grader.instructor.intake_model import Submission
from grader.instructor.replies import (
    FIGURE_TEXT,
    FIGURE_TICKS,
    MESSAGE_CHARS,
    CallReply,
    Caps,
    LoadReply,
    MalformedReply,
    caps_for,
    decode,
    read_outputs,
    validate_blob,
    validate_call_reply,
)
from grader.instructor.rubric import load_rubric
from grader.instructor.sandbox import Child, Limits
from grader.instructor.submission_grading import grade_submission, limit_stored_messages
from grader.instructor.suite import Suite, build_suite
from grader.instructor.verdict import FAILED, PASSED, CaseResult
from grader.registry import HOOK_NAMES, load_solution
from grader.rules import IN_PLACE

HERE = Path(__file__).resolve().parent
KIT_ROOT = HERE.parents[1]
ALICE = KIT_ROOT / "examples" / "submissions" / "alice.py"

SEED = 5
LIMITS = Limits(call_seconds=5, submission_seconds=60, load_seconds=10)
TARGET = ("softmax_weights", "cpu")  # the batch whose replies the scripted child corrupts
UNREADABLE = ("malformed reply", "unreadable")  # what the reason says, from grader.instructor.replies or Child.receive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


# --- the wire, by hand ------------------------------------------------------------------------------------


def frame(header: bytes, blob: bytes = b"") -> bytes:
    """One message in the child runtime's wire format: big-endian lengths around a JSON header and a blob."""
    return struct.pack(">Q", len(header)) + header + struct.pack(">Q", len(blob)) + blob


def safetensors_bytes(entries: dict[str, Any], data: bytes) -> bytes:
    """A safetensors blob with exactly the header ``entries`` says, true or not."""
    text = json.dumps(entries).encode()
    return struct.pack("<Q", len(text)) + text + data


def million_empty_tensors() -> bytes:
    header = "{" + ",".join(f'"t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' for i in range(10**6)) + "}"
    return struct.pack("<Q", len(header)) + header.encode()


class HangUp(bytes):
    """Bytes after which the scripted child closes its socket."""


# --- a scripted child ------------------------------------------------------------------------------------

REFERENCE = load_solution("reference")
Script = Callable[[dict[str, Any], dict[str, torch.Tensor]], bytes]
"""(the honest reply, the honest outputs) -> the bytes to send instead."""


def honest_load_reply() -> dict[str, Any]:
    hooks = {h: {"params": describe_parameters(REFERENCE.functions[h]), "where": "ref.py:1"} for h in HOOK_NAMES}
    return {"hooks": hooks, "isolation": "none", "cuda_init_seconds": None}


@dataclass
class ScriptedTemplate:
    """Stands in for ``Template``: each spawn is a real ``Child`` on a socket pair, answered by a thread.

    The thread answers like the child runtime would, with the reference's
    answers, except: ``load`` (bytes to send instead of the load reply) and
    ``run`` (a script for call ``at`` of the ``TARGET`` batch, used once).
    """

    load: bytes | None = None
    run: Script | None = None
    at: int = 0
    target: tuple[str, str] = TARGET
    sleepers: list[subprocess.Popen] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    spawned: int = 0

    def spawn(self, limits: Limits, gpu: str | None = None, deadline: float | None = None) -> Child:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sleeper = subprocess.Popen(["sleep", "120"], start_new_session=True)  # Child.close kills a process group
        self.sleepers.append(sleeper)
        thread = threading.Thread(target=self._serve, args=(theirs,), daemon=True)
        thread.start()
        self.threads.append(thread)
        self.spawned += 1
        workdir = Path(tempfile.gettempdir()) / "attnkit-test-no-folder"  # a scripted child writes none
        deadline = deadline if deadline is not None else time.monotonic() + limits.submission_seconds
        return Child(pid=sleeper.pid, sock=ours, workdir=workdir, limits=limits, deadline=deadline)

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(30)
        try:
            while True:
                try:
                    header, blob = recv_message(sock)
                except (EOFError, ProtocolError, OSError):
                    return
                if header.get("op") == "load":
                    if self.load is not None:
                        sock.sendall(self.load)
                    else:
                        send_message(sock, honest_load_reply())
                elif header.get("op") == "call":
                    tensors = load_tensors(blob) if blob else {}
                    for call in header["calls"]:
                        reply, outputs = call_hook(REFERENCE.functions, call, tensors)
                        reply["peak_rss_kib"] = 1000
                        if (call["hook"], call["device"]) == self.target and self.run is not None:
                            self.at -= 1
                        if self.at == -1 and self.run is not None:
                            script, self.run = self.run, None
                            data = script(reply, outputs)
                            sock.sendall(data)
                            if isinstance(data, HangUp):
                                return
                        else:
                            send_message(sock, reply, save_tensors(outputs) if outputs else b"")
                else:
                    return
        except OSError:  # the grader hung up on us: what a dropped child sees
            return
        finally:
            sock.close()

    def close(self) -> None:
        for sleeper in self.sleepers:
            sleeper.kill()
            sleeper.wait()
        for thread in self.threads:
            thread.join(timeout=10)


@pytest.fixture(scope="module")
def small_suite() -> Suite:
    """The softmax batches (cpu, meta) and attention_dropout's cpu batch of one suite, with fingerprints."""
    full = build_suite(SEED, ("cpu", "meta"))
    wanted = (TARGET, ("softmax_weights", "meta"), ("attention_dropout", "cpu"))
    keep = [b for b in full.batches if (b.hook, b.device) in wanted]
    suite = Suite(full.seed, full.devices, keep)
    suite.fingerprints = Fingerprints()
    return suite


def submission() -> Submission:
    return Submission(student="mallory", source="mallory.py", format="py", files={"mallory.py": "x = 1\n"},
                      entry="mallory.py", sha256="0" * 64)  # fmt: skip


def grade_scripted(suite: Suite, tmp_path: Path, **script: Any) -> list[CaseResult]:
    """Grade against a ScriptedTemplate; check what any result must be, and that the gradebook takes it."""
    template = ScriptedTemplate(**script)
    try:
        results = grade_submission(submission(), suite, template, LIMITS).results
    finally:
        template.close()
    assert [(r.hook, r.case, r.device, r.dtype) for r in results] == [
        (r.hook, r.case.name, r.device, r.dtype) for r in suite.trials
    ], "every run gets exactly one result"
    for r in results:
        assert isinstance(r.message, str) and len(r.message) < 3 * MESSAGE_CHARS, r.message[:200]
        assert math.isfinite(r.seconds) and r.seconds >= 0
    with Gradebook(tmp_path / f"book-{uuid.uuid4().hex}.sqlite") as book:
        run_id = book.start_run(SEED, "v", ["cpu", "meta"], "0", "none")
        book.record(run_id, submission(), results)
        assert len(book.results_for_run(run_id)["mallory"][1]) == len(results)
    return results


def split(results: list[CaseResult], suite: Suite) -> tuple[list[CaseResult], list[CaseResult]]:
    """(the target batch's results, everybody else's)."""
    target = [r for r in results if (r.hook, r.device) == TARGET]
    return target, [r for r in results if (r.hook, r.device) != TARGET]


# --- mutations of an honest reply ---------------------------------------------------------------------------


def with_header(**changes: Any) -> Script:
    def script(reply: dict[str, Any], outputs: dict[str, torch.Tensor]) -> bytes:
        header = dict(reply, **changes)
        return frame(json.dumps(header, allow_nan=True).encode(), save_tensors(outputs) if outputs else b"")

    return script


def with_raw_header(raw: bytes) -> Script:
    def script(reply: dict[str, Any], outputs: dict[str, torch.Tensor]) -> bytes:
        return frame(raw, save_tensors(outputs) if outputs else b"")

    return script


def with_blob(make: Callable[[dict[str, torch.Tensor]], bytes]) -> Script:
    def script(reply: dict[str, Any], outputs: dict[str, torch.Tensor]) -> bytes:
        return frame(json.dumps(reply).encode(), make(outputs))

    return script


def lying_length(reply: dict[str, Any], outputs: dict[str, torch.Tensor]) -> bytes:
    return HangUp(struct.pack(">Q", 1000) + b'{"id": 0')  # 1000 bytes announced, 8 sent, then it hangs up


def error_reply(message: str) -> Script:
    error = {"type": "RuntimeError", "mro": ["RuntimeError", "Exception"], "message": message, "where": None}
    return with_header(ok=False, error=error, results=[])


def f64_blob(outputs: dict[str, torch.Tensor]) -> bytes:
    return save_tensors({"out0": outputs["out0"].double()})


def offsets_too_short(outputs: dict[str, torch.Tensor]) -> bytes:
    t = outputs["out0"]
    data = t.numpy().tobytes()
    entry = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [0, len(data) - 4]}
    return safetensors_bytes({"out0": entry}, data)


def overlapping(outputs: dict[str, torch.Tensor]) -> bytes:
    data = bytes(16)
    entry = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
    return safetensors_bytes({"out0": entry, "out1": entry}, data)


AT = 4  # the call of the target batch that gets the scripted reply (a float32 run, not the first)
KINDS: list[tuple[str, Script, tuple[str, ...]]] = [
    # (id, what the child sends for the target call, phrases one of which the failed case says)
    ("invalid-json", with_raw_header(b"{not json"), UNREADABLE),
    ("header-not-an-object", with_raw_header(b"[1, 2, 3]"), UNREADABLE),
    ("deeply-nested-array", with_raw_header(b"[" * 100_000 + b"]" * 100_000), UNREADABLE),
    ("deeply-nested-object", with_raw_header(b'{"a":' * 40_000 + b"1" + b"}" * 40_000), UNREADABLE),
    ("string-for-number", with_header(peak_rss_kib="lots"), ("reply.peak_rss_kib: expected `int`",)),
    ("string-for-id", with_header(id="0"), ("reply.id: expected `int`",)),
    ("bool-for-id", with_header(id=True), ("reply.id: expected `int`",)),
    ("list-for-dict-error", with_header(error=["TypeError"]), ("reply.error: expected `object | null`",)),
    ("list-for-dict-result", with_header(results=[["torch.Tensor"]]), ("reply.results[0]: expected `object`",)),
    ("dict-for-list", with_header(results={"0": {}}), ("reply.results: expected `array`",)),
    ("nan-seconds", with_header(seconds=float("nan")), ("reply.seconds: expected `float`",)),
    ("inf-seconds", with_header(seconds=float("inf")), ("reply.seconds: expected `float`",)),
    ("negative-seconds", with_header(seconds=-1.0), ("reply.seconds: expected `float`",)),
    ("huge-int", with_header(peak_rss_kib=10**30), ("reply.peak_rss_kib",)),
    ("too-many-results", with_header(results=[{"type": "torch.Tensor"}] * 5), ("5 results, the call returns 1",)),
    ("out-of-order", with_header(id=7), ("answered out of order",)),
    ("missing-id", with_header(id=None), ("reply.id",)),
    ("long-message-is-refused", error_reply("x" * 200_000), ("reply.error.message: expected `str` of length <= 2000",)),
    ("lone-surrogate-message", error_reply("\ud800 boom \udfff"), ("raised RuntimeError: ? boom ?",)),
    ("blob-random-bytes", with_blob(lambda o: os.urandom(300)), UNREADABLE),
    ("blob-too-short", with_blob(lambda o: b"\x01\x02"), UNREADABLE),
    ("blob-wrong-name", with_blob(lambda o: save_tensors({"evil": o["out0"]})), ("a tensor named 'evil'",)),
    ("blob-extra-tensor", with_blob(lambda o: save_tensors({"out0": o["out0"], "out1": o["out0"].clone()})),
     ("a tensor named 'out1'",)),
    ("blob-unknown-dtype", with_blob(lambda o: safetensors_bytes({"out0": {"dtype": "F4", "shape": [2],
                                                                  "data_offsets": [0, 1]}}, b"\0")),
     ("has dtype 'F4'",)),
    ("blob-offsets-disagree-with-shape", with_blob(offsets_too_short), ("its shape and dtype need another size",)),
    ("blob-overlapping-tensors", with_blob(overlapping), ("a tensor named 'out1'", "overlap")),
    ("blob-header-length-lies", with_blob(lambda o: struct.pack("<Q", 1 << 40) + b"{}"), ("safetensors header of",)),
    ("blob-over-the-cap", with_blob(lambda o: save_tensors({"out0": torch.zeros(2 << 20)})), ("limit", "at most")),
    ("blob-float64-for-float32", with_blob(f64_blob), ("returned dtype float64, expected float32",)),
    ("lying-length-then-hangs-up", lying_length, ("the process ended",)),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("script", "phrases"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS])
def test_a_malformed_reply_fails_that_call_and_grading_goes_on(small_suite, tmp_path, script, phrases):
    at = AT
    results = grade_scripted(small_suite, tmp_path, run=script, at=at)
    target, others = split(results, small_suite)
    hit = target[at]
    assert hit.status == FAILED, hit
    assert any(p in hit.message for p in phrases), hit.message[:300]
    assert [r.status for r in target[:at]] == [PASSED] * at, "calls before it were judged as usual"
    assert [f"{r.test_name}: {r.message}" for r in others if r.status != PASSED] == [], "the rest must pass"


def test_the_scripted_call_is_a_float32_run(small_suite):
    batch = next(b for b in small_suite.batches if (b.hook, b.device) == TARGET)
    assert batch.trials[AT].dtype == "float32", "the float64 kind above needs a float32 run"


def test_an_extra_reply_never_answers_a_later_call(small_suite, tmp_path):
    def twice(reply: dict[str, Any], outputs: dict[str, torch.Tensor]) -> bytes:
        return 2 * frame(json.dumps(reply).encode(), save_tensors(outputs) if outputs else b"")

    meta = ("softmax_weights", "meta")  # a batch of one call: the extra reply is still unread when it ends
    results = grade_scripted(small_suite, tmp_path, run=twice, at=0, target=meta)
    assert [r.status for r in results if (r.hook, r.device) == meta] == [PASSED]
    after = [r for r in results if r.hook == "attention_dropout"]
    assert after[0].status == FAILED and "answered out of order" in after[0].message, after[0].message


def test_a_reply_with_an_undeclared_deep_field_is_read_for_what_it_declares(small_suite, tmp_path):
    deep: Any = 1
    for _ in range(400):
        deep = [deep]
    results = grade_scripted(small_suite, tmp_path, run=with_header(junk=deep, more={"x": [float("nan")]}), at=0)
    assert [f"{r.test_name}: {r.message}" for r in results if r.status != PASSED] == []


def test_a_long_error_message_is_refused_whatever_the_child_claims(small_suite, tmp_path):
    results = grade_scripted(small_suite, tmp_path, run=error_reply("é" * 30_000), at=0)  # 180 kB of JSON
    hit = split(results, small_suite)[0][0]
    assert hit.status == FAILED and "reply.error.message: expected `str` of length <= 2000" in hit.message
    assert len(hit.message) < MESSAGE_CHARS, len(hit.message)


@pytest.mark.parametrize(
    "load",
    [
        frame(b"[" * 100_000 + b"]" * 100_000),
        frame(json.dumps({"hooks": {"softmax_weights": {"params": "lots"}}}).encode()),
        frame(json.dumps({"hooks": [], "isolation": "none"}).encode()),
        frame(json.dumps({"hooks": {}, "cuda_init_seconds": float("nan")}).encode()),
        frame(json.dumps({"hooks": {}}).encode(), b"unexpected data"),
    ],
    ids=["deeply-nested", "string-for-list", "list-for-dict", "nan-seconds", "data-with-a-load-reply"],
)
def test_a_malformed_load_reply_fails_every_case_with_the_reason(small_suite, tmp_path, load):
    results = grade_scripted(small_suite, tmp_path, load=load)
    assert {r.status for r in results} == {FAILED}
    assert all("could not load the submission" in r.message for r in results), results[0].message
    assert any(p in results[0].message for p in (*UNREADABLE, "limit")), results[0].message


def test_an_over_long_import_error_is_refused(small_suite, tmp_path):
    results = grade_scripted(small_suite, tmp_path, load=frame(json.dumps({"import_error": "E" * 500_000}).encode()))
    assert {r.status for r in results} == {FAILED}
    assert all("could not load the submission" in r.message and "import_error" in r.message for r in results)
    assert len(results[0].message) < MESSAGE_CHARS + 100


# --- hypothesis: arbitrary headers and blobs through the real path ---------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)  # fmt: skip
reply_fields = st.sampled_from(
    ["id", "ok", "error", "seconds", "banned", "spawned", "results", "module", "peak_rss_kib"]
)
nested_depth = st.integers(min_value=1, max_value=300_000)


@st.composite
def hostile_scripts(draw) -> Script:
    kind = draw(st.sampled_from(["field", "result-field", "raw-header", "nested", "blob", "crafted-blob", "json"]))
    if kind == "field":
        return with_header(**{draw(reply_fields): draw(json_values)})
    if kind == "result-field":
        name = draw(st.sampled_from(["type", "is_tensor", "exact_tensor", "dtype", "shape", "device", "contiguous"]))
        value = draw(json_values)

        def script(reply: dict[str, Any], outputs: dict[str, torch.Tensor]) -> bytes:
            results = [dict(r, **{name: value}) for r in reply.get("results", [])]
            return with_header(results=results)(reply, outputs)

        return script
    if kind == "raw-header":
        return with_raw_header(draw(st.binary(max_size=300)))
    if kind == "nested":
        n, opener = draw(nested_depth), draw(st.sampled_from([b"[", b'{"a":', b'{"results":[']))
        closer = {b"[": b"]", b'{"a":': b"}", b'{"results":[': b"]}"}[opener]
        return with_raw_header(opener * n + b"0" + closer * n)
    if kind == "json":
        return with_raw_header(json.dumps(draw(json_values), allow_nan=True).encode())
    if kind == "blob":
        return with_blob(lambda o, data=draw(st.binary(max_size=400)): data)
    entries = draw(
        st.dictionaries(
            st.sampled_from(["out0", "out1", "out2", "x", "__metadata__", ""]),
            st.fixed_dictionaries(
                {
                    "dtype": st.sampled_from(["F32", "F64", "BOOL", "I64", "F4", "U8", 3]),
                    "shape": st.lists(st.integers(-2, 70), max_size=5) | json_values,
                    "data_offsets": st.lists(st.integers(-5, 5000), min_size=0, max_size=3) | json_values,
                }
            ),
            max_size=4,
        )
    )
    data = draw(st.binary(max_size=5000))
    return with_blob(lambda o: safetensors_bytes(entries, data))


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=hostile_scripts(), at=st.integers(min_value=0, max_value=5))
def test_no_reply_raises_out_of_grading_a_submission(small_suite, tmp_path, script, at):
    results = grade_scripted(small_suite, tmp_path, run=script, at=at)  # checks every result and the gradebook
    target, others = split(results, small_suite)
    event(f"the scripted call {target[at].status}: {target[at].message.split(':')[0][:40]}")
    assert [r.status for r in target[:at]] == [PASSED] * at
    assert [f"{r.test_name}: {r.message}" for r in others if r.status != PASSED] == [], "the rest must pass"


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values, raw=st.booleans(), blob=st.binary(max_size=50))
def test_no_load_reply_raises_out_of_grading_a_submission(small_suite, tmp_path, value, raw, blob):
    header = json.dumps(value if raw else {"hooks": value}, allow_nan=True).encode()
    results = grade_scripted(small_suite, tmp_path, load=frame(header, blob))
    assert {r.status for r in results} == {FAILED}


# --- the schema and the blob pre-check alone ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(value=json_values, kind=st.sampled_from([CallReply, LoadReply]))
def test_decode_either_fits_the_declaration_or_says_why(value, kind):
    try:
        clean = decode(value, kind, "reply")
    except MalformedReply as exc:
        assert str(exc)
        return
    assert decode(clean, kind, "reply") == clean, "a checked reply fits its declaration as it is"
    json.dumps(clean, allow_nan=False)  # no NaN or infinity is left in it


def _unbounded(kind: Any, where: str) -> list[str]:
    """Every str, list or dict in declaration ``kind`` without a max_length, every number without a range."""
    meta = [m for m in getattr(kind, "__metadata__", ()) if isinstance(m, msgspec.Meta)]
    base = typing.get_args(kind)[0] if meta else kind
    origin = typing.get_origin(base)
    if origin in (types.UnionType, typing.Union):
        return [p for a in typing.get_args(base) if a is not type(None) for p in _unbounded(a, where)]
    if typing.is_typeddict(base):
        hints = typing.get_type_hints(base, include_extras=True)
        return [p for name, hint in hints.items() for p in _unbounded(hint, f"{where}.{name}")]
    found = []
    if base in (str, list, dict) or origin in (list, dict):
        if not meta or meta[0].max_length is None:
            found.append(f"{where}: no max_length")
    elif base in (int, float):
        if not meta or meta[0].ge is None or meta[0].le is None:
            found.append(f"{where}: no range")
    elif base is not bool:
        found.append(f"{where}: {base!r} is not a declared kind")
    for arg in typing.get_args(base) if origin in (list, dict) else ():
        found += _unbounded(arg, f"{where}[]")
    return found


@pytest.mark.parametrize("kind", [CallReply, LoadReply, HelloReply], ids=lambda k: k.__name__)
def test_every_field_of_a_declared_reply_is_bounded(kind):
    assert _unbounded(kind, kind.__name__) == []


def test_the_walk_finds_an_unbounded_field():
    class Loose(typing.TypedDict):
        text: str
        count: typing.Annotated[int, msgspec.Meta(ge=0)]
        items: list[typing.Annotated[str, msgspec.Meta(max_length=3)]]

    assert len(_unbounded(Loose, "Loose")) == 3


def test_an_honest_reply_fit_to_its_declaration_always_decodes():
    error = {"type": "E" * 999, "mro": ["M" * 999] * 200, "message": "m" * 10**5, "where": "w" * 10**4}
    reply = {"id": 0, "ok": False, "error": error, "banned": ["b" * 500] * 100, "printed": "p" * 10**5}
    assert decode(fit(reply, CallReply), CallReply, "reply")["error"]["message"].endswith("…")
    with pytest.raises(MalformedReply, match="reply.error.type"):
        decode(reply, CallReply, "reply")


@settings(max_examples=300, deadline=None)
@given(field_name=reply_fields, value=json_values)
def test_a_call_reply_with_any_field_replaced_fits_or_is_refused(field_name, value):
    honest = {"id": 0, "ok": True, "seconds": 0.1, "banned": [], "spawned": [], "peak_rss_kib": 5,
              "results": [{"type": "torch.Tensor", "is_tensor": True, "exact_tensor": True, "dtype": "float32",
                           "shape": [2, 3], "device": "cpu", "contiguous": True}]}  # fmt: skip
    caps = Caps(1 << 18, 1 << 20, ("out0",), 1)
    try:
        reply = validate_call_reply(dict(honest, **{field_name: value}), caps)
    except MalformedReply:
        return
    for name in ("seconds",):
        if name in reply:
            assert math.isfinite(reply[name]) and reply[name] >= 0
    assert len(reply.get("results", [])) <= 1


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=600))
def test_validate_blob_refuses_arbitrary_bytes_with_a_reason(blob):
    caps = Caps(1 << 18, 1 << 20, ("out0", "out1"), 2)
    try:
        outputs = read_outputs(blob, caps)
    except MalformedReply as exc:
        assert str(exc).startswith("data")
        return
    assert set(outputs) <= {"out0", "out1"}


def test_check_blob_reads_what_safetensors_writes():
    tensors = {"out0": torch.randn(3, 4), "out1": torch.ones(2, dtype=torch.bool), "out2": torch.zeros(0, 5)}
    caps = Caps(1 << 18, 1 << 20, ("out0", "out1", "out2"), 3)
    assert set(validate_blob(save_tensors(tensors), caps)) == set(tensors)
    loaded = read_outputs(save_tensors(tensors), caps)
    assert all(torch.equal(loaded[k], tensors[k]) for k in tensors)


def test_a_million_empty_tensors_are_refused_from_the_header_length():
    blob = million_empty_tensors()
    assert len(blob) > 50 << 20
    caps = Caps(1 << 18, len(blob), ("out0",), 1)  # even with the blob cap out of the way
    with pytest.raises(MalformedReply, match="a safetensors header of"):
        validate_blob(blob, caps)


def test_caps_follow_what_the_call_returns(small_suite):
    runs = {(r.hook, r.device, r.case.name, r.dtype): r for r in small_suite.trials}
    train = runs[("attention_dropout", "cpu", "train-p=0.2", "float32")]
    caps = caps_for(train)
    assert caps.outputs == ("out0", "out1", "out2", "in.weights", "grad.weights") and caps.results == 3
    # twice one state, once another; the input back, as the call left it (the grader compares it with what it
    # sent); and the gradient pass's VJP w.r.t. the weights
    assert caps.max_blob >= 4 * sum(g.numel() * 8 for g in train.golds)
    assert caps.max_header == 256 << 10
    meta = next(r for r in small_suite.trials if r.device == "meta")
    assert caps_for(meta).outputs == (), "a meta run sends no tensors"


def test_stored_messages_are_capped_per_submission_with_a_note():
    results = [CaseResult("s", "h", f"c{i}", "cpu", "float32", FAILED, "m" * 1000) for i in range(50)]
    kept = limit_stored_messages(results, budget=10_000)
    assert [r.case for r in kept] == [r.case for r in results]
    assert [r.message for r in kept[:10]] == ["m" * 1000] * 10
    assert all(r.message.startswith("[message not kept") for r in kept[10:])
    assert sum(len(r.message) for r in kept) < 10_000 + 40 * 120


# --- a class: one submission's failure is its error row, KeyboardInterrupt still stops ------------------------------


def write_class(folder: Path, students: list[str]) -> Path:
    """Copies of Alice's correct solution under other names."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in students:
        (folder / f"{name}.py").write_text(ALICE.read_text(encoding="utf-8"), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_an_exception_grading_one_submission_becomes_its_error_row(tmp_path, monkeypatch):
    real = class_grading.grade_submission

    def flaky(sub, *args, **kwargs):
        if sub.student == "bob":
            raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")
        return real(sub, *args, **kwargs)

    monkeypatch.setattr(class_grading, "grade_submission", flaky)
    folder = write_class(tmp_path / "class", ["alice", "bob"])
    options = class_grading.GradeOptions(seed=SEED, devices=["cpu"], limits=LIMITS)
    run = class_grading.grade_class([str(folder)], tmp_path / "out", options)
    by_student = {sub.student: (sub, results) for sub, results in run.graded}
    assert by_student["bob"][0].error and "RecursionError" in by_student["bob"][0].error
    assert {r.status for r in by_student["bob"][1]} == {FAILED}
    assert {r.status for r in by_student["alice"][1]} == {PASSED}
    conn = sqlite3.connect(tmp_path / "out" / "gradebook.sqlite")
    assert conn.execute("SELECT error FROM submissions WHERE student = 'bob'").fetchone()[0].startswith("grading")
    conn.close()
    monkeypatch.setattr(class_grading, "grade_submission", real)  # the resume grades bob again, for real
    again = class_grading.grade_class([str(folder)], tmp_path / "out", options)
    assert {sub.student: sub.error for sub, _ in again.graded} == {"alice": None, "bob": None}
    assert {r.status for _, results in again.graded for r in results} == {PASSED}


@pytest.mark.slow
def test_keyboard_interrupt_still_stops_the_class(tmp_path, monkeypatch):
    def interrupted(sub, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(class_grading, "grade_submission", interrupted)
    folder = write_class(tmp_path / "class", ["alice"])
    with pytest.raises(KeyboardInterrupt):
        options = class_grading.GradeOptions(seed=SEED, devices=["cpu"], limits=LIMITS)
        class_grading.grade_class([str(folder)], tmp_path / "out", options)


# --- end to end: hostile submissions writing to their own socket -------------------------------------------------

SENDS_ITS_OWN_REPLY = HERE / "replies" / "sends_its_own_reply.py"

HOSTILE_KINDS = {
    # student id -> what its child sends as the reply to its first softmax_weights call of each batch
    "deep_nesting": UNREADABLE,
    "string_for_number": ("reply.peak_rss_kib: expected `int`",),
    "list_for_dict": ("reply.error: expected `object | null`",),
    "nan_seconds": ("reply.seconds: expected `float`",),
    "huge_message": (*UNREADABLE, "limit", "reply.error.message: expected `str` of length"),
    "surrogate_message": ("raised RuntimeError: ? boom",),
    "tensor_250mib": ("limit", "at most"),
    "million_empty_tensors": ("limit", "at most"),
    "wrong_tensor_names": ("a tensor named 'evil",),
}


def hostile_source(kind: str) -> str:
    """Alice's solution, her softmax_weights renamed out of the way (her modules keep it), and the snippet."""
    alice = re.sub(r"\bsoftmax_weights\b", "_alice_softmax_weights", ALICE.read_text(encoding="utf-8"))
    return alice + "\n\n" + SENDS_ITS_OWN_REPLY.read_text(encoding="utf-8").replace("__REPLY_KIND__", kind)


def hostile_class(root: Path) -> Path:
    folder = write_class(root / "class", ["alice"])
    for kind in HOSTILE_KINDS:
        (folder / f"{kind}.py").write_text(hostile_source(kind), encoding="utf-8")
    return folder


def grades(out: Path) -> dict[str, dict[str, str]]:
    with (out / "grades.csv").open(newline="", encoding="utf-8") as fh:
        return {row["student"]: row for row in csv.DictReader(fh)}


def grade_cli(folder: Path, out: Path, *extra: str) -> str:
    args = ["grade", str(folder), "--out", str(out), "--seed", str(SEED), "--devices", "cpu,meta", "--timeout", "5"]
    result = CliRunner().invoke(cli_main, [*args, *extra], catch_exceptions=False)
    assert result.exit_code == 0, result.output[-3000:]
    return result.output


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("hostile-replies")
    folder = hostile_class(root)
    out = root / "out"
    return folder, out, grade_cli(folder, out, "--jobs", "2")


@pytest.mark.slow
def test_alice_keeps_full_marks_beside_hostile_replies(hostile_run):
    _folder, out, _ = hostile_run
    rubric = load_rubric()
    row = grades(out)["alice"]
    assert {h: float(row[h]) for h in HOOK_NAMES} == {h: float(rubric.points[h]) for h in HOOK_NAMES}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(HOSTILE_KINDS), ids=list(HOSTILE_KINDS))
def test_a_hostile_reply_fails_only_the_call_it_answers(hostile_run, kind):
    _folder, out, _ = hostile_run
    rubric = load_rubric()
    row = grades(out)[kind]
    assert float(row["softmax_weights"]) == 0
    assert {h: float(row[h]) for h in HOOK_NAMES if h != "softmax_weights"} == {
        h: float(rubric.points[h]) for h in HOOK_NAMES if h != "softmax_weights"
    }
    for name in ("feedback.md", "feedback.html", "results.json"):
        assert (out / kind / name).is_file(), f"{kind}/{name} is missing"
    conn = sqlite3.connect(out / "gradebook.sqlite")
    rows = conn.execute(
        "SELECT case_name, device, message FROM results WHERE student = ? AND hook = 'softmax_weights'"
        " AND status = 'failed' ORDER BY rowid",
        (kind,),
    ).fetchall()
    conn.close()
    first = rows[0][2]
    assert any(p in first for p in HOSTILE_KINDS[kind]), first[:300]


@pytest.mark.slow
def test_the_gradebook_stays_small_and_resume_works(hostile_run):
    folder, out, _ = hostile_run
    assert (out / "gradebook.sqlite").stat().st_size < 8 << 20
    conn = sqlite3.connect(out / "gradebook.sqlite")
    biggest = conn.execute(
        "SELECT student, SUM(LENGTH(message)) FROM results GROUP BY student ORDER BY 2 DESC"
    ).fetchone()
    before = grades(out)
    # as if the run had been stopped before these were recorded: unfinished, two submissions missing
    (run_id,) = conn.execute("SELECT MAX(id) FROM runs").fetchone()
    conn.execute("UPDATE runs SET finished_at = NULL WHERE id = ?", (run_id,))
    for student in ("alice", "nan_seconds"):
        conn.execute("DELETE FROM results WHERE run_id = ? AND student = ?", (run_id, student))
        conn.execute("DELETE FROM submissions WHERE run_id = ? AND student = ?", (run_id, student))
    conn.commit()
    conn.close()
    assert biggest[1] < 1 << 20, biggest
    grade_cli(folder, out, "--jobs", "2")
    conn = sqlite3.connect(out / "gradebook.sqlite")
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1, "the stopped run was resumed, not restarted"
    conn.close()
    assert grades(out) == before


# --- the grader's memory with oversized replies -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_oversized_replies_leave_the_graders_memory_alone():
    done = subprocess.run(
        [sys.executable, str(KIT_ROOT / "benchmarks" / "oversized_replies.py"), "--json"],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=550,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    honest = measured["honest"]["peak_rss_mib"]
    for kind in ("tensor_250mib", "million_empty_tensors"):
        assert measured[kind]["peak_rss_mib"] < 1024, measured
        assert measured[kind]["peak_rss_mib"] - honest < 128, measured
        assert measured[kind]["softmax_failed"], measured


# --- a figure's facts: data from the child like any other ------------------------------------------------------

FIGURE_REPLY = {"id": 0, "ok": True, "banned": [], "results": [{"type": "matplotlib.figure.Figure", "figure": {
    "images": 1, "xlabel": "Key positions", "ylabel": "Query positions", "colorbar": True,
    "xticks": [{"at": 0.0, "text": "a"}], "yticks": [{"at": 0, "text": "b"}]}}]}  # fmt: skip


def _with_figure(**facts):
    reply = json.loads(json.dumps(FIGURE_REPLY))
    reply["results"][0]["figure"].update(facts)
    return reply


@pytest.mark.parametrize(
    "facts",
    [
        {"xticks": [{"at": float(i), "text": "t"} for i in range(FIGURE_TICKS + 1)]},
        {"yticks": [{"at": -1.0, "text": "t"}]},
        {"yticks": [{"at": float("nan"), "text": "t"}]},
        {"xticks": [{"text": "no position"}]},
        {"images": "1"},
        {"images": True},
        {"colorbar": 1},
        {"xlabel": ["Key positions"]},
    ],
    ids=["too-many-ticks", "negative-tick", "nan-tick", "tick-without-position", "images-as-text", "images-as-bool",
         "colorbar-as-number", "label-as-list"],
)  # fmt: skip
def test_a_figure_reply_that_breaks_its_schema_is_refused(facts):
    with pytest.raises(MalformedReply):
        validate_call_reply(_with_figure(**facts), Caps(1 << 18, 1 << 20, ("out0",), 1))


def test_a_figure_reply_keeps_its_declared_fields_only_and_refuses_long_text():
    caps = Caps(1 << 18, 1 << 20, ("out0",), 1)
    lying = _with_figure(xlabel="K" * 10_000, secret="dropped", xticks=[{"at": 1.0, "text": "x" * 10_000, "more": 1}])
    with pytest.raises(MalformedReply, match="figure.xlabel: expected `str` of length <= 200"):
        validate_call_reply(lying, caps)
    reply = validate_call_reply(fit(lying, CallReply), caps)  # what the honest child sends: cut to the declaration
    facts = reply["results"][0]["figure"]
    assert "secret" not in facts and len(facts["xlabel"]) == FIGURE_TEXT
    assert facts["xticks"] == [{"at": 1.0, "text": "x" * (FIGURE_TEXT - 1) + "…"}]


@pytest.mark.slow
def test_a_figure_whose_facts_claim_everything_still_fails_on_its_array():
    """The child's facts are diagnostics: the image's array, read from the bytes, is compared with the gold."""
    import torch

    from grader.instructor.verdict import judge

    suite = build_suite(SEED, ("cpu",))
    trial = next(t for t in suite.trials if t.hook == "plot_attention" and t.case.name == "square")
    reply = validate_call_reply(_with_figure(), caps_for(trial))
    wrong = {"out0": torch.zeros_like(trial.golds[0])}
    status, message = judge(trial, reply, wrong)
    assert status == FAILED and message.startswith("the image's array: values differ"), message
    inputs = {f"in.{n}": trial.tensors[a["tensor"]].clone() for n, a in trial.call["args"].items() if "tensor" in a}
    assert judge(trial, reply, {"out0": trial.golds[0].clone(), **inputs}) == (PASSED, "")
    assert judge(trial, reply, {"out0": trial.golds[0].clone()}) == (FAILED, IN_PLACE)  # the inputs did not come back
    no_colorbar = validate_call_reply(_with_figure(colorbar=False), caps_for(trial))
    assert judge(trial, no_colorbar, {"out0": trial.golds[0].clone()})[1].startswith("the figure has no colorbar")
    not_a_figure = validate_call_reply({"id": 0, "ok": True, "results": [{"type": "builtins.dict"}]}, caps_for(trial))
    message = judge(trial, not_a_figure, {"out0": trial.golds[0].clone()})[1]
    assert message.startswith("returned builtins.dict, expected a matplotlib Figure"), message
