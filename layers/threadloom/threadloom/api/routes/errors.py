"""Every exception → HTTP status mapping, in one place, with one envelope: ``{"error": {"code", "message"}}``.

Block write refusals (read-only block, over the token budget) are 409: the request is
well formed, the block's state or configuration refuses it. Compaction errors are 409
as well (no compaction function, or the summarizer failed: retrying later may work).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import ServiceError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError, ResponseValidationError

from threadloom.api.exceptions import (
    ForbiddenError,
    IdempotencyInProgressError,
    IdempotencyKeyReusedError,
    PayloadTooLargeError,
    ResponseTooLargeError,
    UnauthenticatedError,
    UnsupportedMediaTypeError,
)
from threadloom.api.observability import logger
from threadloom.errors import (
    BlockLimitError,
    CompactionError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
    ReadOnlyBlockError,
    SessionBusyError,
    SessionChangedError,
    SkillStoreError,
    StaleVersionError,
    StorageError,
    StorageTimeoutError,
    StorageUnavailableError,
    ValidationError,
)

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

# Most specific first: handlers are looked up along each exception's MRO.
MAPPING: tuple[tuple[type[Exception], HTTPStatus, str], ...] = (
    (PayloadTooLargeError, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "payload_too_large"),
    (UnsupportedMediaTypeError, HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
    (ValidationError, HTTPStatus.BAD_REQUEST, "bad_request"),
    (UnauthenticatedError, HTTPStatus.UNAUTHORIZED, "unauthorized"),
    (ForbiddenError, HTTPStatus.FORBIDDEN, "forbidden"),
    (NotFoundError, HTTPStatus.NOT_FOUND, "not_found"),
    (IdempotencyKeyReusedError, HTTPStatus.CONFLICT, "idempotency_key_reused"),
    (IdempotencyInProgressError, HTTPStatus.CONFLICT, "idempotency_in_progress"),
    (StaleVersionError, HTTPStatus.CONFLICT, "stale_version"),
    (SessionChangedError, HTTPStatus.CONFLICT, "session_changed"),
    (ConflictError, HTTPStatus.CONFLICT, "conflict"),
    (ReadOnlyBlockError, HTTPStatus.CONFLICT, "read_only_block"),
    (BlockLimitError, HTTPStatus.CONFLICT, "block_limit_exceeded"),
    (QuotaExceededError, HTTPStatus.CONFLICT, "quota_exceeded"),
    (CompactionError, HTTPStatus.CONFLICT, "compaction_failed"),
    (SessionBusyError, HTTPStatus.SERVICE_UNAVAILABLE, "session_busy"),
    (StorageTimeoutError, HTTPStatus.SERVICE_UNAVAILABLE, "storage_timeout"),
    (StorageUnavailableError, HTTPStatus.SERVICE_UNAVAILABLE, "storage_unavailable"),
    (StorageError, HTTPStatus.INTERNAL_SERVER_ERROR, "storage_error"),
    (ResponseTooLargeError, HTTPStatus.INTERNAL_SERVER_ERROR, "response_too_large"),
    (SkillStoreError, HTTPStatus.SERVICE_UNAVAILABLE, "skill_store_unavailable"),
)
IDEMPOTENCY_CODES = frozenset({"idempotency_key_reused", "idempotency_in_progress"})
"""Conflicts that only the API raises (a client sees them as ``ConflictError``)."""


def error_for(error: Exception) -> tuple[HTTPStatus, str]:
    """The status and code of an error refused outside the resolver (most specific mapping first)."""
    for exc_type, status, code in MAPPING:
        if isinstance(error, exc_type):
            return status, code
    return HTTPStatus.BAD_REQUEST, "bad_request"


def describe_problem(item: Any) -> str:
    """One schema problem in words: where (``message.parts``, ``query limit``) and what is wrong."""
    location = [str(part) for part in item.get("loc", ())]
    source = location[0] if location else ""
    path = ".".join(location[1:])
    message = str(item.get("msg") or item.get("type") or "invalid")
    if source == "body":
        where = f"body field {path!r}" if path else "body"
    elif source in ("query", "path", "header"):
        where = f"{source} parameter {path!r}"
    else:
        where = ".".join(location) or "request"
    return f"{where}: {message[:1].lower()}{message[1:]}"


def error_response(
    status: HTTPStatus, code: str, message: str, *, retry_after: int | None = None, current_version: int | None = None
) -> Response[Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if current_version is not None:  # a stale block write: the version to re-read and base the retry on
        error["currentVersion"] = current_version
    body = {"error": error}
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return Response(status_code=status.value, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


def register_error_handlers(app: APIGatewayHttpResolver) -> None:
    """Attach the mapping, the 422 envelope, the 404 for unknown routes and the 500 catch-all."""
    for exc_type, status, code in MAPPING:

        def handle(error: Exception, status: HTTPStatus = status, code: str = code) -> Response[Any]:
            logger.info("request refused", status=status.value, code=code, error_type=type(error).__name__)
            # A store that is busy or unreachable may serve a retry: say when (RFC 9110 Retry-After).
            retry_after = error.retry_after if isinstance(error, StorageUnavailableError) else None
            current = error.current_version if isinstance(error, StaleVersionError) else None
            return error_response(status, code, str(error), retry_after=retry_after, current_version=current)

        app.exception_handler(exc_type)(handle)

    def schema_error(error: RequestValidationError) -> Response[Any]:
        problems = [describe_problem(item) for item in error.errors()]
        message = "The request does not match the API schema: " + ("; ".join(problems) or "invalid request")
        return error_response(HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_request", message)

    app.exception_handler(RequestValidationError)(schema_error)

    @app.not_found
    def unknown_route(_: Exception) -> Response[Any]:
        return error_response(HTTPStatus.NOT_FOUND, "route_not_found", "No such route")

    def unexpected(error: Exception) -> Response[Any]:
        if isinstance(error, (ServiceError, ResponseValidationError)):
            raise error
        logger.exception("unhandled error")
        request_id = app.current_event.request_context.request_id
        return error_response(
            HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error", f"Internal error (request {request_id})"
        )

    app.exception_handler(Exception)(unexpected)
