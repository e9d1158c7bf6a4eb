"""Use cases of a block's history: the versions page, one version, a revert (issue 26).

Every writable block keeps its changes as versions with provenance; these read them through the
session, so a block of another tenant's session (or another subject's) is simply not found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.api.models import BlockHistoryPage, BlockVersionOut, ContextBlockOut
from threadloom.api.paging import decode_cursor, encode_cursor, item_budget, page_size
from threadloom.api.use_cases.context import http_change
from threadloom.errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.core.session import Session
    from threadloom.limits import Limits

_CURSOR_KIND = "block-history"


def _block_session(session: Session, label: str) -> Session:
    if session.get_context_block(label) is None:
        raise NotFoundError(f'Block "{label}" not found')
    return session


def _cursor_before(cursor: str | None, session_id: str, label: str) -> int | None:
    """The version the previous page ended at (the next page is older than it)."""
    if not cursor:
        return None
    state = decode_cursor(cursor)
    before = state.get("b")
    if state.get("k") != _CURSOR_KIND or state.get("s") != session_id or state.get("l") != label:
        raise ValidationError("Invalid cursor: it belongs to another list")
    if not isinstance(before, int) or isinstance(before, bool) or before < 1:
        raise ValidationError("Invalid cursor")
    return before


def block_history(
    manager: SessionManager, session_id: str, label: str, limits: Limits, *, limit: int | None, cursor: str | None
) -> BlockHistoryPage:
    """One page of versions, newest first, cut at ``limit`` or the response byte budget."""
    with manager.checked_session(session_id) as session:
        _block_session(session, label)
        before = _cursor_before(cursor, session_id, label)
        # The budget counts content bytes; each version's other fields take well under 1 KiB of the envelope.
        versions, more = session.context_history(
            label, before=before, limit=page_size(limit, limits), max_bytes=item_budget(limits) // 2
        )
    next_cursor = (
        encode_cursor({"k": _CURSOR_KIND, "s": session_id, "l": label, "b": versions[-1].version})
        if more and versions
        else None
    )
    return BlockHistoryPage(versions=[BlockVersionOut.of(label, v) for v in versions], next_cursor=next_cursor)


def block_version(manager: SessionManager, session_id: str, label: str, version: int) -> BlockVersionOut:
    with manager.checked_session(session_id) as session:
        return BlockVersionOut.of(label, _block_session(session, label).context_version(label, version))


def revert_block(
    manager: SessionManager, session_id: str, label: str, *, version: int, based_on_version: int | None
) -> ContextBlockOut:
    """Make an old version current again: a new version whose provenance is this request."""
    with manager.checked_session(session_id) as session:
        block = _block_session(session, label).revert_context(
            label, version, change=http_change(), based_on_version=based_on_version
        )
    return ContextBlockOut.of(block)
