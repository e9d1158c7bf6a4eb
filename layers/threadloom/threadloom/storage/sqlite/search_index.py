"""SQLite's message search indexes: one per namespace, filled in batches instead of in every append.

**One index per namespace** (migration 0024). Hits are ordered by FTS5's bm25, whose statistics
(how many rows hold each word, the average row length) are counted over the whole FTS5 table.
With one table for every tenant, the order of a tenant's own hits told whether another tenant
wrote a word, and the work of its search grew with the other tenants' rows (issue 23). So every
namespace has its own FTS5 table, made by the first batch that indexes one of its messages and
named by a hash of the namespace (``SqliteSql.message_index_name``: no tenant text reaches SQL);
sessions no namespace registers (the library's bare ``Session``) share one more, and move to
their namespace's when it registers them (a trigger re-marks their rows). A search reads only the
caller's namespace's index: its hits, their order, its errors and its cost depend on that
namespace's rows alone (the backlog it indexes first, below, excepted). Search entries get the
same, one index per scope (the tenant), in ``SqliteDialect.entry_statement``.

Why not keep one index and give every hit a score that reads only the hit, like PostgreSQL's
``ts_rank``: stdlib ``sqlite3`` cannot register an FTS5 ranking function, and one built from
``highlight()`` counts took 0.98 s against bm25's 0.15 s for 20,000 matching messages; it would
also leave the cost of a search growing with every other tenant's matches. bm25 over the
namespace's own rows keeps the ranking users had on a database of their own, at bm25's speed.

**Batches.** An FTS5 insert writes a new index segment when its transaction commits: indexing
each message in its own append took some 40% of the append's time. So nothing that writes a
message indexes it: it records the row's rowid in ``threadloom_message_fts_pending`` (migration
0011; see ``SqliteSql.pend_row``, ``index_message`` and ``index_copied_path``), and
:func:`index_pending` indexes the rows waiting there, many per transaction (one segment per
namespace for all of them):

- before every message search, all of them (:func:`catch_up`, run by
  ``SqliteSql.prepare_message_search``): a search finds exactly what it would if every message
  had been indexed by its own append;
- inside every :data:`INDEX_EVERY`-th append through one database, a bounded batch
  (:func:`after_appends`), so the backlog stays small when nobody searches.

Unindexing goes the same way: deleting or rewriting a message records its rowid and namespace in
``threadloom_message_fts_stale`` (the statement cannot name a table it has to look up), and a
batch removes those rows from their indexes before it indexes any waiting row (a rowid freed by
a deleted message may already hold a new, waiting one); a rewrite marks the row again. A waiting
rowid whose message is gone is dropped by the next batch; a rowid reused by a new message is
marked again by that message, and a batch indexes the current text of whatever message holds the
rowid.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Final

from threadloom.search import searchable_text
from threadloom.storage.sqlite.database import SqliteDatabase, translate_sqlite_error
from threadloom.storage.sqlite.sql import (
    ANY_INDEX,
    CREATE_INDEX,
    MESSAGE_INDEX,
    SqliteSql,
    aimed_at,
    message_index_name,
)

if TYPE_CHECKING:
    from threadloom.storage.database import Database

INDEX_EVERY: Final = 64
"""Appends through one database between two batches run inside an append.

