"""Tool inputs: the REST API's own request models (``api/models.py``), plus the session a call acts on.

A tool's JSON Schema is its model's, so an MCP client is told exactly what the HTTP API accepts
(camelCase names, the same bounds), and its arguments are validated by the same Pydantic code.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from threadloom.api.models import ApiModel, AppendIn, SessionCreate
from threadloom.limits import HARD_LIMITS

SESSION_ID_DESCRIPTION = "The session to act on; may be left out when the server was started for one session"


class SessionChoice(ApiModel):
    """The ``sessionId`` every session-level tool takes (``Binding.session_for`` fills it in when left out)."""

    session_id: Annotated[str, Field(min_length=1, description=SESSION_ID_DESCRIPTION)] | None = None


class ListSessionsIn(ApiModel):
    """``GET /sessions``'s query: a page size and the cursor of the page before."""

    limit: Annotated[int, Field(ge=1, description="At most this many sessions, most recent activity first")] | None = (
        None
    )
    cursor: Annotated[str, Field(description="nextCursor of the page before")] | None = None


class CreateSessionIn(SessionCreate):
    """``POST /sessions``'s body."""


class AppendMessageIn(AppendIn, SessionChoice):
    """``POST /sessions/{sessionId}/messages``'s body: one ``message`` (or a chain, ``messages``)."""


class ReadHistoryIn(SessionChoice):
    """``GET /sessions/{sessionId}/history``'s query: root to leaf, one page at a time."""

    leaf_id: Annotated[str, Field(description="Read the branch ending here (default: the latest leaf)")] | None = None
    limit: Annotated[int, Field(ge=1, description="At most this many messages on the page")] | None = None
    cursor: Annotated[str, Field(description="nextCursor of the page before")] | None = None


class SearchIn(ApiModel):
    """``GET /sessions/{sessionId}/search`` or ``GET /search``: one session when ``sessionId`` is given, else all."""

    query: Annotated[
        str,
        Field(min_length=1, max_length=HARD_LIMITS.max_query_chars, description='Words ANDed; "quoted phrases"'),
    ]
    session_id: (
        Annotated[str, Field(min_length=1, description="Search this session only (default: all of yours)")] | None
    ) = None
    limit: Annotated[int, Field(ge=1, description="At most this many hits, best first")] | None = None


_LABEL = Field(min_length=1, description="A searchable block's label (the profile's search block, e.g. knowledge)")


class ListKnowledgeIn(ApiModel):
    """``GET /knowledge/{label}``'s query: the block's entries in key order, one page at a time."""

    label: Annotated[str, _LABEL]
    limit: Annotated[int, Field(ge=1, description="At most this many entries on the page")] | None = None
    cursor: Annotated[str, Field(description="nextCursor of the page before")] | None = None


class ForgetKnowledgeIn(ApiModel):
    """``DELETE /knowledge/{label}/entry?key=``: one entry and its search terms."""

    label: Annotated[str, _LABEL]
    key: Annotated[
        str, Field(min_length=1, description='The key list_knowledge shows (set_context answered: Indexed "<key>")')
    ]


__all__ = [
    "AppendMessageIn",
    "CreateSessionIn",
    "ForgetKnowledgeIn",
    "ListKnowledgeIn",
    "ListSessionsIn",
    "ReadHistoryIn",
    "SearchIn",
    "SessionChoice",
]
