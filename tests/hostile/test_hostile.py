"""The hostile suite (issue 6): every attack we can think of, graded together with the sample class.

Each ``submissions/<attack>.py`` is a *snippet*: Alice's correct solution
(``examples/submissions/alice.py``) with the hooks the snippet defines renamed out
of her way and the snippet appended, so the attacked hook is the only wrong one.
Placeholders (``__HOSTILE_TOKEN__`` and friends) are filled in at test time with a
token unique to the run, the ports of listeners the test starts, and so on; see
``README.md`` for the table of attacks and expected outcomes.

Two runs of ``attnkit grade --seed 11 --devices cpu,meta --timeout 3``, as
subprocesses, side by side:

- D1: the sample class alone;
- D2: the sample class, then a class folder holding every hostile submission plus
  the hostile inputs (zip bombs, ``../`` entries, broken notebooks, bad ``.py`` files).

The sample students' rows of D2's ``grades.csv`` must equal D1's byte for byte, and
each attack must get its expected outcome: zero on what it attacks, full marks on
the rest, no file left outside the sandbox, no process left, no socket reached.
Two smaller runs check odd student ids.

Where the machine cannot give learner processes ``FULL_ISOLATION`` the
attacks that depend on it are not even graded (they would really write into /tmp
and the kit) and their tests skip with the isolation the machine has.
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from learner_code import HOSTILE_SNIPPETS, alice_with
from processes import proc_stat

from grader.instructor.class_folder import class_members
from grader.instructor.class_grading import FULL_ISOLATION
from grader.instructor.handin_reading import read_submission
from grader.instructor.sandbox import Template, child_environment
from grader.registry import HOOK_NAMES

HERE = Path(__file__).resolve().parent
SNIPPETS = HERE / "submissions"
KIT_ROOT = HERE.parents[1]
SAMPLE_CLASS = KIT_ROOT / "examples" / "submissions"
ALICE = SAMPLE_CLASS / "alice.py"
SEED = "11"
DEVICES = "cpu,meta"
CALL_TIMEOUT = "3"
RUN_TIMEOUT = 420

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; Linux only"),
]


# --- the attacks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attack:
    """One hostile submission and what the grader must make of it."""

    name: str  # the snippet's file stem, and the student id
    hooks: tuple[str, ...]  # the hooks it attacks; () for a submission that does not import
    phrases: tuple[str, ...]  # every failed cpu case of those hooks says one of these
    isolation: bool = False  # holds only where learner processes get FULL_ISOLATION
    outcome: str = "zero"  # zero | again (fails the "-again" cases only) | mutation (fails where it mutates)
    others_kept: bool = True  # every other hook keeps full marks (not where its processes outlive its call)


SOFTMAX = ("softmax_weights",)
REPORT = ("HOSTILE-REPORT",)

ATTACKS = [
    Attack("patch_comparisons", SOFTMAX, ("values differ",)),
    Attack("forged_eq", SOFTMAX, ("a torch.Tensor",)),
    Attack("tensor_subclass", SOFTMAX, ("not a subclass",)),
    Attack(
        "non_tensor_returns",
        ("softmax_weights", "context_vectors", "causal_mask"),
        ("expected a torch.Tensor", "returned normally"),
    ),
    Attack("sys_exit_at_import", (), ("does not import", "SystemExit")),
    Attack("os_exit_at_import", (), ("the process ended",)),
    Attack("exit_in_call", ("softmax_weights", "context_vectors"), ("the process ended",)),
    Attack("infinite_loop", SOFTMAX, ("timed out",)),
    Attack("memory_blowup", ("softmax_weights", "context_vectors"), ("allocate", "MemoryError")),
    Attack("mutates_input", SOFTMAX, ("modified its input in place",)),
    Attack(
        "returns_input_alias", ("renormalize_masked_weights",), ("modified its input in place",), outcome="mutation"
    ),
    Attack(
        "caches_outputs",
        ("softmax_weights", "context_vectors", "make_self_attention"),
        ("values differ",),
        outcome="again",
    ),
    Attack("seed_from_env", SOFTMAX, REPORT),
    Attack("seed_from_cmdline", SOFTMAX, REPORT),
    Attack("fake_output", SOFTMAX, ("values differ",)),
    Attack("patches_pytest", SOFTMAX, REPORT),
    Attack("hunt_gc", SOFTMAX, REPORT),
    Attack("hunt_sys_modules", SOFTMAX, REPORT),
    Attack("hunt_relative_paths", SOFTMAX, REPORT, isolation=True),
    Attack("hunt_proc_cmdline", SOFTMAX, REPORT, isolation=True),
    Attack("hunt_importlib", SOFTMAX, REPORT, isolation=True),
    Attack("writes_outside", SOFTMAX, REPORT, isolation=True),
    Attack("writes_conftest", SOFTMAX, REPORT, isolation=True),
    Attack("tcp_connect", SOFTMAX, REPORT, isolation=True),
    Attack("unix_socket_connect", SOFTMAX, REPORT, isolation=True),
    Attack("background_processes", SOFTMAX, REPORT, isolation=True, others_kept=False),
    Attack("signals_decoy", SOFTMAX, REPORT, isolation=True),
]
BY_NAME = {a.name: a for a in ATTACKS}
ZERO_ATTACKS = [a for a in ATTACKS if a.outcome == "zero"]
SINGLE_HOOK_ATTACKS = [a for a in ATTACKS if a.hooks and a.others_kept]

BAD_INPUTS = {
    # file name in the class folder -> a phrase of its error row
    "zip_bomb_1gib.zip": "refused zip: 1 GB unpacked is over the 50 MB limit",
    "zip_bomb_lying_sizes.zip": "refused zip",
    "zip_traversal.zip": "points outside the archive",
    "zip_absolute_path.zip": "is an absolute path",
    "zip_symlink.zip": "is a symbolic link",
    "zip_many_entries.zip": "entry limit",
    "notebook_invalid_json.ipynb": "invalid JSON",
    "notebook_v3_heading_bomb.ipynb": "no Python code found in the notebook",
    "py_null_byte.py": "contains a null byte",
    "py_latin1.py": "not valid UTF-8",
    "py_too_big.py": "over the 1 MB limit",
}

INSIDE = {"cwd", "home-env", "submission"}
"""Places inside the learner's own working folder (``$HOME`` is that folder), where writing is allowed."""


