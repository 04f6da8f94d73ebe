"""Looks for the run's seed (and any secret) in the environment: its own, and every process's /proc/<pid>/environ.

It cannot turn a seed into answers (that needs the instructor's hidden cases), so it always fails,
and says in its error what it saw: the test checks that it saw nothing of the grader's environment.
"""

import json
import os


def _environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as fh:
        return dict(part.split("=", 1) for part in fh.read().decode(errors="replace").split("\0") if "=" in part)


def _interesting(env):
    return {k: v for k, v in env.items() if "ATTNKIT" in k.upper() or ("SEED" in k.upper() and k != "PYTHONHASHSEED")}


def softmax_weights(scores, dim=-1):
    seen = dict(_interesting(os.environ))
    readable = []
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            env = _environ_of(pid)
        except OSError:
            continue
        readable.append(pid)
        seen.update(_interesting(env))
    facts = {"env_keys": sorted(os.environ), "found": seen, "environ_readable": readable}
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(facts, sort_keys=True, separators=(",", ":")))
