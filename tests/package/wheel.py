"""Build Threadloom's wheel once per test run, and run commands in a fresh virtual environment outside the repository.

The build is ``python -m build`` as a release would run it: an sdist first, then the wheel from the unpacked
sdist in an isolated environment (so both must carry the package data). With pytest-xdist, the workers
share one build under a lock (so two builds never write the source tree's egg-info at once).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.docs.runner import Block, read_blocks

REPOSITORY = Path(__file__).resolve().parents[2]
BUILD_SECONDS = 300
INSTALL_SECONDS = 300
WHEEL_FLAG = "wheel"
"""A README block fenced ```` ```console wheel ```` runs here, outside the repository (tests/docs skips it)."""
DIST_PLACEHOLDER = "/path/to/threadloom/dist"


@dataclass(frozen=True)
class Built:
    wheel: Path
    sdist: Path
    log: str


def shared_build_folder(tmp_path_factory: Any) -> Path:
    """One folder per test run that every pytest-xdist worker sees (and only this run)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run:
        return Path(tmp_path_factory.getbasetemp()).parent / f"threadloom-wheel-{run}"
    return Path(tmp_path_factory.getbasetemp()) / "threadloom-wheel"


def build_once(shared: Path) -> Built:
    """The wheel and sdist of this checkout, built by the first worker to ask; the others wait and reuse them."""
    shared.mkdir(parents=True, exist_ok=True)
    with (shared / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        dist, log_file = shared / "dist", shared / "build.log"
        if not list(dist.glob("*.whl")):
            shutil.rmtree(dist, ignore_errors=True)
            result = subprocess.run(
                [sys.executable, "-m", "build", "--outdir", str(dist), str(REPOSITORY)],
                capture_output=True,
                text=True,
                timeout=BUILD_SECONDS,
                check=False,
                env=clean_environment(),
            )
            log_file.write_text(result.stdout + result.stderr, encoding="utf-8")
            assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        (wheel,) = dist.glob("threadloom-*-py3-none-any.whl")
        (sdist,) = dist.glob("threadloom-*.tar.gz")
        return Built(wheel, sdist, log_file.read_text(encoding="utf-8"))


def clean_environment(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would reach back into the checkout or the dev venv."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_", "THREADLOOM_", "POWERTOOLS_", "COV_")
    environment = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    development_bin = str(Path(sys.executable).parent)
    path = [entry for entry in environment.get("PATH", "").split(os.pathsep) if entry and entry != development_bin]
    environment["PATH"] = os.pathsep.join(path)
    environment.update({"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb", **extra})
    return environment


def install_blocks() -> list[Block]:
    """The README's blocks that run against the built wheel, in order."""
    blocks = [block for block in read_blocks(REPOSITORY / "README.md") if WHEEL_FLAG in block.flags]
    assert blocks, "README.md has no ```console wheel block (the install commands)"
    return blocks


def snippet_with_output(marker: str) -> tuple[str, str]:
    """The README ```python block containing ``marker`` and the ```output block after it."""
    blocks = read_blocks(REPOSITORY / "README.md")
    for position, block in enumerate(blocks[:-1]):
        if block.language == "python" and marker in block.text and blocks[position + 1].language == "output":
            return block.text, blocks[position + 1].text
    raise AssertionError(f"README.md has no python block with {marker!r} followed by an output block")


class Shell:
    """One bash process in the temporary folder, so ``. .venv/bin/activate`` lasts as in a terminal."""

    def __init__(self, folder: Path, environment: dict[str, str]) -> None:
        self.folder = folder
        self.process = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=folder,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def run(self, command: str, timeout: float = INSTALL_SECONDS) -> tuple[int, str]:
        """Exit status and output (stdout and stderr together) of one command."""
        assert self.process.stdin and self.process.stdout
        marker = f"__threadloom_package_{uuid.uuid4().hex}__"
        self.process.stdin.write(f"{command}\nprintf '\\n{marker} %s\\n' \"$?\"\n")
        self.process.stdin.flush()
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        for line in self.process.stdout:  # the command's own timeout bounds this (pip's, the server's)
            if line.startswith(marker):
                text = "".join(lines)
                return int(line.split()[1]), text[:-1] if text.endswith("\n") else text
            lines.append(line)
            assert time.monotonic() < deadline, f"{command!r} ran past {timeout:.0f} s"
        raise AssertionError(f"the shell ended during {command!r}: {''.join(lines)}")

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()


def normalised(text: str, port: int | None = None) -> list[str]:
    """Non-blank lines without trailing spaces; the server's port shown as the README's 3000."""
    if port is not None:
        text = text.replace(f":{port}", ":3000")
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def commands_in(block: Block) -> list[tuple[str, list[str]]]:
    """(command, lines it shows) for each ``$ `` line of a console block; a trailing ``# comment`` is dropped."""
    commands: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            commands.append((re.sub(r"\s+#.*$", "", line[2:]).strip(), []))
        elif line.strip():
            assert commands, f"{block.where}: a console block starts with '$ command'"
            commands[-1][1].append(line)
    return commands
