"""The use-cases the HTTP routers call: tenant scoping, limits, pagination and model mapping.

Routers stay one line per endpoint; this module is plain Python over a ``SessionManager``
so it is tested without events. Every session-level call first checks that the session
belongs to the manager's namespace: another tenant's session is simply not found.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from threadloom.api.models import (
    AppendOut,
    BlockUsage,
    BranchOut,
    BranchPage,
    BranchPointList,
    BranchPointOut,
    CompactionList,
    CompactionOut,
    CompactionRequestOut,
    CompactOut,
    ContextBlockList,
    ContextBlockOut,
    ContextWindowOut,
    HistoryPage,
    IdleReasonOut,
    LeafOut,
    MessageOut,
    OriginalsPage,
    SearchHit,
    SearchOut,
    SessionListItem,
    SessionOut,
    SessionPage,
    SessionStatusOut,
    SystemPromptOut,
    ToolCallOut,
    ToolsOut,
)
from threadloom.api.paging import count_within_bytes, decode_cursor, encode_cursor, item_budget, json_size, page_size
from threadloom.compaction.markers import COMPACTION_PREFIX
from threadloom.compaction.queue import CompactionRequest
from threadloom.compaction.tracking import TrackedCompactionQueue
from threadloom.core.branch_points import branch_points as find_branch_points
from threadloom.core.prompt import render_prompt
from threadloom.errors import ConflictError, NotFoundError, SessionNotFoundError, ValidationError
from threadloom.live.status import idle_reason, status_report
from threadloom.records import OMITTED, HistoryEntry, HistorySlice
from threadloom.tokens import estimate_message_tokens, estimate_string_tokens
from threadloom.tools.base import is_error_result
from threadloom.tools.formats import to_anthropic_tools, to_bedrock_tool_config, to_openai_tools

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.api.models import AppendIn, ToolFormat
    from threadloom.compaction.queue import CompactionQueue
    from threadloom.core.limits import Limits
    from threadloom.core.manager import SessionManager
    from threadloom.core.session import Session
    from threadloom.records import Message, Omitted, SearchResult, SessionInfo
    from threadloom.tools.base import Tool


T = TypeVar("T")

CONTEXT_WRITING_TOOLS = frozenset({"set_context", "load_context", "unload_context"})
"""Model tools whose call may change the session's context, which live viewers are told about."""

# ------------------------------------------------------------------ helpers


def require_session(manager: SessionManager, session_id: str) -> Session:
    """The session if it exists in this tenant's namespace, else ``NotFoundError``."""
    if manager.get(session_id) is None:
        raise NotFoundError(f"Session {session_id!r} not found")
    return manager.get_session(session_id)


def _require_message(session: Session, session_id: str, message_id: str) -> Message:
    message = session.get_message(message_id)
    if message is None:
        raise NotFoundError(f"Message {message_id!r} not found in session {session_id!r}")
    return message


# ----------------------------------------------------------------- sessions


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
            size_of=lambda model: _model_size(model) + OVERVIEW_BYTES,  # the preview is added after the cut
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


def _model_size(model: Any) -> int:
    return json_size(model.model_dump(mode="json", by_alias=True))


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


# ----------------------------------------------------------------- messages


