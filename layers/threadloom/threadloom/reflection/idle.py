"""The idle trigger: queue a reflection of every session that went quiet since its last reflection.

A sweep (run on a schedule, ``every_minutes`` apart) queues the sessions whose last activity falls in the window
``[now - idle_minutes - every_minutes, now - idle_minutes)`` and that were active after their last reflection, so
each idle stretch of a session is queued by one sweep. A sweep that did not run leaves its window unqueued (a
later reflection, on demand or after a compaction, still reads those messages: the watermark does not move).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from threadloom.clock import timestamp_text
from threadloom.compaction.queue import CompactionRequest
from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from threadloom.compaction.queue import CompactionQueue

DEFAULT_LIMIT = 1000
"""Sessions queued by one sweep at most (the oldest first); the rest wait for a reflection by another trigger."""


class IdleSessions(Protocol):
    """``SqlStore.reflection_sweep()``."""

    def idle_sessions(self, *, idle_before: str, active_after: str, limit: int) -> list[tuple[str, str]]: ...


def _stamp(moment: datetime) -> str:
    return timestamp_text(moment)


def queue_idle_reflections(
    sweep: IdleSessions,
    queue: CompactionQueue,
    *,
    idle_minutes: int,
    every_minutes: int,
    now: datetime | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[tuple[str, str]]:
    """Queue a reflection of each session that went idle in the last ``every_minutes``; the sessions queued."""
    if idle_minutes < 1 or every_minutes < 1:
        raise ValidationError("idle_minutes and every_minutes must be positive")
    idle_before = (now or datetime.now(UTC)) - timedelta(minutes=idle_minutes)
    active_after = idle_before - timedelta(minutes=every_minutes)
    sessions = sweep.idle_sessions(idle_before=_stamp(idle_before), active_after=_stamp(active_after), limit=limit)
    for namespace, session_id in sessions:
        queue.enqueue(CompactionRequest.create(namespace, session_id, None, kind="reflection"))
    return sessions


__all__ = ["DEFAULT_LIMIT", "IdleSessions", "queue_idle_reflections"]
