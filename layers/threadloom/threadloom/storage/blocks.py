"""Context-block contents, frozen prompts and loaded-skill state on SQL (shared by every backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.clock import utc_now
from threadloom.providers.protocols import BlockRead

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.storage.database import Database
    from threadloom.storage.dialect import SqlDialect


class SqlContextProvider:
    """A writable block stored under ``key`` of one owner; ``init(label)`` names an unkeyed provider after its block.

    The owner is ``(namespace, session_id)``: every read, write and delete names it, so a key
    chosen in one namespace or session never reaches another's row, and deleting the session
    removes its rows (contract D12). ``session_id=None`` is a block of no session (``''``).
    """

    def __init__(
        self,
        database: Database,
        sql: type[SqlDialect],
        key: str = "",
        *,
        session_id: str | None = None,
        namespace: str = "",
    ):
        self._database = database
        self._sql = sql
        self.key = key
        self.session_id = session_id
        self.namespace = namespace

    def init(self, label: str) -> None:
        if not self.key:
            self.key = label

    def _owner(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "sid": self.session_id or ""}

    def _row(self) -> dict[str, Any]:
        return {**self._owner(), "key": self.key}

    def get(self) -> str | None:
        return _first_value(self._database.query_once(self._sql.get_block, self._row(), by_key=True))

    def block_read(self) -> BlockRead:
        """``get()`` as a read that can go with the session's other block reads (one round trip)."""
        return BlockRead(self._database, (self._sql.get_block, self._row()), _first_value, single_value=True)

    def set(self, content: str) -> None:
        with self._database.write() as tx:
            tx.execute(self._sql.upsert_block, {**self._row(), "content": content, "now": utc_now()})


class SqlPromptStore(SqlContextProvider):
    """The frozen system prompt of one session: the first freeze wins across processes."""

    def set_if_absent(self, content: str) -> str:
        """Store ``content`` unless a prompt is already stored; return whichever prompt is stored now.

        One statement when this call stores it (the insert says so by returning the row), a
        second read only when another freeze won. The prompt is a cache of what the blocks
        rendered, so its commit need not wait for the disk (``durable=False``): lost only in a
        server crash moments after the freeze, it is frozen again by the next request.
        """
        values = {**self._row(), "content": content, "now": utc_now()}
        if self._database.execute_once(self._sql.insert_prompt_if_absent, values, durable=False):
            return content
        rows = self._database.query_once(self._sql.get_block, self._row(), by_key=True)
        return str(rows[0][0]) if rows else content

    def delete(self) -> None:
        with self._database.write() as tx:
            tx.execute(self._sql.delete_block, self._row())


class SqlSkillState:
    """The set of loaded skills (``"label:key"``) of one session, persisted (contract D7)."""

    def __init__(self, database: Database, sql: type[SqlDialect], session_id: str) -> None:
        self._database = database
        self._sql = sql
        self.session_id = session_id

    def load(self) -> set[str]:
        return {row[0] for row in self._database.query_once(self._sql.get_loaded_skills, {"sid": self.session_id})}

    def save(self, skill_ids: set[str]) -> None:
        with self._database.write() as tx:
            tx.execute(self._sql.clear_loaded_skills, {"sid": self.session_id})
            for skill_id in sorted(skill_ids):
                tx.execute(self._sql.add_loaded_skill, {"sid": self.session_id, "skill_id": skill_id})


def _first_value(rows: Sequence[Sequence[Any]]) -> str | None:
    return str(rows[0][0]) if rows and rows[0][0] is not None else None
