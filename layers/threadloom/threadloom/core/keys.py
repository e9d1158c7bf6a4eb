"""Keyed session ids: the id ``open(key=...)`` gives a key in a namespace.

New ids are an HMAC under the database's own secret, so another tenant cannot compute them;
ids issued before migration 0016 were a public UUIDv5 and keep working in their own namespace.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid

LEGACY_KEYED_SESSION_NAMESPACE = uuid.UUID("6f1d2c3e-8a4b-5c6d-9e0f-1a2b3c4d5e6f")
"""UUIDv5 namespace of the keyed session ids issued before migration 0016 (public, hence predictable)."""


def keyed_session_id(secret: str, namespace: str, key: str) -> str:
    """The id of the session ``key`` names in ``namespace``: HMAC-SHA256 under the deployment's secret.

    Stable across processes, distinct per namespace, and unpredictable without the secret, so
    no tenant can compute (and take first) the id of another tenant's conversation key. Shaped
    as a random UUID, like the ids of sessions created without a key.
    """
    message = f"{namespace}\n{key}".encode("utf-8", errors="surrogatepass")
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def legacy_keyed_session_id(namespace: str, key: str) -> str:
    """The id keyed sessions got before migration 0016; only ever looked up in ``namespace`` itself."""
    return str(uuid.uuid5(LEGACY_KEYED_SESSION_NAMESPACE, f"{namespace}\n{key}"))


__all__ = [
    "LEGACY_KEYED_SESSION_NAMESPACE",
    "keyed_session_id",
    "legacy_keyed_session_id",
]
