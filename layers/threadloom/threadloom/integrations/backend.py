"""The few operations the framework adapters need, which ``SessionManager`` and ``ThreadloomClient`` share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from threadloom.client import ThreadloomClient
    from threadloom.core.manager import SessionManager
    from threadloom.records import Message, SessionInfo, StoredCompaction


class SessionView(Protocol):
    """Reads of one session by message id (``Session`` and ``RemoteSession``)."""

    def get_message(self, message_id: str) -> Message | None: ...

    def get_latest_leaf(self) -> Message | None: ...


class ThreadloomBackend(Protocol):
    """Where an adapter keeps a framework's conversations: the library or the HTTP API."""

    def open_session(
        self, key: str, *, name: str | None = None, model: str | None = None, source: str | None = None
    ) -> SessionInfo: ...

    def get_session(self, session_id: str) -> SessionView: ...

    def append_all(self, session_id: str, messages: list[Message], parent_id: Any = ...) -> str | None: ...

    def upsert(self, session_id: str, message: Message, parent_id: Any = ...) -> str: ...

    def get_history(self, session_id: str, leaf_id: str | None = None) -> list[Message]: ...

    def get_compactions(self, session_id: str) -> list[StoredCompaction]: ...

    def delete_messages(self, session_id: str, message_ids: list[str]) -> None: ...

    def clear_messages(self, session_id: str) -> None: ...


if TYPE_CHECKING:

    def _both_are_backends(manager: SessionManager, client: ThreadloomClient) -> list[ThreadloomBackend]:
        """mypy proves here that the library and the client satisfy the protocol."""
        return [manager, client]


__all__ = ["SessionView", "ThreadloomBackend"]
