"""Which tenant a request belongs to: one verified JWT claim, put there by the HTTP API's JWT authorizer."""

from __future__ import annotations

from typing import Any

from threadloom.api.exceptions import UnauthenticatedError


def tenant_from_claims(claims: dict[str, Any] | None, claim: str) -> str:
    """The claim's value; a missing or empty claim is a 401 (never a shared default tenant)."""
    value = (claims or {}).get(claim)
    if not isinstance(value, str) or not value.strip():
        raise UnauthenticatedError(f"Missing tenant claim {claim!r} in the request's JWT")
    return value


__all__ = ["tenant_from_claims"]
