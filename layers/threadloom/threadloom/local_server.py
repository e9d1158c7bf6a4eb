"""Serve the HTTP API and live status on a laptop: one port, aiohttp, the same Lambda handler as in AWS.

``python -m threadloom.local_server --host 127.0.0.1 --port 3000 --data-dir .threadloom``
runs the embedded default (SQLite file, skills from a local folder, in-process compaction
with the offline summarizer, the default profile). Every HTTP request becomes an API Gateway
v2 event for ``lambda_handler``, as tenant ``local`` (``--tenant`` / ``make serve TENANT=…``;
no JWT is checked locally). ``/ws`` speaks the live-status protocol (``docs/live-status.md``)
for the same tenant. Whatever goes wrong, even in the HTTP parser, the answer is the JSON
error envelope ``{"error": {"code", "message"}}``. Before either, ``threadloom.local_access`` refuses
host names the server was not started for (DNS rebinding), requests from web pages on other origins
and bodies without a Content-Type, since no token protects the server from the pages a browser opens.

aiohttp is needed here only (the ``local`` extra); the Lambda functions never import this module.

Over 400 lines because it is the whole local entry point (HTTP bridge, live WebSocket, command line)
in the one module the Lambda functions never import.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import errno
import json
import logging
import os
import signal
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from threadloom.local_access import AccessRules

if TYPE_CHECKING:
    from aiohttp import web

    from threadloom.live.hub import LocalHub

LOCAL_TENANT = "local"
MAX_BODY_BYTES = 6 * 1024 * 1024
MAX_URL_BYTES = 64 * 1024
"""Longer request targets answer 414 (API Gateway refuses long request lines too)."""
PARSER_LINE_BYTES = 1024 * 1024
"""What the HTTP parser accepts before it gives up, so that most long URLs reach the 414 above."""
LISTEN_BACKLOG = 1024
HANDLER_THREADS = 16
HANDLER_LOCK = threading.Lock()
"""Powertools' resolver keeps the current event on the (global) app, so two requests must never be
inside the handler at once; Lambda runs one request per environment at a time anyway."""
LOCAL_DROPPED_HEADERS = frozenset({"content-length", "connection", "transfer-encoding", "strict-transport-security"})
"""Handler headers aiohttp sets itself, and HSTS, which means nothing over the local server's plain HTTP."""
IDLE_SWEEP_MINUTES = 1
"""How often the local server queues reflections of idle sessions (when the profile sets reflection.idle_minutes)."""
MCP_PATHS = frozenset({"/mcp", "/mcp/"})
"""The MCP endpoint (Streamable HTTP, ``threadloom.mcp.http``), as in ``functions/api/threadloom_api.py``."""
WS_OUTBOX = 256
"""Events queued for one WebSocket client; a client this far behind is disconnected."""
EXAMPLE_SKILLS = {
    "pirate": ("Talk like a pirate", 'Answer in pirate speak: say "arr", call the user "matey".'),
    "tax": ("Tax workflows", "1. Collect receipts.\n2. Sum income by category.\n3. File before the deadline."),
}
logger = logging.getLogger(__name__)


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
    # As API Gateway does: the path arrives percent-decoded and cut at a decoded "?".
    path = unquote(parts.path).split("?", 1)[0]
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
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": parts.query,
        "headers": lowered,
        **({"queryStringParameters": query} if query else {}),
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": "localhost",
            "domainPrefix": "localhost",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
            "authorizer": {"jwt": {"claims": {"sub": tenant}, "scopes": None}},
        },
        **({"body": text, "isBase64Encoded": encoded} if text is not None else {"isBase64Encoded": False}),
    }


def error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode("utf-8")


