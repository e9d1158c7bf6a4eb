"""Errors that only exist at the HTTP boundary (the core hierarchy covers everything else)."""

from __future__ import annotations

from threadloom.errors import ThreadloomError, ValidationError


class PayloadTooLargeError(ValidationError):
    """A message or body exceeds the profile's ``limits.max_message_bytes`` (HTTP 413)."""


class UnauthenticatedError(ThreadloomError):
    """The request carries no tenant claim: the authorizer did not run or the claim is missing (HTTP 401)."""


__all__ = ["PayloadTooLargeError", "UnauthenticatedError"]
