"""Live session status: the WebSocket protocol's events, the status model and the publisher Protocol.

The same protocol runs on the local server (``threadloom.live.hub``) and on API Gateway WebSockets;
both plug a :class:`~threadloom.live.publisher.StatusPublisher` into the runtime, which publishes
after each write. Events carry ids, counts and phases only, never message content.
"""

from __future__ import annotations

from threadloom.live.events import (
    CHANGE_KINDS,
    ChangeKind,
    ClientAction,
    LiveEvent,
    Phase,
    SessionStatus,
    encode,
    error,
    parse_client_message,
    session_changed,
    session_error,
    session_status,
    subscribed,
)
from threadloom.live.publisher import (
    PUBLISH_BUDGET_SECONDS,
    NullPublisher,
    SessionEventForwarder,
    StatusPublisher,
    attach_publisher,
    publish_safely,
)
from threadloom.live.status import current_status, subscribe_reply

__all__ = [
    "CHANGE_KINDS",
    "PUBLISH_BUDGET_SECONDS",
    "ChangeKind",
    "ClientAction",
    "LiveEvent",
    "NullPublisher",
    "Phase",
    "SessionEventForwarder",
    "SessionStatus",
    "StatusPublisher",
    "attach_publisher",
    "current_status",
    "encode",
    "error",
    "parse_client_message",
    "publish_safely",
    "session_changed",
    "session_error",
    "session_status",
    "subscribe_reply",
    "subscribed",
]
