"""The hand-off between the functions in the VPC and the publisher function outside it: one relay message.

A relay message carries one wire event and the connections to post it to (the subscribers the sender found with
its one Query), so the publisher function needs no lookup before posting. Its JSON body::

    {"v": 1, "namespace": "<tenant>", "sessionId": "<session>", "connections": ["<id>", ...], "event": {...}}

On the FIFO queue, ``MessageGroupId`` is one per session (:func:`message_group_id`), so a session's events reach its
watchers in the order they were published (a token meter never steps back), while sessions proceed in parallel.
Each message gets a fresh ``MessageDeduplicationId``: two equal events (say, two ``clear``) are both delivered.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from threadloom.errors import ValidationError
from threadloom.live.events import encode

if TYPE_CHECKING:
    from threadloom.live.events import LiveEvent

VERSION = 1
MAX_CONNECTIONS_PER_MESSAGE = 1000
"""Subscribers named in one message (about 25 KB of ids); a session watched by more is split over several."""
DELIVERY_BUDGET_SECONDS = 2.0
"""The most the publisher function spends posting one message (template.yaml sizes its timeout by it)."""
DELIVERY_CONCURRENCY = 8
"""Posts the publisher function has in flight at once for one message (about 300 posts in the budget at 50 ms)."""
_EVENT_TYPES = frozenset({"session_status", "session_error", "session_changed"})


@dataclass(frozen=True, slots=True)
class RelayMessage:
    """One event of one session and the connections that should receive it."""

    namespace: str
    session_id: str
    connection_ids: tuple[str, ...]
    event: LiveEvent

    def to_json(self) -> str:
        body = {
            "v": VERSION,
            "namespace": self.namespace,
            "sessionId": self.session_id,
            "connections": list(self.connection_ids),
            "event": self.event,
        }
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, body: str) -> RelayMessage:
        """Parse a queue message body; anything malformed raises ``ValidationError`` saying what."""
        try:
            payload: Any = json.loads(body)
        except (ValueError, TypeError):
            raise ValidationError("Relay message is not JSON") from None
        if not isinstance(payload, dict):
            raise ValidationError("Relay message must be a JSON object")
        if payload.get("v") != VERSION:
            raise ValidationError(f"Relay message version {payload.get('v')!r} is not {VERSION}")
        namespace, session_id = payload.get("namespace"), payload.get("sessionId")
        if not isinstance(namespace, str) or not namespace or not isinstance(session_id, str) or not session_id:
            raise ValidationError("Relay message needs a non-empty 'namespace' and 'sessionId'")
        connections = payload.get("connections")
        if not isinstance(connections, list) or not all(isinstance(item, str) and item for item in connections):
            raise ValidationError("Relay message 'connections' must be a list of connection ids")
        event = payload.get("event")
        if not isinstance(event, dict) or event.get("type") not in _EVENT_TYPES:
            raise ValidationError(f"Relay message 'event' must be one of {sorted(_EVENT_TYPES)}")
        if event.get("sessionId") != session_id:
            raise ValidationError("Relay message 'event' is about another session than 'sessionId'")
        return cls(namespace, session_id, tuple(connections), cast("LiveEvent", event))

    def data(self) -> bytes:
        """What is posted to each connection: the event exactly as the local server sends it."""
        return encode(self.event).encode("utf-8")


def relay_messages(namespace: str, session_id: str, connection_ids: list[str], event: LiveEvent) -> list[RelayMessage]:
    """The messages for one event, at most ``MAX_CONNECTIONS_PER_MESSAGE`` subscribers each (none for none)."""
    return [
        RelayMessage(namespace, session_id, tuple(connection_ids[start : start + MAX_CONNECTIONS_PER_MESSAGE]), event)
        for start in range(0, len(connection_ids), MAX_CONNECTIONS_PER_MESSAGE)
    ]


def message_group_id(namespace: str, session_id: str) -> str:
    """One FIFO group per session: SHA-256 hex of ``(namespace, session_id)`` (fits SQS's 128 characters)."""
    return hashlib.sha256(json.dumps([namespace, session_id]).encode("utf-8")).hexdigest()


def deduplication_id() -> str:
    """A fresh id per message: every published event is delivered, even one equal to an earlier one."""
    return uuid.uuid4().hex


__all__ = [
    "DELIVERY_BUDGET_SECONDS",
    "DELIVERY_CONCURRENCY",
    "MAX_CONNECTIONS_PER_MESSAGE",
    "VERSION",
    "RelayMessage",
    "deduplication_id",
    "message_group_id",
    "relay_messages",
]
