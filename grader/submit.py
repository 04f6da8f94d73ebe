"""``attnkit submit``: pack a learner's work into one zip to hand in.

What goes in:

- the learner's ``exercises`` package (by default the current folder's kit's): its ``.py`` files, under
  ``exercises/``, never the public tests (``test_*.py``, ``*_test.py``, ``conftest.py``), ``__pycache__``,
  ``.ipynb_checkpoints`` or hidden files;
- or one notebook, as it is; or several (a folder such as ``notebooks/``, or several paths) merged into one
  ``notebooks.ipynb``: from each, in the order given, the cells the grader would take (those tagged
  ``attnkit-solution``, or every code cell but the check cells when none is tagged), all tagged;
- or one ``.py`` file;
- and ``manifest.json``: kit version, when it was packed (UTC), the sha256 of every packed file (and of the
  notebooks merged), the public check results at packing time per exercise, and the student id.

The student id is ``--student ID``, else ``ATTNKIT_STUDENT`` (:data:`grader.handin.STUDENT_ENV`, which a JupyterHub
admin sets per user), sanitised by :func:`grader.handin.safe_name`; it goes in the manifest (``"student"``, with
``"student_from"`` saying which) and the file name, ``submission-<id>-<date>.zip``.  Without either the hand-in
carries no id (``"student": null``): it is still packed, named after the login (``"login"``), and
:attr:`Packed.warnings` says so in one line.

``attnkit grade`` reads these zips like any other: the manifest is not Python and is never run; its id only confirms
the one the file name gives.  What goes in, the caps and the names follow :mod:`grader.handin`, the rules intake
reads by: a zip written here is accepted there, and what intake would refuse is refused here first, where the
learner can fix it (a notebook is converted as the grader converts it).  So is what would grade as an error
(:func:`problems`, nothing run): a ``.py`` that does not parse (``file:line``), a notebook whose kept cells use
names they do not define (a helper imported from the learner's ``exercises``, which the grader does not have:
submit says which to paste in); then a hand-in that does not import as the grader imports it (:func:`load_problem`,
in a child of the learner's own Python, so this process never runs it: ``exercises/scores.py:3:
ModuleNotFoundError: No module named 'numpyy'``).  ``--force`` packs it anyway, with a warning.  A load that takes
over :data:`LOAD_SECONDS` is not refused: it is packed, with a warning.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from grader.handin import (
    CHECK_TAG,
    KIT_PACKAGE,
    MANIFEST,
    MAX_ENTRIES,
    MAX_NOTEBOOK_BYTES,
    MAX_PY_BYTES,
    MAX_TOTAL_BYTES,
    MAX_WALKED,
    MAX_ZIP_BYTES,
    SOLUTION_TAG,
    STUDENT_ENV,
    cell_tags,
    graded_cells,
    is_graded_source,
    is_hidden,
    is_skipped_dir,
    is_test_file,
    kit_version,
    notebook_metadata,
    safe_name,
    text_problem,
    too_big,
    undefined_names,
)

MERGED_NOTEBOOK = "notebooks.ipynb"
NOT_CHECKED = "not checked"


class SubmitError(Exception):
    """Nothing was packed; the message says why and what to do, in one line."""


@dataclass
class Packed:
    """A zip written by :func:`submit`."""

    out: Path
    kind: str  # "exercises", "notebook", "notebooks" or "py"
    manifest: dict[str, Any]
    sizes: dict[str, int] = field(default_factory=dict)  # packed name -> bytes
    warnings: list[str] = field(default_factory=list)  # one line each: no student id, an id that was changed

    @property
    def checks(self) -> dict[str, dict[str, Any]]:
        return self.manifest.get("checks") or {}


# --- what to pack --------------------------------------------------------------------------------


def locate(paths: list[Path], cwd: Path | None = None) -> tuple[str, list[Path]]:
    """``(kind, paths)``: what the learner asked to hand in, or :class:`SubmitError` saying what is wrong."""
    cwd = Path.cwd() if cwd is None else Path(cwd)
    if not paths:
        if (cwd / KIT_PACKAGE / "__init__.py").is_file():
            return "exercises", [cwd / KIT_PACKAGE]
        if cwd.name == KIT_PACKAGE and (cwd / "__init__.py").is_file():
            return "exercises", [cwd]
        raise SubmitError(
            f"no {KIT_PACKAGE}/ folder in {cwd}: run attnkit submit in your kit's folder, "
            "or name what to hand in (your exercises/ folder, a notebook or a .py file)"
        )
    for p in paths:
        if not p.exists():
            raise SubmitError(f"{p}: no such file or folder")
    if len(paths) > 1:
        if all(p.is_file() and p.suffix.lower() == ".ipynb" for p in paths):
            return "notebooks", list(paths)
        raise SubmitError("give one folder, one .py file, or one or more notebooks (.ipynb)")
    path = paths[0]
    if path.is_dir():
        if (path / KIT_PACKAGE / "__init__.py").is_file():
            return "exercises", [path / KIT_PACKAGE]
        if (path / "__init__.py").is_file():
            return "exercises", [path]
        notebooks = sorted(p for p in path.glob("*.ipynb") if p.is_file() and not is_hidden(p.name))
        if len(notebooks) == 1:
            return "notebook", notebooks
        if notebooks:
            return "notebooks", notebooks
        raise SubmitError(f"{path}: neither an exercises package (no __init__.py) nor a folder of notebooks")
    suffix = path.suffix.lower()
    if suffix == ".ipynb":
        return "notebook", [path]
    if suffix == ".py":
        return "py", [path]
    raise SubmitError(f"{path}: hand in your exercises/ folder, a notebook (.ipynb) or a .py file")


def package_files(package: Path) -> dict[str, Path]:
    """``{"exercises/<rel>": path}`` for every ``.py`` of the package, tests, caches and hidden files left out."""
    found: dict[str, Path] = {}
    total = walked = 0
    for dirpath, dirnames, filenames in os.walk(package, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not is_skipped_dir(d) and not Path(dirpath, d).is_symlink())
        walked += len(dirnames) + len(filenames)
        if walked > MAX_WALKED:
            raise SubmitError(f"{package}: more than {MAX_WALKED} files and folders; is a virtualenv in there?")
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = full.relative_to(package).as_posix()
            if not is_graded_source(rel) or full.is_symlink():
                continue
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                raise SubmitError(f"{rel!r}: the file name is not valid UTF-8; rename it") from None
            size = full.stat().st_size
            if size > MAX_PY_BYTES:
                raise SubmitError(f"{rel}: {too_big(size, '.py file', MAX_PY_BYTES)}")
            total += size
            found[f"{KIT_PACKAGE}/{rel}"] = full
    if f"{KIT_PACKAGE}/__init__.py" not in found:
        raise SubmitError(f"{package}: no __init__.py, so it is not your exercises package")
    if len(found) >= MAX_ENTRIES:  # the manifest takes one entry of the zip
        raise SubmitError(f"{package}: more than {MAX_ENTRIES - 1} .py files")
    if total > MAX_TOTAL_BYTES:
        raise SubmitError(f"{package}: {too_big(total, 'of .py files', MAX_TOTAL_BYTES)}")
    return found


def _read_text(path: Path, limit: int, kind: str) -> bytes:
    size = path.stat().st_size
    if size > limit:
        raise SubmitError(f"{path.name}: {too_big(size, kind, limit)}")
    data = path.read_bytes()
    why = text_problem(data)
    if why is not None:
        raise SubmitError(f"{path.name}: {why}; save it as UTF-8 text")
    return data


def merge_notebooks(paths: list[Path]) -> bytes:
    """One notebook holding, from each notebook in turn, the code cells the grader would take, all tagged: so each
    counts as it would on its own (its ``attnkit-solution`` cells, else every code cell but the check cells); a
    tagged notebook's other code cells but the check cells follow in their places, untagged, so that a helper
    defined there is graded with the tagged cells that call it, as on its own (:mod:`grader.notebook_helpers`)."""
    import nbformat

    v4 = nbformat.v4
    cells = []
    for index, path in enumerate(paths, start=1):
        text = _read_text(path, MAX_NOTEBOOK_BYTES, "notebook").decode("utf-8").removeprefix("\ufeff")
        try:
            nb = nbformat.reads(text, as_version=4)
        except Exception as exc:  # nbformat raises many kinds on a broken file
            line = (str(exc) or type(exc).__name__).splitlines()[0]
            raise SubmitError(f"{path.name}: not a notebook ({line})") from None
        cells.append(v4.new_markdown_cell(f"# From `{path.name}`", id=f"n{index}"))
        chosen = dict(graded_cells(nb.cells))
        helpers_too = any(SOLUTION_TAG in cell_tags(c) for c in chosen.values())  # untagged cells may hold helpers
        taken = 0
        for number, cell in enumerate(nb.cells, start=1):
            tags = set(cell_tags(cell))
            if number in chosen:
                tags.add(SOLUTION_TAG)
            elif not helpers_too or cell.get("cell_type") != "code" or CHECK_TAG in tags:
                continue
            taken += 1
            metadata = dict(cell.get("metadata") or {})
            metadata["tags"] = sorted(tags)
            metadata["attnkit_from"] = path.name
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            cells.append(v4.new_code_cell(source, id=f"n{index}-{taken}", metadata=metadata))
    merged = v4.new_notebook(cells=cells)
    merged.metadata = nbformat.from_dict(notebook_metadata({"merged_from": [p.name for p in paths]}))
    nbformat.validate(merged)
    data = nbformat.writes(merged, version=4).encode("utf-8")
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise SubmitError(f"{MERGED_NOTEBOOK}: {too_big(len(data), 'merged notebook', MAX_NOTEBOOK_BYTES)}")
    return data


# --- checks at packing time ----------------------------------------------------------------------


def _kit_tests_dir(fallback: Path | None) -> Path | None:
    """The public tests `attnkit check` runs: the kit's own, else those beside the package."""
    with contextlib.suppress(RuntimeError, ImportError):
        from grader.check import public_tests_dir

        return public_tests_dir()
    return fallback if fallback is not None and any(fallback.glob("test_*.py")) else None


