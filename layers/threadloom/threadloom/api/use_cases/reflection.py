"""Use cases of reflection: reflect a session now or on the queue, list its proposals, approve or reject one.

Plain Python over a ``SessionManager``, so each is tested without events. Every call first checks that the session
belongs to the manager's namespace (another tenant's session is simply not found), and every proposal is read by
``(namespace, session, id)``: one tenant can neither see nor decide another's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.api.models import ProposalList, ProposalOut, ReflectOut
from threadloom.api.paging import anchor_cursor, cursor_anchor, model_size, page_size, page_within
from threadloom.api.use_cases.common import require_message, require_session
from threadloom.compaction.queue import CompactionRequest, request_key
from threadloom.errors import ConflictError, ValidationError
from threadloom.reflection.proposals import apply_proposal, reject_proposal, require_proposal
from threadloom.reflection.session_blocks import SessionMemoryBlocks
from threadloom.reflection.worker import ReflectionOutcome, reflections_of

if TYPE_CHECKING:
    from threadloom.compaction.queue import CompactionQueue
    from threadloom.core.manager import SessionManager
    from threadloom.limits import Limits
    from threadloom.reflection.worker import ReflectionWorker
    from threadloom.storage.reflections import ProposalStatus, StoredProposal

REFLECTION_OFF = "Reflection is off in this deployment's profile (set reflection.enabled; see docs/reflection.md)"


def proposal_out(proposal: StoredProposal) -> ProposalOut:
    return ProposalOut(
        id=proposal.id,
        label=proposal.label,
        operation=proposal.operation,
        content=proposal.content,
        source_message_ids=list(proposal.source_message_ids),
        based_on_version=proposal.based_on_version,
        status=proposal.status,
        error=proposal.error,
        applied_version=proposal.applied_version,
        created_at=proposal.created_at,
        decided_at=proposal.decided_at,
    )


def reflect(
    manager: SessionManager,
    session_id: str,
    leaf_id: str | None,
    worker: ReflectionWorker | None,
    queue: CompactionQueue | None,
) -> tuple[ReflectOut, bool]:
    """Queue a reflection up to ``leaf_id`` (True: answer 202) or, without a queue, run it now."""
    session = require_session(manager, session_id)
    if worker is None:
        raise ConflictError(REFLECTION_OFF)
    if leaf_id is not None:
        require_message(session, session_id, leaf_id)
    else:
        latest = session.get_latest_leaf()
        leaf_id = str(latest.get("id")) if latest else None
    request = CompactionRequest.create(manager.namespace, session_id, leaf_id, kind="reflection")
    if queue is not None:
        queue.enqueue(request)
        return ReflectOut(status="queued", leaf_id=leaf_id), True
    outcome = worker.handle(request)
    if outcome is ReflectionOutcome.SESSION_GONE:  # deleted between the check above and the worker's read
        raise ConflictError(f"Session {session_id!r} was deleted while it was reflected")
    proposals = reflections_of(manager).of_run(request_key(request))
    out = ReflectOut.model_validate({"status": outcome.value, "leaf_id": leaf_id})
    return out.model_copy(update={"proposals": [proposal_out(item) for item in proposals]}), False


def proposals(
    manager: SessionManager,
    session_id: str,
    limits: Limits,
    *,
    status: ProposalStatus | None,
    limit: int | None,
    cursor: str | None,
) -> ProposalList:
    """One page of the session's proposals (one status, or all), oldest first, cut at ``limit`` or the byte budget."""
    scope = f"proposals:{status or 'all'}"
    with manager.checked_session(session_id):
        anchor = cursor_anchor(cursor, scope, session_id)
        if anchor is not None and not anchor.isdigit():
            raise ValidationError("The cursor is not one this list gave")
        after = int(anchor) if anchor is not None else 0
        size = page_size(limit, limits)
        stored = reflections_of(manager).page(session_id, status=status, after_seq=after, limit=size + 1)
    items = [proposal_out(item) for item in stored]
    page, more = page_within(items, limits, limit, size_of=model_size)
    last = stored[len(page) - 1].seq if page else after
    return ProposalList(proposals=page, next_cursor=anchor_cursor(scope, session_id, str(last)) if more else None)


def approve(manager: SessionManager, session_id: str, proposal_id: str, worker: ReflectionWorker | None) -> ProposalOut:
    """Apply a pending proposal now (409 when it is not pending, or its block refuses the edit: then ``failed``)."""
    session = require_session(manager, session_id)
    ledger = reflections_of(manager)
    proposal = require_proposal(ledger, session_id, proposal_id)
    blocks = worker.blocks_for(session) if worker is not None else SessionMemoryBlocks(session)
    return proposal_out(apply_proposal(ledger, blocks, proposal, from_status="pending"))


def reject(manager: SessionManager, session_id: str, proposal_id: str) -> ProposalOut:
    """Reject a pending proposal (409 when it is not pending); the block is not touched."""
    require_session(manager, session_id)
    return proposal_out(reject_proposal(reflections_of(manager), session_id, proposal_id))


__all__ = ["approve", "proposal_out", "proposals", "reflect", "reject"]
