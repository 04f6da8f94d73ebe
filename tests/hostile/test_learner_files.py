"""Issue 21 §1: the trusted side never opens, stats, lists or removes a name inside a folder a learner can write.

The learner's process owns its work folder (``<tmp>/attnkit-child-XXXX/work``)
and everything in it.  What the grader reads of it comes through descriptors
it made itself (the capture file of fds 1 and 2, a memfd), and the folder is
reclaimed by a guardian whose walker has the learner's credentials
(``grader/instructor/reclaim.py``).  The attacks, written as a learner would:

- ``output.txt`` (and every other name) a symbolic link to a 0600 file of the
  grader's; a hard link to it; a FIFO named ``output.txt``;
- several MB in a folder it then ``chmod 000``s, nested deep, with a link out;
- its own work folder renamed away and replaced by a link to a folder of the grader's.

Each runs in a real child (``Template().spawn``), with every layer and with
no namespace and no Landlock (the learner then writes the real folder, as
the sandbox uid), then as a class graded by ``attnkit grade`` under an audit
hook (``sys.addaudithook``) that records every ``open``/``os.*``/``shutil.*``
event of the trusted process on a path inside a work folder.  Checked: no
secret byte reaches what the grader returns, writes or records; nothing the
grader owns is changed; nothing stalls (the next student is graded, SIGTERM
ends the run promptly); nothing is left in the temporary folder.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from learner_code import alice_with

from grader.child import serve as child_serve
from grader.child.contain import SANDBOX_UID
from grader.instructor import reclaim, sandbox
from grader.instructor.sandbox import Folder, Limits, Template

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd, pidfd, /proc: Linux only"),
]

HERE = Path(__file__).resolve().parent
KIT_ROOT = HERE.parents[1]
ROOT = os.geteuid() == 0
FAST = Limits(call_seconds=10, submission_seconds=60)
NO_WALLS = ("namespaces", "landlock")  # the learner writes the real folder, confined by its uid alone
WALLS = [pytest.param((), id="every-layer"), pytest.param(NO_WALLS, id="no-namespace-no-landlock")]

# --- the attacks, as a learner writes them ------------------------------------------------------------------

ATTACKS = {
    "symlink_output": """
        def attack(secret, decoy):
            done = []
            for name in ("output.txt", "stdout.txt", "feedback.html", "result.json", "printed.txt"):
                if os.path.lexists(name):
                    os.remove(name)
                os.symlink(secret, name)
                done.append(name)
            return done
        """,
    "fifo_output": """
        def attack(secret, decoy):
            for name in ("output.txt", "stderr.txt"):
                if os.path.lexists(name):
                    os.remove(name)
                os.mkfifo(name)
            return sorted(n for n in os.listdir(".") if stat.S_ISFIFO(os.lstat(n).st_mode))
        """,
    "hard_link": """
        def attack(secret, decoy):
            done = []
            for target, name in ((secret, "output.txt"), (os.path.join(decoy, "keep.txt"), "linked.txt")):
                try:
                    os.link(target, name)
                    done.append(name)
                except OSError as exc:
                    done.append(f"{name}: {exc.strerror}")
            return done
        """,
    "chmod_hoard": """
        def attack(secret, decoy):
            def close(path):  # seccomp refuses chmod; without it the folder is closed to an unprivileged grader
                try:
                    os.chmod(path, 0)
                except PermissionError:
                    pass

            path = "hoard"
            for depth in range(60):  # deeper than the walker keeps open: it flattens
                path = os.path.join(path, "d")
            os.makedirs(path)
            for i in range(3):
                with open(os.path.join("hoard", f"blob{i}"), "wb") as fh:
                    fh.write(os.urandom(1 << 20) * 2)
            os.symlink(decoy, os.path.join("hoard", "out"))
            os.symlink(decoy, os.path.join(path, "out"))
            os.mkfifo(os.path.join(path, "pipe"))
            close(path)
            for _ in range(30):
                path = os.path.dirname(path)
                close(path)
            close("hoard")
            return ["hoard"]
        """,
    "swap_workdir": """
        def attack(secret, decoy):
            here = os.getcwd()
            tried = []
            for step in (lambda: os.rename(here, here + "-moved"),
                         lambda: os.rename(os.path.dirname(here), os.path.dirname(here) + "-moved"),
                         lambda: os.symlink(decoy, os.path.join(os.path.dirname(here), "elsewhere"))):
                try:
                    step()
                    tried.append("done")
                except OSError as exc:
                    tried.append(exc.strerror)
            if tried[0] == "done":
                os.symlink(decoy, here)  # where the grader looks for the folder, a link to one of its own
            os.symlink(decoy, "decoy")
            os.symlink("/", "root")
            return tried
        """,
}
HEADER = "import os\nimport stat\n"


def probe_source(attack: str) -> str:
    """A child's probe: run the attack, print a line, return what it did as JSON bytes."""
    return (
        HEADER
        + textwrap.dedent(ATTACKS[attack])
        + textwrap.dedent(
            """
        import json
        import torch

        def probe(secret, decoy):
            print("learner was here")
            done = attack(secret, decoy)
            return torch.tensor(list(json.dumps(done).encode()), dtype=torch.uint8)
        """
        )
    )


