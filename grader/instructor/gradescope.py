"""``attnkit gradescope DEST``: the autograder zip Gradescope runs, and what runs inside it.

Gradescope unpacks the zip into ``/autograder/source`` and runs its ``setup.sh`` once (a venv with the CPU
torch and the kit installed editable from ``source/kit``: never in site-packages, where a learner's process
could read the reference); for every hand-in it puts the learner's files in ``submission/``, runs
``run_autograder`` (which takes every permission but its owner's off the kit, seed and rubric, then runs
:func:`autograde`) and reads ``results/results.json``.  The zip also holds ``attnkit-gradescope.json`` (the
course's seed, so every learner gets the same hidden inputs, and the versions), ``rubric.toml`` and ``kit/``:
the whole instructor's kit, so the zip is never given to learners.  ``AUTOGRADER_ROOT`` (default
``/autograder``) is the root both scripts and :func:`autograde` work under, so a test can lay it out anywhere.

:func:`autograde` grades the one hand-in exactly as ``attnkit grade`` grades a student of a class.  A
submission with no hand-in or several, or an autograder that fails, still gets a ``results.json`` (score 0,
every test at 0 with its points) saying why.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.handin import kit_version
from grader.instructor.inert import inert_line
from grader.instructor.rubric import DEFAULT_RUBRIC, Rubric, load_rubric
from grader.instructor.suite_version import suite_version
from grader.registry import HOOK_NAMES

__all__ = ["BundleError", "CONFIG", "ROOT_ENV", "autograde", "bundle_files", "main", "results_for", "write_bundle"]

KIT_ROOT = Path(__file__).resolve().parents[2]
ROOT_ENV = "AUTOGRADER_ROOT"
"""The environment variable naming the root Gradescope's folders are under (default ``/autograder``)."""
CONFIG = "attnkit-gradescope.json"
KIT_FOLDERS = ("grader", "solutions", "exercises")
KIT_FILES = ("pyproject.toml", "constraints.txt", "README.md", "conftest.py")
LEFT_OUT = frozenset({"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache", ".ruff_cache"})
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # every entry's time: the same inputs give the same bytes

SETUP_SH = """#!/usr/bin/env bash
# attnkit's Gradescope setup: run once by Gradescope from the unpacked zip (/autograder/source).
# A virtual environment in source/.venv with the CPU build of the pinned torch and the kit (editable:
# it stays in source/kit, so a learner's sandboxed process cannot read it from site-packages).
set -euo pipefail
SOURCE="${AUTOGRADER_ROOT:-/autograder}/source"
if ! command -v python3 >/dev/null || ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
    apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-pip
fi
python3 -m venv "$SOURCE/.venv"
PIP="$SOURCE/.venv/bin/python -m pip"
$PIP install --upgrade pip
$PIP install --index-url TORCH_CPU_INDEX TORCH_PIN
$PIP install -c "$SOURCE/kit/constraints.txt" -e "$SOURCE/kit"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# attnkit's Gradescope autograder: grades ${AUTOGRADER_ROOT:-/autograder}/submission and writes
# results/results.json. Python: $ATTNKIT_PYTHON, else source/.venv/bin/python (setup.sh's), else python3.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
PYTHON="${ATTNKIT_PYTHON:-}"
if [ -z "$PYTHON" ] && [ -x "$SOURCE/.venv/bin/python" ]; then PYTHON="$SOURCE/.venv/bin/python"; fi
if [ -z "$PYTHON" ]; then PYTHON="$(command -v python3 || command -v python || true)"; fi
if [ -z "$PYTHON" ]; then echo "run_autograder: no Python found (run setup.sh, or set ATTNKIT_PYTHON)" >&2; exit 1; fi
# Only this root-run grader reads the kit, the seed and the rubric: a learner's process (nobody) gets no
# read of them even where Landlock is missing (see docs/gradescope.md).
chmod -R go-rwx "$SOURCE/kit" "$SOURCE/attnkit-gradescope.json" "$SOURCE/rubric.toml" 2>/dev/null
cd "$SOURCE/kit" || exit 1
exec "$PYTHON" -m grader.instructor.gradescope --root "$ROOT"
"""


class BundleError(Exception):
    """The bundle cannot be written (the message says why, in one line)."""


@dataclass(frozen=True)
class Bundle:
    path: Path
    seed: int
    rubric: str  # where the rubric came from
    files: int  # entries in the zip


def _torch_pin() -> str:
    path = KIT_ROOT / "constraints.txt"
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    pins = [ln.split("#")[0].strip() for ln in lines if ln.strip().startswith("torch")]
    return pins[0] if pins else "torch"