# --- building the class -------------------------------------------------------------------------------


def assemble(snippet: str, fills: dict[str, str]) -> str:
    """Alice's solution with the hooks ``snippet`` defines renamed out of the way, then the snippet, filled in."""
    source = alice_with(snippet, HOSTILE_SNIPPETS, fills)
    assert "__HOSTILE_" not in source, f"{snippet}.py has a placeholder the test does not fill"
    return source


def write_zip_bomb(path: Path, declared_small: bool) -> None:
    """1 GiB of ``#`` in one ``.py`` entry (about 4.5 MB on disk); with ``declared_small`` its sizes say 100 bytes."""
    chunk = b"#" * (1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("bomb/answers.py", "w") as fh:
            for _ in range(1024):
                fh.write(chunk)
    if declared_small:  # the local header (offset 22) and the central directory (offset 24) lie
        data = bytearray(path.read_bytes())
        assert data[:4] == b"PK\x03\x04"
        data[22:26] = (100).to_bytes(4, "little")
        central = data.rindex(b"PK\x01\x02")
        data[central + 24 : central + 28] = (100).to_bytes(4, "little")
        path.write_bytes(bytes(data))


def write_bad_inputs(folder: Path, token: str) -> None:
    alice = ALICE.read_text(encoding="utf-8")
    write_zip_bomb(folder / "zip_bomb_1gib.zip", declared_small=False)
    write_zip_bomb(folder / "zip_bomb_lying_sizes.zip", declared_small=True)
    with zipfile.ZipFile(folder / "zip_traversal.zip", "w") as zf:
        zf.writestr("answers/answers.py", alice)
        zf.writestr(f"../../{token}-escaped.py", "print('out of the archive')\n")
    with zipfile.ZipFile(folder / "zip_absolute_path.zip", "w") as zf:
        zf.writestr("answers.py", alice)
        zf.writestr(zipfile.ZipInfo(f"/tmp/{token}-absolute.py"), "print('absolute')\n")
    with zipfile.ZipFile(folder / "zip_symlink.zip", "w") as zf:
        zf.writestr("answers/answers.py", alice)
        link = zipfile.ZipInfo("answers/helper.py")
        link.external_attr = (0o120777 << 16) | 0x20  # S_IFLNK
        zf.writestr(link, "/etc/passwd")
    with zipfile.ZipFile(folder / "zip_many_entries.zip", "w") as zf:
        for i in range(600):
            zf.writestr(f"answers/part{i}.py", f"X{i} = {i}\n")
    (folder / "notebook_invalid_json.ipynb").write_text('{"cells": [', encoding="utf-8")
    heading = {"cell_type": "heading", "level": 10**15, "metadata": {}, "source": "x"}  # the upgrade writes "#" * level
    (folder / "notebook_v3_heading_bomb.ipynb").write_text(
        json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": [{"cells": [heading] * 1000}], "metadata": {}}),
        encoding="utf-8",
    )
    (folder / "py_null_byte.py").write_bytes(alice.encode() + b"\n# \x00\n")
    (folder / "py_latin1.py").write_bytes(b"# caf\xe9\n" + alice.encode())
    (folder / "py_too_big.py").write_bytes(alice.encode() + b"#" * (2 << 20) + b"\n")


# --- running the grader --------------------------------------------------------------------------------


def grade_command(paths: list[Path], out: Path) -> list[str]:
    return [
        sys.executable, "-m", "grader.cli", "grade", *map(str, paths), "--out", str(out),
        "--seed", SEED, "--devices", DEVICES, "--timeout", CALL_TIMEOUT,
    ]  # fmt: skip


def grader_environment(tmpdir: Path, token: str) -> dict[str, str]:
    """The grader's environment: its own TMPDIR, and a seed and a secret a learner must never see."""
    tmpdir.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "COLUMNS": "200",
        "ATTNKIT_SEED": SEED,
        "ATTNKIT_SECRET_TOKEN": f"{token}-secret",
    }


