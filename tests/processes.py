"""What ``/proc`` says about a process (Linux): for the tests that check no learner process is left behind."""

from __future__ import annotations

import os
from pathlib import Path


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, pgrp, session) of a process, or None when it has no /proc entry."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def alive(pid: int) -> bool:
    """Whether the process exists and is neither a zombie nor dead."""
    info = proc_stat(pid)
    return info is not None and info[0] not in "ZX"


def processes_under(folder: Path) -> dict[int, str]:
    """Live processes whose working directory is under ``folder`` (a grader's TMPDIR: template, children, helpers)."""
    found = {}
    prefix = str(folder)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")[:60].decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(prefix) and alive(int(entry.name)):
            found[int(entry.name)] = f"{cmd.strip()} (cwd {cwd})"
    return found
