"""Skills per tenant: a tenant's own writable namespace over the operator's read-only catalogue.

Why: one skill store shared by every tenant let any tenant's model overwrite a skill another
tenant loads, and put its descriptions into every tenant's system prompt. Now:

- the operator's catalogue (the configured folder or bucket prefix) is read-only to every tenant;
- each tenant writes only under its own namespace, ``<catalogue>/.tenants/<digest>/``, where the
  digest is a SHA-256 of the tenant, so no claim value (``../``, ``/``, separators, look-alikes)
  can name another tenant's folder. Keys can never reach it: a key segment may not start with ``.``;
- a tenant's key shadows the catalogue's key of the same name for that tenant only;
- a quota bounds how many skills one tenant may hold (and the limits table bounds each document
  and description), so what a tenant writes grows only its own prompt, and only so far.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Protocol

from threadloom.errors import QuotaExceededError

if TYPE_CHECKING:
    from threadloom.limits import Limits

TENANTS_FOLDER = ".tenants"


class ListableSkills(Protocol):
    """A skill store that can list its keys and ``(key, description)`` entries (local folder, S3 prefix)."""

    def keys(self) -> list[str]: ...

    def entries(self) -> list[tuple[str, str | None]]: ...

    def load(self, key: str) -> str | None: ...


class WritableSkills(ListableSkills, Protocol):
    def set(self, key: str, content: str, description: str | None = None) -> None: ...


def tenant_namespace(tenant: str) -> str:
    """The relative folder/prefix of ``tenant``'s own skills: ``.tenants/<sha256 hex, 32 chars>/``."""
    digest = hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{TENANTS_FOLDER}/{digest}/"


class TenantSkillProvider:
    """The skills block of one tenant: its own skills first, then the catalogue's other keys.

    Parameters
    ----------
    own:
        The tenant's namespace (writable).
    catalogue:
        The operator catalogue (only read), or None when there is none.
    limits:
        ``max_skills_per_tenant`` caps how many keys ``own`` may hold.
    """

    def __init__(self, own: WritableSkills, catalogue: ListableSkills | None, *, limits: Limits) -> None:
        self._own = own
        self._catalogue = catalogue
        self._limits = limits

    def get(self) -> str | None:
        """``- key: description`` lines, key order; a tenant key replaces the catalogue line of the same key."""
        merged: dict[str, str | None] = dict(self._catalogue.entries()) if self._catalogue is not None else {}
        merged.update(self._own.entries())
        lines = [
            f"- {key}: {description}" if description else f"- {key}" for key, description in sorted(merged.items())
        ]
        return "\n".join(lines) if lines else None

    def load(self, key: str) -> str | None:
        content = self._own.load(key)
        if content is None and self._catalogue is not None:
            content = self._catalogue.load(key)
        return content

    def set(self, key: str, content: str, description: str | None = None) -> None:
        """Write into the tenant's namespace only; a new key beyond the quota is refused."""
        quota = self._limits.max_skills_per_tenant
        keys = self._own.keys()
        if key not in keys and len(keys) >= quota:
            raise QuotaExceededError(
                f"This tenant already has {len(keys)} skills, the most allowed ({quota}); overwrite one instead"
            )
        self._own.set(key, content, description)


__all__ = ["TENANTS_FOLDER", "ListableSkills", "TenantSkillProvider", "WritableSkills", "tenant_namespace"]
