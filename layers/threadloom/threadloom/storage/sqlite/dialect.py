"""SQLite's dialect as the shared tree and registry use it: the statements plus the search catch-up.

``sql.py`` holds only statements and ``search_index.py`` runs the batches over them; this class joins
the two, so neither module imports the other's user (no import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.storage.sqlite.search_index import catch_up
from threadloom.storage.sqlite.sql import SqliteSql

if TYPE_CHECKING:
    from threadloom.storage.database import Database


class SqliteDialect(SqliteSql):
    """The statements of :class:`SqliteSql` with the message index brought up to date before a search."""

    @classmethod
    def prepare_message_search(cls, database: Database) -> None:
        """Index the messages still waiting for it (:func:`threadloom.storage.sqlite.search_index.catch_up`)."""
        catch_up(database)
