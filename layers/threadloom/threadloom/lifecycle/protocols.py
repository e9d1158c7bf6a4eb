"""What the lifecycle operations need from a backend, as Protocols (both SQL stores provide them).

``LifecycleStorage`` is satisfied by ``SqlLifecycleStorage`` (``store.lifecycle()``) on SQLite
and PostgreSQL alike. ``DerivedDataEraser`` covers data kept outside the database that is
derived from a session (a DynamoDB prompt cache item, idempotency records, export objects):
retention and erasure call every configured eraser before the session's rows go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from threadloom.storage.snapshot import (
        ExpiredSession,
        KnowledgeEntrySnapshot,
        RemovedRows,
        RemovedSubjectBlocks,
        SessionSnapshot,
        SharedBlockSnapshot,
    )


class LifecycleStorage(Protocol):
    def read_session(self, namespace: str, session_id: str) -> SessionSnapshot | None: ...

    def session_namespace(self, session_id: str) -> str | None: ...

    def session_id_secret(self) -> str: ...

    def subject_session_ids(self, namespace: str, subject_id: str) -> list[str]: ...

    def child_session_ids(self, namespace: str, session_id: str) -> list[str]: ...

    def expired_sessions(
        self, cutoff: str, *, namespace: str = "", limit: int, after: ExpiredSession | None = None
    ) -> list[ExpiredSession]: ...

    def read_shared_blocks(
        self, namespace: str, scope: str, subject_id: str = "", *, max_versions: int
    ) -> list[SharedBlockSnapshot]: ...

    def read_knowledge_entries(
        self, namespace: str, *, after: tuple[str, str] = ("", ""), limit: int
    ) -> list[KnowledgeEntrySnapshot]: ...

    def read_knowledge_contents(self, namespace: str, label: str, keys: Sequence[str]) -> dict[str, str]: ...

    def write_sessions(
        self,
        namespace: str,
        snapshots: Iterable[SessionSnapshot],
        shared_blocks: Iterable[SharedBlockSnapshot] = (),
        knowledge_entries: Sequence[KnowledgeEntrySnapshot] = (),
        *,
        entry_quota: int | None = None,
    ) -> None: ...

    def delete_session(
        self, namespace: str, session_id: str, *, expired_before: str | None = None
    ) -> RemovedRows | None: ...

    def erase_subject_blocks(self, namespace: str, subject_id: str) -> RemovedSubjectBlocks: ...

    def purge_deleted(self) -> None: ...


class LifecycleStore(Protocol):
    """A store (``SqliteStore``, ``PostgresStore``) that hands out its lifecycle storage."""

    def lifecycle(self) -> LifecycleStorage: ...


class DerivedDataEraser(Protocol):
    """Removes what a session left outside the database; returns how many items it removed."""

    kind: str
    """The receipt's name for what this eraser removes (``prompt_cache``, ``idempotency_records``…)."""

    def erase_session(self, namespace: str, session_id: str) -> int: ...


__all__ = ["DerivedDataEraser", "LifecycleStorage", "LifecycleStore"]