def _solution_spec(package: Path) -> str:
    """``"exercises"`` when ``package`` is the importable ``exercises`` (what `attnkit check` checks), else its path."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(KIT_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if locations and Path(locations[0]).resolve() == package.resolve():
        return KIT_PACKAGE
    return str(package)


def _run_checks(solution: str, tests_dir: Path | None) -> tuple[dict[str, dict[str, Any]], str]:
    if tests_dir is None:
        return {}, f"{NOT_CHECKED}: the public tests were not found (run attnkit submit in your kit's folder)"
    try:
        from grader.check import run_public_cases

        results = run_public_cases(solution=solution, tests_dir=tests_dir)
    except Exception as exc:  # a broken kit or learner code that breaks pytest itself: still pack
        line = (str(exc) or type(exc).__name__).splitlines()[0]
        return {}, f"{NOT_CHECKED}: {line}"
    checks = {
        r.exercise: {"status": r.status, "passed": r.passed, "total": r.passed + r.failed + r.not_implemented}
        for r in results
    }
    return checks, "public cases run at packing time"


def _notebook_source(data: bytes, name: str) -> str | None:
    """The module the grader makes of the notebook, or None when this kit cannot read notebooks; one the grader
    would refuse (over a cap, a tagged cell that does not parse, no code) is refused here with its reason."""
    try:
        from grader.notebooks import notebook_to_source
    except ImportError:
        return None
    try:
        return notebook_to_source(data.decode("utf-8").removeprefix("\ufeff"))
    except ValueError as exc:
        line = (str(exc) or "the notebook cannot be read").splitlines()[0]
        raise SubmitError(f"{name}: {line} (attnkit grade would refuse it too; fix it and submit again)") from None


def _check_notebook(source: str | None, tests_dir: Path | None) -> tuple[dict[str, dict[str, Any]], str]:
    if source is None:
        return {}, f"{NOT_CHECKED}: this kit cannot read notebooks (grader/notebooks.py or nbformat is missing)"
    with tempfile.TemporaryDirectory(prefix="attnkit-submit-") as tmp:
        module = Path(tmp) / "notebook_submission.py"
        module.write_text(source, encoding="utf-8")
        return _run_checks(str(module), tests_dir)


# --- what would grade as an error ------------------------------------------------------------------


def syntax_problem(name: str, data: bytes) -> str | None:
    """``"exercises/scores.py:12: SyntaxError: invalid syntax"`` for a file the grader's loader could not import."""
    import ast

    try:
        ast.parse(data.decode("utf-8").removeprefix("\ufeff"), filename=name)
    except SyntaxError as exc:
        return f"{name}:{exc.lineno}: SyntaxError: {exc.msg}"
    except ValueError as exc:  # null bytes
        return f"{name}: cannot be parsed ({exc})"
    return None


