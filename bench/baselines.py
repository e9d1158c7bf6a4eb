"""The raw PostgreSQL baselines and the LangChain peer that the PostgreSQL benches run beside Threadloom.

A baseline does what a competent user writing a raw client would do, at the best speed the driver
gives: every statement is prepared once per connection and then costs one round trip (pg8000's
``Connection.prepare``, psycopg 3's ``prepare=True``), never pg8000's ``Connection.run`` (three round
trips per statement). The table keeps what makes a message findable, as Threadloom does: the message
JSON, its parent, and a ``tsvector`` built by the server (``to_tsvector('english', text)``) in a GIN
index, under a primary key (session, id). The peer is langchain-postgres's
``PostgresChatMessageHistory`` (psycopg 3), used as its documentation shows, so a user switching
stores sees what they would get. ``DESCRIPTIONS`` is printed by each bench.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pg8000.native
import psycopg
from langchain_core.messages import HumanMessage
from langchain_postgres import PostgresChatMessageHistory
from threadloom.storage.postgres.connection import parse_database_url

RAW_SCHEMA = (
    "CREATE TABLE raw_messages (session_id TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT, "
    "content TEXT NOT NULL, search_vector TSVECTOR NOT NULL, PRIMARY KEY (session_id, id))",
    "CREATE INDEX raw_messages_search ON raw_messages USING gin (search_vector)",
)
RAW_INSERT = (
    "INSERT INTO raw_messages (session_id, id, parent_id, content, search_vector) "
    "VALUES ({sid}, {id}, {parent}, {content}, to_tsvector('english', {text}))"
)
RAW_READ = "SELECT content FROM raw_messages WHERE session_id = {sid} AND id = {id}"
RAW_HISTORY = (
    "WITH RECURSIVE path(id, parent_id, content) AS ("
    " SELECT id, parent_id, content FROM raw_messages WHERE session_id = {sid} AND id = {leaf}"
    " UNION ALL"
    " SELECT m.id, m.parent_id, m.content FROM raw_messages m"
    " JOIN path p ON m.session_id = {sid} AND m.id = p.parent_id"
    ") SELECT content FROM path"
)
LANGCHAIN_TABLE = "langchain_messages"

DESCRIPTIONS = {
    "threadloom": "Session.append_message / get_history on PostgresStore (one call of the append function, "
    "unnamed statement, one round trip)",
    "threadloom prepared": "the same with prepared_statements=on, for a direct connection: the append "
    "and history function calls named once per connection (statements over the tables stay unnamed)",
    "raw pg8000": "pg8000 Connection.prepare once, then one round trip per INSERT (PK + parent + JSON + "
    "to_tsvector('english') in a GIN index); history = one prepared recursive query",
    "raw psycopg": "psycopg 3, autocommit, execute(prepare=True): the same statements and table",
    "langchain": "langchain-postgres PostgresChatMessageHistory.add_messages([message]) / .messages "
    "(psycopg 3; its own table: serial id, session uuid, JSONB, index on session; psycopg prepares its INSERT "
    "and SELECT as named server-side statements after 5 runs)",
    "langchain unprepared": "the same with prepare_threshold=None, as psycopg must run behind a transaction "
    "pooler that does not track prepared statements (as Threadloom by default)",
}

_PG8000 = {"sid": ":sid", "id": ":id", "parent": ":parent", "content": ":content", "text": ":text", "leaf": ":leaf"}
_PSYCOPG = {name: f"%({name})s" for name in _PG8000}


def text_of(item: dict[str, Any]) -> str:
    """The searchable text of a bench message (its text parts joined), as the raw side indexes it."""
    return " ".join(part["text"] for part in item["parts"] if part.get("type") == "text")


def create_raw_schema(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        for statement in RAW_SCHEMA:
            connection.execute(statement)
        PostgresChatMessageHistory.create_tables(connection, LANGCHAIN_TABLE)


class Pg8000Raw:
    """A raw pg8000 client: each statement prepared once, then one round trip per call."""

    name = "raw pg8000"

    def __init__(self, url: str) -> None:
        params = parse_database_url(url)
        self.connection = pg8000.native.Connection(
            user=params.user, host=params.host, port=params.port, database=params.database, password=params.password
        )
        self._insert = self.connection.prepare(RAW_INSERT.format(**_PG8000))
        self._read = self.connection.prepare(RAW_READ.format(**_PG8000))
        self._history = self.connection.prepare(RAW_HISTORY.format(**_PG8000))

    def append(self, session_id: str, item: dict[str, Any], parent: str | None) -> None:
        content = json.dumps(item, separators=(",", ":"))
        self._insert.run(sid=session_id, id=item["id"], parent=parent, content=content, text=text_of(item))

    def read(self, session_id: str, message_id: str) -> Any:
        return self._read.run(sid=session_id, id=message_id)

    def history(self, session_id: str, leaf: str) -> list[dict[str, Any]]:
        rows = self._history.run(sid=session_id, leaf=leaf)
        return [json.loads(content) for (content,) in reversed(rows)]

    def close(self) -> None:
        self.connection.close()


class PsycopgRaw:
    """A raw psycopg 3 client in autocommit: each statement prepared on the server, one round trip per call."""

    name = "raw psycopg"

    def __init__(self, url: str) -> None:
        self.connection = psycopg.connect(url, autocommit=True, prepare_threshold=0)
        self._insert = RAW_INSERT.format(**_PSYCOPG)
        self._read = RAW_READ.format(**_PSYCOPG)
        self._history = RAW_HISTORY.format(**_PSYCOPG)

    def append(self, session_id: str, item: dict[str, Any], parent: str | None) -> None:
        content = json.dumps(item, separators=(",", ":"))
        params = {"sid": session_id, "id": item["id"], "parent": parent, "content": content, "text": text_of(item)}
        self.connection.execute(self._insert, params, prepare=True)

    def read(self, session_id: str, message_id: str) -> Any:
        return self.connection.execute(self._read, {"sid": session_id, "id": message_id}, prepare=True).fetchall()

    def history(self, session_id: str, leaf: str) -> list[dict[str, Any]]:
        rows = self.connection.execute(self._history, {"sid": session_id, "leaf": leaf}, prepare=True).fetchall()
        return [json.loads(content) for (content,) in reversed(rows)]

    def close(self) -> None:
        self.connection.close()


class LangchainPeer:
    """langchain-postgres's history as its documentation uses it: one object per session, one connection."""

    name = "langchain"

    def __init__(self, url: str, prepare_threshold: int | None = 5) -> None:
        # psycopg's default (5): a statement run 5 times is prepared as a named server-side statement,
        # which RDS Proxy pins and PgBouncer's transaction pooling (before 1.21) breaks; None turns it off.
        self.connection = psycopg.connect(url, prepare_threshold=prepare_threshold)

    def session(self, key: str) -> PostgresChatMessageHistory:
        session_id = str(uuid.uuid5(uuid.NAMESPACE_URL, key))
        return PostgresChatMessageHistory(LANGCHAIN_TABLE, session_id, sync_connection=self.connection)

    @staticmethod
    def message(item: dict[str, Any]) -> HumanMessage:
        return HumanMessage(content=text_of(item), id=item["id"])

    def close(self) -> None:
        self.connection.close()
