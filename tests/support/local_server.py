"""``python -m threadloom.local_server`` (or a harness around it) in a subprocess, for tests that need real HTTP.

One launcher for every test: the server writes its log to a file (a pipe nobody drains would block it
once full), the launcher waits for the banner, and the server is stopped and waited for on exit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RunningServer:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"


@contextmanager
def local_server(
    data_dir: Path,
    *,
    profile: str | None = None,
    tenant: str | None = None,
    port: int | None = None,
    script: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[RunningServer]:
    """A server over ``data_dir`` on a free port; ``script`` runs a harness file instead of the module."""
    port = port or free_port()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, **(env or {})}
    if profile is not None:
        profile_path = data_dir.parent / f"{data_dir.name}-profile.yaml"
        profile_path.write_text(profile, encoding="utf-8")
        environment["THREADLOOM_PROFILE"] = str(profile_path)
    start = [str(script)] if script is not None else ["-m", "threadloom.local_server"]
    command = [sys.executable, *start, "--port", str(port), "--data-dir", str(data_dir)]
    if tenant is not None:
        command += ["--tenant", tenant]
    log = data_dir.parent / f"{data_dir.name}-server-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=sink, stderr=subprocess.STDOUT)
    try:
        _wait_for_banner(log, port, process)
        yield RunningServer(port, process, log)
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_for_banner(log: Path, port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while f"http://127.0.0.1:{port}" not in (text := log.read_text(encoding="utf-8", errors="replace")):
        assert process.poll() is None, f"the server exited with {process.returncode}:\n{text}"
        assert time.monotonic() < deadline, f"no banner after {STARTUP_TIMEOUT_S} s:\n{text}"
        time.sleep(0.05)


def call(base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One JSON request; the status and the decoded body, for errors too."""
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("content-type", "application/json")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