def problems(kind: str, contents: Mapping[str, bytes], notebook_source: str | None) -> list[str]:
    """One line per reason the hand-in would grade as an error, read as the grader reads it (nothing run): a file
    that does not parse, or names the module made of a notebook uses that no kept cell defines."""
    if kind in ("exercises", "py"):
        return [why for name, data in sorted(contents.items()) if (why := syntax_problem(name, data))]
    missing = undefined_names(notebook_source) if notebook_source is not None else []
    if not missing:
        return []
    from grader.registry import HOOK_NAMES

    shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
    kit = [n for n in missing if n in HOOK_NAMES]
    how = f"define or import them in a cell tagged {SOLUTION_TAG}"
    if kit:
        how = f"paste your {', '.join(kit)} into a cell tagged {SOLUTION_TAG} "
        how += "(the grader does not have your exercises package)"
    return [f"{next(iter(contents))}: uses {shown}, which the notebook does not define when graded; {how}"]


LOAD_SECONDS = 60.0
"""How long submit waits for the hand-in to import in a child Python; past it the hand-in is packed, warned."""

_COULD_NOT_LOAD = re.compile(r"exercise \w+: could not load (.+)")  # grader.child.load.load_error_of's line
_CHILD = "import sys; from grader.submit import _load_in_child; _load_in_child(*sys.argv[1:])"


