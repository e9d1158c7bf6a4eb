"""A session's current status (phase, token estimate, threshold) and the answer to a subscription.

The ``subscribed`` reply and ``GET /sessions/{id}/status`` both start from ``status_report`` so a
client sees the same figures whichever way it asks. The phase is ``compacting`` while this process
compacts the session or while its latest tracked request is ``running`` (in a worker elsewhere).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from threadloom.errors import NotFoundError
from threadloom.live.events import SessionStatus, error, subscribed

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.live.events import ErrorEvent, Phase, SubscribedEvent
    from threadloom.records import TrackedCompaction

RUNNING_FOR_AT_MOST = timedelta(minutes=15)
"""A ``running`` request older than this (a worker that died: Lambda's longest run) no longer counts."""


def status_report(manager: SessionManager, session_id: str) -> tuple[SessionStatus, TrackedCompaction | None]:
    """The session's status now and its latest compaction request; ``NotFoundError`` outside the namespace."""
    if manager.get(session_id) is None:
        raise NotFoundError(f"Session {session_id!r} not found")
    session = manager.get_session(session_id)
    latest = latest_request(manager, session_id)
    phase: Phase = "compacting" if session.compacting or _running(latest) else "idle"
    status = SessionStatus(
        phase=phase, token_estimate=session.estimate_tokens(), token_threshold=session.token_threshold
    )
    return status, latest


def current_status(manager: SessionManager, session_id: str) -> SessionStatus:
    """The session's status now; ``NotFoundError`` when it is not in the manager's namespace."""
    return status_report(manager, session_id)[0]


def latest_request(manager: SessionManager, session_id: str) -> TrackedCompaction | None:
    """The session's latest tracked compaction request (None when there is none or no request log)."""
    factory = getattr(manager.store, "compaction_requests", None)
    if not callable(factory):
        return None
    return factory(manager.namespace).latest(session_id)  # type: ignore[no-any-return]


def subscribe_reply(manager: SessionManager, session_id: str) -> SubscribedEvent | ErrorEvent:
    """``subscribed`` with the current status, or ``error`` for an unknown (or another tenant's) session."""
    try:
        return subscribed(session_id, current_status(manager, session_id))
    except NotFoundError as exc:
        return error(str(exc))


def _running(request: TrackedCompaction | None) -> bool:
    if request is None or request.state != "running" or request.started_at is None:
        return False
    started = datetime.fromisoformat(request.started_at.replace("Z", "+00:00"))
    return datetime.now(UTC) - started < RUNNING_FOR_AT_MOST


__all__ = ["RUNNING_FOR_AT_MOST", "current_status", "latest_request", "status_report", "subscribe_reply"]
