"""Use cases of a namespace's searchable knowledge: its entries listed, read and removed.

The entries the model stores with ``set_context`` under a ``search`` block belong to the
tenant, not to one session, so they are addressed by the block's label alone; the manager
is the caller's tenant's, so another tenant's entries are never reached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.api.models import Deleted, SearchEntryOut, SearchEntryPage
from threadloom.api.paging import anchor_cursor, cursor_anchor, model_size, page_size, page_within
from threadloom.errors import NotFoundError
from threadloom.limits import shown

if TYPE_CHECKING:
    from threadloom.core.manager import SessionManager
    from threadloom.limits import Limits

_CURSOR_KIND = "knowledge"


def search_entries(
    manager: SessionManager, label: str, limits: Limits, *, limit: int | None, cursor: str | None
) -> SearchEntryPage:
    """One page of the block's entries in key order, cut at ``limit`` or the response byte budget."""
    store = manager.search_entries(label)
    after = cursor_anchor(cursor, _CURSOR_KIND, label) or ""
    rows = store.entries(after=after, limit=page_size(limit, limits) + 1)
    entries, more = page_within([SearchEntryOut.of(row) for row in rows], limits, limit, size_of=model_size)
    next_cursor = anchor_cursor(_CURSOR_KIND, label, entries[-1].key) if more and entries else None
    return SearchEntryPage(entries=entries, next_cursor=next_cursor)


def search_entry(manager: SessionManager, label: str, key: str) -> SearchEntryOut:
    entry = manager.search_entries(label).entry(key)
    if entry is None:
        raise NotFoundError(f"No entry {shown(key)} in block {shown(label)}")
    return SearchEntryOut.of(entry)


def delete_search_entry(manager: SessionManager, label: str, key: str) -> Deleted:
    if not manager.delete_search_entry(label, key):
        raise NotFoundError(f"No entry {shown(key)} in block {shown(label)}")
    return Deleted()