# --- the grader's own files, which nothing of a learner's may reach ---------------------------------------


@pytest.fixture(scope="module")
def grader_files():
    """A 0600 secret and a decoy folder (anyone may write it) of the grader's, in a folder a learner may traverse."""
    base = Path(tempfile.mkdtemp(prefix="attnkit-files-test-"))
    base.chmod(0o711)
    secret = base / "secret" / "grader-secret.txt"
    secret.parent.mkdir(mode=0o700)
    token = f"attnkit-secret-{uuid.uuid4().hex}"
    secret.write_text(token + "\n")
    secret.chmod(0o600)
    decoy = base / "decoy"
    decoy.mkdir()
    decoy.chmod(0o777)  # so that only a walker that follows a link could empty it
    (decoy / "keep.txt").write_text("the grader's\n")
    (decoy / "keep.txt").chmod(0o666)
    tmp = base / "tmp"
    tmp.mkdir()
    tmp.chmod(0o711)
    yield {"base": base, "secret": secret, "token": token, "decoy": decoy, "tmp": tmp}
    shutil.rmtree(base, ignore_errors=True)


def children_left(files) -> list[str]:
    return [name for name in os.listdir(files["tmp"]) if name.startswith("attnkit-child-")]


def intact(files) -> None:
    assert files["secret"].read_text() == files["token"] + "\n"
    assert sorted(os.listdir(files["decoy"])) == ["keep.txt"], "a walk followed a learner's link"
    assert (files["decoy"] / "keep.txt").read_text() == "the grader's\n"