def invoke_handler(event: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """Run the API Lambda handler on one event (in a worker thread); its status, headers and body.

    ``/mcp`` goes to the MCP server's handler, as the deployed function's entry sends it there.
    """
    from threadloom.api.routes.app import lambda_handler

    handler = lambda_handler
    if event.get("rawPath") in MCP_PATHS:
        from threadloom.mcp.http import lambda_handler as handler

    with HANDLER_LOCK:
        result = handler(event, _Context())
    payload = result.get("body") or ""
    data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
    headers = {str(key): str(value) for key, value in (result.get("headers") or {}).items()}
    return int(result.get("statusCode", 500)), headers, data


class LocalServer:
    """The aiohttp side: HTTP requests to the handler, ``/ws`` to the live-status hub."""

    def __init__(self, hub: LocalHub, tenant: str, access: AccessRules | None = None) -> None:
        self.hub = hub
        self.tenant = tenant
        self.access = access or AccessRules.for_server("127.0.0.1", 3000)
        """Replaced once the port is bound (``serve``): the hosts and origins answered."""
        self.pool = ThreadPoolExecutor(max_workers=HANDLER_THREADS, thread_name_prefix="threadloom-request")

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        from aiohttp import web

        try:
            refusal = self.refusal(request)
            if refusal is not None:
                return refusal
            if request.path == "/ws":
                return await self.websocket(request)
            return await self.http(request)
        except web.HTTPException as exc:
            return envelope(exc.status, _code_for(exc.status), exc.reason)
        except Exception:
            logger.exception("Request %s %s failed", request.method, request.path)
            return envelope(500, "internal_error", "The local server failed to handle the request; see its log")

    def refusal(self, request: web.BaseRequest) -> web.Response | None:
        """The answer to a request from a host name or web page the server does not serve (``local_access``)."""
        headers = {key.lower(): value for key, value in request.headers.items()}
        has_body = bool(request.content_length) or "chunked" in headers.get("transfer-encoding", "").lower()
        refused = self.access.check(request.method, headers, has_body=has_body)
        if refused is None:
            return None
        logger.info("Refused %s %s: %s", request.method, request.path, refused.message)  # the body says why
        return envelope(refused.status, refused.code, refused.message)

    async def http(self, request: web.BaseRequest) -> web.StreamResponse:
        from aiohttp import web

        if len(request.raw_path) > MAX_URL_BYTES:
            return envelope(
                414, "uri_too_long", f"The URL is {len(request.raw_path)} bytes; the limit is {MAX_URL_BYTES} bytes"
            )
        if (request.content_length or 0) > MAX_BODY_BYTES:
            return envelope(413, "payload_too_large", "Request body exceeds 6 MB")
        body = bytearray()
        async for chunk in request.content.iter_chunked(64 * 1024):
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return envelope(413, "payload_too_large", "Request body exceeds 6 MB")
        headers: dict[str, str] = {}
        for key, value in request.headers.items():
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        event = to_event(request.method, request.raw_path, headers, bytes(body), self.tenant)
        loop = asyncio.get_running_loop()
        status, response_headers, data = await loop.run_in_executor(self.pool, invoke_handler, event)
        response = web.Response(status=status, body=data)
        for key, value in response_headers.items():
            if key.lower() not in LOCAL_DROPPED_HEADERS:
                response.headers[key] = value
        return response

    async def websocket(self, request: web.BaseRequest) -> web.StreamResponse:
        from aiohttp import WSMsgType, web

        from threadloom.live.events import MAX_CLIENT_MESSAGE_BYTES
        from threadloom.live.subprotocol import LIVE_SUBPROTOCOL

        socket = web.WebSocketResponse(
            heartbeat=30, max_msg_size=MAX_CLIENT_MESSAGE_BYTES * 4, protocols=(LIVE_SUBPROTOCOL,)
        )
        if request.method != "GET" or not socket.can_prepare(request).ok:
            return envelope(426, "upgrade_required", "/ws is a WebSocket: connect with a WebSocket client")
        await socket.prepare(request)
        client = WebSocketClient(socket, asyncio.get_running_loop())
        pump = asyncio.create_task(client.pump())
        try:
            async for message in socket:
                if message.type == WSMsgType.TEXT:
                    await self.on_message(client, message.data)
                elif message.type == WSMsgType.BINARY:
                    client.offer(_error_text('Send text frames such as {"action": "subscribe", "sessionId": "<id>"}'))
        finally:
            client.close()
            self.hub.drop(client)
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        return socket

    async def on_message(self, client: WebSocketClient, data: str) -> None:
        from threadloom.api.runtime import get_runtime
        from threadloom.errors import ValidationError
        from threadloom.live.events import encode, error, parse_client_message
        from threadloom.live.status import subscribe_reply

        try:
            action = parse_client_message(data)
        except ValidationError as exc:
            client.offer(encode(error(str(exc))))
            return
        if action.action == "unsubscribe":
            self.hub.unsubscribe(client, self.tenant, action.session_id)
            return
        manager = get_runtime().manager(self.tenant)
        loop = asyncio.get_running_loop()
        reply = await loop.run_in_executor(self.pool, subscribe_reply, manager, action.session_id)
        if reply["type"] == "subscribed" and not self.hub.subscribe(client, self.tenant, action.session_id):
            limit = self.hub.max_subscriptions_per_connection
            reply = error(f"At most {limit} subscriptions per connection; unsubscribe from one first")
        client.offer(encode(reply))  # before any event published from now on (those go through the loop)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class WebSocketClient:
    """One ``/ws`` connection as the hub sees it: ``send`` queues from any thread and never blocks."""

    def __init__(self, socket: web.WebSocketResponse, loop: asyncio.AbstractEventLoop) -> None:
        self._socket = socket
        self._loop = loop
        self._outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=WS_OUTBOX)
        self.closed = False

    def send(self, text: str) -> bool:
        if self.closed:
            return False
        try:
            self._loop.call_soon_threadsafe(self.offer, text)
        except RuntimeError:  # the loop is gone: the server is stopping
            self.closed = True
        return not self.closed

    def offer(self, text: str) -> None:
        """Queue ``text`` (on the loop's thread); a client too far behind is disconnected."""
        if self.closed:
            return
        try:
            self._outbox.put_nowait(text)
        except asyncio.QueueFull:
            logger.warning("Closing a live-status client that fell %d events behind", WS_OUTBOX)
            self.close()
            self._loop.create_task(self._socket.close(code=1008, message=b"too far behind"))

    def close(self) -> None:
        self.closed = True

    async def pump(self) -> None:
        while True:
            text = await self._outbox.get()
            await self._socket.send_str(text)


