"""Session ids bound to a namespace: minted under the database's secret, checkable, unguessable.

Session ids are unique across the whole database, so an id another tenant could compute, or an
import told "that id is taken", would let one tenant squat or detect another's conversation. Every
id this deployment mints is a UUID (version 8, RFC 9562) whose first 10 bytes are its body and
whose last 6 a tag, HMAC-SHA256 under the secret of the namespace and the body: only this
deployment can mint an id for a namespace, and it can tell an id minted for a namespace from any
other. Keyed ids (``open(key=...)``) and the ids given to imported sessions have a body derived
from their inputs, so they are stable; other sessions get a random body.

Ids issued before: the 0016 keyed id (HMAC shaped as a version 4 UUID) and the public UUIDv5
before it keep working in their own namespace (see ``SqlSessionRegistry.find_keyed``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import uuid

LEGACY_KEYED_SESSION_NAMESPACE = uuid.UUID("6f1d2c3e-8a4b-5c6d-9e0f-1a2b3c4d5e6f")
"""UUIDv5 namespace of the keyed session ids issued before migration 0016 (public, hence predictable)."""

BODY_BYTES = 10
TAG_BYTES = 6
TAG_CONTEXT = b"threadloom session id\n"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogatepass")


def _hmac(secret: str, message: bytes) -> bytes:
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()


def _tag(secret: str, namespace: str, body: bytes) -> bytes:
    return _hmac(secret, TAG_CONTEXT + _encode(namespace) + b"\n" + body)[:TAG_BYTES]


def mint_session_id(secret: str, namespace: str, body: bytes) -> str:
    """The id with ``body`` (its first 10 bytes; version and variant bits set) tagged for ``namespace``."""
    if len(body) < BODY_BYTES:
        raise ValueError(f"A session id body has {BODY_BYTES} bytes")
    marked = bytearray(body[:BODY_BYTES])
    marked[6] = (marked[6] & 0x0F) | 0x80  # version 8: custom (RFC 9562)
    marked[8] = (marked[8] & 0x3F) | 0x80  # the RFC variant
    return str(uuid.UUID(bytes=bytes(marked) + _tag(secret, namespace, bytes(marked))))


def is_minted_for(secret: str, namespace: str, session_id: str) -> bool:
    """Whether this deployment minted ``session_id`` for ``namespace`` (exact canonical spelling only)."""
    if not isinstance(session_id, str) or len(session_id) != 36:
        return False
    try:
        parsed = uuid.UUID(session_id)
    except ValueError:
        return False
    if str(parsed) != session_id or parsed.version != 8 or parsed.variant != uuid.RFC_4122:
        return False
    body, tag = parsed.bytes[:BODY_BYTES], parsed.bytes[BODY_BYTES:]
    return hmac.compare_digest(tag, _tag(secret, namespace, body))


def new_session_id(secret: str, namespace: str) -> str:
    """A fresh id for a session created without one (create, fork, split): a random body, tagged."""
    return mint_session_id(secret, namespace, os.urandom(BODY_BYTES))


def keyed_session_id(secret: str, namespace: str, key: str) -> str:
    """The id of the session ``key`` names in ``namespace``: stable, and unpredictable without the secret."""
    return mint_session_id(secret, namespace, _hmac(secret, _encode(f"{namespace}\n{key}")))


def imported_session_id(secret: str, namespace: str, old_id: str) -> str:
    """The id an imported session whose id was not minted for ``namespace`` gets: the same on every import."""
    return mint_session_id(secret, namespace, _hmac(secret, _encode(f"import\n{namespace}\n{old_id}")))


def previous_keyed_session_id(secret: str, namespace: str, key: str) -> str:
    """The id keyed sessions got from migration 0016 until ids were minted (an HMAC shaped as UUIDv4)."""
    digest = _hmac(secret, _encode(f"{namespace}\n{key}"))
    return str(uuid.UUID(bytes=digest[:16], version=4))


def legacy_keyed_session_id(namespace: str, key: str) -> str:
    """The id keyed sessions got before migration 0016; only ever looked up in ``namespace`` itself."""
    return str(uuid.uuid5(LEGACY_KEYED_SESSION_NAMESPACE, f"{namespace}\n{key}"))


__all__ = [
    "LEGACY_KEYED_SESSION_NAMESPACE",
    "imported_session_id",
    "is_minted_for",
    "keyed_session_id",
    "legacy_keyed_session_id",
    "mint_session_id",
    "new_session_id",
    "previous_keyed_session_id",
]