@pytest.fixture(scope="module")
def template(grader_files):
    """A template whose children's folders go in the test's own temporary folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "tempdir", str(grader_files["tmp"]))
        with Template(warm_meta=False, warm_figures=False) as tpl:
            yield tpl


def run_attack(template, files, attack: str, without=()) -> tuple[object, str, float]:
    child = template.spawn(FAST, without=without)
    outer = child.workdir.parent
    try:
        child.send({"op": "load", "files": {"probe.py": probe_source(attack)}, "entry": "probe.py", "hooks": ["probe"]})
        header, _ = child.receive(FAST.load_seconds)
        assert "probe" in header.get("hooks", {}), header
        args = {"secret": {"value": str(files["secret"])}, "decoy": {"value": str(files["decoy"])}}
        child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": args}]})
        header, blob = child.receive(FAST.call_seconds)
        from safetensors.torch import load

        assert header.get("ok"), header
        done = json.loads(bytes(load(blob)["out0"].tolist()).decode())
        began = time.monotonic()
        printed = child.output()
    finally:
        child.close()
    seconds = time.monotonic() - began
    assert not outer.exists(), f"{outer} survived close(): {sorted(os.listdir(outer))}"
    return done, printed, seconds


@pytest.mark.slow
@pytest.mark.parametrize("without", WALLS)
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_the_work_folder_gains_nothing(template, grader_files, attack, without):
    if without and not ROOT:
        pytest.skip("an unprivileged grader's child without namespaces has the grader's own uid: no wall left")
    done, printed, seconds = run_attack(template, grader_files, attack, without)
    assert "learner was here" in printed, printed
    assert grader_files["token"] not in printed
    assert seconds < 5, f"reading and reclaiming took {seconds:.1f} s"
    intact(grader_files)
    assert children_left(grader_files) == [], "something of the child's is left in the temporary folder"
    if attack == "symlink_output":
        assert done and all(not d.startswith("output.txt:") for d in done)  # the links were made
    if attack == "fifo_output":
        assert done == ["output.txt", "stderr.txt"], done
    if attack == "swap_workdir":
        assert done[:2] == ["Permission denied"] * 2 or "mount-ns" in template.isolation(), done
    # the template is not stalled: the next child is served
    child = template.spawn(FAST)
    try:
        child.send({"op": "hello"})
        assert child.receive(10)[0]["pid"]
    finally:
        child.close()


def test_what_a_child_prints_is_read_through_the_graders_own_descriptor(template):
    """A capture file with no name: removing or replacing any name in the folder changes nothing of it."""
    child = template.spawn(FAST, without=NO_WALLS if ROOT else ())
    try:
        source = "import os, sys, torch\ndef probe():\n    print('kept')\n    sys.stdout.flush()\n"
        source += "    for n in os.listdir('.'):\n        os.remove(n) if not os.path.isdir(n) else None\n"
        source += "    open('output.txt', 'w').write('forged')\n    return torch.zeros(1)\n"
        child.send({"op": "load", "files": {"probe.py": source}, "entry": "probe.py", "hooks": ["probe"]})
        child.receive(FAST.load_seconds)
        child.send({"op": "call", "calls": [{"id": 0, "hook": "probe", "args": {}}]})
        assert child.receive(FAST.call_seconds)[0]["ok"]
        assert stat.S_ISREG(os.fstat(child.capture).st_mode) and os.fstat(child.capture).st_nlink == 0
        assert child.output() == "kept\n"
    finally:
        child.close()
    assert child.output() == "kept\n", "close() keeps what was printed"


def test_a_failure_before_the_learner_runs_is_noted_in_the_capture_file():
    fd = sandbox.capture_file()
    try:
        try:
            raise RuntimeError("the sandbox could not be set up")
        except RuntimeError:
            child_serve._note_failure(fd)
        assert b"RuntimeError: the sandbox could not be set up" in os.pread(fd, 1 << 16, 0)
    finally:
        os.close(fd)


# --- the walker on its own -----------------------------------------------------------------------------------


def test_the_walker_removes_closed_folders_and_follows_no_link(grader_files, monkeypatch):
    """A guardian on its own: links removed, not followed; 000 folders opened; a FIFO unlinked; deep trees flattened."""
    monkeypatch.setattr(tempfile, "tempdir", str(grader_files["tmp"]))
    learner = SANDBOX_UID if ROOT else -1
    folder = Folder("attnkit-child-", learner)
    top = folder.path
    deep = top / "a"
    for i in range(reclaim.MAX_DEPTH * 3):
        deep = deep / f"{i}"
    deep.mkdir(parents=True)
    (deep / "f").write_bytes(b"x" * 1000)
    os.symlink(grader_files["decoy"], deep / "link")
    os.symlink(grader_files["decoy"] / "keep.txt", top / "file-link")
    os.mkfifo(top / "fifo")
    os.link(grader_files["decoy"] / "keep.txt", top / "hard")
    made = [top, *[p for p in deep.parents if top in p.parents], deep]
    if ROOT:  # as the learner would have them: its own
        for path in [*made, deep / "f", deep / "link", top / "file-link", top / "fifo"]:
            os.chown(path, learner, learner, follow_symlinks=False)
    for path in reversed(made[1:]):
        path.chmod(0)
    assert folder.release(), "the guardian did not report the folder reclaimed"
    assert not folder.outer.exists()
    intact(grader_files)
    assert os.stat(grader_files["decoy"] / "keep.txt").st_nlink == 1


def test_a_guardian_reclaims_the_folder_when_the_grader_dies(grader_files):
    """No ``release()``: the guardian sees its pipe close with the process that held it, and reclaims anyway."""
    script = textwrap.dedent(
        f"""
        import os, sys, tempfile
        sys.path.insert(0, {str(KIT_ROOT)!r})
        tempfile.tempdir = {str(grader_files["tmp"])!r}
        from grader.instructor.sandbox import Folder
        folder = Folder("attnkit-child-", -1)
        (folder.path / "sub").mkdir()
        (folder.path / "sub" / "f").write_text("x")
        os.chmod(folder.path / "sub", 0)
        print(folder.outer, flush=True)
        os.kill(os.getpid(), 9)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    outer = Path(done.stdout.strip())
    deadline = time.monotonic() + 10
    while outer.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not outer.exists(), "the guardian did not reclaim the folder of a grader that died"


