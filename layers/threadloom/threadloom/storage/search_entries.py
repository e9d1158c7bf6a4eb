"""Searchable context entries (the ``search_context`` tool's backing store) on SQL."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.clock import utc_now
from threadloom.errors import QuotaExceededError, ValidationError
from threadloom.jscompat import js_trim
from threadloom.providers.protocols import BlockRead
from threadloom.records import SearchEntry
from threadloom.storage.database import to_timestamp_text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.storage.database import Database
    from threadloom.storage.dialect import SqlDialect

SEARCH_RESULT_LIMIT = 10


class SqlSearchProvider:
    """Keyed entries under a block label, searched with the D5 dialect.

    ``scope`` separates tenants sharing one database; within a scope the index is
    shared by every session, as in the reference.
    """

    def __init__(
        self, database: Database, sql: type[SqlDialect], *, scope: str = "", max_entries: int | None = None
    ) -> None:
        self._database = database
        self._sql = sql
        self.scope = scope
        self.max_entries = max_entries
        self.label = ""

    def init(self, label: str) -> None:
        self.label = label

    def _params(self) -> dict[str, str]:
        return {"scope": self.scope, "label": self.label}

    def get(self) -> str | None:
        return _describe_count(self._database.query_once(self._sql.count_entries, self._params()))

    def block_read(self) -> BlockRead:
        """``get()`` as a read that can go with the session's other block reads (one round trip)."""
        return BlockRead(self._database, (self._sql.count_entries, self._params()), _describe_count, single_value=True)

    def search(self, query: str) -> str | None:
        if not isinstance(query, str) or not js_trim(query):
            return None
        match = self._sql.match_param(query)
        if match is None:
            return None
        statement = self._sql.entry_search_statement(self._database, self.scope)
        if statement is None:
            return None
        rows = self._database.query_once(statement, {**self._params(), "match": match, "limit": SEARCH_RESULT_LIMIT})
        if not rows:
            return None
        return "\n\n".join(f"[{key}]\n{content}" for key, content in rows)

    def set(self, key: str, content: str) -> None:
        if not self.label:  # an entry under no label could be listed, exported or removed by no one
            raise ValidationError("This search provider has no block label yet: call init(label) first")
        params = {**self._params(), "key": key}
        with self._database.write() as tx:
            if self.max_entries is not None and not tx.query(self._sql.entry_exists, params):
                count = int(tx.query(self._sql.lock_entry_count, self._params())[0][0])
                if count >= self.max_entries:
                    raise QuotaExceededError(
                        f"Block {self.label!r} already holds {count} entries, the most allowed ({self.max_entries});"
                        " update an existing entry instead"
                    )
            if self._sql.unindex_entry:
                tx.execute(self._sql.entry_statement(tx, self._sql.unindex_entry, self.scope), params)
            tx.execute(self._sql.upsert_entry, {**params, "content": content, "now": utc_now()})
            index = self._sql.entry_statement(tx, self._sql.index_entry, self.scope)
            tx.execute(index, {**params, **self._sql.index_params(content)})

    def entries(self, *, after: str = "", limit: int) -> list[SearchEntry]:
        """The label's entries in key order, the first ``limit`` after the key ``after``: what is stored, to read."""
        rows = self._database.query_once(self._sql.entries_page, {**self._params(), "after": after, "limit": limit})
        return [_entry(row) for row in rows]

    def entry(self, key: str) -> SearchEntry | None:
        rows = self._database.query_once(self._sql.get_entry, {**self._params(), "key": key})
        return _entry(rows[0]) if rows else None

    def delete(self, key: str) -> bool:
        """Remove one entry and its index terms; False when there was none.

        The reference has no way to take an entry back, so a wrong or personal fact the model
        stored would stay searchable for good, and a label at ``max_entries`` could never take
        a new key. The session prompts frozen before keep their entry count until refreshed.
        """
        params = {**self._params(), "key": key}
        with self._database.write() as tx:
            if self._sql.unindex_entry:
                tx.execute(self._sql.entry_statement(tx, self._sql.unindex_entry, self.scope), params)
            return bool(tx.query(self._sql.delete_entry, params))


def _entry(row: Sequence[Any]) -> SearchEntry:
    return SearchEntry(
        key=row[0], content=row[1], created_at=to_timestamp_text(row[2]), updated_at=to_timestamp_text(row[3])
    )


def _describe_count(rows: Sequence[Sequence[Any]]) -> str | None:
    count = int(rows[0][0])
    return f"{count} entries indexed." if count else None