def _kit_files() -> list[tuple[str, Path]]:
    """``(name in the zip, file)`` for the whole kit, sorted, without caches, hidden or compiled files."""
    found = []
    for folder in KIT_FOLDERS:
        for path in (KIT_ROOT / folder).rglob("*"):
            rel = path.relative_to(KIT_ROOT)
            if any(part in LEFT_OUT or part.startswith(".") for part in rel.parts) or path.suffix in (".pyc", ".pyo"):
                continue
            if path.is_file() and not path.is_symlink():
                found.append((f"kit/{rel.as_posix()}", path))
    found += [(f"kit/{name}", KIT_ROOT / name) for name in KIT_FILES if (KIT_ROOT / name).is_file()]
    if not any(name == "kit/grader/instructor/gradescope.py" for name, _ in found):
        raise BundleError(f"no instructor's kit at {KIT_ROOT}: attnkit gradescope runs from the kit's source tree")
    return sorted(found)


def bundle_files(rubric_path: str | Path | None, seed: int, devices: Sequence[str] | None = None) -> dict[str, bytes]:
    """Every file of the zip by its name in it (scripts, config, rubric, kit); the rubric and devices are checked
    first.  ``devices`` None: the grader's default ones on Gradescope's machine."""
    rubric_file = Path(rubric_path) if rubric_path is not None else DEFAULT_RUBRIC
    load_rubric(rubric_file)  # ValueError naming the file and key of anything invalid
    from grader.instructor.class_grading import choose_devices

    choose_devices(devices or ())  # ValueError for a device the grader does not know, as `attnkit grade` says it
    config = {"seed": seed, "rubric": "rubric.toml", "kit_version": kit_version(), "suite_version": suite_version()}
    if devices:
        config["devices"] = list(devices)
    setup = SETUP_SH.replace("TORCH_CPU_INDEX", TORCH_CPU_INDEX).replace("TORCH_PIN", f'"{_torch_pin()}"')
    config_json = (json.dumps(config, indent=2) + "\n").encode()
    files = {"setup.sh": setup.encode(), "run_autograder": RUN_AUTOGRADER.encode(), CONFIG: config_json}
    files["rubric.toml"] = rubric_file.read_bytes()
    files.update((name, path.read_bytes()) for name, path in _kit_files())
    return files


