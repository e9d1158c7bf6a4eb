"""The live-status WebSocket Lambda: ``$connect``, ``$disconnect``, ``subscribe``, ``unsubscribe`` and ``$default``.

Each route is one call into ``threadloom.live.aws.routes``; a reply event goes back to the client as the route
response body (``subscribed`` or ``error``).
An invalid deployment profile is logged once at init, which then fails (``threadloom.api.startup``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import APIGatewayWebSocketEvent
from threadloom.api import startup
from threadloom.api.observability import logger, metrics, tracer
from threadloom.live.events import encode
from threadloom.live.subprotocol import SUBPROTOCOL_HEADER, selected_subprotocol

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from threadloom.live.aws.routes import WebSocketRoutes

startup.fail_init_on_invalid_profile()  # logged once; a connection then fails rather than every route erring

_routes: WebSocketRoutes | None = None


def get_routes() -> WebSocketRoutes:
    """The routes over the process-wide runtime and ``THREADLOOM_CONNECTIONS_TABLE``, built on first use."""
    global _routes  # noqa: PLW0603 - one instance per Lambda execution environment
    if _routes is None:
        from threadloom.api.runtime import get_runtime
        from threadloom.live.aws.connections import ConnectionsTable
        from threadloom.live.aws.routes import MAX_CONNECTIONS_PER_TENANT, WebSocketRoutes

        runtime = get_runtime()
        _routes = WebSocketRoutes(
            ConnectionsTable(os.environ.get("THREADLOOM_CONNECTIONS_TABLE", "")),
            runtime.manager,
            max_connections_per_tenant=int(
                os.environ.get("THREADLOOM_LIVE_CONNECTIONS_PER_TENANT", MAX_CONNECTIONS_PER_TENANT)
            ),
        )
    return _routes


def set_routes(routes: WebSocketRoutes | None) -> None:
    """Replace (or with None, forget) the routes; for tests."""
    global _routes  # noqa: PLW0603
    _routes = routes


def connected(event: dict[str, Any]) -> dict[str, Any]:
    """The ``$connect`` answer; it names ``threadloom.live`` when the client offered it (browsers do, with their token).

    A browser drops a handshake whose answer names none of the subprotocols it offered; the token subprotocol is
    never echoed back.
    """
    offered = next(
        (value for key, value in (event.get("headers") or {}).items() if key.lower() == SUBPROTOCOL_HEADER), None
    )
    selected = selected_subprotocol(offered)
    return {"statusCode": 200, "headers": {"Sec-WebSocket-Protocol": selected}} if selected else {"statusCode": 200}


@logger.inject_lambda_context(correlation_id_path="requestContext.requestId", clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = APIGatewayWebSocketEvent(event)
    route = request.request_context.route_key
    connection_id = request.request_context.connection_id
    logger.append_keys(route=route, connection_id=connection_id)
    routes = get_routes()
    metrics.add_metric(name="WebSocketRouteCalls", unit=MetricUnit.Count, value=1)
    if route == "$connect":
        authorizer = event["requestContext"].get("authorizer") or {}
        tenant = authorizer.get("tenant")
        if not tenant:  # only reachable if the route were deployed without its authorizer
            logger.error("$connect without an authorizer tenant; refusing the connection")
            return {"statusCode": 403}
        expires = authorizer.get("tokenExpiresAt")  # API Gateway may pass a context number as a string
        if not routes.connect(connection_id, tenant, token_expires_at=int(expires) if expires is not None else None):
            logger.warning("$connect refused: the tenant already holds its most live connections")
            metrics.add_metric(name="WebSocketConnectionsRefused", unit=MetricUnit.Count, value=1)
            return {"statusCode": 429}
        return connected(event)
    if route == "$disconnect":
        routes.disconnect(connection_id)
        return {"statusCode": 200}
    reply = routes.message(connection_id, request.decoded_body)
    return {"statusCode": 200} if reply is None else {"statusCode": 200, "body": encode(reply)}