def append(manager: SessionManager, session_id: str, body: AppendIn, limits: Limits) -> tuple[AppendOut, bool]:
    """Append one message or a chain; returns the result and whether anything new was stored.

    A chain reports where its first message attached (``parentId``) and whether any of
    its messages was new (``inserted``); its ``expectedLeafId`` is checked under the write lock.
    """
    session = require_session(manager, session_id)
    if (body.message is None) == (body.messages is None):
        raise ValidationError("Send exactly one of 'message' or 'messages'")
    parent: str | Omitted | None = body.parent_id if "parent_id" in body.model_fields_set else OMITTED
    if body.message is not None:
        result = session.append_message(body.message.as_message(), parent, expected_leaf_id=body.expected_leaf_id)
        if result.inserted:
            manager._touch(session_id)
        estimate = result.token_estimate if result.token_estimate is not None else session.estimate_tokens()
        out = AppendOut(
            id=result.id,
            parent_id=result.parent_id,
            inserted=result.inserted,
            token_estimate=estimate,
            token_threshold=session.token_threshold,
        )
        return out, result.inserted
    messages = [item.as_message() for item in body.messages or []]
    if len(messages) > limits.max_chain_messages:
        raise ValidationError(f"A chain holds at most {limits.max_chain_messages} messages per request")
    results = manager.append_chain(session_id, messages, parent, expected_leaf_id=body.expected_leaf_id)
    inserted = any(result.inserted for result in results)
    last_estimate = results[-1].token_estimate if results else None
    out = AppendOut(
        id=results[-1].id,
        parent_id=results[0].parent_id,
        inserted=inserted,
        ids=[result.id for result in results],
        token_estimate=last_estimate if last_estimate is not None else session.estimate_tokens(),
        token_threshold=session.token_threshold,
    )
    return out, inserted


def get_message(manager: SessionManager, session_id: str, message_id: str) -> MessageOut:
    session = require_session(manager, session_id)
    return MessageOut(message=_require_message(session, session_id, message_id))


def update_message(
    manager: SessionManager, session_id: str, message_id: str, message: Message, limits: Limits
) -> MessageOut:
    session = require_session(manager, session_id)
    if message.get("id") != message_id:
        raise ValidationError(f"The message id {message.get('id')!r} does not match the path ({message_id!r})")
    limits.check_message(message)
    _require_message(session, session_id, message_id)
    session.update_message(message)
    return MessageOut(message=_require_message(session, session_id, message_id))


def delete_message(manager: SessionManager, session_id: str, message_id: str) -> None:
    session = require_session(manager, session_id)
    _require_message(session, session_id, message_id)
    manager.delete_messages(session_id, [message_id])


def branches(
    manager: SessionManager, session_id: str, message_id: str, limits: Limits, *, limit: int | None, cursor: str | None
) -> BranchPage:
    """One page of the children, cut at ``limit`` or the response byte budget; the cursor is the last child's seq."""
    session = require_session(manager, session_id)
    after_seq = 0
    if cursor:
        state = decode_cursor(cursor)
        stored_seq = state.get("s")
        if isinstance(stored_seq, bool) or not isinstance(stored_seq, int) or stored_seq < 0:
            raise ValidationError("Invalid cursor")
        if state.get("p") != message_id:
            raise ValidationError("The cursor belongs to the children of another message")
        after_seq = stored_seq
    _require_message(session, session_id, message_id)
    size, budget = page_size(limit, limits), item_budget(limits)
    rows = session.get_branch_page(message_id, after_seq=after_seq, limit=size + 1, max_bytes=budget)
    loaded: list[tuple[int, Message]] = []
    for seq, message in rows[:size]:
        if message is None:  # storage stopped reading at the byte budget
            break
        loaded.append((seq, message))
    page = loaded[: count_within_bytes([message for _, message in loaded], budget)]
    next_cursor = encode_cursor({"p": message_id, "s": page[-1][0]}) if page and len(rows) > len(page) else None
    return BranchPage(messages=[message for _, message in page], next_cursor=next_cursor)


