"""``benchmarks/cuda_check.sh`` without a GPU: it says so, runs nothing and exits 0 at once.

The GPU path itself runs only where a GPU is lent (its report goes in the lead's notes); here the
script is checked for what every machine sees: its syntax, and the no-GPU exit, both when
``CUDA_VISIBLE_DEVICES`` hides every GPU (any machine) and when there is no ``nvidia-smi`` at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "cuda_check.sh"
STEP_LINE = ("PASS ", "FAIL ", "SKIP ")


def run_script(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    # a hung check would stop the test here; a guard, not a measured time
    return subprocess.run(["bash", str(SCRIPT)], env=env, cwd=cwd, capture_output=True, text=True, timeout=30)


def test_the_script_parses():
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("hidden", ["", "-1"], ids=["empty", "minus-one"])
def test_hidden_gpus_mean_no_gpu(tmp_path, hidden):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=hidden, CUDA_CHECK_OUT=str(tmp_path / "out"))
    done = run_script(env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("cuda_check: no GPU here (CUDA_VISIBLE_DEVICES=")
    assert "hides every GPU" in done.stdout and not done.stderr
    assert not [ln for ln in done.stdout.splitlines() if ln.lstrip().startswith(STEP_LINE)]
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="nvidia-smi is here: the full check would run")
def test_no_nvidia_smi_means_no_gpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["CUDA_CHECK_OUT"] = str(tmp_path / "out")
    done = run_script(env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == (
        "cuda_check: no GPU here (no nvidia-smi on PATH): nothing to check. Run it on a machine with an NVIDIA GPU.\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_listed_gpu_torch_cannot_use_is_a_failure(tmp_path):
    """nvidia-smi lists a GPU but torch sees none (a CPU build, here): exit 1 naming torch, before any step."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here: the check would run")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text('#!/bin/sh\n[ "$1" = -L ] && echo "GPU 0: Pretend GPU (UUID: GPU-0)"\n')
    (fake / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(PATH=f"{fake}{os.pathsep}{env['PATH']}", CUDA_CHECK_OUT=str(tmp_path / "out"))
    done = run_script(env, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "GPU 0: Pretend GPU" in done.stdout
    assert "FAIL  torch cannot use the GPU nvidia-smi lists" in done.stdout and "NOT available" in done.stdout
    assert not (tmp_path / "out" / "class.log").exists()
