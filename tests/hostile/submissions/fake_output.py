"""Prints fake "PASSED" lines, a fake pytest summary and fake results JSON everywhere it can, and
returns zeros from softmax_weights.

Every line carries a marker (__HOSTILE_TOKEN__-FAKE) that the test looks for in the grader's console
output and in every file the grader wrote: it must be in none of them.
"""

import glob
import json
import os
import sys

import torch

_MARK = "__HOSTILE_TOKEN__-FAKE"
_LINES = (
    f"tests/test_hidden.py::test_softmax_weights PASSED {_MARK}\n"
    f"============ 412 passed in 0.01s ({_MARK}) ============\n"
    + json.dumps({"score": 24.0, "max_score": 24.0, "output": _MARK, "tests": []})
    + "\n"
    + json.dumps({"id": 0, "ok": True, "results": [{"is_tensor": True, "exact_tensor": True}], "note": _MARK})
    + "\n"
)


def _shout():
    print(_LINES, flush=True)
    print(_LINES, file=sys.stderr, flush=True)
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.write(_LINES)
            stream.flush()
        except Exception:
            pass
    for fd in (1, 2):
        try:
            os.write(fd, _LINES.encode())
        except OSError:
            pass
    targets = ["/dev/tty", "/dev/console", "/dev/stdout", "/dev/stderr"] + glob.glob("/dev/pts/[0-9]*")
    targets += glob.glob("/proc/[0-9]*/fd/1") + glob.glob("/proc/[0-9]*/fd/2")
    for path in targets:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, _LINES.encode())
        except OSError:
            pass
        finally:
            os.close(fd)


_shout()


def softmax_weights(scores, dim=-1):
    _shout()
    return torch.zeros_like(scores)
