"""Use cases of compaction: request one, its status, the overlays and the messages they replace, split.

Plain Python over a ``SessionManager``, so each is tested without events. Every session-level
call first checks that the session belongs to the manager's namespace: another tenant's
session is simply not found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.api.models import (
    CompactionList,
    CompactionOut,
    CompactionRequestOut,
    CompactOut,
    IdleReasonOut,
    OriginalsPage,
    SessionOut,
    SessionStatusOut,
)
from threadloom.api.paging import (
    anchor_cursor,
    cursor_anchor,
    index_after,
    model_size,
    page_within,
)
from threadloom.api.use_cases.common import require_message, require_session
from threadloom.compaction.markers import COMPACTION_PREFIX
from threadloom.compaction.queue import CompactionRequest
from threadloom.compaction.tracking import TrackedCompactionQueue
from threadloom.errors import NotFoundError, ValidationError
from threadloom.live.status import idle_reason, status_report

if TYPE_CHECKING:
    from threadloom.compaction.queue import CompactionQueue
    from threadloom.core.manager import SessionManager
    from threadloom.limits import Limits
    from threadloom.records import Message


def compact(
    manager: SessionManager, session_id: str, leaf_id: str | None, queue: CompactionQueue | None
) -> tuple[CompactOut, bool]:
    """Queue a compaction (True: answer 202) or, without a queue, run it now."""
    session = require_session(manager, session_id)
    if leaf_id is not None:
        require_message(session, session_id, leaf_id)
    if queue is not None:
        if leaf_id is None:
            latest = session.get_latest_leaf()
            leaf_id = latest.get("id") if latest else None
        request = CompactionRequest.create(manager.namespace, session_id, leaf_id)
        if isinstance(queue, TrackedCompactionQueue):
            return CompactOut(status="queued", request_id=queue.submit(request).id), True
        queue.enqueue(request)
        return CompactOut(status="queued"), True
    result = session.compact(leaf_id, registered=True)
    if result is None:
        return CompactOut(status="nothing_to_compact"), False
    return (
        CompactOut(
            status="compacted",
            from_message_id=result.from_message_id,
            to_message_id=result.to_message_id,
            summary=result.summary,
        ),
        False,
    )


def session_status(manager: SessionManager, session_id: str) -> SessionStatusOut:
    """Phase, token estimate and threshold (as the live ``session_status`` event) and the latest request."""
    status, latest = status_report(manager, session_id)
    with manager.checked_session(session_id) as session:  # checked again: the status's own check has ended
        stale_blocks = session.stale_prompt_blocks()
    return SessionStatusOut(
        session_id=session_id,
        phase=status.phase,
        token_estimate=status.token_estimate,
        token_threshold=status.token_threshold,
        compaction=CompactionRequestOut.of(latest) if latest is not None else None,
        idle_reason=IdleReasonOut.of(idle_reason(status, latest)),
        stale_blocks=stale_blocks,
    )


def compactions(
    manager: SessionManager, session_id: str, limits: Limits, *, limit: int | None, cursor: str | None
) -> CompactionList:
    """One page of the overlays, cut at ``limit`` or the byte budget; the cursor names the last one returned."""
    stored = [CompactionOut.of(item) for item in manager.get_compactions(session_id)]
    start = index_after(stored, cursor_anchor(cursor, "compactions", session_id), lambda item: item.id, "overlay")
    page, more = page_within(stored[start:], limits, limit, size_of=model_size)
    next_cursor = anchor_cursor("compactions", session_id, page[-1].id) if more else None
    return CompactionList(compactions=page, next_cursor=next_cursor)


def compaction_originals(
    manager: SessionManager,
    session_id: str,
    compaction_id: str,
    limits: Limits,
    *,
    limit: int | None,
    cursor: str | None,
) -> OriginalsPage:
    """The stored messages an overlay replaces, ``from`` to ``to`` inclusive, as appended, a page at a time."""
    wanted = compaction_id.removeprefix(COMPACTION_PREFIX)
    with manager.checked_session(session_id) as session:
        found = next((item for item in session.get_compactions() if item.id == wanted), None)
        if found is None:
            raise NotFoundError(f"Compaction {compaction_id!r} not found in session {session_id!r}")
        raw_path = getattr(session.storage, "get_raw_path", None)
        if not callable(raw_path):
            raise ValidationError("This session storage cannot read the originals of a compaction")
        path: list[Message] = raw_path(found.to_message_id)
    start = next((index for index, message in enumerate(path) if message.get("id") == found.from_message_id), None)
    if start is None:
        raise NotFoundError(f"The start of compaction {compaction_id!r} is no longer stored")
    originals = path[start:]
    scope = f"originals:{wanted}"
    offset = index_after(
        originals, cursor_anchor(cursor, scope, session_id), lambda message: message.get("id"), "message"
    )
    page, more = page_within(originals[offset:], limits, limit)
    next_cursor = anchor_cursor(scope, session_id, str(page[-1].get("id"))) if more else None
    return OriginalsPage(messages=page, next_cursor=next_cursor)


def split(manager: SessionManager, session_id: str, summary: str, name: str | None) -> SessionOut:
    return SessionOut.of(manager.compact_and_split(session_id, summary, name))