@dataclass
class Run:
    out: Path
    tmpdir: Path
    returncode: int
    output: str
    seconds: float

    def rows(self) -> dict[str, dict[str, float]]:
        with (self.out / "grades.csv").open(newline="", encoding="utf-8") as fh:
            table = list(csv.reader(fh))
        header = table[0]
        return {r[0]: {name: float(v) for name, v in zip(header[1:], r[1:]) if name != "status"} for r in table[1:]}

    def lines(self) -> dict[str, bytes]:
        raw = (self.out / "grades.csv").read_bytes().splitlines(keepends=True)
        return {"<header>": raw[0], **{line.split(b",", 1)[0].decode(): line for line in raw[1:]}}

    def query(self, sql: str, *params) -> list[tuple]:
        conn = sqlite3.connect(f"file:{self.out / 'gradebook.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def cases(self, student: str, hook: str | None = None, device: str = "cpu") -> list[tuple[str, str, str]]:
        """(case name, status, message) of a student's cases on ``device`` (of ``hook``, or of every hook)."""
        rows = self.query(
            "SELECT hook, case_name, status, message FROM results WHERE student = ? AND device = ? ORDER BY rowid",
            student,
            device,
        )
        return [(case, status, message) for h, case, status, message in rows if hook is None or h == hook]


def start(paths: list[Path], out: Path, tmpdir: Path, token: str) -> tuple[subprocess.Popen, float]:
    proc = subprocess.Popen(
        grade_command(paths, out),
        cwd=KIT_ROOT,
        env=grader_environment(tmpdir, token),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, time.monotonic()


def finish(proc: subprocess.Popen, started: float, out: Path, tmpdir: Path) -> Run:
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        output += f"\n[the test stopped the grader after {RUN_TIMEOUT} s]"
    return Run(out, tmpdir, proc.returncode, output, time.monotonic() - started)


# --- looking around afterwards ----------------------------------------------------------------------------


def processes_with(needle: str) -> dict[int, str]:
    """Live processes whose command line holds ``needle``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle.encode() in cmd and state not in "ZX":
            found[int(entry.name)] = cmd.replace(b"\0", b" ").decode(errors="replace")[:120]
    return found


def homes() -> list[Path]:
    return [Path(pwd.getpwuid(os.getuid()).pw_dir), Path("/root"), *Path("/home").glob("*")]


def watched_folders(root: Path) -> list[Path]:
    """Where an escaped write would land: the usual places, the kit, this folder, the test's own tree."""
    shallow = [Path("/"), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), *homes(), KIT_ROOT,
               KIT_ROOT / "tests", HERE, SNIPPETS]  # fmt: skip
    deep = [p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()]
    return [p for p in dict.fromkeys(shallow + [root] + deep) if p.is_dir()]


def leftovers(token: str, folders: list[Path]) -> list[Path]:
    """Files named with ``token``, and ``conftest.py`` files holding it, in ``folders``."""
    found = []
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = folder / name
            if token in name:
                found.append(path)
            elif name == "conftest.py" and path.is_file():
                try:
                    if token in path.read_text(encoding="utf-8", errors="replace"):
                        found.append(path)
                except OSError:
                    pass
    return found


def accepted(listener: socket.socket, wait: float) -> list[bytes]:
    """What connected to a listening socket (whatever is in its backlog), and what each sent."""
    got = []
    listener.settimeout(wait)
    while True:
        try:
            conn, _ = listener.accept()
        except (TimeoutError, OSError):
            return got
        with conn:
            conn.settimeout(0.5)
            try:
                got.append(conn.recv(1024))
            except OSError:
                got.append(b"")
        listener.settimeout(0.2)


def datagrams(sock: socket.socket) -> list[bytes]:
    got = []
    sock.settimeout(0.2)
    while True:
        try:
            got.append(sock.recv(1024))
        except (TimeoutError, OSError):
            return got


# --- the module's runs --------------------------------------------------------------------------------------


@dataclass
class World:
    token: str
    isolation: str
    graded: list[str]  # the attacks graded in D2
    class_dir: Path
    d1: Run
    d2: Run
    tcp: list[bytes] = field(default_factory=list)
    udp: list[bytes] = field(default_factory=list)
    unix: list[bytes] = field(default_factory=list)
    processes_left: dict[int, str] = field(default_factory=dict)
    files_left: list[Path] = field(default_factory=list)
    decoy_state: str | None = None

    def report(self, student: str, hook: str = "softmax_weights") -> dict:
        """The JSON an attack put in its error message (``HOSTILE-REPORT {...}``), from its first cpu case."""
        for _case, _status, message in self.d2.cases(student, hook):
            if "HOSTILE-REPORT " in message:
                text = message.split("HOSTILE-REPORT ", 1)[1]
                return json.JSONDecoder().raw_decode(text)[0]
        pytest.fail(f"{student} left no report in {hook}: {self.d2.cases(student, hook)[:2]}")


def needs_isolation(world: World) -> None:
    if not set(FULL_ISOLATION.split("+")) <= set(world.isolation.split("+")):
        pytest.skip(f"isolation here: {world.isolation}")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    with Template() as template:
        isolation = template.isolation()
    root = tmp_path_factory.mktemp("hostile")
    token = f"hostile{uuid.uuid4().hex[:12]}"
    decoy_token = f"{token}-decoy"
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix_path = root / "listener.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(unix_path))
    unix.listen(8)
    decoy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", decoy_token])
    fills = {
        "__HOSTILE_TOKEN__": token,
        "__HOSTILE_TCP_PORT__": str(tcp.getsockname()[1]),
        "__HOSTILE_UDP_PORT__": str(udp.getsockname()[1]),
        "__HOSTILE_UNIX_SOCKET__": str(unix_path),
        "__HOSTILE_DECOY__": decoy_token,
    }
    class_dir = root / "hostile-class"
    class_dir.mkdir()
    full = set(FULL_ISOLATION.split("+")) <= set(isolation.split("+"))
    graded = [a.name for a in ATTACKS if full or not a.isolation]
    for name in graded:
        (class_dir / f"{name}.py").write_text(assemble(name, fills), encoding="utf-8")
    write_bad_inputs(class_dir, token)
    found: list[Path] = []
    graders: list[subprocess.Popen] = []
    try:
        p1, t1 = start([SAMPLE_CLASS], root / "D1", root / "tmp-d1", token)
        graders.append(p1)
        p2, t2 = start([SAMPLE_CLASS, class_dir], root / "D2", root / "tmp-d2", token)
        graders.append(p2)
        d2 = finish(p2, t2, root / "D2", root / "tmp-d2")
        d1 = finish(p1, t1, root / "D1", root / "tmp-d1")
        w = World(token, isolation, graded, class_dir, d1, d2)
        w.tcp = accepted(tcp, 1.0)
        w.udp = datagrams(udp)
        w.unix = accepted(unix, 0.2)
        deadline = time.monotonic() + 5
        w.processes_left = processes_with(token)
        w.processes_left.pop(decoy.pid, None)
        while w.processes_left and time.monotonic() < deadline:
            time.sleep(0.1)
            w.processes_left = processes_with(token)
            w.processes_left.pop(decoy.pid, None)
        w.decoy_state = (proc_stat(decoy.pid) or ('?',))[0] if decoy.poll() is None else None
        found = leftovers(token, watched_folders(root))
        w.files_left = found
        yield w
    finally:
        for proc in [*graders, decoy]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for sock in (tcp, udp, unix):
            sock.close()
        for pid in processes_with(token):  # what our own hostile submissions left running, by pid
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for path in found:  # what they managed to write outside (only ever files named with, or holding, our token)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def graded_attack(world: World, attack: Attack) -> None:
    if attack.isolation:
        needs_isolation(world)
    assert attack.name in world.graded


# --- the run completes, and the sample class grades as it does alone (issue 6, "Done when") -----------------


def test_both_runs_complete(world):
    assert world.d1.returncode == 0, world.d1.output[-3000:]
    assert world.d2.returncode == 0, world.d2.output[-3000:]
    expected = {read_submission(p).student for p in class_members(SAMPLE_CLASS)}
    assert set(world.d1.rows()) == expected
    hostile = set(world.graded) | {Path(name).stem for name in BAD_INPUTS}
    assert set(world.d2.rows()) == expected | hostile
    assert world.d2.query("SELECT count(*) FROM runs WHERE finished_at IS NOT NULL") == [(1,)]


def test_sample_class_grades_the_same_with_the_hostile_suite_beside_it(world):
    """The issue's first "Done when": the sample students' rows of D2 equal D1's, byte for byte."""
    d1, d2 = world.d1.lines(), world.d2.lines()
    assert d2["<header>"] == d1["<header>"]
    differing = {s: (d1[s], d2.get(s)) for s in d1 if d2.get(s) != d1[s]}
    assert differing == {}, f"the sample class graded differently beside the hostile suite: {differing}"


def test_the_grader_reports_the_isolation_it_had(world):
    (recorded,) = world.d2.query("SELECT isolation FROM runs")
    assert recorded == (world.isolation,)
    assert f"isolation: {world.isolation}" in " ".join(world.d2.output.split())


# --- each attack earns nothing on what it attacks, and loses nothing elsewhere ------------------------------


@pytest.mark.parametrize("attack", ZERO_ATTACKS, ids=lambda a: a.name)
def test_attack_earns_nothing_on_what_it_attacks(world, attack):
    graded_attack(world, attack)
    row = world.d2.rows()[attack.name]
    hooks = attack.hooks or HOOK_NAMES
    assert {h: row[h] for h in hooks} == {h: 0.0 for h in hooks}
    for hook in hooks:
        cases = world.d2.cases(attack.name, hook)
        assert cases, f"no cpu case of {hook} was recorded"
        assert [c for c, status, _ in cases if status == "passed"] == []
        unexplained = [m for _, _, m in cases if not any(p in m for p in attack.phrases)]
        assert unexplained == [], f"{hook}: failed for another reason than {attack.phrases}"


@pytest.mark.parametrize("attack", SINGLE_HOOK_ATTACKS, ids=lambda a: a.name)
def test_attack_keeps_full_marks_on_every_other_hook(world, rubric, attack):
    graded_attack(world, attack)
    row = world.d2.rows()[attack.name]
    others = [h for h in HOOK_NAMES if h not in attack.hooks]
    assert {h: row[h] for h in others} == {h: rubric.points[h] for h in others}


def test_caching_outputs_fails_every_again_case(world, rubric):
    """A cache keyed by shape passes a shape's first case and fails the same shape with fresh values.

    Cases of different names may share a shape (``large-logits`` and ``masked`` do), so the cache can
    fail a first-seen case too; what matters is that no "-again" case passes and that it costs points.  Its
    first answers' values are right; their gradient pass, which calls it again, gets the cached tensor.
    """
    attack = BY_NAME["caches_outputs"]
    row = world.d2.rows()[attack.name]
    for hook in attack.hooks:
        cases = world.d2.cases(attack.name, hook)
        again = [(c, s) for c, s, _ in cases if c.endswith("-again")]
        assert again, f"{hook} has no -again case"
        assert {s for _, s in again} == {"failed"}, f"{hook}: a cached output passed a fresh-values case"
        # and the gradient pass (issue 23) calls it again: a cached answer does not depend on its input
        cut = "the gradient does not reach"
        assert [m for _, s, m in cases if s == "failed" and "values differ" not in m and cut not in m] == []
        first = [(s, m) for c, s, m in cases if not c.endswith("-again")]
        assert any(s == "passed" or cut in m for s, m in first), f"{hook}: the cache's first values should be right"
        assert row[hook] < rubric.points[hook]


def test_returning_an_alias_with_in_place_changes_fails_wherever_the_input_changed(world):
    """The only cases it may pass are those where the right answer equals the input (T = 1): there its
    in-place ops change nothing, and returning the input is what a copy would have returned."""
    attack = BY_NAME["returns_input_alias"]
    (hook,) = attack.hooks
    cases = world.d2.cases(attack.name, hook)
    passed = {c for c, s, _ in cases if s == "passed"}
    assert passed <= {"T=1"}, f"passed with its input overwritten: {passed}"
    assert [m for _, s, m in cases if s == "failed" and attack.phrases[0] not in m] == []
    assert len(cases) - len([c for c, _, _ in cases if c == "T=1"]) >= 10


# --- no seed, no secret -------------------------------------------------------------------------------------


def test_learner_environment_holds_no_seed_and_no_secret(world):
    seen = world.report("seed_from_env")
    assert seen["env_keys"] == sorted(child_environment("x"))
    assert not [k for k in seen["env_keys"] if "ATTNKIT" in k]


def test_learner_cannot_read_any_other_process_environment(world):
    needs_isolation(world)
    seen = world.report("seed_from_env")
    assert seen["found"] == {}, f"the learner's process read the grader's environment: {seen['found']}"


def test_learner_cannot_read_the_seed_from_command_lines(world):
    """The seed is on the grader's command line (``--seed 11``); /proc/<pid>/cmdline is the host's."""
    seen = world.report("seed_from_cmdline")
    assert seen["seeds"] == [], (
        f"the learner's process read the seed {seen['seeds']} from /proc/<pid>/cmdline; "
        f"grader command lines it saw: {seen['grader_cmdlines']}"
    )


# --- fake output, patched pytest ----------------------------------------------------------------------------


PRINTED_SHOWN_IN = {"output.txt", "class.md", "class.html", "gradebook.sqlite"}
"""Where what a learner's process printed is kept and shown, as that (issue 13: the class report's "What learners
printed", linking each student's output.txt), inert; never in grades, results, junit or feedback."""


def test_fake_output_reaches_neither_the_console_nor_any_report(world):
    mark = f"{world.token}-FAKE"
    assert mark not in world.d2.output
    carrying = {p.name for p in world.d2.out.rglob("*") if p.is_file() and mark.encode() in p.read_bytes()}
    assert "output.txt" in carrying, "what the learner printed is not kept in its output.txt"
    assert carrying <= PRINTED_SHOWN_IN, carrying - PRINTED_SHOWN_IN


def test_patching_pytest_changes_nothing(world):
    patched = world.report("patches_pytest")["patched"]
    assert len(patched) == 5, f"the attack could not patch _pytest here: {patched}"  # it did run


# --- the reference stays out of reach -----------------------------------------------------------------------


def test_no_kit_object_or_module_in_the_learner_process(world):
    assert world.report("hunt_gc")["found"] == []
    assert world.report("hunt_gc")["scanned"] > 1000
    assert world.report("hunt_sys_modules")["suspects"] == []


@pytest.mark.parametrize("hunt", ["hunt_relative_paths", "hunt_importlib"])
def test_the_hunt_knew_the_kit_root_and_still_found_nothing(world, hunt):
    needs_isolation(world)
    seen = world.report(hunt)
    assert seen["kit_root"] == str(KIT_ROOT), "the attack did not learn the kit root (it should, from its cmdline)"
    if hunt == "hunt_importlib":
        assert any(e.startswith("spec_from_file_location") for e in seen["errors"]), seen


def test_proc_gives_away_no_file_of_the_kit_or_the_class(world):
    needs_isolation(world)
    seen = world.report("hunt_proc_cmdline")
    assert str(KIT_ROOT) in seen["roots"]
    assert seen["opened"] == []
    ours = (str(KIT_ROOT), str(world.class_dir.parent))
    assert [entry for entry in seen["listed"] if entry.startswith(ours)] == []


# --- nothing written outside, no socket reached, no process left, no signal delivered -----------------------


def test_writes_outside_the_working_folder_all_fail(world):
    needs_isolation(world)
    seen = world.report("writes_outside")
    assert {"cwd:file", "home-env:file"} <= set(seen["ok"]), "writing inside its own folder should work"
    assert seen["refused"] >= 40, seen
    assert [k for k in seen["ok"] if k.split(":")[0] not in INSIDE] == []


def test_conftest_files_land_nowhere_outside(world):
    needs_isolation(world)
    seen = world.report("writes_conftest")
    for when in ("at_import", "in_call"):
        escaped = {k: v for k, v in seen[when].items() if k not in INSIDE and v == "ok"}
        assert escaped == {}, f"{when}: {escaped}"  # kit-conftest-append included: the kit's own conftest.py


def test_no_file_is_left_outside_the_sandbox(world):
    assert world.files_left == [], f"files left behind: {world.files_left}"
    for run in (world.d1, world.d2):  # the learners' working folders and the template's home are gone
        left = [p.name for p in run.tmpdir.iterdir() if p.name.startswith("attnkit")]
        assert left == [], f"the grader left its temporary folders in {run.tmpdir}"


def test_no_tcp_or_udp_reaches_a_listener_on_loopback(world):
    needs_isolation(world)
    outcome = world.report("tcp_connect")
    assert world.tcp == [] and world.udp == [], f"the listeners got {world.tcp + world.udp}"
    assert [k for k, v in outcome.items() if v in ("connected", "sent")] == [], outcome


def test_no_unix_socket_outside_is_reached(world):
    """Beyond the issue's letter: a Unix socket by path (docker.sock, an ssh agent, D-Bus) is a way out too."""
    needs_isolation(world)
    outcome = world.report("unix_socket_connect")
    assert world.unix == [], f"a listener on {world.class_dir.parent / 'listener.sock'} got {world.unix} ({outcome})"


def test_no_background_process_outlives_the_run(world):
    needs_isolation(world)
    started = world.report("background_processes")
    assert all(isinstance(v, int) or v == "forked" for v in started.values()), f"nothing was started: {started}"
    assert world.processes_left == {}, f"still running after the run: {world.processes_left}"
    # while they run, no later call of that process gains anything: each says what the learner's code started
    cases = [c for hook in HOOK_NAMES if hook not in SOFTMAX for c in world.d2.cases("background_processes", hook)]
    later = [message for _, status, message in cases if status != "passed"]
    assert later and all("your code started a process" in m for m in later), later[:3]


def test_no_signal_reaches_a_process_outside(world):
    needs_isolation(world)
    outcome = world.report("signals_decoy")
    # with a /proc of its own PID namespace the attack cannot even see the decoy; where it can, signals must fail
    assert outcome["targets"] == 0 or set(outcome.values()) - {outcome["targets"]} <= {
        "ProcessLookupError",
        "PermissionError",
    }, outcome
    assert world.decoy_state not in (None, "T", "t"), f"the decoy was stopped or killed: {world.decoy_state}"
    assert "delivered" not in outcome.values(), outcome


# --- hostile inputs: zip bombs, traversal, links, broken notebooks and .py files ----------------------------


@pytest.mark.parametrize("name", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_is_a_clear_error_row(world, rubric, name):
    student = Path(name).stem
    ((error,),) = world.d2.query("SELECT error FROM submissions WHERE student = ?", student)
    assert error and BAD_INPUTS[name] in error, error
    row = world.d2.rows()[student]
    assert row["total"] == 0.0 and row["max"] == rubric.max_total
    assert (world.d2.out / student / "feedback.md").is_file()


# --- odd student ids ----------------------------------------------------------------------------------------

MINIMAL = "def dot_product_scores(queries, keys):\n    return queries @ keys.transpose(-2, -1)\n"
ODD_NAMES = [
    "a b.py",
    "José Ñúñez.py",
    "学生.py",
    "..\\..\\x.py",
    "...py",
    "-rf.py",
    "new\nline.py",
    "x" * 200 + ".py",
    "Alice.py",
    "alice.py",
]


@pytest.fixture(scope="module")
def odd(tmp_path_factory) -> tuple[Run, list[str], Path]:
    root = tmp_path_factory.mktemp("odd-ids")
    folder = root / "odd"
    (folder / "sub").mkdir(parents=True)
    for name in ODD_NAMES:
        (folder / name).write_text(MINIMAL, encoding="utf-8")
    # paths as an instructor might type them: with ../ inside, and relative ones that climb
    paths = [folder / name for name in ODD_NAMES] + [folder / "sub" / ".." / "-rf.py"]
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    token = f"odd{uuid.uuid4().hex[:8]}"
    proc, started = start(paths, root / "OUT", root / "tmp", token)
    run = finish(proc, started, root / "OUT", root / "tmp")
    after = sorted(p.relative_to(root) for p in root.rglob("*"))
    appeared = [str(p) for p in after if p not in before and p.parts[0] not in ("OUT", "tmp")]
    return run, appeared, root


def test_odd_ids_are_sanitised_and_stay_inside_out(odd):
    run, appeared, _root = odd
    assert run.returncode == 0, run.output[-3000:]
    ids = list(run.rows())
    assert len(ids) == len(ODD_NAMES) + 1
    assert len({i.lower() for i in ids}) == len(ids), f"two submissions share an id: {ids}"
    for student in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}", student), student
        folder = (run.out / student).resolve()
        assert folder.parent == run.out.resolve() and (folder / "feedback.md").is_file()
    assert appeared == [], f"written outside --out: {appeared}"
    assert [p.name for p in run.tmpdir.iterdir() if p.name.startswith("attnkit")] == []


RESERVED = ["grades.csv.py", "junit.xml.py", "gradebook.sqlite.py"]


@pytest.fixture(scope="module")
def reserved(tmp_path_factory) -> Run:
    root = tmp_path_factory.mktemp("reserved-ids")
    folder = root / "class"
    folder.mkdir()
    for name in RESERVED + ["ada.py"]:
        (folder / name).write_text(MINIMAL, encoding="utf-8")
    proc, started = start([folder], root / "OUT", root / "tmp", "reserved")
    return finish(proc, started, root / "OUT", root / "tmp")


def test_ids_named_like_the_grader_own_files_do_not_break_the_run(reserved):
    """A learner's file ``grades.csv.py`` has the id ``grades.csv``: its folder must not be the class's grades.csv."""
    assert reserved.returncode == 0, reserved.output[-1500:]
    assert (reserved.out / "grades.csv").is_file() and (reserved.out / "junit.xml").is_file()
    assert len(reserved.rows()) == len(RESERVED) + 1
    for student in reserved.rows():
        assert (reserved.out / student / "feedback.md").is_file()
