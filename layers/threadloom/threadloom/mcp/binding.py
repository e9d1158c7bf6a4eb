"""Whose memory a request acts on: one tenant's manager, its limits, and the session named at start.

The tools and resources are defined once for every transport; each transport says whose memory they
act on by setting ``CURRENT`` (a context variable, so concurrent HTTP requests never see each other's
tenant): stdio once per process, HTTP once per request from the verified JWT.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from threadloom.api.exceptions import ForbiddenError
from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.limits import Limits


@dataclass
class Binding:
    """One caller's view: the manager of its tenant (namespace) and what the tools default to."""

    manager: SessionManager
    limits: Limits
    session_id: str | None = None
    """The session named when the server started (``--session``, ``/mcp?session=``), used when a call names none."""
    subject_id: str | None = None
    """The caller's data-subject id (the JWT's subject claim over HTTP), recorded on the sessions it creates."""
    may_name_subjects: bool = True
    """Whether a created session may name a subject other than the caller's: over HTTP, only a token with the
    act-for-users scope may when the profile shares blocks by subject (as ``POST /sessions`` checks); stdio
    runs as the machine's own user."""
    notifies: bool = False
    """Whether the transport keeps a channel open for change notifications (stdio does; stateless HTTP does not)."""
    subscriptions: set[str] = field(default_factory=set)
    """Resource URIs the client subscribed to (``resources/subscribe``), told about when they change."""

    def session_for(self, session_id: str | None) -> str:
        """The session a call acts on: its ``sessionId`` argument, else the one named at start."""
        chosen = session_id if session_id is not None else self.session_id
        if chosen is None:
            raise ValidationError(
                "Name the session: pass sessionId (list_sessions shows yours), or start the server with one"
                " (threadloom mcp --session ID, or /mcp?session=ID)"
            )
        return chosen

    def subject_for_new_session(self, subject_id: str | None) -> str | None:
        """The subject a created session records: the one named, if this caller may name it, else the caller's."""
        if subject_id is None or subject_id == self.subject_id:
            return self.subject_id
        if not self.may_name_subjects:
            raise ForbiddenError(
                "subjectId names another user: their sessions share that user's memory, so only a token with the"
                " act-for-users scope may name one; leave it out to create a session of your own"
            )
        return subject_id


CURRENT: ContextVar[Binding] = ContextVar("threadloom_mcp_binding")


def current() -> Binding:
    """The binding of the request being served (set by the transport before the server runs)."""
    return CURRENT.get()


__all__ = ["CURRENT", "Binding", "current"]
