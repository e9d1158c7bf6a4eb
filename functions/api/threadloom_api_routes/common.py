"""What every router needs: the caller's tenant manager, the profile limits, responses and idempotent writes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import BaseModel
from threadloom.api.idempotency import run_idempotent
from threadloom.api.models import ErrorOut
from threadloom.api.observability import logger
from threadloom.api.runtime import get_runtime
from threadloom.api.tenancy import tenant_from_claims

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
    from threadloom.core.limits import Limits
    from threadloom.core.manager import SessionManager

ERROR_RESPONSES: dict[int, OpenAPIResponse] = {
    code: {"description": text, "content": {"application/json": {"model": ErrorOut}}}
    for code, text in (
        (400, "Bad input"),
        (401, "No tenant claim"),
        (404, "Not found (or another tenant's)"),
        (409, "Precondition or idempotency conflict"),
        (413, "Too large"),
        (422, "Request does not match the schema"),
        (503, "Storage unavailable"),
    )
}


def new_router() -> APIGatewayHttpRouter:
    """A resource router (typed wrapper: Powertools' constructor is unannotated)."""
    return APIGatewayHttpRouter()  # type: ignore[no-untyped-call]


def tenant(router: APIGatewayHttpRouter) -> str:
    """The tenant from the JWT claim the HTTP API authorizer verified (401 when absent)."""
    claims = router.current_event.request_context.authorizer.jwt_claim
    value = tenant_from_claims(claims, get_runtime().settings.tenant_claim)
    logger.append_keys(tenant=value)
    return value


def manager(router: APIGatewayHttpRouter) -> SessionManager:
    return get_runtime().manager(tenant(router))


def limits() -> Limits:
    return get_runtime().limits


def json_response(status: int, body: BaseModel | dict[str, Any]) -> Response[Any]:
    payload = body.model_dump(mode="json", by_alias=True) if isinstance(body, BaseModel) else body
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=payload)


def idempotent_write(
    router: APIGatewayHttpRouter, key: str | None, payload: Any, run: Callable[[], tuple[int, BaseModel]]
) -> Response[Any]:
    """Run a write once per ``Idempotency-Key`` (per tenant and route); a replay answers the stored outcome."""

    def outcome() -> tuple[int, dict[str, Any]]:
        status, body = run()
        return status, body.model_dump(mode="json", by_alias=True)

    event = router.current_event
    scope = f"{tenant(router)}#{event.request_context.http.method} {event.raw_path}"
    status, body = run_idempotent(
        get_runtime().settings.idempotency_table, key, scope=scope, payload=payload, run=outcome
    )
    return json_response(status, body)


__all__ = ["ERROR_RESPONSES", "idempotent_write", "json_response", "limits", "manager", "new_router", "tenant"]
