"""Applying, approving and rejecting proposals: each moves its status by compare-and-set first, so it happens once.

A proposal is claimed (``applying``) before its edit is written, by exactly one worker or approver: with approval
off, by the worker whose transaction stored it (it is stored ``applying``); with approval on, by the approver that
moves it from ``pending``. The edit then goes through ``MemoryBlocks.apply_edit`` with its provenance, and the
proposal ends ``applied`` (with the block's new version) or ``failed`` (with the reason the write was refused). A
process that dies between the claim and the end leaves it ``applying``, visible, rather than applying it twice.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from threadloom.errors import ConflictError, NotFoundError, ThreadloomError
from threadloom.reflection.protocols import BlockEdit, Provenance

if TYPE_CHECKING:
    from threadloom.reflection.protocols import MemoryBlocks
    from threadloom.storage.reflections import ProposalStatus, SqlReflections, StoredProposal

logger = logging.getLogger(__name__)


def require_proposal(ledger: SqlReflections, session_id: str, proposal_id: str) -> StoredProposal:
    found = ledger.get(session_id, proposal_id)
    if found is None:
        raise NotFoundError(f"Proposal {proposal_id!r} not found in session {session_id!r}")
    return found


def _claim(ledger: SqlReflections, proposal: StoredProposal, from_status: ProposalStatus) -> None:
    if not ledger.move(proposal.session_id, proposal.id, from_status, "applying"):
        now = require_proposal(ledger, proposal.session_id, proposal.id)
        raise ConflictError(f"Proposal {proposal.id!r} is {now.status}, not {from_status}; nothing was changed")


def apply_proposal(
    ledger: SqlReflections, blocks: MemoryBlocks, proposal: StoredProposal, *, from_status: ProposalStatus
) -> StoredProposal:
    """Claim ``proposal`` from ``from_status``, write its edit, record the outcome; raises what refused the write."""
    _claim(ledger, proposal, from_status)
    return apply_claimed(ledger, blocks, proposal)


def apply_claimed(ledger: SqlReflections, blocks: MemoryBlocks, proposal: StoredProposal) -> StoredProposal:
    """Write the edit of a proposal this caller holds (``applying``) and record the outcome."""
    edit = BlockEdit(
        label=proposal.label,
        operation=proposal.operation,
        content=proposal.content,
        based_on_version=proposal.based_on_version,
        provenance=Provenance(proposal.source_message_ids, proposal.request_key, proposal.id),
    )
    try:
        block = blocks.apply_edit(edit)
    except Exception as error:
        reason = str(error) if isinstance(error, ThreadloomError) else f"unexpected {type(error).__name__}"
        ledger.move(proposal.session_id, proposal.id, "applying", "failed", error=reason)
        raise
    ledger.move(proposal.session_id, proposal.id, "applying", "applied", applied_version=block.version)
    return require_proposal(ledger, proposal.session_id, proposal.id)


def apply_run(ledger: SqlReflections, blocks: MemoryBlocks, proposals: list[StoredProposal]) -> int:
    """Apply, in order, the proposals a run stored claimed (approval off); a refused one is recorded ``failed`` and
    the rest go on. Returns how many were applied."""
    applied = 0
    for proposal in proposals:
        try:
            apply_claimed(ledger, blocks, proposal)
        except ThreadloomError as error:
            logger.warning("Reflection proposal %s failed: %s", proposal.id, error)
            continue
        applied += 1
    return applied


def reject_proposal(ledger: SqlReflections, session_id: str, proposal_id: str) -> StoredProposal:
    """``pending`` → ``rejected``; ``ConflictError`` when it is no longer pending."""
    proposal = require_proposal(ledger, session_id, proposal_id)
    if not ledger.move(session_id, proposal_id, "pending", "rejected"):
        now = require_proposal(ledger, session_id, proposal_id)
        raise ConflictError(f"Proposal {proposal_id!r} is {now.status}, not pending; nothing was changed")
    return require_proposal(ledger, session_id, proposal.id)


__all__ = ["apply_claimed", "apply_proposal", "apply_run", "reject_proposal", "require_proposal"]
