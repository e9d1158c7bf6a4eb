"""A session's current status (phase, token estimate, threshold) and the answer to a subscription.

The ``subscribed`` reply and ``GET /sessions/{id}/status`` both start from ``status_report`` so a
client sees the same figures whichever way it asks. The phase is ``compacting`` while this process
compacts the session or while its latest tracked request is ``running`` (in a worker elsewhere).
``idle_reason`` says why a session over its threshold is ``idle`` (a red meter with no compaction
under way needs words, not a guess).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from threadloom.errors import NotFoundError, SessionChangedError, ValidationError
from threadloom.live.events import SessionStatus, error, subscribed

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.live.events import ErrorEvent, Phase, SubscribedEvent
    from threadloom.records import TrackedCompaction

RUNNING_FOR_AT_MOST = timedelta(minutes=15)
"""A ``running`` request older than this (a worker that died: Lambda's longest run) no longer counts."""


def status_report(manager: SessionManager, session_id: str) -> tuple[SessionStatus, TrackedCompaction | None]:
    """The session's status now and its latest compaction request; ``NotFoundError`` outside the namespace."""
    with manager.checked_session(session_id) as session:
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
    """``subscribed`` with the current status, or ``error`` for an unknown (or another tenant's) session.

    A session this process knew for another subject (deleted and opened again elsewhere) is read once
    more: the check that told it so dropped what the process held, so the second read is the new session's.
    """
    try:
        try:
            return subscribed(session_id, current_status(manager, session_id))
        except SessionChangedError:
            return subscribed(session_id, current_status(manager, session_id))
    except (NotFoundError, SessionChangedError, ValidationError) as exc:
        return error(str(exc))


IdleReasonCode = Literal[
    "nothing_to_summarize", "compaction_failed", "compaction_queued", "still_over_after_compaction", "not_requested"
]


@dataclass(frozen=True, slots=True)
class IdleReason:
    """Why a session whose estimate exceeds its threshold is not compacting: a code and a sentence."""

    code: IdleReasonCode
    message: str


def idle_reason(status: SessionStatus, latest: TrackedCompaction | None) -> IdleReason | None:
    """Why the session is idle over its threshold; None when it is under it, compacting or has none."""
    threshold = status.token_threshold
    if status.phase != "idle" or threshold is None or status.token_estimate <= threshold:
        return None
    over = f"The estimate ({status.token_estimate:,} tokens) is over the compaction threshold ({threshold:,})"
    if latest is None:
        return IdleReason(
            "not_requested",
            f"{over}, but no compaction was requested: the next append over the threshold "
            "(or POST /compact) asks for one.",
        )
    leaf = f" for leaf {latest.leaf_id!r}" if latest.leaf_id else ""
    if latest.state == "nothing_to_summarize":
        return IdleReason(
            "nothing_to_summarize",
            f"{over}, but the last compaction{leaf} found nothing to summarize: outside the protected head and "
            "tail there are only earlier summaries, or too few messages. It tries again when an append moves "
            "older messages out of the protected tail.",
        )
    if latest.state == "failed":
        return IdleReason(
            "compaction_failed",
            f"{over}, but the last compaction{leaf} failed: {latest.error or 'no error was recorded'}. "
            "POST /compact asks for it again.",
        )
    if latest.state in ("queued", "running"):
        return IdleReason(
            "compaction_queued",
            f"{over}; a compaction{leaf} was requested at {latest.requested_at} and waits for the worker.",
        )
    return IdleReason(
        "still_over_after_compaction",
        f"{over} even after the last compaction{leaf}: the summary with the protected head and tail is that "
        "large. It tries again when an append moves older messages out of the protected tail.",
    )


def _running(request: TrackedCompaction | None) -> bool:
    if request is None or request.state != "running" or request.started_at is None:
        return False
    started = datetime.fromisoformat(request.started_at.replace("Z", "+00:00"))
    return datetime.now(UTC) - started < RUNNING_FOR_AT_MOST


__all__ = [
    "RUNNING_FOR_AT_MOST",
    "IdleReason",
    "IdleReasonCode",
    "current_status",
    "idle_reason",
    "latest_request",
    "status_report",
    "subscribe_reply",
]