# --- the invariant, mechanically ------------------------------------------------------------------------------

AUDITED = ("open", "os.", "shutil.", "glob.", "pathlib.")


def test_the_audit_hook_sees_a_trusted_open_inside_a_work_folder(tmp_path):
    """The hook the class run uses is not blind: it flags opens, listings and removals, by name and by descriptor."""
    hook = tmp_path / "hook.py"
    hook.write_text(AUDIT_HOOK)
    work = tmp_path / "attnkit-child-x" / "work"
    code = textwrap.dedent(
        f"""
        import os, runpy, sys
        runpy.run_path({str(hook)!r})
        work = {str(work)!r}
        os.makedirs(work)
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
        open(os.path.join(work, "output.txt"), "w").close()
        os.listdir(fd)
        os.remove("output.txt", dir_fd=fd)
        """
    )
    log = tmp_path / "events.jsonl"
    env = {**os.environ, "ATTNKIT_AUDIT_LOG": str(log), "TMPDIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events == ["open", "os.listdir", "os.remove"], events


AUDIT_HOOK = r'''
import json, os, sys

_log = os.open(os.environ["ATTNKIT_AUDIT_LOG"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
_tmp = os.path.realpath(os.environ["TMPDIR"])
_busy = [False]


def _resolve(path, dir_fd=None):
    """The absolute path an event names, relative ones against their dir_fd or the working folder."""
    if isinstance(path, int):
        try:
            return os.readlink(f"/proc/self/fd/{path}")
        except OSError:
            return None
    try:
        path = os.fsdecode(path)
    except TypeError:
        return None
    if not os.path.isabs(path):
        base = os.readlink(f"/proc/self/fd/{dir_fd}") if isinstance(dir_fd, int) and dir_fd >= 0 else os.getcwd()
        path = os.path.join(base, path)
    return os.path.normpath(path)


_LISTING = ("os.listdir", "os.scandir", "os.fwalk", "shutil.rmtree", "glob.glob", "pathlib.Path.glob")


def _inside_work(path, listing):
    """Under ``<TMPDIR>/attnkit-child-*/work/``; a listing of the folder itself too (itself is the grader's entry)."""
    if not path or not path.startswith(_tmp + os.sep):
        return False
    parts = path[len(_tmp) + 1 :].split(os.sep)
    if len(parts) < 2 or not parts[0].startswith("attnkit-child-") or parts[1] != "work":
        return False
    return len(parts) > 2 or listing


def _hook(event, args):
    if _busy[0] or not event.startswith(("open", "os.", "shutil.", "glob.", "pathlib.")) or event == "os.exec":
        return
    _busy[0] = True
    try:
        dir_fds = {"os.remove": 1, "os.rmdir": 1, "os.chmod": 2, "os.chown": 3, "os.mkdir": 2, "os.symlink": 2,
                   "os.rename": 2, "os.link": 2, "os.utime": 3, "shutil.rmtree": 1}
        named = [a for a in args if isinstance(a, (str, bytes, os.PathLike, int))][:2]
        if event == "open":
            named = args[:1]
        dir_fd = args[dir_fds[event]] if event in dir_fds and len(args) > dir_fds[event] else None
        for path in named:
            if isinstance(path, int) and event == "open":
                continue  # open() of a descriptor already held
            resolved = _resolve(path, dir_fd)
            if _inside_work(resolved, event in _LISTING):
                os.write(_log, (json.dumps({"event": event, "path": resolved}) + "\n").encode())
    except Exception as exc:
        os.write(_log, (json.dumps({"event": "hook-error", "path": repr(exc)}) + "\n").encode())
    finally:
        _busy[0] = False


sys.addaudithook(_hook)
'''


def write_class(folder: Path, files) -> list[str]:
    """Alice's solution with each attack run at import time, and an honest student graded after them."""
    fills = {"secret": str(files["secret"]), "decoy": str(files["decoy"])}
    students = []
    for attack in sorted(ATTACKS):
        code = HEADER + textwrap.dedent(ATTACKS[attack])
        code += f"\nprint('learner was here')\nattack({fills['secret']!r}, {fills['decoy']!r})\n"
        (folder / f"{attack}.py").write_text(alice_with(None) + "\n\n" + code, encoding="utf-8")
        students.append(attack)
    (folder / "zoe.py").write_text(alice_with(None), encoding="utf-8")
    return [*students, "zoe"]


def grade_under_audit(tmp_path: Path, files, class_dir: Path, extra_env=None, signal_after=None):
    """``attnkit grade`` with the audit hook in the grader; (completed-or-killed process, events, out, seconds)."""
    hook = tmp_path / "hook.py"
    hook.write_text(AUDIT_HOOK)
    runner = tmp_path / "grade.py"
    runner.write_text(
        f"import runpy, sys\nrunpy.run_path({str(hook)!r})\nsys.argv = ['attnkit', *sys.argv[1:]]\n"
        "from grader.cli import main\nsys.exit(main())\n"
    )
    log = tmp_path / "events.jsonl"
    log.touch()
    tmp = files["base"] / f"run-{uuid.uuid4().hex[:8]}"  # this run's own: the module's template lives in files["tmp"]
    tmp.mkdir(mode=0o711)
    out = tmp_path / "out"
    env = {**os.environ, "ATTNKIT_AUDIT_LOG": str(log), "TMPDIR": str(tmp), **(extra_env or {})}
    command = [sys.executable, str(runner), "grade", str(class_dir), "--out", str(out), "--seed", "3",
               "--devices", "cpu", "--jobs", "1", "--timeout", "30"]  # fmt: skip
    began = time.monotonic()
    printed = tmp_path / "printed.txt"
    with printed.open("w") as sink:
        proc = subprocess.Popen(command, cwd=KIT_ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        if signal_after is not None:
            signal_after(proc, tmp)
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run stalled (300 s): {printed.read_text(errors='replace')[-2000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seconds = time.monotonic() - began
    text = printed.read_text(errors="replace")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return proc, text, events, out, seconds, tmp


def _everything_under(folder: Path) -> bytes:
    data = b""
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data += path.read_bytes()
    return data


@pytest.mark.slow
def test_a_class_of_attacks_is_graded_without_the_grader_touching_a_learners_name(tmp_path, grader_files):
    class_dir = tmp_path / "class"
    class_dir.mkdir()
    students = write_class(class_dir, grader_files)
    proc, text, events, out, _, tmp = grade_under_audit(tmp_path, grader_files, class_dir)
    assert proc.returncode == 0, text[-3000:]
    assert events == [], f"the trusted process touched names inside a learner's folder: {events[:10]}"
    grades = (out / "grades.csv").read_text()
    for student in students:
        assert student in grades, f"{student} was not graded:\n{grades}"
    zoe = next(line for line in grades.splitlines() if line.startswith("zoe"))
    alice_like = next(line for line in grades.splitlines() if line.startswith("symlink_output"))
    assert zoe.split(",")[1:] == alice_like.split(",")[1:], "an attack at import time changed a grade"
    assert "learner was here" in (out / "symlink_output" / "output.txt").read_text()
    assert grader_files["token"].encode() not in _everything_under(out), "a secret byte reached the out folder"
    assert grader_files["token"] not in text
    intact(grader_files)
    assert os.listdir(tmp) == [], "a run left something in its temporary folder"


@pytest.mark.slow
def test_sigterm_ends_a_run_whose_learner_left_a_fifo_promptly(tmp_path, grader_files):
    class_dir = tmp_path / "class"
    class_dir.mkdir()
    code = HEADER + textwrap.dedent(ATTACKS["fifo_output"]) + "\nattack('', '')\nimport time\ntime.sleep(120)\n"
    (class_dir / "fifo_then_sleep.py").write_text(alice_with(None) + "\n\n" + code, encoding="utf-8")
    timing = {}

    def terminate_once_in_flight(proc, tmp):
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline and proc.poll() is None:
            if any(name.startswith("attnkit-child-") for name in os.listdir(tmp)):
                break
            time.sleep(0.05)
        time.sleep(2.0)  # the learner has made its FIFO and sleeps
        timing["sent"] = time.monotonic()
        proc.send_signal(signal.SIGTERM)

    proc, text, events, out, _, tmp = grade_under_audit(
        tmp_path, grader_files, class_dir, signal_after=terminate_once_in_flight
    )
    seconds = time.monotonic() - timing["sent"]
    assert proc.returncode in (130, 143, -signal.SIGTERM), text[-3000:]
    assert seconds < 5, f"the run took {seconds:.1f} s to end after SIGTERM"
    assert events == [], events[:10]
    deadline = time.monotonic() + 5
    while os.listdir(tmp) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.listdir(tmp) == [], "a stopped run left something in its temporary folder"


# --- the code path, where the audit hook is blind (os.stat is no audit event) ---------------------------------


def _uses_of(tree: ast.AST, name: str) -> list[ast.AST]:
    return [n for n in ast.walk(tree) if (isinstance(n, ast.Name) and n.id == name)
            or (isinstance(n, ast.Attribute) and n.attr == name)]  # fmt: skip


def test_no_trusted_module_builds_a_path_from_a_work_folder():
    """In ``grader/instructor``, ``workdir`` only goes to the child's config, its environment and ``Child``."""
    for path in sorted((KIT_ROOT / "grader" / "instructor").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for use in _uses_of(tree, "workdir"):
            parent = parents.get(use)
            allowed = (
                (isinstance(parent, ast.Call) and getattr(parent.func, "id", "") in ("str", "Child"))
                or isinstance(parent, ast.AnnAssign)
                or (isinstance(parent, ast.Assign) and use in parent.targets)
            )
            assert allowed, f"{path.name}:{use.lineno}: {ast.get_source_segment(text, parent)}"
        if path.name == "sandbox.py":
            assert "rmtree" not in text
            names = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            assert not any("output.txt" in v for v in names if not v.startswith(("The", "One", "A ")))


def test_the_template_touches_no_childs_folder():
    source = inspect.getsource(child_serve.serve_template)
    for word in ("workdir", "rmtree", "output.txt", "getcwd"):
        assert word not in source, word


def test_a_folder_is_made_in_a_folder_of_the_graders(grader_files, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(grader_files["tmp"]))
    folder = Folder("attnkit-child-", -1)
    try:
        assert stat.S_IMODE(folder.outer.stat().st_mode) == 0o711
        assert folder.outer.stat().st_uid == os.geteuid()
        assert stat.S_IMODE(folder.path.stat().st_mode) == 0o700
    finally:
        assert folder.release()
    assert not folder.outer.exists()


# --- the grader as an unprivileged user ---------------------------------------------------------------------

UNPRIVILEGED_RUN = r"""
import json, os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_learner_files as t
from grader.instructor.sandbox import Template

files = json.loads(sys.argv[2])
tempfile.tempdir = files["tmp"]
report = {}
with Template(warm_meta=False, warm_figures=False) as template:
    report["isolation"] = template.isolation()
    for attack in sorted(t.ATTACKS):
        done, printed, seconds = t.run_attack(template, {k: Path(v) for k, v in files.items()}, attack)
        report[attack] = {"printed": printed, "seconds": seconds, "done": done}
print(json.dumps({"uid": os.getuid(), **report}))
"""


def _searchable_by(path: Path, uid: int) -> bool:
    """Whether ``uid`` (not root, no groups) may reach and read ``path``: every folder on the way o+x, it o+r."""
    try:
        return all(f.stat().st_mode & stat.S_IXOTH for f in path.parents) and bool(path.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not ROOT, reason="needs root to start a grader as another, unprivileged user (setpriv)")
def test_an_unprivileged_graders_learners_gain_nothing_from_their_folder(tmp_path):
    """The grader as uid 65534: its secret (0600, its own) stays its own; a 000 folder of the learner's is reclaimed."""
    import sysconfig

    setpriv = shutil.which("setpriv")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(os.path.realpath(sys.executable))]
    candidates += [Path(p) for p in (shutil.which(version, path="/usr/bin:/usr/local/bin:/bin"),) if p]
    python = next((c for c in candidates if _searchable_by(c, SANDBOX_UID)), None)
    packages = Path(sysconfig.get_paths()["purelib"])
    if setpriv is None or python is None:
        pytest.skip(f"no setpriv, or no {version} that uid {SANDBOX_UID} may run")
    if not (_searchable_by(packages / "torch" / "__init__.py", SANDBOX_UID) and _searchable_by(Path(__file__), 65534)):
        pytest.skip(f"the kit or its packages are not readable by uid {SANDBOX_UID}")
    home = Path(tempfile.mkdtemp(prefix="attnkit-unprivileged-"))
    try:
        home.chmod(0o755)
        subprocess.run([str(python), "-m", "venv", "--without-pip", str(home / "venv")], check=True, timeout=120)
        site = next((home / "venv").glob("lib/python3*/site-packages"))
        (site / "attnkit-packages.pth").write_text(f"{packages}\n{KIT_ROOT}\n{KIT_ROOT / 'tests'}\n")
        files = {"tmp": home / "tmp", "decoy": home / "decoy", "secret": home / "secret" / "grader-secret.txt"}
        token = f"attnkit-secret-{uuid.uuid4().hex}"
        files["tmp"].mkdir(mode=0o711)
        files["decoy"].mkdir(mode=0o777)
        (files["decoy"] / "keep.txt").write_text("the grader's\n")
        files["secret"].parent.mkdir(mode=0o700)
        files["secret"].write_text(token + "\n")
        files["secret"].chmod(0o600)
        for path in [files["tmp"], files["decoy"], files["decoy"] / "keep.txt", *files["secret"].parents[:1]]:
            os.chown(path, SANDBOX_UID, SANDBOX_UID)
        os.chown(files["secret"], SANDBOX_UID, SANDBOX_UID)
        (files["decoy"] / "keep.txt").chmod(0o666)
        user = [setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(files["tmp"]), "LANG": "C.UTF-8"}
        done = subprocess.run(
            [*user, str(home / "venv" / "bin" / "python"), "-c", UNPRIVILEGED_RUN, str(HERE),
             json.dumps({k: str(v) for k, v in files.items()})],
            capture_output=True, text=True, timeout=400, env=env, cwd=home,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert report["uid"] == SANDBOX_UID
        for attack in ATTACKS:
            assert "learner was here" in report[attack]["printed"], report[attack]
            assert token not in report[attack]["printed"], attack
            assert report[attack]["seconds"] < 5, report[attack]
        assert files["secret"].read_text() == token + "\n"
        assert sorted(os.listdir(files["decoy"])) == ["keep.txt"]
        assert os.listdir(files["tmp"]) == [], "an unprivileged grader left a learner's folder behind"
    finally:
        shutil.rmtree(home, ignore_errors=True)
