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
from threadloom.api.tenancy import resolve_tenant

if TYPE_CHECKING:
    from collections.abc import Callable

    from aws_lambda_powertools.event_handler.openapi.models import SecurityScheme
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

    from threadloom.core.manager import SessionManager
    from threadloom.limits import Limits

ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "Bad input: text rules, id alphabet, limits, invalid JSON or a body that is not UTF-8",
    401: "No usable tenant claim in the JWT",
    403: "The token lacks the scope the operation needs",
    404: (
        "No such session, message, block or tool (or another tenant's), or no operation at the path "
        "(API Gateway cuts a path at a percent-decoded ?)"
    ),
    409: (
        "A precondition, quota, block state or Idempotency-Key conflict, or session_changed: a keyed session "
        "deleted and created again for another subject since this server last read it (nothing ran: retry)"
    ),
    413: "A message, block, entry or body over its size limit",
    415: "The request body is not application/json",
    422: "The request does not match the API schema",
    500: "Unexpected server error (never expected: reported with a request id)",
    503: "Storage or the skill store is unavailable; retrying may help",
}
ANY = (400, 401, 422, 500, 503)
"""What every operation can answer: bad text in the path or query, no tenant, schema mismatch, outages."""
SESSION = (*ANY, 404)
"""Operations under ``/sessions/{sessionId}``."""
CHECKED = (*SESSION, 409)
"""Operations that read or write a session's data with its blocks in hand: ``session_changed`` is a 409."""
BODY = (413, 415)
"""Operations that take a JSON body."""


def security_schemes() -> dict[str, SecurityScheme]:
    """The bearer JWT scheme, built only for the OpenAPI document: its models are slow to import on a cold start."""
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    return {
        "bearerAuth": HTTPBearer(
            bearerFormat="JWT",
            description="A JWT verified by the HTTP API's authorizer; its tenant claim (default `sub`) scopes all data",
        )
    }


SECURITY: list[dict[str, list[str]]] = [{"bearerAuth": []}]


def responses(
    status: int,
    model: type[BaseModel],
    description: str,
    *errors: int,
    also: dict[int, tuple[type[BaseModel], str]] | None = None,
) -> dict[int, OpenAPIResponse]:
    """Every status an operation can answer, each with its schema (success first, then the error envelope)."""
    documented: dict[int, OpenAPIResponse] = {
        status: {"description": description, "content": {"application/json": {"model": model}}}
    }
    for other, (other_model, other_description) in (also or {}).items():
        documented[other] = {"description": other_description, "content": {"application/json": {"model": other_model}}}
    for code in sorted(set(errors)):
        documented[code] = {
            "description": ERROR_DESCRIPTIONS[code],
            "content": {"application/json": {"model": ErrorOut}},
        }
    return documented


def new_router() -> APIGatewayHttpRouter:
    """A resource router (typed wrapper: Powertools' constructor is unannotated)."""
    return APIGatewayHttpRouter()  # type: ignore[no-untyped-call]


def tenant(router: APIGatewayHttpRouter) -> str:
    """The tenant from the JWT claim the HTTP API authorizer verified (401 when absent; sam local: docs/deploy.md)."""
    runtime = get_runtime()
    settings = runtime.settings
    request_context = router.current_event.raw_event.get("requestContext") or {}
    value = resolve_tenant(request_context, settings.tenant_claim, runtime.limits, local_tenant=settings.local_tenant)
    logger.append_keys(tenant=value)
    return value


def subject(router: APIGatewayHttpRouter) -> str | None:
    """The caller's data-subject id (the ``sub`` claim by default): what a new session is recorded under."""
    claims = router.current_event.request_context.authorizer.jwt_claim or {}
    value = claims.get(get_runtime().settings.subject_claim)
    return value if isinstance(value, str) and value else None


def manager(router: APIGatewayHttpRouter) -> SessionManager:
    return get_runtime().manager(tenant(router))


def limits() -> Limits:
    return get_runtime().limits


def json_text_response(body: str) -> Response[str]:
    """A 200 whose JSON body is already written (a large page), instead of Powertools' validate-then-encode walk.

    For routes whose items come from storage (validated when written); the route documents its model
    through ``responses=``. UTF-8 without escapes, as the byte budget counts it.
    """
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body)


def json_response(status: int, body: BaseModel | dict[str, Any]) -> Response[Any]:
    payload = body.model_dump(mode="json", by_alias=True) if isinstance(body, BaseModel) else body
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=payload)


def idempotent_write(
    router: APIGatewayHttpRouter, key: str | None, payload: Any, run: Callable[[], tuple[int, BaseModel]]
) -> Response[Any]:
    """Run a write once per ``Idempotency-Key`` (per tenant, caller's subject and route); a replay answers the
    stored outcome. The subject is part of the scope: two users of one tenant sending the same key (a client
    library's counter, say) would otherwise get each other's answers, a session of the other user included."""

    def outcome() -> tuple[int, dict[str, Any]]:
        status, body = run()
        return status, body.model_dump(mode="json", by_alias=True)

    event = router.current_event
    scope = (tenant(router), subject(router) or "", event.request_context.http.method, event.raw_path)
    status, body = run_idempotent(
        get_runtime().settings.idempotency_table, key, scope=scope, payload=payload, run=outcome
    )
    return json_response(status, body)


__all__ = [
    "ANY",
    "BODY",
    "SECURITY",
    "SESSION",
    "idempotent_write",
    "json_response",
    "limits",
    "manager",
    "new_router",
    "responses",
    "security_schemes",
    "subject",
    "tenant",
]
