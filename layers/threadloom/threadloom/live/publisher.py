"""Where live events leave the process: the ``StatusPublisher`` Protocol and the bridge from session events.

The runtime attaches one publisher to every tenant's ``SessionManager`` (``attach_publisher``); the
sessions then publish after each write and around each compaction, in the API process and in the
compaction worker alike. The local server plugs in ``LocalHub``; the deployed stack either hands events to its
publisher function through a queue (``threadloom.live.aws.queue_publisher``) or posts them through the API Gateway
Management API itself (``threadloom.live.aws.publisher``). Publishing is best effort: ``publish_safely`` makes
sure no publisher failure ever reaches the write that triggered it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from threadloom.live.events import CHANGE_KINDS, SessionStatus, session_changed, session_error, session_status

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.live.events import ChangeKind, Compacted, LiveEvent, Phase

logger = logging.getLogger(__name__)

PUBLISH_BUDGET_SECONDS = 0.25
"""The most a publish may add to a write. Implementations bound their network calls by it."""


@runtime_checkable
class StatusPublisher(Protocol):
    """Delivers one event to every connection subscribed to ``(namespace, session_id)``.

    Contract for implementations: never raise; return within ``PUBLISH_BUDGET_SECONDS`` (queue or
    drop rather than wait); forget connections that are gone; never deliver across namespaces.
    """

    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None: ...


class NullPublisher:
    """Publishes nowhere: the default when no live channel is configured."""

    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        return None


def publish_safely(publisher: StatusPublisher, namespace: str, session_id: str, event: LiveEvent) -> None:
    """Publish, swallowing (and logging) any failure; a publish over budget is logged as a warning."""
    started = time.monotonic()
    try:
        publisher.publish(namespace, session_id, event)
    except Exception:
        logger.warning("Live publish of %s for session %r failed", event["type"], session_id, exc_info=True)
        return
    elapsed = time.monotonic() - started
    if elapsed > PUBLISH_BUDGET_SECONDS:
        logger.warning(
            "Live publish of %s for session %r took %.3f s (budget %.3f s)",
            event["type"],
            session_id,
            elapsed,
            PUBLISH_BUDGET_SECONDS,
        )


class SessionEventForwarder:
    """Turns a manager's session events (``on_session_event``) into wire events for one namespace.

    With the manager, a change of a shared (subject or tenant) block is also told to the other
    sessions sharing it: each gets a ``session_status`` whose ``staleBlocks`` names what changed
    under its frozen prompt.
    """

    def __init__(self, publisher: StatusPublisher, namespace: str, manager: SessionManager | None = None) -> None:
        self.publisher = publisher
        self.namespace = namespace
        self.manager = manager

    def __call__(self, session_id: str, event: dict[str, Any]) -> None:
        if event.get("type") == "shared_block_changed":
            self._tell_sharing_sessions(session_id, str(event.get("scope")))
            return
        wire = to_wire_event(session_id, event)
        if wire is not None:
            publish_safely(self.publisher, self.namespace, session_id, wire)

    def _tell_sharing_sessions(self, session_id: str, scope: str) -> None:
        manager = self.manager
        if manager is None:
            return
        from threadloom.live.status import current_status

        try:
            others = manager.sessions_sharing(session_id, scope)
        except Exception:
            logger.warning("Listing the sessions sharing a %s block of %r failed", scope, session_id, exc_info=True)
            return
        for other in others:
            try:
                stale = manager.get_session(other).stale_prompt_blocks()
                if stale:
                    event = session_status(other, current_status(manager, other), stale_blocks=stale)
                    publish_safely(self.publisher, self.namespace, other, event)
            except Exception:
                logger.warning("Telling session %r its prompt is stale failed", other, exc_info=True)


def to_wire_event(session_id: str, event: dict[str, Any]) -> LiveEvent | None:
    """The protocol event for a core session event (``None`` for a kind the protocol does not carry)."""
    kind = event.get("type")
    if kind == "session_status":
        phase: Phase = "compacting" if event.get("phase") == "compacting" else "idle"
        status = SessionStatus(phase, int(event.get("tokenEstimate") or 0), event.get("tokenThreshold"))
        before = (event.get("compacted") or {}).get("tokensBefore")
        compacted: Compacted | None = {"tokensBefore": int(before)} if isinstance(before, int) else None
        return session_status(session_id, status, compacted=compacted)
    if kind == "session_error":
        return session_error(session_id, str(event.get("error", "")))
    if kind == "session_changed" and event.get("change") in CHANGE_KINDS:
        change: ChangeKind = event["change"]
        leaf_id = event.get("leafId")
        return session_changed(session_id, change, leaf_id if isinstance(leaf_id, str) else None)
    return None


def attach_publisher(manager: SessionManager, publisher: StatusPublisher) -> SessionManager:
    """Publish every session event of ``manager`` (status, errors, changes) through ``publisher``."""
    return manager.on_session_event(SessionEventForwarder(publisher, manager.namespace, manager))


__all__ = [
    "PUBLISH_BUDGET_SECONDS",
    "NullPublisher",
    "SessionEventForwarder",
    "StatusPublisher",
    "attach_publisher",
    "publish_safely",
    "to_wire_event",
]
