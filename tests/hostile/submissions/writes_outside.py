"""Tries to leave files behind outside its working folder: in ~ ($HOME, the passwd home, /root and
/home/*), /tmp, /var/tmp, /dev/shm, ``..``, ``../..``, /, and the kit (root from /proc/self/cmdline),
by creating files and folders, symlinking, hard-linking and renaming its own files out.

Every name starts with __HOSTILE_TOKEN__, so the test can look for them afterwards.  softmax_weights
always fails, listing what worked; inside its own folder (``.`` and $HOME) writing is allowed.
"""

import glob
import json
import os
import pwd

TOKEN = "__HOSTILE_TOKEN__"


def _kit_root():
    with open("/proc/self/cmdline", "rb") as fh:
        argv = fh.read().decode(errors="replace").split("\0")
    return next((a for a in reversed(argv) if a.startswith("/")), "")


def _targets():
    root = _kit_root()
    return {
        "cwd": ".",
        "home-env": os.path.expanduser("~"),
        "home-passwd": pwd.getpwuid(os.getuid()).pw_dir,  # "nobody" inside a user namespace
        "home-root": "/root",
        **{f"home-{os.path.basename(h)}": h for h in glob.glob("/home/*")},
        "tmp": "/tmp",
        "var-tmp": "/var/tmp",
        "dev-shm": "/dev/shm",
        "parent": "..",
        "grandparent": "../..",
        "root": "/",
        "kit": root,
        "kit-tests-hostile": os.path.join(root, "tests", "hostile"),
    }


def _attempt(label, folder, outcome):
    def note(op, fn):
        try:
            fn()
            outcome[f"{label}:{op}"] = "ok"
        except OSError as exc:
            outcome[f"{label}:{op}"] = type(exc).__name__

    base = os.path.join(folder, f"{TOKEN}-{label}")
    note("file", lambda: open(base + "-file", "x").close())
    note("mkdir", lambda: os.mkdir(base + "-dir"))
    note("symlink", lambda: os.symlink(os.getcwd(), base + "-symlink"))
    mine = f"{TOKEN}-mine-{label}"
    open(mine, "w").close()
    note("link", lambda: os.link(mine, base + "-hardlink"))
    note("rename", lambda: os.rename(mine, base + "-renamed"))


_FACTS = None


def softmax_weights(scores, dim=-1):
    global _FACTS
    if _FACTS is None:
        outcome = {}
        for label, folder in _targets().items():
            if folder:
                _attempt(label, folder, outcome)
        _FACTS = {"ok": sorted(k for k, v in outcome.items() if v == "ok"), "refused": len(outcome)}
        _FACTS["refused"] -= len(_FACTS["ok"])
    raise RuntimeError("HOSTILE-REPORT " + json.dumps(_FACTS, sort_keys=True, separators=(",", ":")))
