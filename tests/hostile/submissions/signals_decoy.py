"""Sends SIGSTOP and SIGKILL to a process outside its sandbox: a decoy the test started, found by the
token __HOSTILE_DECOY__ in /proc/*/cmdline (a stand-in for the grader itself, which it must not be
able to kill either).

softmax_weights always fails, saying what each signal gave.
"""

import json
import os
import signal

_OUTCOME = None


def _attack():
    outcome = {"targets": 0}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"__HOSTILE_DECOY__" not in fh.read():
                    continue
        except OSError:
            continue
        outcome["targets"] += 1
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(int(pid), sig)
                outcome[sig.name] = "delivered"
            except OSError as exc:
                outcome[sig.name] = type(exc).__name__
    return outcome


def softmax_weights(scores, dim=-1):
    global _OUTCOME
    if _OUTCOME is None:
        _OUTCOME = _attack()
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(_OUTCOME, sort_keys=True, separators=(",", ":")))