def _error_text(message: str) -> str:
    from threadloom.live.events import encode, error

    return encode(error(message))


def envelope(status: int, code: str, message: str) -> web.Response:
    from aiohttp import web

    return web.Response(status=status, body=error_body(code, message), content_type="application/json")


_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    414: "uri_too_long",
    426: "upgrade_required",
    431: "headers_too_large",
}


def _code_for(status: int) -> str:
    return _CODES.get(status, "internal_error" if status >= 500 else "bad_request")


def build_server(local: LocalServer) -> web.Server:
    """aiohttp's low-level server whose connection handler answers parser errors with the envelope too."""
    from aiohttp import web
    from aiohttp.http_exceptions import LineTooLong
    from aiohttp.web_protocol import RequestHandler

    class EnvelopeRequestHandler(RequestHandler):
        def handle_error(
            self,
            request: web.BaseRequest,
            status: int = 500,
            exc: BaseException | None = None,
            message: str | None = None,
        ) -> web.StreamResponse:
            super().handle_error(request, status, exc, message)  # logs it; raises if a response already started
            if isinstance(exc, LineTooLong):
                answer = envelope(414, "uri_too_long", "The request line or a header is too long")
            elif status >= 500:
                answer = envelope(status, "internal_error", "The local server failed to handle the request")
            else:
                reason = str(getattr(exc, "message", "") or message or "the request is not valid HTTP")
                answer = envelope(status, _code_for(status), f"Malformed HTTP request: {reason}")
            answer.force_close()
            return answer

    class EnvelopeServer(web.Server):
        def __init__(self, **options: Any) -> None:
            super().__init__(local.handle, **options)
            self._envelope_options = options

        def __call__(self) -> RequestHandler:
            return EnvelopeRequestHandler(self, loop=asyncio.get_running_loop(), **self._envelope_options)

    return EnvelopeServer(max_line_size=PARSER_LINE_BYTES, max_field_size=64 * 1024)


def seed_skills(directory: Path) -> None:
    """Write the example skills on first start (an existing folder is left alone)."""
    if directory.exists():
        return
    from threadloom.providers.local_skills import LocalSkillProvider

    provider = LocalSkillProvider(directory)
    for key, (description, content) in EXAMPLE_SKILLS.items():
        provider.set(key, content, description)


def quiet_console_defaults() -> None:
    """Keep the console for people: the access log's one line per request, and warnings and errors.

    Metrics are off (no EMF JSON, no "No application metrics to publish") and the API's JSON log
    lines start at WARNING, so a refused request is its access line only. Both stay overridable
    (``POWERTOOLS_METRICS_DISABLED=0``, ``POWERTOOLS_LOG_LEVEL=INFO``).
    """
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


