"""Use cases of the sessions resource: create, open by key, list, read, rename, hold, fork, usage.

Plain Python over a ``SessionManager``, so each is tested without events. Every session-level
call first checks that the session belongs to the manager's namespace: another tenant's
session is simply not found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.api.models import (
    SessionListItem,
    SessionOut,
    SessionPage,
)
from threadloom.api.paging import (
    count_within_bytes,
    item_budget,
    model_size,
    page_size,
)
from threadloom.errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.limits import Limits
    from threadloom.records import SessionInfo


def create_session(
    manager: SessionManager,
    name: str,
    *,
    parent_session_id: str | None,
    model: str | None,
    source: str | None,
    subject_id: str | None = None,
) -> SessionOut:
    if parent_session_id is not None and manager.get(parent_session_id) is None:
        raise NotFoundError(f"Session {parent_session_id!r} not found")
    info = manager.create(name, parent_session_id=parent_session_id, model=model, source=source, subject_id=subject_id)
    return SessionOut.of(info)


def open_session(
    manager: SessionManager,
    key: str,
    *,
    name: str | None,
    model: str | None,
    source: str | None,
    subject_id: str | None = None,
) -> tuple[SessionOut, bool]:
    """The session for the caller's key and whether this call created it (recorded under ``subject_id``)."""
    existed = manager.get(manager.session_id_for(key)) is not None
    info = manager.open_session(key, name=name, model=model, source=source, subject_id=subject_id)
    return SessionOut.of(info), not existed


def list_sessions(manager: SessionManager, limits: Limits, *, limit: int | None, cursor: str | None) -> SessionPage:
    """A keyset page cut at ``limit`` or the response byte budget, whichever comes first."""
    budget = item_budget(limits)

    def fit(infos: list[SessionInfo]) -> int:
        return count_within_bytes(
            [SessionOut.of(info) for info in infos],
            budget,
            size_of=lambda model: model_size(model) + OVERVIEW_BYTES,  # the preview is added after the cut
        )

    sessions, next_cursor = manager.list_page(limit=page_size(limit, limits), cursor=cursor or None, fit=fit)
    found = manager.overviews([info.id for info in sessions], preview_chars=PREVIEW_CHARS)
    items = [
        SessionListItem.of_overview(info, None if found is None else found.get(info.id), known=found is not None)
        for info in sessions
    ]
    return SessionPage(sessions=items, next_cursor=next_cursor)


PREVIEW_CHARS = 160
OVERVIEW_BYTES = 6 * PREVIEW_CHARS + 96  # the most a list item's count, preview and role add as JSON


def get_session(manager: SessionManager, session_id: str) -> SessionOut:
    info = manager.get(session_id)
    if info is None:
        raise NotFoundError(f"Session {session_id!r} not found")
    return SessionOut.of(info)


def rename_session(manager: SessionManager, session_id: str, name: str) -> SessionOut:
    return SessionOut.of(manager.rename(session_id, name))


def update_session(
    manager: SessionManager, session_id: str, *, name: str | None, legal_hold: bool | None
) -> SessionOut:
    """``PATCH``: a new name, a legal hold change, or both (at least one)."""
    if name is None and legal_hold is None:
        raise ValidationError("Send 'name', 'legalHold' or both")
    if manager.get(session_id) is None:
        raise NotFoundError(f"Session {session_id!r} not found")
    info = manager.rename(session_id, name) if name is not None else None
    if legal_hold is not None:
        info = manager.set_legal_hold(session_id, legal_hold)
    assert info is not None
    return SessionOut.of(info)


def delete_session(manager: SessionManager, session_id: str) -> None:
    if not manager.delete(session_id):
        raise NotFoundError(f"Session {session_id!r} not found")


def fork(manager: SessionManager, session_id: str, at_message_id: str, name: str) -> SessionOut:
    """The manager checks the session (404) and the message (404) itself, before anything is written."""
    return SessionOut.of(manager.fork(session_id, at_message_id, name))


def add_usage(
    manager: SessionManager, session_id: str, *, input_tokens: int, output_tokens: int, cost: float
) -> SessionOut:
    return SessionOut.of(manager.add_usage(session_id, input_tokens, output_tokens, cost))