def history(
    manager: SessionManager,
    session_id: str,
    limits: Limits,
    *,
    leaf_id: str | None,
    limit: int | None,
    cursor: str | None,
) -> HistoryPage:
    """Root→leaf, overlays applied, one page at a time: at most ``limit`` items and the response byte budget.

    The cursor pins the leaf of the first page and keys the next page on the stored depth where it
    continues (plus the message it continues after, to notice a tree changed under it), so a page
    costs a page on SQL storage, not the whole path; it may also carry the ancestor where the next
    page's walk starts (a shortcut storage checks). ``total`` is counted once, on the first page.

    On SQL storage the page read itself checks the session's tenant and, without a leaf, finds the
    latest one (on PostgreSQL all in the page's statement): no registry or head read of its own.
    """
    size = page_size(limit, limits)
    start, after_id, total, walk_from = 0, None, None, None
    if cursor:
        try:
            leaf_id, start, after_id, total, walk_from = _history_cursor(cursor)
        except ValidationError:
            require_session(manager, session_id)  # another tenant's session is a 404 whatever the cursor
            raise
    budget = item_budget(limits)
    try:
        page = _history_slice(
            manager,
            session_id,
            leaf_id,
            start=start,
            size=size,
            budget=budget,
            after_id=after_id,
            walk_from=walk_from,
            with_total=total is None,
        )
    except SessionNotFoundError:
        raise
    except NotFoundError:
        if cursor:
            raise NotFoundError(
                f"The cursor's leaf message {leaf_id!r} no longer exists; read the history again without a cursor"
            ) from None
        raise
    leaf_id = page.leaf_id
    if leaf_id is None:  # the session has no messages
        return HistoryPage(messages=[], leaf_id=None, total=0, next_cursor=None)
    if total is None:
        total = page.total if page.total is not None else page.path_length
    entries = page.entries[: count_within_bytes(page.entries, budget, size_of=lambda entry: entry.size)]
    next_cursor = None
    if entries and entries[-1].next_depth < page.path_length:
        last = entries[-1]
        state: dict[str, Any] = {"l": leaf_id, "d": last.next_depth, "a": last.last_id, "t": total}
        if page.next_anchor is not None:
            state["j"] = list(page.next_anchor)
        next_cursor = encode_cursor(state)
    # Stored messages were validated when written: skip re-validating a page of them (a third of its cost).
    return HistoryPage.model_construct(
        messages=[entry.message for entry in entries], leaf_id=leaf_id, total=total, next_cursor=next_cursor
    )


def _history_slice(
    manager: SessionManager,
    session_id: str,
    leaf_id: str | None,
    *,
    start: int,
    size: int,
    budget: int,
    after_id: str | None,
    walk_from: tuple[int, str] | None,
    with_total: bool,
) -> HistorySlice:
    """One page's slice with the leaf it read (None: no messages) and, ``with_total``, the history's length.

    SQL storage checks the tenant and finds the latest leaf in its own page read; other storage
    is reached through a checked session and a whole read sliced.
    """
    options: dict[str, Any] = {"walk_from": walk_from} if walk_from is not None else {}
    storage: Any = _tenant_checked_pages(manager, session_id)
    session: Session | None = None
    if storage is not None:
        options["namespace"] = manager.namespace
    else:
        session = require_session(manager, session_id)
        storage = session.storage
    read_page = getattr(storage, "get_history_page", None)
    if callable(read_page):
        page: HistorySlice = read_page(
            leaf_id, start=start, limit=size, max_bytes=budget, after_id=after_id, with_total=with_total, **options
        )
        if with_total and page.total is None and page.leaf_id is not None:
            page = replace(page, total=int(storage.count_history(page.leaf_id)))
        return page
    assert session is not None
    if leaf_id is None:
        leaf = session.get_latest_leaf()
        leaf_id = str(leaf["id"]) if leaf else None
        if leaf_id is None:
            return HistorySlice(entries=[], path_length=0, total=0)
    _require_message(session, session_id, leaf_id)
    page = _slice_history(session.get_history(leaf_id), start, size, budget)
    return replace(page, total=page.path_length, leaf_id=leaf_id)


def _tenant_checked_pages(manager: SessionManager, session_id: str) -> Any | None:
    """Session storage whose page read checks the tenant itself (SQL stores), else None.

    A bare provider, not ``manager.get_session``: that builds and caches a Session, which must wait
    until the session is known to be the tenant's.
    """
    provider_of = getattr(manager.store, "session_provider", None)
    storage = provider_of(session_id) if callable(provider_of) else None
    return storage if callable(getattr(storage, "get_history_page", None)) else None