A batch costs one FTS5 segment and one read of the waiting rows whatever its size, so 64
messages share what each of them paid alone. The append that runs it takes about a millisecond
more for 64 short messages (a JSON parse and an FTS5 insert each, one segment at the commit),
and the backlog a search may have to index stays small: under 64 messages per appending store
when nothing else marks any.
"""
BATCH_PER_APPEND: Final = 2
"""An append's batch indexes up to this many rows per append counted since the previous batch:
more than those appends left, so rows marked by other writers (updates, imports, forks, other
processes) are absorbed too, yet bounded, so that no append pays for a large backlog."""
SEARCH_BATCH: Final = 1_000
"""Rows indexed per write transaction before a search: other writers wait at most one batch."""


def index_pending(connection: sqlite3.Connection, limit: int) -> int:
    """Remove, then index, up to ``limit`` rows, lowest rowid first, inside the caller's write transaction.

    Rows named for removal go first, all of them before any waiting row: a rowid freed by a
    deleted message may already hold a new message waiting to be indexed. Each waiting row goes
    to the index of its session's namespace (made on first use). Returns how many rows it took:
    removed, indexed, or dropped because the message has no searchable text or is gone. Fewer
    than ``limit`` means none is left.
    """
    stale = connection.execute(SqliteSql.stale_rows, (limit,)).fetchall()
    if stale:
        known: set[str] = set()
        for _, rowid, namespace in stale:
            table = message_index_name(namespace)
            if table in known or _exists(connection, table):
                known.add(table)
                connection.execute(aimed_at(SqliteSql.unindex_stale_row, MESSAGE_INDEX, table), (rowid,))
        connection.execute(SqliteSql.drop_stale_rows, (stale[-1][0],))
        if len(stale) == limit:
            return limit
    rows = connection.execute(SqliteSql.pending_rows, (limit - len(stale),)).fetchall()
    if not rows:
        return len(stale)
    by_namespace: dict[str | None, list[tuple[int, str]]] = {}
    for rowid, content, namespace in rows:
        if content is not None and (text := _searchable(content)):
            by_namespace.setdefault(namespace, []).append((rowid, text))
    for namespace, texts in by_namespace.items():
        table = message_index_name(namespace)
        ensure_index(connection, table, "messages", namespace)
        connection.executemany(aimed_at(SqliteSql.index_pending_row, MESSAGE_INDEX, table), texts)
    connection.execute(SqliteSql.drop_pending_rows, (rows[-1][0],))
    return len(stale) + len(rows)


def ensure_index(connection: sqlite3.Connection, table: str, kind: str, owner: str | None) -> bool:
    """Make the index ``table`` of ``owner`` unless it exists; True when it was made now.

    Inside the caller's write transaction. ``table`` is a name made by ``message_index_name`` or
    ``entry_index_name``, never caller text.
    """
    if _exists(connection, table):
        return False
    connection.execute(aimed_at(CREATE_INDEX, ANY_INDEX, table))
    registered = {"name": table, "kind": kind if owner is not None else f"{kind} of unregistered sessions"}
    connection.execute(SqliteSql.register_search_index, {**registered, "owner": owner or ""})
    return True


def _exists(connection: sqlite3.Connection, table: str) -> bool:
    return connection.execute(SqliteSql.search_index_exists, {"name": table}).fetchone() is not None


def after_appends(database: SqliteDatabase, count: int) -> None:
    """Count ``count`` messages just appended in the open write transaction; a batch when it is due.

    The countdown starts at 0, so the first append through a new database runs a batch too: a
    process that appends fewer than :data:`INDEX_EVERY` times (a command-line call) still
    indexes what earlier ones left.
    """
    database.appends_to_next_index -= count
    if database.appends_to_next_index <= 0:
        limit = BATCH_PER_APPEND * (INDEX_EVERY - database.appends_to_next_index)
        database.appends_to_next_index = INDEX_EVERY
        try:
            index_pending(database.connection, limit)
        except sqlite3.Error as error:
            raise translate_sqlite_error(error, database.busy_timeout) from error


def catch_up(database: Database) -> None:
    """Index every waiting row, each :data:`SEARCH_BATCH` in its own write transaction.

    One cheap read first: with nothing waiting (the usual case) no write transaction is taken.
    Called outside any transaction, before a search's own read: the search then sees every
    message committed before it started.
    """
    assert isinstance(database, SqliteDatabase)
    if not database.query_once(SqliteSql.any_pending)[0][0]:
        return
    handled = SEARCH_BATCH
    while handled == SEARCH_BATCH:
        with database.write():
            try:
                handled = index_pending(database.connection, SEARCH_BATCH)
            except sqlite3.Error as error:
                raise translate_sqlite_error(error, database.busy_timeout) from error
            database.appends_to_next_index = INDEX_EVERY  # nothing is left: appends need no batch soon


def _searchable(content: str) -> str:
    """What the append would have indexed: the text parts of the stored message."""
    try:
        return searchable_text(json.loads(content))
    except (ValueError, RecursionError):  # not JSON: a row written by hand, with no text to find
        return ""
