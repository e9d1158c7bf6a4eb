"""Loopback HTTP servers for the client tests: a scripted one, and the real API handler whose answers can be lost."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws
from threadloom import SqliteStore
from threadloom.api.runtime import Runtime, Settings, set_runtime
from threadloom.local_server import LOCAL_TENANT, invoke_handler, to_event

PROFILE = """
blocks:
  - {label: soul, kind: static, content: You are a ship's navigator.}
  - {label: memory, kind: writable, max_tokens: 1100}
  - {label: skills, kind: skills}
compaction: {threshold: 100000, protect_head: 1, tail_token_budget: 30, min_tail_messages: 2}
searchable_history: history
limits: {max_message_bytes: 20000, default_page_size: 50, max_page_size: 200}
"""


def msg(message_id: str, role: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


SESSION = {
    "id": "s1",
    "name": "n",
    "parentSessionId": None,
    "model": None,
    "source": None,
    "inputTokens": 0,
    "outputTokens": 0,
    "estimatedCost": 0.0,
    "endReason": None,
    "createdAt": "2026-01-01T00:00:00.000Z",
    "updatedAt": "2026-01-01T00:00:00.000Z",
}


class QuietServer(ThreadingHTTPServer):
    """A dropped connection is the point of these servers, not an error worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class Script:
    """What the scripted server answers, in order (a body of bytes as it is, anything else as JSON); every request
    it sees is recorded."""

    def __init__(self, *answers: tuple[int, dict[str, str], Any] | str) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[bytes] = []


@contextmanager
def scripted_server(script: Script) -> Iterator[str]:
    class Scripted(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            script.bodies.append(self.rfile.read(length))
            script.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            answer = script.answers.pop(0) if script.answers else (200, {}, SESSION)
            if answer == "drop":  # the request arrived; the answer never does
                self.close_connection = True
                self.connection.shutdown(2)
                return
            status, headers, body = answer  # type: ignore[misc]
            raw = isinstance(body, bytes)  # a page of a proxy's or a gateway's own, sent as it is
            data = body if raw else json.dumps(body).encode()
            self.send_response(status)
            for key, value in {"content-type": "text/html" if raw else "application/json", **headers}.items():
                self.send_header(key, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = QuietServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


UNAVAILABLE = (503, {}, {"error": {"code": "storage_unavailable", "message": "Database is down"}})


@contextmanager
def api_behind_a_flaky_network(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """The real API handler (idempotency on a moto DynamoDB table) whose first answer per listed route is lost."""
    with mock_aws():
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="idem",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        store = SqliteStore(str(tmp_path / "api.db"))
        set_runtime(Runtime(Settings(sqlite_path=str(tmp_path / "api.db"), idempotency_table="idem"), store=store))
        to_drop: list[str] = []

        class Flaky(BaseHTTPRequestHandler):
            """The local server's event conversion and handler call, over the stdlib server so answers can be lost."""

            protocol_version = "HTTP/1.1"

            def _dispatch(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                event = to_event(self.command, self.path, dict(self.headers.items()), body, LOCAL_TENANT)
                status, headers, data = invoke_handler(event)
                route = f"{self.command} {self.path}"
                if route in to_drop:  # the handler ran; the answer is lost on the way back
                    to_drop.remove(route)
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

            def log_message(self, *args: Any) -> None:
                pass

        server = QuietServer(("127.0.0.1", 0), Flaky)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}", to_drop
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            set_runtime(None)
            store.close()