def _history_cursor(cursor: str) -> tuple[str, int, str | None, int, tuple[int, str] | None]:
    """The leaf, start depth, message continued after, total and walk anchor a history cursor carries."""
    state = decode_cursor(cursor)
    leaf_id, start, after_id, total = state.get("l"), state.get("d"), state.get("a"), state.get("t")
    anchor = state.get("j")
    valid = (
        isinstance(leaf_id, str)
        and leaf_id != ""
        and _is_count(start)
        and _is_count(total)
        and (isinstance(after_id, str) if start else after_id is None)
        and (
            anchor is None
            or (
                isinstance(anchor, list)
                and len(anchor) == 2
                and _is_count(anchor[0])
                and anchor[0] < 2**63  # a seq is a BIGINT
                and isinstance(anchor[1], str)
            )
        )
    )
    if not valid:
        raise ValidationError("Invalid cursor")
    walk_from = (anchor[0], anchor[1]) if isinstance(anchor, list) else None
    return leaf_id, start, after_id, total, walk_from  # type: ignore[return-value]


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _slice_history(messages: list[Message], start: int, size: int, budget: int) -> HistorySlice:
    """A page cut from a whole read, for session storage without paged reads (position = depth here)."""
    entries = [
        HistoryEntry(message=message, size=json_size(message), last_id=str(message.get("id")), next_depth=index + 1)
        for index, message in enumerate(messages[start : start + size], start=start)
    ]
    return HistorySlice(
        entries=entries[: count_within_bytes(entries, budget, size_of=lambda e: e.size)], path_length=len(messages)
    )


def branch_points(manager: SessionManager, session_id: str) -> BranchPointList:
    """Where the session's tree branches, from one read of its skeleton (no message content)."""
    storage = require_session(manager, session_id).storage
    skeleton = getattr(storage, "get_tree_skeleton", None)
    if not callable(skeleton):
        raise ValidationError("This session storage cannot list its branch points")
    return BranchPointList(
        branch_points=[
            BranchPointOut(
                parent_id=point.parent_id,
                children=[BranchOut(id=child.id, leaf_id=child.leaf_id) for child in point.children],
            )
            for point in find_branch_points(skeleton())
        ]
    )


def leaf(manager: SessionManager, session_id: str) -> LeafOut:
    return LeafOut(message=require_session(manager, session_id).get_latest_leaf())


def clear(manager: SessionManager, session_id: str) -> None:
    manager.clear_messages(session_id)


# ------------------------------------------------------------------- search


def search_session(
    manager: SessionManager, session_id: str, query: str, limit: int | None, limits: Limits
) -> SearchOut:
    hits = require_session(manager, session_id).search(query, limit=_search_limit(limit, limits))
    return _search_out(hits, limits)


def search_all(manager: SessionManager, query: str, limit: int | None, limits: Limits) -> SearchOut:
    hits = manager.search(query, limit=_search_limit(limit, limits))
    return _search_out(hits, limits)


def _search_out(hits: list[SearchResult], limits: Limits) -> SearchOut:
    """The best hits that fit in the response byte budget; ``truncated`` says some were left out.

    A hit carries up to a whole message's text, so 100 of them could pass Lambda's 6 MB; ranked
    results have no cheap keyset, hence a flag rather than a cursor.
    """
    results = [SearchHit.of(hit) for hit in hits]
    fitting = count_within_bytes(results, item_budget(limits), size_of=_model_size)
    return SearchOut(results=results[:fitting], truncated=fitting < len(results))


def _search_limit(limit: int | None, limits: Limits) -> int:
    return limits.search_size(limit)


# --------------------------------------------------------- fork and compact


def fork(manager: SessionManager, session_id: str, at_message_id: str, name: str) -> SessionOut:
    session = require_session(manager, session_id)
    _require_message(session, session_id, at_message_id)
    return SessionOut.of(manager.fork(session_id, at_message_id, name))


