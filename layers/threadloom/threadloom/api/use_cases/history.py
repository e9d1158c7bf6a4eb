"""Use cases that read a session's path: history pages and their cursors, branch points, search.

Plain Python over a ``SessionManager``, so each is tested without events. Every session-level
call first checks that the session belongs to the manager's namespace: another tenant's
session is simply not found.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from threadloom.api.models import (
    BranchOut,
    BranchPointList,
    BranchPointOut,
    HistoryPage,
    SearchHit,
    SearchOut,
)
from threadloom.api.paging import (
    count_within_bytes,
    decode_cursor,
    encode_cursor,
    item_budget,
    json_size,
    model_size,
    page_size,
)
from threadloom.api.use_cases.common import require_message, require_session
from threadloom.api.wire import history_page_json
from threadloom.core.branch_points import branch_points as find_branch_points
from threadloom.errors import NotFoundError, SessionNotFoundError, ValidationError
from threadloom.records import HistoryEntry, HistorySlice

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.core.session import Session
    from threadloom.limits import Limits
    from threadloom.records import Message, SearchResult


def history(
    manager: SessionManager,
    session_id: str,
    limits: Limits,
    *,
    leaf_id: str | None,
    limit: int | None,
    cursor: str | None,
) -> HistoryPage:
    """Root→leaf, overlays applied, one page at a time (see :func:`history_entries`)."""
    envelope, entries = history_entries(manager, session_id, limits, leaf_id=leaf_id, limit=limit, cursor=cursor)
    # Stored messages were validated when written: skip re-validating a page of them (a third of its cost).
    return HistoryPage.model_construct(
        messages=[entry.message for entry in entries],
        leaf_id=envelope.leaf_id,
        total=envelope.total,
        next_cursor=envelope.next_cursor,
    )


def history_json(
    manager: SessionManager,
    session_id: str,
    limits: Limits,
    *,
    leaf_id: str | None,
    limit: int | None,
    cursor: str | None,
) -> str:
    """:func:`history` as its JSON body, the stored texts spliced in unparsed (:mod:`threadloom.api.wire`)."""
    envelope, entries = history_entries(manager, session_id, limits, leaf_id=leaf_id, limit=limit, cursor=cursor)
    return history_page_json(envelope, entries)


def history_entries(
    manager: SessionManager,
    session_id: str,
    limits: Limits,
    *,
    leaf_id: str | None,
    limit: int | None,
    cursor: str | None,
) -> tuple[HistoryPage, list[HistoryEntry]]:
    """A page's envelope (no messages) and its entries: at most ``limit`` items and the response byte budget.

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
        return HistoryPage(messages=[], leaf_id=None, total=0, next_cursor=None), []
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
    return HistoryPage.model_construct(messages=[], leaf_id=leaf_id, total=total, next_cursor=next_cursor), entries


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
    require_message(session, session_id, leaf_id)
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
    with manager.checked_session(session_id) as session:
        skeleton = getattr(session.storage, "get_tree_skeleton", None)
        if not callable(skeleton):
            raise ValidationError("This session storage cannot list its branch points")
        points = find_branch_points(skeleton())
    return BranchPointList(
        branch_points=[
            BranchPointOut(
                parent_id=point.parent_id,
                children=[BranchOut(id=child.id, leaf_id=child.leaf_id) for child in point.children],
            )
            for point in points
        ]
    )


def search_session(
    manager: SessionManager, session_id: str, query: str, limit: int | None, limits: Limits
) -> SearchOut:
    with manager.checked_session(session_id) as session:
        hits = session.search(query, limit=_search_limit(limit, limits))
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
    fitting = count_within_bytes(results, item_budget(limits), size_of=model_size)
    return SearchOut(results=results[:fitting], truncated=fitting < len(results))


def _search_limit(limit: int | None, limits: Limits) -> int:
    return limits.search_size(limit)
