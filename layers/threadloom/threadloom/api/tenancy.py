"""Which tenant a request belongs to: one verified JWT claim, put there by the HTTP API's JWT authorizer.

``sam local start-api`` cannot run a JWT authorizer, so under it a request carries no authorizer context at all;
only there (``Settings.local_tenant``, read only when ``AWS_SAM_LOCAL=true``) such a request gets the configured
local tenant. A deployed HTTP API always runs the authorizer on tenant routes, so the override can never apply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.api.exceptions import ForbiddenError, UnauthenticatedError
from threadloom.errors import ValidationError
from threadloom.limits import DEFAULT_LIMITS

if TYPE_CHECKING:
    from collections.abc import Mapping

    from threadloom.limits import Limits


def has_scope(scopes: list[str] | None, claims: Mapping[str, Any] | None, needed: str) -> bool:
    """Whether the token grants ``needed`` (API Gateway's ``scopes``, or a space-separated ``scope`` claim)."""
    granted = set(scopes or [])
    scope_claim = (claims or {}).get("scope")
    if isinstance(scope_claim, str):
        granted.update(scope_claim.split())
    return needed in granted


def require_scope(scopes: list[str] | None, claims: Mapping[str, Any] | None, needed: str) -> None:
    """403 unless the token grants ``needed``."""
    if not has_scope(scopes, claims, needed):
        raise ForbiddenError(f"This operation needs the {needed!r} scope")


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


def resolve_tenant(
    request_context: Mapping[str, Any],
    claim: str,
    limits: Limits = DEFAULT_LIMITS,
    *,
    local_tenant: str | None = None,
) -> str:
    """The tenant of an API Gateway v2 request: its JWT claim, or ``local_tenant`` when no authorizer ran."""
    authorizer = request_context.get("authorizer")
    if not authorizer and local_tenant:
        return limits.check_tenant(local_tenant)
    claims = ((authorizer or {}).get("jwt") or {}).get("claims")
    return tenant_from_claims(claims, claim, limits)


__all__ = ["has_scope", "require_scope", "resolve_tenant", "tenant_from_claims"]