def compact(
    manager: SessionManager, session_id: str, leaf_id: str | None, queue: CompactionQueue | None
) -> tuple[CompactOut, bool]:
    """Queue a compaction (True: answer 202) or, without a queue, run it now."""
    session = require_session(manager, session_id)
    if leaf_id is not None:
        _require_message(session, session_id, leaf_id)
    if queue is not None:
        if leaf_id is None:
            latest = session.get_latest_leaf()
            leaf_id = latest.get("id") if latest else None
        request = CompactionRequest.create(manager.namespace, session_id, leaf_id)
        if isinstance(queue, TrackedCompactionQueue):
            return CompactOut(status="queued", request_id=queue.submit(request).id), True
        queue.enqueue(request)
        return CompactOut(status="queued"), True
    result = session.compact(leaf_id)
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
    return SessionStatusOut(
        session_id=session_id,
        phase=status.phase,
        token_estimate=status.token_estimate,
        token_threshold=status.token_threshold,
        compaction=CompactionRequestOut.of(latest) if latest is not None else None,
        idle_reason=IdleReasonOut.of(idle_reason(status, latest)),
    )


def compactions(
    manager: SessionManager, session_id: str, limits: Limits, *, limit: int | None, cursor: str | None
) -> CompactionList:
    """One page of the overlays, cut at ``limit`` or the byte budget; the cursor names the last one returned."""
    stored = [CompactionOut.of(item) for item in manager.get_compactions(session_id)]
    start = _after(stored, _cursor_anchor(cursor, "compactions", session_id), lambda item: item.id, "overlay")
    page, more = _page_within(stored[start:], limits, limit, size_of=_model_size)
    next_cursor = _anchor_cursor("compactions", session_id, page[-1].id) if more else None
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
    session = require_session(manager, session_id)
    wanted = compaction_id.removeprefix(COMPACTION_PREFIX)
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
    offset = _after(originals, _cursor_anchor(cursor, scope, session_id), lambda message: message.get("id"), "message")
    page, more = _page_within(originals[offset:], limits, limit)
    next_cursor = _anchor_cursor(scope, session_id, str(page[-1].get("id"))) if more else None
    return OriginalsPage(messages=page, next_cursor=next_cursor)


def _page_within(
    items: list[T], limits: Limits, limit: int | None, size_of: Callable[[Any], int] = json_size
) -> tuple[list[T], bool]:
    """The leading items within ``limit`` and the byte budget, and whether any are left after them."""
    window = items[: page_size(limit, limits)]
    count = count_within_bytes(window, item_budget(limits), size_of=size_of)
    return window[:count], count < len(items)


def _anchor_cursor(scope: str, session_id: str, last_id: str) -> str:
    return encode_cursor({"k": scope, "s": session_id, "a": last_id})


def _cursor_anchor(cursor: str | None, scope: str, session_id: str) -> str | None:
    """The id of the last item the previous page returned (None: start at the beginning)."""
    if not cursor:
        return None
    state = decode_cursor(cursor)
    anchor = state.get("a")
    if state.get("k") != scope or state.get("s") != session_id or not isinstance(anchor, str):
        raise ValidationError("Invalid cursor: it belongs to another list")
    return anchor


def _after(items: list[T], anchor: str | None, id_of: Callable[[T], Any], what: str) -> int:
    if anchor is None:
        return 0
    index = next((position for position, item in enumerate(items) if id_of(item) == anchor), None)
    if index is None:
        raise ConflictError(f"The {what} {anchor!r} this cursor continues from is gone; read the list again")
    return index + 1


def split(manager: SessionManager, session_id: str, summary: str, name: str | None) -> SessionOut:
    return SessionOut.of(manager.compact_and_split(session_id, summary, name))


def add_usage(
    manager: SessionManager, session_id: str, *, input_tokens: int, output_tokens: int, cost: float
) -> SessionOut:
    return SessionOut.of(manager.add_usage(session_id, input_tokens, output_tokens, cost))


# ------------------------------------------------------- context and tools


def context_blocks(manager: SessionManager, session_id: str) -> ContextBlockList:
    blocks = require_session(manager, session_id).get_context_blocks()
    return ContextBlockList(blocks=[ContextBlockOut.of(block) for block in blocks])


def context_block(manager: SessionManager, session_id: str, label: str) -> ContextBlockOut:
    block = require_session(manager, session_id).get_context_block(label)
    if block is None:
        raise NotFoundError(f'Block "{label}" not found')
    return ContextBlockOut.of(block)


