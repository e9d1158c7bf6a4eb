"""SQLite's dialect as the shared tree and registry use it: the statements plus the search catch-up.

``sql.py`` holds only statements and ``search_index.py`` runs the batches over them; this class joins
the two, so neither module imports the other's user (no import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.storage.sqlite.search_index import catch_up
from threadloom.storage.sqlite.sql import (
    ANY_INDEX,
    CREATE_INDEX,
    ENTRY_INDEX,
    MESSAGE_INDEX,
    SqliteSql,
    aimed_at,
    entry_index_name,
    message_index_name,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.storage.database import Database, Executor


class SqliteDialect(SqliteSql):
    """The statements of :class:`SqliteSql` with the message index brought up to date before a search."""

    @classmethod
    def prepare_message_search(cls, database: Database) -> None:
        """Index the messages still waiting for it (:func:`threadloom.storage.sqlite.search_index.catch_up`)."""
        catch_up(database)

    @classmethod
    def message_search_statement(
        cls, database: Database, statement: str, *, namespace: str | None = None, session_id: str | None = None
    ) -> str | None:
        """``statement`` aimed at the namespace's own index: bm25 then counts that namespace's messages only."""
        if namespace is None:
            rows = database.query_once(SqliteSql.session_namespace_of, {"sid": session_id})
            namespace = str(rows[0][0]) if rows else None  # None: a session no namespace registers
        table = message_index_name(namespace)
        if not database.query_once(SqliteSql.search_index_exists, {"name": table}):
            return None  # an index is never dropped: once there, the search that follows reads it
        return aimed_at(statement, MESSAGE_INDEX, table)

    @classmethod
    def entry_search_statement(cls, database: Database, scope: str) -> str | None:
        """``search_entries`` aimed at the scope's own index: bm25 then counts that scope's entries only."""
        table = entry_index_name(scope)
        if database.query_once(SqliteSql.search_index_exists, {"name": table}):
            return aimed_at(SqliteSql.search_entries, ENTRY_INDEX, table)
        if not database.query_once(SqliteSql.scope_has_entries, {"scope": scope}):
            return None  # nothing to find, and no index made for a scope that never wrote
        with database.write() as tx:  # entries stored before migration 0024: their index, once
            return cls.entry_statement(tx, SqliteSql.search_entries, scope)

    @classmethod
    def entry_statement(cls, tx: Executor, statement: str, scope: str) -> str:
        """``statement`` aimed at the scope's own index, made on first use and filled with the scope's entries."""
        table = entry_index_name(scope)
        if not tx.query(SqliteSql.search_index_exists, {"name": table}):
            tx.execute(aimed_at(CREATE_INDEX, ANY_INDEX, table))
            tx.execute(SqliteSql.register_search_index, {"name": table, "kind": "entries", "owner": scope})
            tx.execute(aimed_at(SqliteSql.fill_entry_index, ENTRY_INDEX, table), {"scope": scope})
        return aimed_at(statement, ENTRY_INDEX, table)

    @classmethod
    def purge_statements_now(cls, database: Database) -> Sequence[str]:
        """Remove deleted messages from their indexes (:func:`catch_up`), then merge every index's segments."""
        catch_up(database)
        tables = [str(row[0]) for row in database.query_once(SqliteSql.search_index_names)]
        return [aimed_at(SqliteSql.optimize_index, ANY_INDEX, table) for table in tables]