def load_errors(entry: Path) -> list[str]:
    """The one-line error of each of the hand-in's modules that does not import, loaded as the grader loads it.
    Loading runs the learner's code: only ever called in a child process (:func:`load_problem`)."""
    from grader.registry import SolutionError, load_solution

    try:
        solution = load_solution(entry)
    except SolutionError as exc:  # nothing imports at all
        return [str(exc) or "the hand-in does not import"]
    return list(dict.fromkeys(m.group(1) for p in solution.problems if (m := _COULD_NOT_LOAD.fullmatch(p))))


def _load_in_child(entry: str, result: str, kit_root: str) -> None:
    """The child of :func:`load_problem`: hide the kit as the grader's sandbox does, load, write the errors as JSON."""
    from grader.child.serve import _drop_kit_from_path

    Path(result + ".started").touch()
    _drop_kit_from_path([kit_root])
    errors = load_errors(Path(entry))
    Path(result).write_text(json.dumps([e.splitlines()[0] for e in errors if e.strip()]), encoding="utf-8")


def _in_notebook(line: str, entry: str, name: str, source: str) -> str:
    """``scores.py:12: NameError: …`` in the module made of a notebook, as
    ``scores.ipynb: cell 3 (`class Settings:`), line 2: …`` (:mod:`grader.cell_places`)."""
    from grader.cell_places import converted_place, place_text

    match = re.match(re.escape(entry) + r":(\d+): (.*)", line)
    if not match:
        return f"{name}: {line}"
    place = converted_place(source, int(match.group(1)))
    return f"{name}: {place_text(*place)}: {match.group(2)}" if place else f"{name}: {match.group(2)}"


