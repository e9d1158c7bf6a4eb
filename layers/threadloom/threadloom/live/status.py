"""A session's current status (phase, token estimate, threshold) and the answer to a subscription.

Both the ``subscribed`` reply and ``GET /sessions/{id}/status`` start from ``current_status`` so a
client sees the same figures whichever way it asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.errors import NotFoundError
from threadloom.live.events import SessionStatus, error, subscribed

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.live.events import ErrorEvent, Phase, SubscribedEvent


def current_status(manager: SessionManager, session_id: str, *, compacting: bool = False) -> SessionStatus:
    """The session's status now; ``NotFoundError`` when it is not in the manager's namespace.

    ``compacting`` says a compaction of this session is running elsewhere (the worker's tracked
    request); a compaction running in this process is seen on the session itself.
    """
    if manager.get(session_id) is None:
        raise NotFoundError(f"Session {session_id!r} not found")
    session = manager.get_session(session_id)
    phase: Phase = "compacting" if compacting or session.compacting else "idle"
    return SessionStatus(phase=phase, token_estimate=session.estimate_tokens(), token_threshold=session.token_threshold)


def subscribe_reply(manager: SessionManager, session_id: str) -> SubscribedEvent | ErrorEvent:
    """``subscribed`` with the current status, or ``error`` for an unknown (or another tenant's) session."""
    try:
        return subscribed(session_id, current_status(manager, session_id))
    except NotFoundError as exc:
        return error(str(exc))


__all__ = ["current_status", "subscribe_reply"]