def write_bundle(
    dest: str | Path,
    rubric_path: str | Path | None = None,
    seed: int | None = None,
    force: bool = False,
    devices: Sequence[str] | None = None,
) -> Bundle:
    """Write the autograder zip to ``dest`` (a ``.zip`` path whose folder exists); ``seed`` None: a random one.
    Written beside ``dest`` and moved over it once complete, so a crash never leaves half a zip."""
    dest = Path(dest)
    if dest.suffix.lower() != ".zip":
        raise BundleError(f"{dest}: the bundle is a .zip file (Gradescope takes a zip): name it e.g. autograder.zip")
    if not dest.parent.is_dir():
        raise BundleError(f"{dest.parent}: no such folder")
    if dest.is_dir():
        raise BundleError(f"{dest}: is a folder; give the path of the zip to write")
    if dest.exists() and not force:
        raise FileExistsError(f"{dest}: exists; nothing was written (--force overwrites it)")
    seed = secrets.randbelow(2**31 - 1) if seed is None else seed
    files = bundle_files(rubric_path, seed, devices)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in files.items():
                info = zipfile.ZipInfo(name, ZIP_TIME)
                info.external_attr = (0o100755 if name in ("setup.sh", "run_autograder") else 0o100644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Bundle(dest, seed, str(rubric_path or DEFAULT_RUBRIC), len(files))


# --- inside Gradescope's container ----------------------------------------------------------------


def _nothing_graded(rubric: Rubric, why: str) -> dict[str, Any]:
    """A ``results.json`` for a submission that could not be graded at all: 0 points, every test listed."""
    tests = [
        {"name": hook, "score": 0.0, "max_score": round(rubric.points.get(hook, 0.0), 2), "status": "failed",
         "output": why, "visibility": rubric.visibility_of(hook)}
        for hook in HOOK_NAMES
    ]  # fmt: skip
    top = {"score": 0.0, "max_score": rubric.max_total, "output": why, "visibility": rubric.default_visibility}
    return {**top, "stdout_visibility": "hidden", "tests": tests}


def _take_in(folder: Path):
    """The hand-in in Gradescope's submission folder, which is one learner's upload: its one member (a .py, .zip,
    notebook, folder: a folder read as one, ``--one``), else the folder itself: one learner's modules, kit or
    package when it holds no zip or notebook beside them, else the hand-ins it holds (:func:`results_for` then
    refuses them with what to upload), and IntakeError when it holds nothing.  By the upload's shape, never the
    code in it; :class:`~grader.instructor.intake_model.Intake`."""
    from grader.instructor.class_folder import sort_out
    from grader.instructor.intake import collect, is_kit_or_package
    from grader.instructor.intake_model import IntakeError

    if not folder.is_dir():
        raise IntakeError(f"{folder}: no such folder")
    members, _ = sort_out(folder)
    if len(members) == 1 and not (folder / "__init__.py").exists():
        return collect([members[0]], reading="one")
    containers = [m for m in members if m.suffix.lower() in (".zip", ".ipynb") and not m.is_dir()]
    one = members and (not containers or is_kit_or_package(folder))  # an upload is one learner's: its markers too
    return collect([folder], reading="one" if one else "auto")


def results_for(
    submission_dir: Path, rubric: Rubric, seed: int, devices: Sequence[str] | None = None
) -> dict[str, Any]:
    """Grade the hand-in in ``submission_dir`` as ``attnkit grade`` would, and return its ``results.json``.  The
    isolation, devices and versions go to ``extra_data``, which the instructor sees and the learner does not."""
    from grader.instructor.class_grading import GradeOptions, LocalExecutor, grade_class
    from grader.instructor.intake_model import IntakeError
    from grader.instructor.report_model import student_report
    from grader.instructor.results_json import gradescope_results

    try:
        intake = _take_in(submission_dir)
    except IntakeError as exc:
        return _nothing_graded(rubric, f"No hand-in found in your submission: {exc}")
    if len(intake.submissions) != 1:
        names = inert_line(", ".join(repr(Path(s.source).name) for s in intake.submissions[:6]))  # the learner's names
        return _nothing_graded(
            rubric,
            f"Your submission holds {len(intake.submissions)} hand-ins ({names}): "
            "upload one (a .py file, a notebook, your exercises/ folder or attnkit submit's zip).",
        )
    with tempfile.TemporaryDirectory(prefix="attnkit-gradescope-") as out:
        run = grade_class(intake, Path(out), GradeOptions(seed=seed, devices=devices, executor=LocalExecutor(1)))
    ((sub, results),) = run.graded
    report = student_report(sub, results, rubric, run.report_options, run.roll.printed.get(sub.student))
    data = gradescope_results(report)
    data["extra_data"] = dict(
        student=sub.student, isolation=run.isolation, devices=run.devices, skipped_devices=run.skipped_devices,
        suite_version=run.suite_version, kit_version=kit_version(),
    )
    return data


def autograde(root: str | Path) -> dict[str, Any]:
    """Grade ``root/submission`` with the bundle's rubric and seed and write ``root/results/results.json``;
    whatever happens, a ``results.json`` is written (an autograder that fails says so in it and raises)."""
    root = Path(root)
    started = time.monotonic()
    source = root / "source"
    results_path = root / "results" / "results.json"
    try:
        config = json.loads((source / CONFIG).read_text(encoding="utf-8"))
        rubric = load_rubric(source / config.get("rubric", "rubric.toml"))
    except (OSError, ValueError) as exc:
        why = f"The autograder is broken ({exc}); tell your instructor."
        _write_results(results_path, {"score": 0.0, "output": why, "tests": []}, started)
        raise
    try:
        data = results_for(root / "submission", rubric, int(config["seed"]), config.get("devices"))
    except Exception as exc:
        data = _nothing_graded(rubric, f"The autograder failed ({type(exc).__name__}: {exc}); tell your instructor.")
        _write_results(results_path, data, started)
        raise
    _write_results(results_path, data, started)
    return data


def _write_results(path: Path, data: dict[str, Any], started: float) -> None:
    data["execution_time"] = round(time.monotonic() - started, 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    description = "Grade Gradescope's submission folder and write results/results.json (run_autograder runs this)."
    parser = argparse.ArgumentParser(prog="python -m grader.instructor.gradescope", description=description)
    root_help = f"the folder holding source/, submission/ and results/ (default: ${ROOT_ENV}, else /autograder)"
    parser.add_argument("--root", default=os.environ.get(ROOT_ENV) or "/autograder", help=root_help)
    data = autograde(parser.parse_args(argv).root)
    print(f"attnkit: {data['score']} / {data['max_score']} points; {data['output']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