def configure(data_dir: Path, hub: LocalHub | None = None) -> None:
    """Point the runtime at the data dir and the hub."""
    data_dir.mkdir(parents=True, exist_ok=True)
    skills = data_dir / "skills"
    seed_skills(skills)
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "threadloom-local")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ThreadloomLocal")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    quiet_console_defaults()
    from threadloom.api.runtime import Runtime, Settings, set_runtime

    set_runtime(
        Runtime(
            Settings(
                sqlite_path=str(data_dir / "threadloom.db"),
                skills_dir=str(skills),
                compaction_mode="in-process",
                profile_path=os.environ.get("THREADLOOM_PROFILE") or None,
            ),
            publisher=hub,
        )
    )


def profile_problem() -> str | None:
    """The one line to exit with when the deployment profile cannot be used (file, key, problem), else None.

    Checked before the port is bound: an invalid profile used to start the server and then fail every request.
    """
    from threadloom.api.profile import ProfileError
    from threadloom.api.runtime import get_runtime

    runtime = get_runtime()
    try:
        _ = runtime.profile
        _ = runtime.limits
    except ProfileError as error:
        return f"threadloom: {error}"
    return None


async def serve(host: str, port: int, data_dir: Path, tenant: str, allowed_hosts: tuple[str, ...] = ()) -> int:
    """Listen until SIGTERM/SIGINT; 1 (after one line on stderr) when the profile is invalid or the address taken."""
    from aiohttp import web

    from threadloom.live.hub import LocalHub

    hub = LocalHub()
    configure(data_dir, hub)
    problem = profile_problem()
    if problem is not None:
        print(problem, file=sys.stderr, flush=True)
        return 1
    import threadloom.api.routes.app  # noqa: F401 - fail now, not on the first request

    local = LocalServer(hub, tenant)
    runner = web.ServerRunner(build_server(local))
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        local.close()
        reason = "the port is already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        hint = f"; stop the other server or pick another port (--port, make serve PORT={port + 1})"
        print(f"threadloom: cannot listen on {host}:{port}: {reason}{hint}", file=sys.stderr, flush=True)
        return 1
    bound = runner.addresses[0][1] if runner.addresses else port
    local.access = AccessRules.for_server(host, bound, allowed_hosts)
    print(f"Threadloom API on http://{host}:{bound} (data in {data_dir}, tenant {tenant!r})", flush=True)
    print(f"Live status on ws://{host}:{bound}/ws", flush=True)
    print(f"MCP (Streamable HTTP) on http://{host}:{bound}/mcp", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    sweeper = asyncio.create_task(sweep_idle_sessions(local))
    try:
        await stop.wait()
    finally:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
        await runner.cleanup()
        local.close()
    return 0


async def sweep_idle_sessions(local: LocalServer) -> None:
    """Every minute, queue reflections of the sessions gone idle (``reflection.idle_minutes``; off by default)."""
    from threadloom.api.runtime import get_runtime

    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(IDLE_SWEEP_MINUTES * 60)
        try:
            await loop.run_in_executor(local.pool, get_runtime().jobs.sweep_idle, IDLE_SWEEP_MINUTES)
        except Exception:
            logger.exception("The idle-reflection sweep failed; the next one tries again")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Threadloom HTTP API and live status on a local SQLite file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--data-dir", default=".threadloom", type=Path)
    parser.add_argument("--tenant", default=LOCAL_TENANT, help="the JWT 'sub' every request carries")
    parser.add_argument(
        "--allowed-hosts",
        default="",
        help="more host names (name or name:port, comma-separated) to answer besides localhost, 127.0.0.1, [::1]"
        " and --host; also THREADLOOM_ALLOWED_HOSTS",
    )
    args = parser.parse_args(argv)
    allowed_hosts = tuple(name.strip() for name in args.allowed_hosts.split(",") if name.strip())
    from threadloom.extras import missing_extra_message

    missing = missing_extra_message("the local server", "local", "aiohttp", "aws_lambda_powertools", "pydantic")
    if missing is not None:
        print(missing, file=sys.stderr)
        raise SystemExit(1)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    access = logging.getLogger("aiohttp.access")
    access_handler = logging.StreamHandler(sys.stderr)
    access_handler.setFormatter(logging.Formatter("%(message)s"))
    access.addHandler(access_handler)
    access.setLevel(logging.INFO)
    access.propagate = False
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(asyncio.run(serve(args.host, args.port, args.data_dir, args.tenant, allowed_hosts)))


if __name__ == "__main__":
    main()
