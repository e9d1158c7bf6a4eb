"""The MCP resources: the caller's sessions, and per session its history (paged), context blocks and prompt.

Addressed as ``threadloom://sessions`` and ``threadloom://sessions/{sessionId}/...`` (URI templates,
RFC 6570); each read is the REST API's answer for the same thing, as JSON, from the same use case,
so it pages and caps its bytes the same way and another tenant's session is simply not found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from threadloom.api.use_cases import context as context_cases
from threadloom.api.use_cases import history as history_cases
from threadloom.api.use_cases import sessions as session_cases
from threadloom.errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from threadloom.mcp.binding import Binding

SCHEME = "threadloom"
SESSIONS_URI = f"{SCHEME}://sessions"
JSON = "application/json"


@dataclass(frozen=True)
class TemplateSpec:
    uri_template: str
    name: str
    description: str


TEMPLATES = (
    TemplateSpec(f"{SESSIONS_URI}{{?cursor,limit}}", "sessions", "Your sessions, most recent activity first (paged)"),
    TemplateSpec(f"{SESSIONS_URI}/{{sessionId}}", "session", "One session: name, model, token usage"),
    TemplateSpec(
        f"{SESSIONS_URI}/{{sessionId}}/history{{?cursor,limit}}",
        "history",
        "A session's messages, root to latest leaf, overlays applied; nextCursor reads the next page",
    ),
    TemplateSpec(f"{SESSIONS_URI}/{{sessionId}}/context", "context", "A session's context blocks"),
    TemplateSpec(f"{SESSIONS_URI}/{{sessionId}}/system-prompt", "system-prompt", "A session's frozen system prompt"),
)
_SESSION_PATH = re.compile(r"^/([^/]+)(?:/(history|context|system-prompt))?$")


def session_uri(session_id: str, tail: str = "") -> str:
    """``threadloom://sessions/{id}{tail}``, the id percent-encoded so that any id makes one path segment."""
    return f"{SESSIONS_URI}/{quote(session_id, safe='')}{tail}"


def listed(binding: Binding) -> list[tuple[str, str]]:
    """``(uri, name)`` of the concrete resources: the sessions list, and the bound session's own."""
    items = [(SESSIONS_URI, "sessions")]
    if binding.session_id is not None:
        for tail, name in (("", "session"), ("/history", "history"), ("/context", "context")):
            items.append((session_uri(binding.session_id, tail), f"{name} of {binding.session_id}"))
    return items


def read(binding: Binding, uri: str) -> str:
    """The resource's JSON; ``NotFoundError`` for a URI that names nothing of the caller's."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or parts.netloc != "sessions":
        raise NotFoundError(f"No resource {uri!r}: Threadloom's resources start with {SESSIONS_URI}")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    limit = _limit(query.get("limit"))
    cursor = query.get("cursor") or None
    manager, limits = binding.manager, binding.limits
    model: BaseModel
    if parts.path in ("", "/"):
        model = session_cases.list_sessions(manager, limits, limit=limit, cursor=cursor)
        return model.model_dump_json(by_alias=True)
    match = _SESSION_PATH.match(parts.path)
    if match is None:
        raise NotFoundError(f"No resource {uri!r}; see resources/templates/list for the shapes")
    session_id, kind = unquote(match.group(1)), match.group(2)
    if kind is None:
        model = session_cases.get_session(manager, session_id)
    elif kind == "history":
        model = history_cases.history(manager, session_id, limits, leaf_id=None, limit=limit, cursor=cursor)
    elif kind == "context":
        model = context_cases.context_blocks(manager, session_id)
    else:
        model = context_cases.system_prompt(manager, session_id)
    return model.model_dump_json(by_alias=True)


def _limit(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValidationError(f"limit must be a positive integer, not {text!r}")
    return int(text)


__all__ = ["JSON", "SESSIONS_URI", "TEMPLATES", "TemplateSpec", "listed", "read", "session_uri"]
