"""The few operations the framework adapters need, which ``SessionManager`` and ``ThreadloomClient`` share.

An asynchronous framework (the OpenAI Agents SDK) takes an :class:`AsyncThreadloomBackend`
too: ``AsyncThreadloomClient`` is one, and :func:`as_async` runs a synchronous backend's calls
in a worker thread so they never block the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, cast

if TYPE_CHECKING:
    from threadloom.client import AsyncThreadloomClient, ThreadloomClient
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


class AsyncSessionView(Protocol):
    """:class:`SessionView`, awaited (``AsyncRemoteSession``)."""

    async def get_latest_leaf(self) -> Message | None: ...


class AsyncThreadloomBackend(Protocol):
    """The operations an asynchronous adapter awaits: ``AsyncThreadloomClient``, or :func:`as_async` of a backend."""

    async def open_session(
        self, key: str, *, name: str | None = None, model: str | None = None, source: str | None = None
    ) -> SessionInfo: ...

    def get_session(self, session_id: str) -> AsyncSessionView: ...

    async def append_all(self, session_id: str, messages: list[Message]) -> str | None: ...

    async def get_history(self, session_id: str, leaf_id: str | None = None) -> list[Message]: ...

    async def delete_messages(self, session_id: str, message_ids: list[str]) -> None: ...

    async def clear_messages(self, session_id: str) -> None: ...


class _ThreadedView:
    def __init__(self, view: SessionView) -> None:
        self._view = view

    async def get_latest_leaf(self) -> Message | None:
        return await asyncio.to_thread(self._view.get_latest_leaf)


class _Threaded:
    """A synchronous backend whose calls each run in a worker thread, off the event loop."""

    def __init__(self, backend: ThreadloomBackend) -> None:
        self._backend = backend

    async def open_session(
        self, key: str, *, name: str | None = None, model: str | None = None, source: str | None = None
    ) -> SessionInfo:
        return await asyncio.to_thread(self._backend.open_session, key, name=name, model=model, source=source)

    def get_session(self, session_id: str) -> AsyncSessionView:
        return _ThreadedView(self._backend.get_session(session_id))

    async def append_all(self, session_id: str, messages: list[Message]) -> str | None:
        return await asyncio.to_thread(self._backend.append_all, session_id, messages)

    async def get_history(self, session_id: str, leaf_id: str | None = None) -> list[Message]:
        return await asyncio.to_thread(self._backend.get_history, session_id, leaf_id)

    async def delete_messages(self, session_id: str, message_ids: list[str]) -> None:
        await asyncio.to_thread(self._backend.delete_messages, session_id, message_ids)

    async def clear_messages(self, session_id: str) -> None:
        await asyncio.to_thread(self._backend.clear_messages, session_id)


def is_async(backend: ThreadloomBackend | AsyncThreadloomBackend) -> TypeGuard[AsyncThreadloomBackend]:
    """Whether the backend's methods are awaited (``AsyncThreadloomClient``)."""
    return inspect.iscoroutinefunction(backend.open_session)


def as_async(backend: ThreadloomBackend | AsyncThreadloomBackend) -> AsyncThreadloomBackend:
    """The backend itself when it is asynchronous, else its calls in a worker thread."""
    if is_async(backend):
        return backend
    return _Threaded(cast("ThreadloomBackend", backend))


if TYPE_CHECKING:

    def _both_are_backends(manager: SessionManager, client: ThreadloomClient) -> list[ThreadloomBackend]:
        """mypy proves here that the library and the client satisfy the protocol."""
        return [manager, client]

    def _async_backends(client: AsyncThreadloomClient, manager: SessionManager) -> list[AsyncThreadloomBackend]:
        """... and that the async client, and a threaded backend, satisfy the asynchronous one."""
        return [client, _Threaded(manager)]


__all__ = ["AsyncSessionView", "AsyncThreadloomBackend", "SessionView", "ThreadloomBackend", "as_async", "is_async"]
