"""``/mcp`` over Streamable HTTP: one API Gateway HTTP API (payload 2.0) event in, one Lambda response out.

The deployed function's entry (``functions/api/threadloom_api.py``) and the local server send requests
for ``/mcp`` here, so both serve the same code. Before the SDK sees a request it passes the REST API's
edge: the same size, media type and JSON checks (``api.edge``) and the tenant of the verified JWT
(``api.tenancy``), refused with the same error envelope (413, 415, 400, 401). Then the SDK's
Streamable HTTP transport answers it statelessly with plain JSON (``stateless=True``,
``json_response=True``): nothing is kept between requests, so any Lambda instance may serve any of them.
The answer passes the same response byte cap as every other route.

Only POST is served. A stateless server has no stream to offer a GET (the specification lets it answer
405), and the SDK's transport would open one that never ends: on the local server, which runs one
request at a time, a single cross-site navigation to ``/mcp`` then froze every route. A request the
transport has not answered within :data:`REQUEST_SECONDS` gets a 504, so no other path can do the same.
"""

from __future__ import annotations

import asyncio
import base64
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit

from threadloom.api.edge import MAX_BODY_BYTES, check_event, with_security_headers
from threadloom.api.observability import logger, metrics, tracer
from threadloom.api.routes.app import envelope, refused, within_response_cap
from threadloom.api.runtime import get_runtime
from threadloom.api.tenancy import has_scope, resolve_tenant
from threadloom.errors import ThreadloomError
from threadloom.mcp.binding import CURRENT, Binding

if TYPE_CHECKING:
    from collections.abc import MutableMapping

    from aws_lambda_powertools.utilities.typing import LambdaContext

MCP_PATH = "/mcp"
REQUEST_SECONDS = 8.0
"""How long the transport may take over one request: under the functions' 10 s timeout (template.yaml)."""
SESSION_PARAMETER = "session"
"""``/mcp?session=ID`` binds the reference tools to one session, as ``threadloom mcp --session`` does."""


def is_mcp_path(path: str) -> bool:
    """Whether a request path is the MCP endpoint (with or without a trailing slash)."""
    return path.rstrip("/") == MCP_PATH


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Answer one ``/mcp`` request (the function's entry calls this for that path only)."""
    metrics.add_metric(name="McpRequests", unit=MetricUnit.Count, value=1)
    return with_security_headers(handle(event))


def handle(event: dict[str, Any]) -> dict[str, Any]:
    """The REST API's edge checks and tenancy, then the SDK's answer; never raises."""
    method = str(((event.get("requestContext") or {}).get("http") or {}).get("method", "POST")).upper()
    if method != "POST":
        response = envelope(
            event,
            HTTPStatus.METHOD_NOT_ALLOWED,
            "method_not_allowed",
            f"{MCP_PATH} answers POST only (Streamable HTTP, stateless: no event stream to open), not {method[:16]}",
        )
        response["headers"]["Allow"] = "POST"
        return response
    runtime = get_runtime()
    limits = runtime.limits
    try:
        check_event(event, limits, extra_depth=4)  # a message sits in {"params": {"arguments": {"message": …}}}
        tenant = resolve_tenant(
            event.get("requestContext") or {},
            runtime.settings.tenant_claim,
            limits,
            local_tenant=runtime.settings.local_tenant,
        )
        session = (event.get("queryStringParameters") or {}).get(SESSION_PARAMETER) or None
    except ThreadloomError as error:
        logger.info("MCP request refused before the protocol", error_type=type(error).__name__)
        return refused(event, error)
    jwt = ((event.get("requestContext") or {}).get("authorizer") or {}).get("jwt") or {}
    claims = jwt.get("claims") or {}
    subject = claims.get(runtime.settings.subject_claim)
    binding = Binding(
        manager=runtime.manager(tenant),
        limits=limits,
        session_id=session,
        subject_id=subject if isinstance(subject, str) and subject else None,
        may_name_subjects=not runtime.profile.has_subject_blocks
        or has_scope(jwt.get("scopes"), claims, runtime.settings.act_for_users_scope),
    )
    try:
        status, headers, body = asyncio.run(_serve(binding, _scope(event), _body(event)))
    except TimeoutError:
        logger.warning("MCP request not answered in time", seconds=REQUEST_SECONDS)
        return envelope(
            event,
            HTTPStatus.GATEWAY_TIMEOUT,
            "mcp_timeout",
            f"The MCP request was not answered within {REQUEST_SECONDS:g} s and was stopped there",
        )
    response = {"statusCode": status, "headers": headers, "body": body.decode("utf-8"), "isBase64Encoded": False}
    return within_response_cap(event, response, limits.max_response_bytes)


async def _serve(binding: Binding, scope: dict[str, Any], body: bytes) -> tuple[int, dict[str, str], bytes]:
    """Run the SDK's stateless Streamable HTTP transport on one request; its status, headers and body."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    from threadloom.mcp.server import build_server

    CURRENT.set(binding)
    manager = StreamableHTTPSessionManager(
        app=build_server(),
        json_response=True,
        stateless=True,
        # Host and origin are checked where they can be: API Gateway's domain, the local server's access rules.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=MAX_BODY_BYTES,
    )
    sent = False
    status, headers, chunks = 500, {}, []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # no more body; a disconnect never comes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for key, value in message.get("headers", []):
                headers[key.decode("latin-1")] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    async with asyncio.timeout(REQUEST_SECONDS), manager.run():
        await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)


def _scope(event: dict[str, Any]) -> dict[str, Any]:
    """The ASGI scope of the request API Gateway described."""
    http = (event.get("requestContext") or {}).get("http") or {}
    path = event.get("rawPath") or MCP_PATH
    headers = [
        (str(key).lower().encode("latin-1"), str(value).encode("latin-1", errors="replace"))
        for key, value in (event.get("headers") or {}).items()
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": str(http.get("method", "POST")).upper(),
        "scheme": "https",
        "path": path,
        "raw_path": path.encode("utf-8"),
        "query_string": str(event.get("rawQueryString") or "").encode("utf-8"),
        "root_path": "",
        "headers": headers,
        "client": (str(http.get("sourceIp", "")), 0),
        "server": ("threadloom", 443),
    }


def _body(event: dict[str, Any]) -> bytes:
    body = event.get("body") or ""
    return base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")


__all__ = ["MCP_PATH", "handle", "is_mcp_path", "lambda_handler"]
