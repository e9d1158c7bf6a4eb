"""Starting ``python -m threadloom.local_server`` (or a test harness around it) in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RunningServer:
    port: int
    process: subprocess.Popen[str]

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
) -> Iterator[RunningServer]:
    """A server on a free port, stopped afterwards; ``script`` runs a harness file instead of the module."""
    port = port or free_port()
    env = dict(os.environ)
    if profile is not None:
        profile_path = data_dir.parent / f"{data_dir.name}-profile.yaml"
        profile_path.write_text(profile, encoding="utf-8")
        env["THREADLOOM_PROFILE"] = str(profile_path)
    start = [str(script)] if script is not None else ["-m", "threadloom.local_server"]
    command = [sys.executable, *start, "--port", str(port), "--data-dir", str(data_dir)]
    if tenant is not None:
        command += ["--tenant", tenant]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert f"http://127.0.0.1:{port}" in banner, banner
        yield RunningServer(port, process)
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def call(base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
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
