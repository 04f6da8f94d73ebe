"""Headless Chromium for the tests that check a page renders in a real browser (skipped where none is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        pytest.skip("no Chromium installed: apt-get install chromium")
    return found


def _chromium_args(browser: str, profile: Path) -> list[str]:
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
        "--window-size=1100,6000",
    ]


def screenshot(page: Path, where: Path) -> Path:
    browser = _chromium()
    where.mkdir(parents=True, exist_ok=True)
    shot = where / "shot.png"
    args = _chromium_args(browser, where / "profile") + [f"--screenshot={shot}", page.resolve().as_uri()]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=where)
    assert done.returncode == 0, done.stderr[-3000:]
    assert shot.is_file() and shot.stat().st_size > 0, f"Chromium wrote no screenshot: {done.stderr[-3000:]}"
    return shot


def dump_dom(page: Path, where: Path) -> str:
    browser = _chromium()
    where.mkdir(parents=True, exist_ok=True)
    args = _chromium_args(browser, where / "profile") + ["--dump-dom", page.resolve().as_uri()]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=where)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
