"""Errors that only exist at the HTTP boundary (the core hierarchy covers everything else)."""

from __future__ import annotations

from threadloom.errors import ConflictError, PayloadTooLargeError, ThreadloomError, ValidationError


class UnauthenticatedError(ThreadloomError):
    """The request carries no tenant claim: the authorizer did not run or the claim is missing (HTTP 401)."""


class UnsupportedMediaTypeError(ValidationError):
    """A request body that is not ``application/json`` (HTTP 415)."""


class ForbiddenError(ThreadloomError):
    """The caller is authenticated but lacks the scope the operation needs (HTTP 403)."""


class IdempotencyKeyReusedError(ConflictError):
    """An ``Idempotency-Key`` already used with a different request body (HTTP 409)."""


class IdempotencyInProgressError(ConflictError):
    """A request with the same ``Idempotency-Key`` is still running (HTTP 409; retrying later replays it)."""


class ResponseTooLargeError(ThreadloomError):
    """An answer that would pass the response byte cap (HTTP 500; the lists page by bytes, so a guard only)."""


__all__ = [
    "ForbiddenError",
    "ResponseTooLargeError",
    "IdempotencyInProgressError",
    "IdempotencyKeyReusedError",
    "PayloadTooLargeError",
    "UnauthenticatedError",
    "UnsupportedMediaTypeError",
]
