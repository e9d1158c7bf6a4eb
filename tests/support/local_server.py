"""``python -m threadloom.local_server`` in a subprocess on a free loopback port, for tests that need real HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def local_server(data_dir: Path, *, profile: str | None = None) -> Iterator[str]:
    """The base URL of a fresh server over ``data_dir``; stopped (and waited for) on exit."""
    env = dict(os.environ)
    if profile is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "profile.yaml").write_text(profile, encoding="utf-8")
        env["THREADLOOM_PROFILE"] = str(data_dir / "profile.yaml")
    port = free_port()
    command = [sys.executable, "-m", "threadloom.local_server", "--port", str(port), "--data-dir", str(data_dir / "d")]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert f"http://127.0.0.1:{port}" in banner, banner
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
