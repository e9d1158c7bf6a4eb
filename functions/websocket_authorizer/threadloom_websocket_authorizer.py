"""The WebSocket ``$connect`` Lambda authorizer: the same JWT as the HTTP API, verified with PyJWT.

The token comes in ``Authorization`` or, from a browser, as the ``threadloom.token.<jwt>`` subprotocol
(``threadloom.live.subprotocol``); never from the URL, which proxies and access logs record.

Allowed connections carry the tenant (``THREADLOOM_TENANT_CLAIM``) in the authorizer context, which the
``$connect`` route stores with the connection; refused ones get a Deny policy (API Gateway answers 403).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerResponseWebSocket,
)
from threadloom.api.exceptions import UnauthenticatedError
from threadloom.api.observability import logger, metrics, tracer
from threadloom.api.tenancy import tenant_from_claims
from threadloom.live.aws.jwt_verifier import InvalidTokenError, JwtSettings, JwtVerifier, token_from_request

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

_verifier: JwtVerifier | None = None


def get_verifier() -> JwtVerifier:
    """The verifier (and its cached JWKS) for this execution environment, built from the environment on first use."""
    global _verifier  # noqa: PLW0603 - one verifier, one JWKS cache per Lambda execution environment
    if _verifier is None:
        _verifier = JwtVerifier(JwtSettings.from_env(os.environ))
    return _verifier


def set_verifier(verifier: JwtVerifier | None) -> None:
    """Replace (or with None, forget) the verifier; for tests."""
    global _verifier  # noqa: PLW0603
    _verifier = verifier


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    method_arn = event["methodArn"]
    try:
        token = token_from_request(event.get("headers"))
        claims = get_verifier().verify(token)
        tenant = tenant_from_claims(claims, os.environ.get("THREADLOOM_TENANT_CLAIM") or "sub")
    except (InvalidTokenError, UnauthenticatedError) as exc:
        logger.info("WebSocket connection refused", reason=str(exc))
        metrics.add_metric(name="WebSocketConnectionsRefused", unit=MetricUnit.Count, value=1)
        denied = APIGatewayAuthorizerResponseWebSocket.from_route_arn(method_arn, principal_id="anonymous")
        denied.deny_all_routes()
        return denied.asdict()
    allowed = APIGatewayAuthorizerResponseWebSocket.from_route_arn(
        method_arn,
        principal_id=str(claims.get("sub") or tenant),
        # The connection may act no longer than its token: $connect records when it expires.
        context={"tenant": tenant, "tokenExpiresAt": int(claims["exp"])},
    )
    allowed.allow_all_routes()
    metrics.add_metric(name="WebSocketConnectionsAllowed", unit=MetricUnit.Count, value=1)
    return allowed.asdict()