def load_problem(
    kind: str, contents: Mapping[str, bytes], notebook_source: str | None, timeout: float = LOAD_SECONDS
) -> tuple[str | None, str | None]:
    """``(problem, warning)``: why the hand-in does not import as the grader imports it, or why that was not checked.

    The packed files are loaded from a temporary folder with :func:`grader.registry.load_solution` (the grader's
    loader: a module that fails costs the hooks it defines) in a child of the learner's own Python, so submit's
    process never runs them.  The problem is the first load error (a notebook's named by cell).  A load over
    ``timeout`` seconds, or a child that cannot start, is a warning: the grading machine, not a slow laptop,
    decides what is too slow.
    """
    import grader

    kit_root = str(Path(grader.__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="attnkit-submit-load-") as tmp:
        folder = Path(tmp) / "submission"
        if kind in ("notebook", "notebooks"):
            if notebook_source is None:
                return None, None  # this kit cannot read notebooks; the checks said so
            entry_name = safe_name(Path(next(iter(contents))).stem) + ".py"  # what intake names it
            files = {entry_name: notebook_source.encode("utf-8")}
        else:
            files = dict(contents)
            entry_name = KIT_PACKAGE if kind == "exercises" else next(iter(contents))
        for rel, data in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(data)
        result = Path(tmp) / "errors.json"
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        env["PYTHONPATH"] = os.pathsep.join([kit_root, *filter(None, [env.get("PYTHONPATH")])])
        # output to a file, not a pipe: nothing the learner's code starts can keep submit waiting
        with (Path(tmp) / "output.txt").open("w+b") as output:
            process = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(folder / entry_name), str(result), kit_root],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=os.name == "posix",
            )
            try:
                code = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):  # the child and whatever it started (its own session, on POSIX)
                    if os.name == "posix":
                        os.killpg(process.pid, signal.SIGKILL)
                    else:
                        process.kill()
                process.wait()
                return None, f"not loaded: importing it took over {timeout:g} s here, so it is packed unchecked"
            output.seek(0)
            said = [line.strip() for line in output.read().decode("utf-8", "replace").splitlines() if line.strip()]
        last = f": {said[-1]}" if said else ""
        if not result.is_file():
            if Path(str(result) + ".started").exists():  # the learner's code ended the process (os._exit, a crash)
                return f"{entry_name}: importing it ended Python (exit code {code}){last}", None
            return None, f"not loaded: the import check could not start (exit code {code}){last}"
        errors = json.loads(result.read_text(encoding="utf-8"))
    if not errors:
        return None, None
    first = str(errors[0])
    if kind in ("notebook", "notebooks"):
        first = _in_notebook(first, entry_name, next(iter(contents)), notebook_source or "")
    return first, None


# --- the zip -----------------------------------------------------------------------------------


def _login() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return None


def student_id(given: str | None, environ: Mapping[str, str] | None = None) -> tuple[str | None, str | None, list[str]]:
    """``(id, where it came from, warnings)``: ``--student``, else :data:`STUDENT_ENV`, else ``(None, None, ...)``.

    The id is sanitised (:func:`safe_name`), with a warning when that changed it or there is none; one with nothing
    usable in it is refused."""
    env = os.environ if environ is None else environ
    for raw, source in ((given, "--student"), (env.get(STUDENT_ENV), STUDENT_ENV)):
        if raw is None or not raw.strip():
            continue
        raw = raw.strip()
        sid = safe_name(raw, "")
        if not sid:
            raise SubmitError(f"{source} {raw!r}: not an id (use letters, digits, '.', '_' or '-')")
        warnings = [] if sid == raw else [f"student id {raw!r} ({source}) is written as {sid!r}"]
        return sid, source, warnings
    no_id = f"this hand-in carries no student id: pass --student YOUR_ID (or ask for {STUDENT_ENV} to be set)"
    return None, None, [no_id]


def _free(path: Path) -> Path:
    if not path.exists():
        return path
    for n in range(2, 1000):
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        if not candidate.exists():
            return candidate
    raise SubmitError(f"{path}: too many submissions with this name; use --out")


@dataclass(frozen=True)
class Validation:
    """What :func:`submit` runs before it packs, besides parsing: the public cases (``attnkit check``, whose
    table the manifest keeps) and a trial import of the hand-in in a child Python (:func:`load_problem`)."""

    public_checks: bool = True
    trial_import: bool = True


