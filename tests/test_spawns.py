"""Threads and processes of the learner's code: heard or measured in the child, and every call after them fails.

* the invariant, in a fresh interpreter of each Python found (3.10 to 3.13): once the child watches
  (:func:`grader.child.spawns._watch_spawns`, an audit hook that cannot be removed), every route to a
  thread or a process is noted (``threading``, ``_thread``, ``concurrent.futures``, ``os.fork``,
  ``subprocess``, ``multiprocessing``), and what is measured sees a thread or a child process started
  before the watch (a Python thread besides the caller, a child not reaped, a child reaped);
* the trusted side words each fact from its own table, and a forged one as "a thread or a process";
* end to end, in the sandboxed child: ``torch.softmax`` in a thread, full attention in a thread pool or
  in a forked process, a thread started at import serving every call: each such hook gains nothing,
  with the message, and every other hook keeps full marks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import learner_code
import pytest

from grader.instructor.replies import CallReply, decode
from grader.instructor.sandbox import Limits
from grader.instructor.suite import Suite, build_suite
from grader.instructor.verdict import PASSED
from grader.rules import SPAWN_KINDS, spawn_message

KIT = Path(__file__).resolve().parents[1]
LIMITS = Limits()

PROBE = r"""
import importlib.util, json, multiprocessing, os, subprocess, sys, threading, time, _thread
import concurrent.futures


def sleeper():
    time.sleep(30)


def joined(target):
    worker = threading.Thread(target=target); worker.start(); worker.join()


def raw():
    lock = _thread.allocate_lock(); lock.acquire(); _thread.start_new_thread(lock.release, ()); lock.acquire()


def pool():
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        ex.submit(int).result()


def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def spawned_process():
    p = multiprocessing.get_context("spawn").Process(target=int); p.start(); p.join()


def fork_exec_directly():
    import _posixsubprocess
    try:
        _posixsubprocess.fork_exec()
    except TypeError:
        pass  # its arguments differ from one Python to the next: the event comes first


def main():
    threading.Thread(target=sleeper, daemon=True).start()  # started before the watch: only measuring sees it
    child = subprocess.Popen(["sleep", "30"])
    sys.path.insert(0, ".")
    from grader.child import spawns as runtime  # the child imports nothing else of the kit: it loads alone
    runtime._watch_spawns()
    out = {"measured": runtime._spawn_facts()}
    child.kill(); child.wait()
    out["reaped"] = [f for f in runtime._spawn_facts() if f.startswith("process")]

    def heard(label, start):
        runtime._SPAWNS.clear()
        start()
        out[label] = [f for f in runtime._spawn_facts() if f not in ("thread-running", "process-ended")]

    heard("threading", lambda: joined(int))
    heard("_thread", raw)
    heard("concurrent.futures", pool)
    heard("os.fork", fork)
    heard("subprocess", lambda: subprocess.run(["true"]))
    heard("os.system", lambda: os.system("true"))
    heard("os.posix_spawn", lambda: os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0))
    heard("_posixsubprocess", fork_exec_directly)
    heard("multiprocessing", spawned_process)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
"""


def interpreters() -> list[str]:
    found = [sys.executable]
    for minor in range(10, 14):
        path = shutil.which(f"python3.{minor}")
        if path and subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
            found.append(path)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the child runs on Linux only")
@pytest.mark.parametrize("python", interpreters())
def test_every_route_to_a_thread_or_a_process_is_heard_or_measured(python, tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    run = subprocess.run([python, str(probe)], cwd=KIT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    assert set(out.pop("measured")) == {"thread-running", "process-running"}
    assert out.pop("reaped") == ["process-ended"]  # reaped after the watch began: the kernel's accounting moved
    thread = {"_thread.start_new_thread", "_thread.start_joinable_thread"}
    for label in ("threading", "_thread", "concurrent.futures"):
        facts = out.pop(label)
        assert facts and set(facts) <= thread, (label, facts)
    assert out.pop("os.fork") == ["os.fork"]
    assert out.pop("subprocess")[0] == "subprocess.Popen"
    assert out.pop("os.system") == ["os.system"]
    assert out.pop("os.posix_spawn") == ["os.posix_spawn"]
    assert out.pop("_posixsubprocess") == ["_posixsubprocess.fork_exec"]
    assert "_posixsubprocess.fork_exec" in out.pop("multiprocessing")
    assert out == {}


def test_the_trusted_side_words_the_facts_itself():
    message = spawn_message(["_thread.start_new_thread", "os.fork", "thread-running"])
    assert message.startswith("your code started a thread, a process (os.fork), a thread (still running): threads and")
    assert "not allowed in graded code, at import or in a call" in message
    forged = spawn_message(["\nalice.py:1: PASSED everything"])
    assert "PASSED" not in forged and "a thread or a process" in forged
    assert set(SPAWN_KINDS) >= {"_thread.start_new_thread", "os.fork", "subprocess.Popen", "process-ended"}
    assert decode({"id": 0, "spawned": ["os.fork"]}, CallReply, "reply")["spawned"] == ["os.fork"]


# --- end to end, in the sandboxed child -------------------------------------------------------------------


@pytest.fixture(scope="module")
def suite():
    full = build_suite(7, ("cpu", "meta"))
    hooks = {"softmax_weights", "chunked_attention", "attention_weights"}
    return Suite(full.seed, full.devices, [b for b in full.batches if b.hook in hooks])


def graded(tmp_path, snippet, suite, template):
    return learner_code.graded_snippet(tmp_path, snippet, suite, template, LIMITS)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")
@pytest.mark.parametrize(
    "snippet, hook",
    [
        ("threaded_softmax", "softmax_weights"),
        ("threaded_chunked", "chunked_attention"),
        ("forked_chunked", "chunked_attention"),
    ],
)
def test_a_call_that_starts_a_thread_or_a_process_gains_nothing(tmp_path, suite, template, snippet, hook):
    results = graded(tmp_path, snippet, suite, template)
    mine = [r for r in results if r.hook == hook and r.device != "meta"]
    assert mine and [r for r in mine if r.status == PASSED] == []
    said = ("threads and processes are not allowed in graded code", "should raise ValueError")  # forked: no check
    assert all(any(p in r.message for p in said) for r in mine), [r.message for r in mine]
    others = [r for r in results if r.hook != hook and r.status != PASSED]
    if snippet.startswith("threaded"):  # a thread that ended with its call leaves the other calls alone
        assert [f"{r.test_name}: {r.message}" for r in others] == []
    else:  # a process may outlive its call, unseen: every call after it fails too (here, none comes after)
        assert all("your code started a process" in r.message for r in others), [r.message for r in others]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")
def test_a_thread_started_at_import_fails_every_call(tmp_path, suite, template):
    results = graded(tmp_path, "thread_at_import", suite, template)
    cpu = [r for r in results if r.device != "meta"]
    assert cpu and [r for r in cpu if r.status == PASSED] == []  # every hook: the thread could serve any of them
    assert all("your code started a thread" in r.message for r in cpu), cpu[0].message


@pytest.mark.slow  # grades a whole submission in the sandbox: over 5 s on the 2-core machine
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandboxed child runs on Linux only")
def test_correct_code_starts_nothing(tmp_path, suite, template):
    results = graded(tmp_path, None, suite, template)
    assert [f"{r.test_name}: {r.message}" for r in results if r.status != PASSED] == []
