"""Starts processes meant to outlive the grading: a plain ``Popen``, a double-forked daemon and a
``setsid`` session leader.  Each is a shell looping on ``sleep`` whose command line carries
__HOSTILE_TOKEN__, so the test can look for it in /proc/*/cmdline afterwards.

softmax_weights starts them on its first call, then always fails, saying what it started.
"""

import json
import os
import subprocess

TOKEN = "__HOSTILE_TOKEN__"
LOOP = "while :; do sleep 1; done"
_STARTED = None


def _daemon(name):
    pid = os.fork()
    if pid == 0:  # first child: a new session, fork again, exit
        try:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sh", ["/bin/sh", "-c", LOOP, name])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def _start():
    started = {}
    for label, start in (
        ("popen", lambda name: subprocess.Popen(["/bin/sh", "-c", LOOP, name]).pid),
        ("daemon", _daemon),
        ("setsid", lambda name: subprocess.Popen(["/bin/sh", "-c", LOOP, name], start_new_session=True).pid),
    ):
        try:
            started[label] = start(f"{TOKEN}-{label}")
        except OSError as exc:
            started[label] = type(exc).__name__
    return started


def softmax_weights(scores, dim=-1):
    global _STARTED
    if _STARTED is None:
        _STARTED = _start()
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(_STARTED, sort_keys=True, separators=(",", ":")))
