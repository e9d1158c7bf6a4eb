"""Lookups every use case starts with: a session or message of this tenant, or a 404.

Plain Python over a ``SessionManager``, so each is tested without events. Every session-level
call first checks that the session belongs to the manager's namespace: another tenant's
session is simply not found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.errors import NotFoundError

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.core.session import Session
    from threadloom.records import Message


def require_session(manager: SessionManager, session_id: str) -> Session:
    """The session if it exists in this tenant's namespace, else ``NotFoundError``."""
    if manager.get(session_id) is None:
        raise NotFoundError(f"Session {session_id!r} not found")
    return manager.get_session(session_id)


def require_message(session: Session, session_id: str, message_id: str) -> Message:
    message = session.get_message(message_id)
    if message is None:
        raise NotFoundError(f"Message {message_id!r} not found in session {session_id!r}")
    return message
