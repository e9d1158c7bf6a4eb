"""``scripts/smoke_test.py`` against the local server, as CI runs it (a deploy runs it against the stack's URL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support.local_server import ROOT, free_port, local_server

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.e2e
SCRIPT = ROOT / "scripts" / "smoke_test.py"


@pytest.fixture(scope="module")
def smoke_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with local_server(tmp_path_factory.mktemp("smoke") / "d") as server:
        yield server.url


def smoke(*arguments: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "THREADLOOM_TOKEN"}
    command = [sys.executable, str(SCRIPT), *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)


def test_the_smoke_test_passes_against_the_local_server(smoke_server: str) -> None:
    result = smoke(smoke_server, "--token", "ignored-locally")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "ok  health: the API answers and its storage is reachable"
    assert lines[-2:] == ["ok  deleted the session", f"smoke test passed against {smoke_server}"]
    assert len(lines) == 8


def test_the_base_url_can_come_from_the_stack_outputs(smoke_server: str, tmp_path: Path) -> None:
    outputs = {"Stacks": [{"Outputs": [{"OutputKey": "ApiUrl", "OutputValue": smoke_server + "/"}]}]}
    (tmp_path / "outputs.json").write_text(json.dumps(outputs), encoding="utf-8")
    result = smoke("--outputs", str(tmp_path / "outputs.json"))
    assert result.returncode == 0, result.stderr


def test_an_unreachable_api_fails_with_the_reason() -> None:
    result = smoke(f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 1
    assert result.stderr.startswith("FAILED  GET /health: cannot reach")