def write_context_block(
    manager: SessionManager, session_id: str, label: str, *, content: str, mode: str, limits: Limits
) -> ContextBlockOut:
    session = require_session(manager, session_id)
    if session.get_context_block(label) is None:
        raise NotFoundError(f'Block "{label}" not found')
    if mode == "append":
        return ContextBlockOut.of(session.append_context_block(label, content))
    return ContextBlockOut.of(session.replace_context_block(label, content))


def context_window(manager: SessionManager, session_id: str, threshold: int | None) -> ContextWindowOut:
    """The breakdown behind the auto-compaction estimate, and the frozen prompt beside a fresh render.

    Reads only: nothing is frozen or refreshed here, so looking never changes what the model sees.
    """
    session = require_session(manager, session_id)
    blocks = session.get_context_blocks()
    store = session.blocks.prompt_store
    frozen = store.get() if store is not None else None
    prompt_tokens = estimate_string_tokens(session.blocks.system_prompt_for_estimate())
    incremental = getattr(session.storage, "get_token_estimate", None)
    history_tokens = int(incremental()) if callable(incremental) else estimate_message_tokens(session.get_history())
    return ContextWindowOut(
        frozen_prompt=frozen,
        fresh_prompt=render_prompt(blocks),
        system_prompt_tokens=prompt_tokens,
        blocks=[BlockUsage(label=block.label, tokens=block.tokens, max_tokens=block.max_tokens) for block in blocks],
        history_tokens=history_tokens,
        history_messages=session.get_path_length(),
        total_tokens=prompt_tokens + history_tokens,
        threshold=threshold,
        loaded_skills=sorted(session.get_loaded_skill_keys()),
    )


def system_prompt(manager: SessionManager, session_id: str, *, refresh: bool = False) -> SystemPromptOut:
    session = require_session(manager, session_id)
    prompt = session.refresh_system_prompt() if refresh else session.freeze_system_prompt()
    return SystemPromptOut(system_prompt=prompt)


def session_tools(manager: SessionManager, session_id: str) -> dict[str, Tool]:
    """The session's context tools plus the manager's ``session_search``."""
    return {**require_session(manager, session_id).tools(), **manager.tools()}


def tool_specs(manager: SessionManager, session_id: str, fmt: ToolFormat) -> ToolsOut:
    tools = session_tools(manager, session_id)
    specs: Any
    if fmt == "bedrock":
        specs = to_bedrock_tool_config(tools)
    elif fmt == "openai":
        specs = to_openai_tools(tools)
    elif fmt == "anthropic":
        specs = to_anthropic_tools(tools)
    else:
        specs = [
            {"name": tool.name, "description": tool.description, "inputSchema": tool.schema()}
            for tool in tools.values()
        ]
    return ToolsOut(format=fmt, tools=specs)


def call_tool(manager: SessionManager, session_id: str, tool_name: str, arguments: dict[str, Any]) -> ToolCallOut:
    tool = session_tools(manager, session_id).get(tool_name)
    if tool is None:
        raise NotFoundError(f"Tool {tool_name!r} is not available in session {session_id!r}")
    output = tool.execute(arguments)
    if tool_name in CONTEXT_WRITING_TOOLS:
        manager.get_session(session_id).announce_change("context")
    return ToolCallOut(output=output, is_error=is_error_result(output))


__all__ = [
    "add_usage",
    "append",
    "branch_points",
    "branches",
    "call_tool",
    "clear",
    "compact",
    "compaction_originals",
    "compactions",
    "context_block",
    "context_blocks",
    "context_window",
    "create_session",
    "decode_cursor",
    "delete_message",
    "delete_session",
    "encode_cursor",
    "fork",
    "get_message",
    "get_session",
    "history",
    "leaf",
    "list_sessions",
    "open_session",
    "page_size",
    "rename_session",
    "require_session",
    "search_all",
    "search_session",
    "session_status",
    "session_tools",
    "split",
    "system_prompt",
    "tool_specs",
    "update_message",
    "update_session",
    "write_context_block",
]
