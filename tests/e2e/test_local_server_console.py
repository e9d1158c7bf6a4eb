"""The local server's console is for people: at most one line per request, no metrics (issue 30).

The first request used to print an EMF metrics JSON blob (the cold-start metric) and Powertools'
``UserWarning: No application metrics to publish``. Through a real server in a subprocess; the
control turns metrics on (as in Lambda) and sees the blob, so the check can fail.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.local_server import call, local_server

pytestmark = pytest.mark.e2e


def console_after_requests(tmp_path: Path, env: dict[str, str]) -> tuple[list[str], int]:
    with local_server(tmp_path / "data", env=env) as server:
        requests = 0
        for method, path, body in [
            ("GET", "/health", None),
            ("POST", "/sessions", {"name": "Console"}),
            ("GET", "/sessions", None),
            ("GET", "/sessions/nope", None),
        ]:
            call(server.url, method, path, body)
            requests += 1
        time.sleep(0.3)  # the access log line is written after the response
        lines = server.log.read_text(encoding="utf-8").splitlines()
    return lines, requests


def test_the_console_shows_one_line_per_request_and_no_metrics(tmp_path: Path) -> None:
    lines, requests = console_after_requests(tmp_path, {"THREADLOOM_TEST_CONSOLE": "1"})
    banner, rest = lines[:3], lines[3:]
    assert banner[0].startswith("Threadloom API on http://127.0.0.1:") and banner[1].startswith("Live status on")
    assert banner[2].startswith("MCP (Streamable HTTP) on http://127.0.0.1:")
    text = "\n".join(rest)
    assert '"_aws"' not in text and "CloudWatchMetrics" not in text
    assert "UserWarning" not in text and "No application metrics" not in text
    assert len(rest) <= requests, rest
    assert all('HTTP/1.1"' in line for line in rest), rest


def test_control_with_metrics_on_the_blob_appears(tmp_path: Path) -> None:
    lines, _ = console_after_requests(tmp_path, {"POWERTOOLS_METRICS_DISABLED": "0"})
    assert any('"_aws"' in line for line in lines), lines
