"""Writes ``conftest.py`` files that force every pytest test to pass into its folder, ``..``, ``../..``,
~ ($HOME, the passwd home, /root and /home/*), /tmp and the kit (root from /proc/self/cmdline), at import time and again
in softmax_weights, and opens the kit's own conftest.py for appending.

softmax_weights always fails, saying which writes worked.  Each conftest.py carries
__HOSTILE_TOKEN__, so the test can tell them from any other.
"""

import glob
import json
import os
import pwd

CONFTEST = """# __HOSTILE_TOKEN__
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""


def _kit_root():
    with open("/proc/self/cmdline", "rb") as fh:
        argv = fh.read().decode(errors="replace").split("\0")
    return next((a for a in reversed(argv) if a.startswith("/")), "")


def _write_all():
    root = _kit_root()
    targets = {
        "cwd": ".",
        "submission": "submission",
        "home-env": os.path.expanduser("~"),
        "home-passwd": pwd.getpwuid(os.getuid()).pw_dir,  # "nobody" inside a user namespace
        "home-root": "/root",
        **{f"home-{os.path.basename(h)}": h for h in glob.glob("/home/*")},
        "tmp": "/tmp",
        "parent": "..",
        "grandparent": "../..",
        "kit-tests-hostile": os.path.join(root, "tests", "hostile"),
    }
    outcome = {}
    for label, folder in targets.items():
        try:
            with open(os.path.join(folder, "conftest.py"), "x", encoding="utf-8") as fh:
                fh.write(CONFTEST)
            outcome[label] = "ok"
        except OSError as exc:
            outcome[label] = type(exc).__name__
    try:
        open(os.path.join(root, "conftest.py"), "a").close()  # opened for writing; nothing written
        outcome["kit-conftest-append"] = "ok"
    except OSError as exc:
        outcome["kit-conftest-append"] = type(exc).__name__
    return outcome


_AT_IMPORT = _write_all()


def softmax_weights(scores, dim=-1):
    facts = {"at_import": _AT_IMPORT, "in_call": _write_all()}
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(facts, sort_keys=True, separators=(",", ":")))