def submit(
    paths: list[Path] | tuple[Path, ...] = (),
    out: Path | None = None,
    *,
    student: str | None = None,
    cwd: Path | None = None,
    validation: Validation = Validation(),
    force: bool = False,
) -> Packed:
    """Pack the learner's work into one zip (see the module docstring); returns what was written.

    A hand-in that would grade as an error (:func:`problems`; then, with ``validation.trial_import``,
    :func:`load_problem`) is refused with :class:`SubmitError`, unless ``force``: then it is packed with a warning.
    ``out`` defaults to ``submission-<id>-<date>.zip`` in ``cwd``, never overwriting (``-2``, ``-3`` … added); an
    ``out`` given is overwritten.  ``student`` is ``--student``; without it the id is :data:`STUDENT_ENV`'s, else
    there is none and the file is named after the login, else the folder.
    """
    cwd = Path.cwd() if cwd is None else Path(cwd)
    sid, sid_from, warnings = student_id(student)
    if out is not None:
        if Path(out).suffix.lower() != ".zip":
            raise SubmitError(f"{out}: the hand-in is a zip; name it <something>.zip")
        if Path(out).is_dir():
            raise SubmitError(f"{out}: is a folder")
    kind, found = locate([Path(p) for p in paths], cwd)
    now = datetime.now(timezone.utc)
    contents: dict[str, bytes] = {}
    sources: dict[str, str] = {}
    source: str | None = None
    checks: dict[str, dict[str, Any]] = {}
    note = NOT_CHECKED
    if kind == "exercises":
        package = found[0]
        for arcname, full in package_files(package).items():
            contents[arcname] = _read_text(full, MAX_PY_BYTES, ".py file")
        if validation.public_checks:
            checks, note = _run_checks(_solution_spec(package), _kit_tests_dir(package))
    elif kind == "py":
        data = _read_text(found[0], MAX_PY_BYTES, ".py file")
        name = safe_name(found[0].stem, "solution") + ".py"
        if is_test_file(name):
            raise SubmitError(f"{found[0].name}: the name of a test file, which the grader leaves out; rename it")
        contents[name] = data
        if validation.public_checks:
            checks, note = _run_checks(str(found[0]), _kit_tests_dir(None))
    else:
        if kind == "notebook":
            data = _read_text(found[0], MAX_NOTEBOOK_BYTES, "notebook")
            name = safe_name(found[0].stem, "notebook") + ".ipynb"
        else:
            data = merge_notebooks(found)
            name = MERGED_NOTEBOOK
            sources = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in found}
        contents[name] = data
        source = _notebook_source(data, found[0].name if kind == "notebook" else name)
        if validation.public_checks:
            checks, note = _check_notebook(source, _kit_tests_dir(None))
    refused = problems(kind, contents, source)
    if validation.trial_import and not refused:  # it parses: import it as the grader will, in a child Python
        problem, unchecked = load_problem(kind, contents, source)
        refused = [problem] if problem else []
        warnings += [unchecked] if unchecked else []
    if refused and not force:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise SubmitError(f"{refused[0]}{more}: it would grade as an error; fix it, or pack anyway with --force")
    warnings += [f"packed anyway (--force): {why}" for why in refused]

    try:
        import torch

        torch_version = str(torch.__version__)
    except ImportError:
        torch_version = None
    passing = sum(c["status"] == "passing" for c in checks.values())
    login = _login()
    manifest: dict[str, Any] = {
        "kit": "attnkit",
        "kit_version": kit_version(),
        "created": now.isoformat(timespec="seconds"),
        "student": sid,
        "student_from": sid_from,
        "login": login,
        "kind": kind,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(contents.items())},
        "checked": bool(checks),
        "check_note": note,
        "checks": checks,
        "passing": passing,
        "exercises": len(checks),
        "python": platform.python_version(),
        "torch": torch_version,
    }
    if sources:
        manifest["merged_from"] = sources
    manifest_data = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    total = sum(len(data) for data in contents.values()) + len(manifest_data)
    if total > MAX_TOTAL_BYTES:
        raise SubmitError(f"the hand-in: {too_big(total, 'with its manifest', MAX_TOTAL_BYTES)}")
    if len(contents) + 1 > MAX_ENTRIES:  # package_files stops sooner; this holds for every kind
        raise SubmitError(f"the hand-in: {len(contents) + 1} files is over the {MAX_ENTRIES} file limit")
    stem = sid or safe_name(login or "", "") or safe_name(cwd.resolve().name, "learner")  # safe in a file name
    default = f"submission-{stem}-{now.strftime('%Y-%m-%d')}.zip"
    target = _free(cwd / default) if out is None else Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name, data in sorted(contents.items()):
                zf.writestr(_entry(name, now), data)
            zf.writestr(_entry(MANIFEST, now), manifest_data)
        size = partial.stat().st_size
        if size > MAX_ZIP_BYTES:
            raise SubmitError(f"{target.name}: {too_big(size, 'zip', MAX_ZIP_BYTES)}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    sizes = {name: len(data) for name, data in sorted(contents.items())}
    return Packed(out=target, kind=kind, manifest=manifest, sizes=sizes, warnings=warnings)


def _entry(name: str, when: datetime) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=when.timetuple()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info
