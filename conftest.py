"""Fixtures for the public exercise tests: the solution under test, the device, the dtype.

    pytest exercises                          # the reference here, your own exercises in a learner's kit
    pytest exercises --solution exercises     # the learner's own exercises package
    pytest exercises --solution path/to/mine.py --device cuda

``--solution`` takes anything :func:`grader.registry.load_solution` takes: ``reference``,
``exercises``, a ``.py`` file, a folder, or an entry-point name.  ``ATTNKIT_SOLUTION``
sets the default; without it, the default is ``reference`` where this kit's
``solutions`` package is importable (the instructor's kit) and ``exercises``
otherwise (a learner's kit, which ``attnkit release`` gives this very file).

Every test under ``exercises/`` names its exercise with
``@pytest.mark.exercise("<hook name>")``; tools map results to exercises by that marker.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

SOLUTION_ENV_VAR = "ATTNKIT_SOLUTION"
DEVICES = ("cpu", "cuda", "mps")
DTYPES = ("float32", "float64")

KIT_ROOT = Path(__file__).resolve().parent
EXERCISES_DIR = KIT_ROOT / "exercises"

# `grader` and `exercises` are imported from the kit root whatever the rootdir or
# --import-mode (importlib mode does not touch sys.path).
if str(KIT_ROOT) not in sys.path:
    sys.path.insert(0, str(KIT_ROOT))


def _has_solutions() -> bool:
    """Whether this kit's own ``solutions`` package (beside this file, not some other install's) is importable."""
    spec = importlib.util.find_spec("solutions")  # a top-level name: found, not imported
    return spec is not None and any(
        Path(folder).resolve() == KIT_ROOT / "solutions" for folder in spec.submodule_search_locations or ()
    )


DEFAULT_SOLUTION = "reference" if _has_solutions() else "exercises"
"""The solution the public tests check when neither --solution nor ATTNKIT_SOLUTION says: the
reference in the instructor's kit, the learner's own ``exercises`` in a learner's kit."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("attnkit", "attnkit exercises")
    group.addoption(
        "--solution",
        default=os.environ.get(SOLUTION_ENV_VAR) or DEFAULT_SOLUTION,
        help=f"the solution to test: reference, exercises, a .py file, a folder or an entry-point name "
        f"(default: ${SOLUTION_ENV_VAR}, else {DEFAULT_SOLUTION!r})",
    )
    group.addoption(
        "--device",
        default="cpu",
        choices=DEVICES,
        help="the device the test tensors live on (default: cpu); an unavailable device skips the tests",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "exercise(name): the exercise (hook name) this public test checks")


def pytest_report_header(config: pytest.Config) -> str:
    return f"attnkit: solution {_solution_spec(config)!r}, device {_device_name(config)}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``exercise`` names exactly one real hook, or the run stops at collection.

    Tools file results under that marker, so a typo would silently drop a test
    from its exercise.  Unmarked tests (a learner's own, say) are left alone.
    """
    from grader.registry import HOOK_NAMES

    for item in items:
        if EXERCISES_DIR not in Path(item.path).resolve().parents:
            continue
        names = [m.args[0] if m.args else None for m in item.iter_markers("exercise")]
        if names and (len(names) != 1 or names[0] not in HOOK_NAMES):
            raise pytest.UsageError(
                f"{item.nodeid}: needs exactly one @pytest.mark.exercise(<hook name>), found {names}; "
                f"the hooks are: {', '.join(HOOK_NAMES)}"
            )


def _solution_spec(config: pytest.Config) -> str:
    # getoption's default covers a run where this conftest was not an initial one
    return config.getoption("solution", default=None) or os.environ.get(SOLUTION_ENV_VAR) or DEFAULT_SOLUTION


def _device_name(config: pytest.Config) -> str:
    return config.getoption("device", default=None) or "cpu"


@pytest.fixture(scope="session")
def solution(pytestconfig: pytest.Config):
    """The solution under test; call hooks as ``solution.softmax_weights(scores, dim=-1)``."""
    from grader.check import IN_MEMORY_SOLUTION
    from grader.registry import SolutionError, load_solution

    given = pytestconfig.stash.get(IN_MEMORY_SOLUTION, None)
    if given is not None:  # handed over by `attnkit check` (a notebook's functions, say)
        return given
    spec = _solution_spec(pytestconfig)
    try:
        return load_solution(spec)
    except SolutionError as exc:
        pytest.fail(f"cannot load solution {spec!r}: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def device(pytestconfig: pytest.Config) -> str:
    """The device test tensors are built on: ``cpu`` unless ``--device`` says otherwise."""
    import torch

    name = _device_name(pytestconfig)
    if name == "cuda" and not torch.cuda.is_available():
        pytest.skip("cuda: not available")
    if name == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        pytest.skip("mps: not available")
    return name


@pytest.fixture(params=DTYPES, ids=DTYPES)
def dtype(request: pytest.FixtureRequest):
    """The floating dtype test tensors are built in; each test runs once per dtype."""
    import torch

    if request.param == "float64" and _device_name(request.config) == "mps":
        pytest.skip("mps: float64 not supported")
    return getattr(torch, request.param)
