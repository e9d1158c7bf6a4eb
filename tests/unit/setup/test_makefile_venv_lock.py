"""Two `make` targets started together on a fresh clone build the virtual environment once.

The Makefile is run in a throwaway folder with a fake interpreter whose `pip install` takes a
second and records when it runs, so the test sees whether two set-ups overlapped. A copy of
the Makefile with the lock taken out is the control: it must overlap, proving the check can fail.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Answers what the Makefile asks of $(PYTHON) and of .venv/bin/python; `--version` waits for the other
# set-up to reach it too (a rendezvous, so a loaded machine cannot serialize the unlocked control by
# chance); `pip install` holds a "busy" marker for a second and fails if another install already holds
# it (the real race's pip error).
FAKE_PYTHON = """#!/bin/sh
log="$FAKE_LOG"
case "$1 $2" in
  "-c import sys") exit 0 ;;
  "--version ")
    # Both set-ups meet here (at most 5 s) so that, unlocked, they surely overlap whatever the load
    touch "$log.arrived.$$"; waited=0
    while set -- "$log".arrived.*; [ "$#" -lt 2 ] && [ "$waited" -lt 50 ]; do sleep 0.1; waited=$((waited + 1)); done
    echo "Python 3.99.0"; exit 0 ;;
  "-m venv") mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; echo venv >> "$log"; exit 0 ;;
  "-m pip")
    if ! mkdir "$log.busy" 2>/dev/null; then echo "pip: No module named pip" >&2; echo clash >> "$log"; exit 1; fi
    echo "pip $*" >> "$log"; sleep 1; rmdir "$log.busy"; exit 0 ;;
esac
echo "fake python: unexpected $*" >&2
exit 2
"""


def _clone(folder: Path, *, without_lock: bool = False) -> None:
    folder.mkdir()
    makefile = (ROOT / "Makefile").read_text()
    if without_lock:
        assert "exec 9>$(VENV_LOCK) && flock 9 && \\" in makefile
        makefile = makefile.replace("exec 9>$(VENV_LOCK) && flock 9 && \\", "true && \\")
    (folder / "Makefile").write_text(makefile)
    (folder / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    pins = folder / "functions" / "mcp" / "requirements.txt"  # the set-up's constraints, as in a clone
    pins.parent.mkdir(parents=True)
    pins.write_text("mcp==2.1.1\n")
    fake = folder / "fake-python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)


def _run_two_together(folder: Path) -> tuple[list[subprocess.CompletedProcess[str]], list[str]]:
    log = folder / "setup.log"
    environment = {"PATH": "/usr/bin:/bin", "FAKE_LOG": str(log)}
    fake = folder / "fake-python"
    command = ["make", "--no-print-directory", "-C", str(folder), f"PYTHON={fake}", ".venv/.installed"]
    processes = [
        subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    results = []
    for process in processes:
        output, _ = process.communicate(timeout=60)
        results.append(subprocess.CompletedProcess(command, process.returncode, output, ""))
    return results, log.read_text().splitlines() if log.exists() else []


@pytest.mark.skipif(shutil.which("flock") is None or shutil.which("make") is None, reason="needs make and flock")
def test_two_makes_started_together_both_succeed_and_build_once(tmp_path: Path) -> None:
    folder = tmp_path / "clone"
    _clone(folder)
    results, log = _run_two_together(folder)
    assert [result.returncode for result in results] == [0, 0], [result.stdout for result in results]
    assert "clash" not in log
    assert log.count("venv") == 1
    assert sum(line.startswith("pip ") for line in log) == 2  # upgrade pip + install, once
    # the install is held to the MCP function's pins, so the tests run what that function ships
    assert any("-c functions/mcp/requirements.txt -e .[dev]" in line for line in log), log
    assert any("Set-up done by another make." in result.stdout for result in results)
    assert (folder / ".venv" / ".installed").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_control_without_the_lock_the_two_set_ups_clash(tmp_path: Path) -> None:
    folder = tmp_path / "clone"
    _clone(folder, without_lock=True)
    results, log = _run_two_together(folder)
    assert "clash" in log
    assert sorted(result.returncode for result in results)[-1] != 0
