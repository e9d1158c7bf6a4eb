"""The local server's transport: every answer in the error envelope, 32 parallel clients, a busy port."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_server import ROOT, RunningServer, local_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with local_server(tmp_path_factory.mktemp("transport") / "data") as running:
        yield running


def request(
    server: RunningServer, method: str, target: str, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        connection.request(method, target, body=body, headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def raw(server: RunningServer, data: bytes) -> tuple[int, dict[str, Any]]:
    """Send bytes that are not valid HTTP; the status line and the JSON body of the answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def assert_envelope(body: bytes, code: str) -> str:
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message"} and error["code"] == code and error["message"]
    return str(error["message"])


def test_a_100_kb_url_answers_414_in_the_envelope(server: RunningServer) -> None:
    status, headers, body = request(server, "GET", "/sessions?cursor=" + "x" * 100_000)
    assert status == 414 and headers["content-type"].startswith("application/json")
    assert "limit is 65536 bytes" in assert_envelope(body, "uri_too_long")


def test_head_and_options_reach_the_handler(server: RunningServer) -> None:
    get_status, _, _ = request(server, "GET", "/health")
    status, headers, body = request(server, "HEAD", "/health")
    assert status != 501 and body == b"" and "html" not in headers.get("content-type", "")
    status, headers, body = request(server, "OPTIONS", "/sessions")
    assert status != 501 and "html" not in headers.get("content-type", "")
    if body:
        json.loads(body)
    assert get_status == 200


def test_malformed_requests_and_wrong_use_of_ws_answer_in_the_envelope(server: RunningServer) -> None:
    status, envelope = raw(server, b"NOT-HTTP\r\n\r\n")
    assert status == 400 and envelope["error"]["code"] == "bad_request"
    status, envelope = raw(server, b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
    assert status == 400 and envelope["error"]["message"].startswith("Malformed HTTP request")
    status, _, body = request(server, "GET", "/ws")
    assert status == 426 and "WebSocket" in assert_envelope(body, "upgrade_required")
    status, _, body = request(server, "POST", "/sessions", b"x" * (6 * 1024 * 1024 + 1))
    assert status == 413 and assert_envelope(body, "payload_too_large")


def test_32_parallel_clients_get_no_connection_reset(server: RunningServer) -> None:
    clients, per_client = 32, 8
    barrier = threading.Barrier(clients)
    failures: list[str] = []
    statuses: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        barrier.wait()
        for _ in range(per_client):
            try:
                status, _, _ = request(server, "GET", "/health")  # a new connection each time
            except OSError as error:
                with lock:
                    failures.append(repr(error))
            else:
                with lock:
                    statuses.append(status)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert statuses == [200] * (clients * per_client)


def test_a_busy_port_gives_one_line_and_a_non_zero_exit(server: RunningServer, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "threadloom.local_server", "--port", str(server.port), "--data-dir", str(tmp_path)]
    second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert second.returncode == 1
    assert second.stdout == ""
    assert second.stderr.count("\n") == 1
    assert second.stderr.startswith(f"threadloom: cannot listen on 127.0.0.1:{server.port}: the port is already in use")
