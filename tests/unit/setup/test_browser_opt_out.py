"""Without a browser the inspector's tests fail with the command to run; skipping them is an explicit opt-out.

Issue 30: ``make test`` passed while all the inspector browser tests were skipped because chromedriver
was missing. A pytest run of tests/browser in a subprocess, pointed at a chromedriver that is not
there: it fails and names the fix; with ``THREADLOOM_SKIP_BROWSER=1`` it skips, and the run's
summary says so.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_browser_tests(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("THREADLOOM_")}
    environment.update({"THREADLOOM_CHROMEDRIVER": str(tmp_path / "no-chromedriver"), **extra})
    command = [sys.executable, "-m", "pytest", "tests/browser", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    return subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120, check=False)


def test_a_missing_chromedriver_fails_the_run_with_the_command_to_run(tmp_path: Path) -> None:
    done = run_browser_tests(tmp_path)
    assert done.returncode != 0
    assert "apt-get install chromium chromium-driver" in done.stdout
    assert "THREADLOOM_SKIP_BROWSER=1" in done.stdout
    assert " passed" not in done.stdout.splitlines()[-1]


def test_the_explicit_opt_out_skips_and_the_summary_says_so(tmp_path: Path) -> None:
    done = run_browser_tests(tmp_path, THREADLOOM_SKIP_BROWSER="1")
    assert done.returncode == 0, done.stdout
    last = done.stdout.splitlines()[-1]
    assert "skipped" in last and "failed" not in last and "error" not in last
    assert "THREADLOOM_SKIP_BROWSER=1:" in done.stdout
    assert "inspector browser tests were skipped, so the inspector is untested" in done.stdout


def run_make_browser_deps(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``make browser-deps`` with no apt-get on PATH (only ``id``), so nothing can be installed from here."""
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    if not (tools / "id").exists():
        (tools / "id").symlink_to("/usr/bin/id")
    environment = {"PATH": str(tools), "THREADLOOM_CHROMEDRIVER": str(tmp_path / "no-chromedriver"), **extra}
    command = ["/usr/bin/make", "--no-print-directory", "-C", str(ROOT), "browser-deps"]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60, check=False)


def test_make_fails_with_the_command_when_it_cannot_install_the_browser(tmp_path: Path) -> None:
    done = run_make_browser_deps(tmp_path)
    assert done.returncode != 0
    assert "run sudo apt-get install chromium chromium-driver" in done.stdout
    assert "THREADLOOM_SKIP_BROWSER=1 make test" in done.stdout


def test_make_lets_the_explicit_opt_out_through(tmp_path: Path) -> None:
    done = run_make_browser_deps(tmp_path, THREADLOOM_SKIP_BROWSER="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "THREADLOOM_SKIP_BROWSER=1: the inspector's browser tests will be skipped" in done.stdout
