"""Which tenant a request belongs to: one verified JWT claim, put there by the HTTP API's JWT authorizer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.api.exceptions import UnauthenticatedError
from threadloom.core.limits import DEFAULT_LIMITS
from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from threadloom.core.limits import Limits


def tenant_from_claims(claims: dict[str, Any] | None, claim: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """The claim's value, used exactly as given (never trimmed or folded, so look-alikes stay distinct tenants).

    A missing, blank, over-long or non-text claim (NUL, lone surrogate) is a 401: there is
    never a shared default tenant, and nothing untextable reaches storage as a namespace.
    """
    value = (claims or {}).get(claim)
    if not isinstance(value, str) or not value.strip():
        raise UnauthenticatedError(f"Missing tenant claim {claim!r} in the request's JWT")
    try:
        return limits.check_tenant(value)
    except ValidationError as exc:
        raise UnauthenticatedError(f"Unusable tenant claim {claim!r}: {exc}") from None


__all__ = ["tenant_from_claims"]
