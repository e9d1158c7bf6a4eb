"""What each client method sends and how it reads the answers, written once for the sync and async clients.

An operation is a generator: it yields the requests it needs (:class:`Call`, :class:`Download`)
and is sent each decoded answer, or has the typed exception thrown into it, and returns the
method's result. ``ThreadloomClient`` drives it with httpx's ``Client``, ``AsyncThreadloomClient``
with ``AsyncClient``; neither knows a route, a body or an answer's shape.

Over 400 lines because every operation of the API the client offers is here, each a few lines,
so that the two clients share one copy.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar
from urllib.parse import quote

from threadloom.client import wire
from threadloom.errors import NotFoundError
from threadloom.records import OMITTED, AppendResult, CompactResult, Omitted

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import httpx

    from threadloom.records import (
        BlockVersion,
        ContextBlock,
        Message,
        Proposal,
        ReflectResult,
        SearchEntry,
        SearchResult,
        SessionInfo,
        StoredCompaction,
    )

T = TypeVar("T")

MAX_CHAIN: Final = 500
"""The most messages one append request may carry (``AppendIn.messages``)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One API request; ``raw`` asks for the ``httpx.Response`` instead of the decoded JSON."""

    method: str
    route: str
    params: Mapping[str, Any] | None = None
    body: Any = None
    content: bytes | None = None
    content_type: str | None = None
    idempotent: bool | None = None
    raw: bool = False
    redirects: frozenset[int] = frozenset()
    """The 3xx answers the operation reads itself (the export's 303); any other raises ``HttpError``."""


@dataclass(frozen=True, slots=True)
class Download:
    """An absolute URL the API pointed at (a presigned S3 link), fetched without our credentials."""

    url: str


Step: TypeAlias = Call | Download
Op: TypeAlias = Generator[Step, Any, T]
Page: TypeAlias = tuple[list[T], str | None]
"""One page of items and the cursor of the next (None on the last)."""


def collect(page: Callable[[str | None], Op[Page[T]]]) -> Op[list[T]]:
    """Every item of every page, in order."""
    items: list[T] = []
    cursor: str | None = None
    while True:
        found, cursor = yield from page(cursor)
        items.extend(found)
        if cursor is None:
            return items


def path(*segments: str) -> str:
    """A route path with each segment percent-encoded; ``:`` and ``@`` (valid in ids and in a path) stay as they are."""
    return "/" + "/".join(quote(segment, safe=":@") for segment in segments)


def _route(session_id: str, *segments: str) -> str:
    return path("sessions", session_id, *segments)


def absent(error: NotFoundError, subject: str) -> bool:
    """Whether a 404 says the resource the call names is not stored: the API's ``not_found`` code, its message
    about that resource (``subject`` starts it: ``"Session "``, ``"Message "``...).

    A route the API does not serve (``route_not_found``: a wrong base path), a 404 without the envelope (a
    gateway's or a proxy's own) or one about another resource (the session of a block read, a block that is
    not searchable) is not an answer about it, and is raised.
    """
    return getattr(error, "code", None) == "not_found" and str(error).startswith(subject)


# ------------------------------------------------------------------ service


def health() -> Op[dict[str, Any]]:
    return dict((yield Call("GET", "/health")))


def openapi() -> Op[dict[str, Any]]:
    return dict((yield Call("GET", "/openapi.json")))


# ----------------------------------------------------------------- sessions


def create(
    name: str, parent_session_id: str | None, model: str | None, source: str | None, subject_id: str | None = None
) -> Op[SessionInfo]:
    body: dict[str, Any] = {"name": name, "parentSessionId": parent_session_id, "model": model, "source": source}
    if subject_id is not None:
        body["subjectId"] = subject_id
    return wire.session_info((yield Call("POST", "/sessions", body=body, idempotent=True)))


def open_session(key: str, name: str | None, model: str | None, source: str | None) -> Op[SessionInfo]:
    body = {"key": key, "name": name, "model": model, "source": source}
    return wire.session_info((yield Call("POST", "/sessions/open", body=body, idempotent=True)))


def get(session_id: str) -> Op[SessionInfo | None]:
    try:
        return wire.session_info((yield Call("GET", _route(session_id))))
    except NotFoundError as error:
        if not absent(error, "Session "):
            raise
        return None


def sessions_page(limit: int, cursor: str | None) -> Op[Page[SessionInfo]]:
    out = yield Call("GET", "/sessions", params={"limit": limit, "cursor": cursor})
    return [wire.session_info(item) for item in out["sessions"]], out.get("nextCursor") or None


def update(session_id: str, body: dict[str, Any]) -> Op[SessionInfo]:
    """``PATCH /sessions/{id}``: a rename or a legal hold."""
    return wire.session_info((yield Call("PATCH", _route(session_id), body=body)))


def delete(session_id: str) -> Op[bool]:
    try:
        yield Call("DELETE", _route(session_id))
    except NotFoundError as error:
        if not absent(error, "Session "):
            raise
        return False
    return True


def fork(session_id: str, at_message_id: str, name: str) -> Op[SessionInfo]:
    body = {"atMessageId": at_message_id, "name": name}
    return wire.session_info((yield Call("POST", _route(session_id, "fork"), body=body, idempotent=True)))


def compact_and_split(session_id: str, summary: str, name: str | None) -> Op[SessionInfo]:
    body = {"summary": summary, "name": name}
    return wire.session_info((yield Call("POST", _route(session_id, "split"), body=body)))


def add_usage(session_id: str, input_tokens: int, output_tokens: int, cost: float) -> Op[SessionInfo]:
    body = {"inputTokens": input_tokens, "outputTokens": output_tokens, "cost": cost}
    return wire.session_info((yield Call("POST", _route(session_id, "usage"), body=body)))


def search(query: str, limit: int, session_id: str | None = None) -> Op[list[SearchResult]]:
    """Across the tenant's sessions, or within one."""
    route = "/search" if session_id is None else _route(session_id, "search")
    out = yield Call("GET", route, params={"q": query, "limit": limit})
    return [wire.search_result(hit) for hit in out["results"]]


# ---------------------------------------------------------------- lifecycle


def export_session(
    session_id: str, *, include_shared_blocks: bool = False, include_knowledge: bool = False
) -> Op[bytes]:
    """The export file, following the API to S3 when it answers 303; with ``include_shared_blocks``, the subject
    and tenant blocks and their history too; with ``include_knowledge``, the tenant's knowledge entries."""
    params: dict[str, str] = {}
    if include_shared_blocks:
        params["includeSharedBlocks"] = "true"
    if include_knowledge:
        params["includeKnowledge"] = "true"
    call = Call("GET", _route(session_id, "export"), params=params or None, raw=True, redirects=frozenset({303}))
    response: httpx.Response = yield call
    if response.status_code == 303:
        return bytes((yield Download(response.json()["url"])))
    return response.content


def import_sessions(data: bytes | str) -> Op[dict[str, Any]]:
    content = data.encode("utf-8") if isinstance(data, str) else data
    call = Call("POST", "/sessions/import", content=content, content_type="application/x-ndjson", idempotent=True)
    return dict((yield call))


def import_from_s3(key: str) -> Op[dict[str, Any]]:
    return dict((yield Call("POST", "/sessions/import-from-s3", body={"key": key}, idempotent=True)))


def erase_subject(subject_id: str) -> Op[dict[str, Any]]:
    """In the body: a subject id may hold what a URL path cannot carry (``/``, ``?``, ``#``)."""
    return dict((yield Call("POST", "/subjects/erase", body={"subjectId": subject_id}, idempotent=True)))


# ----------------------------------------------------------------- messages


def append_message(
    session_id: str, message: Message, parent_id: str | Omitted | None, expected_leaf_id: str | None
) -> Op[AppendResult]:
    body: dict[str, Any] = {"message": message}
    if parent_id is not OMITTED:
        body["parentId"] = parent_id
    if expected_leaf_id is not None:
        body["expectedLeafId"] = expected_leaf_id
    out = yield Call("POST", _route(session_id, "messages"), body=body, idempotent=True)
    return AppendResult(id=out["id"], parent_id=out.get("parentId"), inserted=bool(out["inserted"]))


def append_messages(session_id: str, messages: list[Message], parent_id: str | Omitted | None) -> Op[str | None]:
    """A chain, in requests of 500 each attached to the previous one's last id."""
    last: str | None = None
    for start in range(0, len(messages), MAX_CHAIN):
        body: dict[str, Any] = {"messages": messages[start : start + MAX_CHAIN]}
        if start:
            body["parentId"] = last
        elif parent_id is not OMITTED:
            body["parentId"] = parent_id
        last = (yield Call("POST", _route(session_id, "messages"), body=body, idempotent=True))["id"]
    return last


def update_message(session_id: str, message: Message) -> Op[None]:
    yield Call("PUT", _route(session_id, "messages", str(message["id"])), body={"message": message})


def upsert(session_id: str, message: Message, parent_id: str | Omitted | None) -> Op[str]:
    """Append, or replace when the id is already stored."""
    if not (yield from append_message(session_id, message, parent_id, None)).inserted:
        yield from update_message(session_id, message)
    return str(message["id"])


def delete_messages(session_id: str, message_ids: list[str]) -> Op[None]:
    """Ids that are not stored are skipped, as in the library."""
    for message_id in message_ids:
        try:
            yield Call("DELETE", _route(session_id, "messages", message_id))
        except NotFoundError as error:
            if not absent(error, "Message "):
                raise


def clear_messages(session_id: str) -> Op[None]:
    yield Call("POST", _route(session_id, "clear"), idempotent=True)


def get_message(session_id: str, message_id: str) -> Op[Message | None]:
    try:
        out = yield Call("GET", _route(session_id, "messages", message_id))
    except NotFoundError as error:
        if not absent(error, "Message "):
            raise
        return None
    return out["message"]  # type: ignore[no-any-return]


def get_latest_leaf(session_id: str) -> Op[Message | None]:
    return (yield Call("GET", _route(session_id, "leaf")))["message"]  # type: ignore[no-any-return]


def branches_page(session_id: str, message_id: str, limit: int, cursor: str | None) -> Op[Page[Message]]:
    """Children of a message, oldest first; the API pages them by count and by bytes."""
    params = {"limit": limit, "cursor": cursor}
    out = yield Call("GET", _route(session_id, "messages", message_id, "branches"), params=params)
    return list(out["messages"]), out.get("nextCursor") or None


def history_page(session_id: str, leaf_id: str | None, limit: int, cursor: str | None) -> Op[Page[Message]]:
    """Root → leaf with compaction overlays applied; the cursor carries the leaf after the first page."""
    params = {"leafId": leaf_id, "limit": limit} if cursor is None else {"limit": limit, "cursor": cursor}
    out = yield Call("GET", _route(session_id, "history"), params=params)
    return list(out["messages"]), out.get("nextCursor") or None


def get_history(session_id: str, leaf_id: str | None, page_size: int) -> Op[list[Message]]:
    return (yield from collect(lambda cursor: history_page(session_id, leaf_id, page_size, cursor)))


def get_path_length(session_id: str, leaf_id: str | None, page_size: int) -> Op[int]:
    page = yield Call("GET", _route(session_id, "history"), params={"leafId": leaf_id, "limit": 1})
    total = page.get("total")
    if isinstance(total, int):
        return total
    return len((yield from get_history(session_id, leaf_id, page_size)))


def compactions_page(session_id: str, cursor: str | None) -> Op[Page[StoredCompaction]]:
    """The overlays, oldest first; the API pages them by count and by bytes (summaries can be long)."""
    out = yield Call("GET", _route(session_id, "compactions"), params={"cursor": cursor})
    return [wire.stored_compaction(item) for item in out["compactions"]], out.get("nextCursor") or None


def get_compactions(session_id: str) -> Op[list[StoredCompaction]]:
    return (yield from collect(lambda cursor: compactions_page(session_id, cursor)))


def compact(session_id: str, leaf_id: str | None) -> Op[CompactResult | None]:
    """None when there was nothing to compact or the server queued it for its worker."""
    body = {"leafId": leaf_id} if leaf_id is not None else {}
    out = yield Call("POST", _route(session_id, "compact"), body=body, idempotent=True)
    if out.get("status") != "compacted":
        return None
    return CompactResult(from_message_id=out["fromMessageId"], to_message_id=out["toMessageId"], summary=out["summary"])


def status(session_id: str) -> Op[dict[str, Any]]:
    return dict((yield Call("GET", _route(session_id, "status"))))


# ----------------------------------------------------------- context blocks


def get_context_block(session_id: str, label: str) -> Op[ContextBlock | None]:
    try:
        return wire.context_block((yield Call("GET", _route(session_id, "context", label))))
    except NotFoundError as error:
        if not absent(error, "Block "):
            raise
        return None


def get_context_blocks(session_id: str) -> Op[list[ContextBlock]]:
    return [wire.context_block(block) for block in (yield Call("GET", _route(session_id, "context")))["blocks"]]


def write_context_block(
    session_id: str, label: str, content: str, mode: str, based_on_version: int | None = None
) -> Op[ContextBlock]:
    # An append retried after a lost answer would append twice, and a replacement based on a version would be
    # refused as stale by its own first write: only retried when the server surely did not run it.
    body: dict[str, Any] = {"content": content, "mode": mode}
    if based_on_version is not None:
        body["basedOnVersion"] = based_on_version
    idempotent = mode != "append" and based_on_version is None
    call = Call("PUT", _route(session_id, "context", label), body=body, idempotent=idempotent)
    return wire.context_block((yield call))


def context_history(
    session_id: str, label: str, limit: int | None = None, cursor: str | None = None
) -> Op[tuple[list[BlockVersion], str | None]]:
    params = {"limit": limit, "cursor": cursor}
    page = yield Call("GET", _route(session_id, "context", label, "history"), params=params)
    return [wire.block_version(item) for item in page["versions"]], page.get("nextCursor")


def context_version(session_id: str, label: str, version: int) -> Op[BlockVersion]:
    return wire.block_version((yield Call("GET", _route(session_id, "context", label, "history", str(version)))))


def revert_context(session_id: str, label: str, version: int, based_on_version: int | None = None) -> Op[ContextBlock]:
    body: dict[str, Any] = {"version": version}
    if based_on_version is not None:
        body["basedOnVersion"] = based_on_version
    return wire.context_block((yield Call("POST", _route(session_id, "context", label, "revert"), body=body)))


# -------------------------------------------------------------- knowledge


def knowledge_page(label: str, limit: int, cursor: str | None) -> Op[Page[SearchEntry]]:
    out = yield Call("GET", path("knowledge", label), params={"limit": limit, "cursor": cursor})
    return [wire.search_entry(item) for item in out["entries"]], out.get("nextCursor") or None


def knowledge_entry(label: str, key: str) -> Op[SearchEntry | None]:
    try:
        return wire.search_entry((yield Call("GET", path("knowledge", label, "entry"), params={"key": key})))
    except NotFoundError as error:
        if not absent(error, "No entry "):
            raise
        return None


def delete_knowledge_entry(label: str, key: str) -> Op[bool]:
    try:
        yield Call("DELETE", path("knowledge", label, "entry"), params={"key": key}, idempotent=True)
    except NotFoundError as error:
        if not absent(error, "No entry "):
            raise
        return False
    return True


# ------------------------------------------------------------- reflection


def reflect(session_id: str, leaf_id: str | None) -> Op[ReflectResult]:
    body = {"leafId": leaf_id} if leaf_id is not None else None
    # Not retried: a reflect whose answer was lost may have run, and a second run over the same messages
    # is refused (409) rather than duplicated, so the caller decides.
    return wire.reflect_result((yield Call("POST", _route(session_id, "reflect"), body=body)))


def proposals_page(
    session_id: str, status: str | None, limit: int | None, cursor: str | None
) -> Op[tuple[list[Proposal], str | None]]:
    params = {"status": status, "limit": limit, "cursor": cursor}
    page = yield Call("GET", _route(session_id, "proposals"), params=params)
    return [wire.proposal(item) for item in page["proposals"]], page.get("nextCursor")


def decide_proposal(session_id: str, proposal_id: str, decision: str) -> Op[Proposal]:
    # Deciding twice is refused (409: no longer pending), so a retry after a lost answer would mislead.
    return wire.proposal((yield Call("POST", _route(session_id, "proposals", proposal_id, decision))))


def freeze_system_prompt(session_id: str) -> Op[str]:
    return str((yield Call("GET", _route(session_id, "system-prompt")))["systemPrompt"])


def refresh_system_prompt(session_id: str) -> Op[str]:
    return str((yield Call("POST", _route(session_id, "system-prompt", "refresh"), idempotent=True))["systemPrompt"])


def tool_specs(session_id: str, fmt: str) -> Op[Any]:
    return (yield Call("GET", _route(session_id, "tools"), params={"format": fmt}))["tools"]


def call_tool(session_id: str, name: str, arguments: dict[str, Any]) -> Op[str]:
    return str((yield Call("POST", _route(session_id, "tools", name), body={"input": arguments}))["output"])


__all__ = ["MAX_CHAIN", "Call", "Download", "Op", "Page", "Step", "absent", "collect", "path"]
