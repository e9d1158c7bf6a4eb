"""Serve the HTTP API on a laptop: stdlib HTTP server → API Gateway v2 event → the Lambda handler.

``python -m threadloom.local_server --host 127.0.0.1 --port 3000 --data-dir .threadloom``
runs the embedded default (SQLite file, skills from a local folder, in-process compaction
with the offline summarizer, the default profile). Every request is handled by the same
``lambda_handler`` as in AWS, as tenant ``local`` (no JWT is checked locally).
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

LOCAL_TENANT = "local"
# Powertools' resolver keeps the current event on the (global) app, so two requests must never be
# inside the handler at once; Lambda runs one request per environment at a time anyway.
HANDLER_LOCK = threading.Lock()
MAX_BODY_BYTES = 6 * 1024 * 1024
EXAMPLE_SKILLS = {
    "pirate": ("Talk like a pirate", 'Answer in pirate speak: say "arr", call the user "matey".'),
    "tax": ("Tax workflows", "1. Collect receipts.\n2. Sum income by category.\n3. File before the deadline."),
}


class _Context:
    """Just enough of a Lambda context for Powertools."""

    function_name = "threadloom-local"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:threadloom-local"

    def __init__(self) -> None:
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def to_event(method: str, target: str, headers: dict[str, str], body: bytes, tenant: str) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event, as the JWT authorizer would pass it on."""
    parts = urlsplit(target)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    now = datetime.now(UTC)
    text: str | None = None
    encoded = False
    if body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text, encoded = base64.b64encode(body).decode("ascii"), True
    lowered = {key.lower(): value for key, value in headers.items()}
    if lowered.get("content-type", "").startswith("application/x-www-form-urlencoded") and body[:1] in (b"{", b"["):
        lowered["content-type"] = "application/json"  # curl -d without -H: it is JSON, say so
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path,
        "rawQueryString": parts.query,
        "headers": lowered,
        **({"queryStringParameters": query} if query else {}),
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": "localhost",
            "domainPrefix": "localhost",
            "http": {"method": method, "path": parts.path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
            "authorizer": {"jwt": {"claims": {"sub": tenant}, "scopes": None}},
        },
        **({"body": text, "isBase64Encoded": encoded} if text is not None else {"isBase64Encoded": False}),
    }


class Handler(BaseHTTPRequestHandler):
    """Converts each request to an event and writes the handler's answer back."""

    server_version = "threadloom-local"
    protocol_version = "HTTP/1.1"
    tenant = LOCAL_TENANT

    def _dispatch(self) -> None:
        from threadloom_api import lambda_handler

        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            self._write(
                413,
                {"content-type": "application/json"},
                b'{"error":{"code":"payload_too_large","message":"Request body exceeds 6 MB"}}',
            )
            return
        body = self.rfile.read(length) if length else b""
        event = to_event(self.command, self.path, dict(self.headers.items()), body, self.tenant)
        with HANDLER_LOCK:
            result = lambda_handler(event, _Context())
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        self._write(int(result.get("statusCode", 500)), dict(result.get("headers") or {}), data)

    def _write(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("content-length", "connection"):
                self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _dispatch

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def seed_skills(directory: Path) -> None:
    """Write the example skills on first start (an existing folder is left alone)."""
    if directory.exists():
        return
    from threadloom.providers.local_skills import LocalSkillProvider

    provider = LocalSkillProvider(directory)
    for key, (description, content) in EXAMPLE_SKILLS.items():
        provider.set(key, content, description)


def configure(data_dir: Path) -> None:
    """Point the runtime at the data dir and make ``threadloom_api`` importable (repo checkout layout)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    skills = data_dir / "skills"
    seed_skills(skills)
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "threadloom-local")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ThreadloomLocal")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "1")
    from threadloom.api.runtime import Runtime, Settings, set_runtime

    set_runtime(
        Runtime(
            Settings(
                sqlite_path=str(data_dir / "threadloom.db"),
                skills_dir=str(skills),
                compaction_mode="in-process",
                profile_path=os.environ.get("THREADLOOM_PROFILE") or None,
            )
        )
    )
    functions = Path(__file__).resolve().parents[3] / "functions" / "api"
    if functions.is_dir() and str(functions) not in sys.path:
        sys.path.insert(0, str(functions))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Threadloom HTTP API on a local SQLite file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--data-dir", default=".threadloom", type=Path)
    parser.add_argument("--tenant", default=LOCAL_TENANT, help="the JWT 'sub' every request carries")
    args = parser.parse_args(argv)
    configure(args.data_dir)
    Handler.tenant = args.tenant
    import threadloom_api  # noqa: F401 - fail now, not on the first request

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(
        f"Threadloom API on http://{args.host}:{server.server_port} (data in {args.data_dir}, tenant {args.tenant!r})",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
