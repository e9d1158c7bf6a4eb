"""The live-status wire protocol: what a client may send and every event the server sends back.

Client → server: ``{"action": "subscribe"|"unsubscribe", "sessionId": "<id>"}``.
Server → client: ``subscribed``, ``error``, ``session_status``, ``session_error`` and ``session_changed``
(see ``docs/live-status.md``). The builders below are the only place these shapes are written, so the
local server and the API Gateway publisher cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast, get_args

from threadloom.errors import ValidationError
from threadloom.limits import HARD_LIMITS

Phase = Literal["idle", "compacting"]
ChangeKind = Literal["append", "update", "delete", "clear", "compaction", "fork", "context"]
CHANGE_KINDS: frozenset[str] = frozenset(get_args(ChangeKind))
Action = Literal["subscribe", "unsubscribe"]
MAX_CLIENT_MESSAGE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """What a token meter shows: the phase, the current estimate and the auto-compaction threshold."""

    phase: Phase
    token_estimate: int
    token_threshold: int | None

    def to_json(self) -> StatusJson:
        return {"phase": self.phase, "tokenEstimate": self.token_estimate, "tokenThreshold": self.token_threshold}


class StatusJson(TypedDict):
    phase: Phase
    tokenEstimate: int
    tokenThreshold: int | None


class Compacted(TypedDict):
    tokensBefore: int


class SubscribedEvent(TypedDict):
    type: Literal["subscribed"]
    sessionId: str
    status: StatusJson


class ErrorEvent(TypedDict):
    type: Literal["error"]
    error: str


class SessionStatusEvent(TypedDict):
    type: Literal["session_status"]
    sessionId: str
    phase: Phase
    tokenEstimate: int
    tokenThreshold: int | None
    compacted: NotRequired[Compacted]
    staleBlocks: NotRequired[list[str]]


class SessionErrorEvent(TypedDict):
    type: Literal["session_error"]
    sessionId: str
    error: str


class SessionChangedEvent(TypedDict):
    type: Literal["session_changed"]
    sessionId: str
    change: ChangeKind
    leafId: NotRequired[str]


LiveEvent = SubscribedEvent | ErrorEvent | SessionStatusEvent | SessionErrorEvent | SessionChangedEvent


def subscribed(session_id: str, status: SessionStatus) -> SubscribedEvent:
    return {"type": "subscribed", "sessionId": session_id, "status": status.to_json()}


def error(message: str) -> ErrorEvent:
    return {"type": "error", "error": message}


def session_status(
    session_id: str,
    status: SessionStatus,
    *,
    compacted: Compacted | None = None,
    stale_blocks: list[str] | None = None,
) -> SessionStatusEvent:
    """``staleBlocks``: shared blocks changed since the session's prompt was frozen (only when there are some)."""
    event: SessionStatusEvent = {
        "type": "session_status",
        "sessionId": session_id,
        "phase": status.phase,
        "tokenEstimate": status.token_estimate,
        "tokenThreshold": status.token_threshold,
    }
    if compacted is not None:
        event["compacted"] = {"tokensBefore": int(compacted["tokensBefore"])}
    if stale_blocks:
        event["staleBlocks"] = list(stale_blocks)
    return event


def session_error(session_id: str, message: str) -> SessionErrorEvent:
    return {"type": "session_error", "sessionId": session_id, "error": message}


def session_changed(session_id: str, change: ChangeKind, leaf_id: str | None = None) -> SessionChangedEvent:
    if change not in CHANGE_KINDS:
        raise ValidationError(f"Unknown change kind {change!r}")
    event: SessionChangedEvent = {"type": "session_changed", "sessionId": session_id, "change": change}
    if leaf_id is not None:
        event["leafId"] = leaf_id
    return event


def encode(event: LiveEvent) -> str:
    """Compact JSON with ``type`` first (the order the builders write), as sent on the wire."""
    return json.dumps(event, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ClientAction:
    """One parsed client message."""

    action: Action
    session_id: str


def parse_client_message(data: str | bytes) -> ClientAction:
    """Parse ``{"action": ..., "sessionId": ...}``; anything else raises ``ValidationError`` saying what is wrong."""
    if len(data) > MAX_CLIENT_MESSAGE_BYTES:
        raise ValidationError(f"Message too large: at most {MAX_CLIENT_MESSAGE_BYTES} bytes")
    try:
        payload: Any = json.loads(data)
    except (ValueError, TypeError):
        raise ValidationError('Message is not JSON; send {"action": "subscribe", "sessionId": "<id>"}') from None
    if not isinstance(payload, dict):
        raise ValidationError('Message must be a JSON object such as {"action": "subscribe", "sessionId": "<id>"}')
    action = payload.get("action")
    if action not in get_args(Action):
        raise ValidationError(f"Unknown action {action!r}: use 'subscribe' or 'unsubscribe'")
    # The REST API's rule for an id in a path, so no store, table key or log gets a NUL, a lone surrogate
    # or other text no session id can hold: those raised from the stores instead of an error event.
    session_id = HARD_LIMITS.check_id(payload.get("sessionId"), "sessionId")
    return ClientAction(action=cast("Action", action), session_id=session_id)


__all__ = [
    "CHANGE_KINDS",
    "MAX_CLIENT_MESSAGE_BYTES",
    "Action",
    "ChangeKind",
    "ClientAction",
    "Compacted",
    "ErrorEvent",
    "LiveEvent",
    "Phase",
    "SessionChangedEvent",
    "SessionErrorEvent",
    "SessionStatus",
    "SessionStatusEvent",
    "StatusJson",
    "SubscribedEvent",
    "encode",
    "error",
    "parse_client_message",
    "session_changed",
    "session_error",
    "session_status",
    "subscribed",
]
