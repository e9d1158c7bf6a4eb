"""``AsyncThreadloomClient``: :class:`~threadloom.client.ThreadloomClient` for ``asyncio``, on ``httpx.AsyncClient``.

Same methods, arguments, results, retries and exceptions, awaited: each method runs the same
operation of :mod:`threadloom.client.operations` as its synchronous twin. The paging iterators
are ``async for`` iterators. ``tools()`` has no counterpart (a library ``Tool`` runs
synchronously).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.client import operations as ops
from threadloom.client.async_session import AsyncRemoteSession
from threadloom.client.transport import AsyncTransport, Connection, RetryPolicy
from threadloom.records import OMITTED, Omitted

if TYPE_CHECKING:
    import builtins
    from collections.abc import AsyncIterator, Mapping
    from types import TracebackType

    import httpx

    from threadloom.records import Message, SearchEntry, SearchResult, SessionInfo, StoredCompaction


class AsyncThreadloomClient:
    """An asynchronous client of the Threadloom HTTP API.

    Examples
    --------
    >>> async with AsyncThreadloomClient("http://127.0.0.1:3000", token=jwt) as client:
    ...     info = await client.open_session("user-42")
    ...     await client.append(info.id, {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    'm1'
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.2,
        max_backoff: float = 10.0,
        page_size: int = 200,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.page_size = page_size
        retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_backoff=max_backoff)
        self._http = AsyncTransport(Connection(base_url, token, timeout, retry, headers), transport=transport)

    async def close(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> AsyncThreadloomClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.close()

    async def health(self) -> dict[str, Any]:
        return await self._http.run(ops.health())

    async def openapi(self) -> dict[str, Any]:
        return await self._http.run(ops.openapi())

    # --------------------------------------------------------------- sessions

    def get_session(self, session_id: str) -> AsyncRemoteSession:
        """A handle on one session (no request is made)."""
        return AsyncRemoteSession(self._http, session_id, page_size=self.page_size)

    async def create(
        self,
        name: str = "",
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
        subject_id: str | None = None,
    ) -> SessionInfo:
        """A new session; ``subject_id`` names the end user it is for (a service token with the act-for-users
        scope only, see docs/memory.md), by default the caller's JWT ``sub``."""
        return await self._http.run(ops.create(name, parent_session_id, model, source, subject_id))

    create_session = create

    async def open_session(
        self, key: str, *, name: str | None = None, model: str | None = None, source: str | None = None
    ) -> SessionInfo:
        return await self._http.run(ops.open_session(key, name, model, source))

    async def get(self, session_id: str) -> SessionInfo | None:
        return await self._http.run(ops.get(session_id))

    async def list_page(self, *, limit: int, cursor: str | None = None) -> ops.Page[SessionInfo]:
        return await self._http.run(ops.sessions_page(limit, cursor))

    def iter_sessions(self, *, page_size: int | None = None) -> AsyncIterator[SessionInfo]:
        """Every session, a page fetched as ``async for`` reaches it."""
        return self._http.pages(lambda cursor: ops.sessions_page(page_size or self.page_size, cursor))

    async def list(self) -> builtins.list[SessionInfo]:
        return [info async for info in self.iter_sessions()]

    async def count(self) -> int:
        return len(await self.list())

    async def rename(self, session_id: str, name: str) -> SessionInfo:
        return await self._http.run(ops.update(session_id, {"name": name}))

    async def set_legal_hold(self, session_id: str, hold: bool) -> SessionInfo:
        return await self._http.run(ops.update(session_id, {"legalHold": hold}))

    async def status(self, session_id: str) -> dict[str, Any]:
        return await self._http.run(ops.status(session_id))

    # -------------------------------------------------------------- lifecycle

    async def export_session(
        self, session_id: str, *, include_shared_blocks: bool = False, include_knowledge: bool = False
    ) -> bytes:
        return await self._http.run(
            ops.export_session(
                session_id, include_shared_blocks=include_shared_blocks, include_knowledge=include_knowledge
            )
        )

    async def import_sessions(self, data: bytes | str) -> dict[str, Any]:
        return await self._http.run(ops.import_sessions(data))

    async def import_from_s3(self, key: str) -> dict[str, Any]:
        return await self._http.run(ops.import_from_s3(key))

    async def erase_subject(self, subject_id: str) -> dict[str, Any]:
        return await self._http.run(ops.erase_subject(subject_id))

    async def delete(self, session_id: str) -> bool:
        return await self._http.run(ops.delete(session_id))

    # --------------------------------------------------------------- messages

    async def append(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        return (await self._http.run(ops.append_message(session_id, message, parent_id, None))).id

    async def upsert(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        return await self._http.run(ops.upsert(session_id, message, parent_id))

    async def append_all(
        self, session_id: str, messages: builtins.list[Message], parent_id: str | Omitted | None = OMITTED
    ) -> str | None:
        return await self._http.run(ops.append_messages(session_id, messages, parent_id))

    async def get_history(self, session_id: str, leaf_id: str | None = None) -> builtins.list[Message]:
        return await self._http.run(ops.get_history(session_id, leaf_id, self.page_size))

    def iter_history(
        self, session_id: str, leaf_id: str | None = None, *, page_size: int | None = None
    ) -> AsyncIterator[Message]:
        return self.get_session(session_id).iter_history(leaf_id, page_size=page_size)

    async def get_branches(self, session_id: str, message_id: str) -> builtins.list[Message]:
        return await self._http.run(
            ops.collect(lambda cursor: ops.branches_page(session_id, message_id, self.page_size, cursor))
        )

    async def get_message_count(self, session_id: str) -> int:
        return await self._http.run(ops.get_path_length(session_id, None, self.page_size))

    async def clear_messages(self, session_id: str) -> None:
        await self._http.run(ops.clear_messages(session_id))

    async def delete_messages(self, session_id: str, message_ids: builtins.list[str]) -> None:
        await self._http.run(ops.delete_messages(session_id, message_ids))

    # ------------------------------------------------------- fork and compact

    async def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        return await self._http.run(ops.fork(session_id, at_message_id, name))

    async def get_compactions(self, session_id: str) -> builtins.list[StoredCompaction]:
        return await self._http.run(ops.get_compactions(session_id))

    async def compact_and_split(self, session_id: str, summary: str, name: str | None = None) -> SessionInfo:
        return await self._http.run(ops.compact_and_split(session_id, summary, name))

    async def add_usage(self, session_id: str, input_tokens: int, output_tokens: int, cost: float) -> SessionInfo:
        return await self._http.run(ops.add_usage(session_id, input_tokens, output_tokens, cost))

    async def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        """Search across the tenant's sessions."""
        return await self._http.run(ops.search(query, limit))

    # -------------------------------------------------------------- knowledge

    async def knowledge_page(
        self, label: str, *, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[SearchEntry], str | None]:
        """One page of a searchable block's entries (the tenant's, shared by its sessions), in key order."""
        return await self._http.run(ops.knowledge_page(label, limit, cursor))

    def iter_knowledge(self, label: str, *, page_size: int | None = None) -> AsyncIterator[SearchEntry]:
        """Every entry of the searchable block ``label``, a page fetched at a time."""
        return self._http.pages(lambda cursor: ops.knowledge_page(label, page_size or self.page_size, cursor))

    async def knowledge_entry(self, label: str, key: str) -> SearchEntry | None:
        return await self._http.run(ops.knowledge_entry(label, key))

    async def delete_knowledge_entry(self, label: str, key: str) -> bool:
        """Remove an entry and its search terms; False when there was none."""
        return await self._http.run(ops.delete_knowledge_entry(label, key))


__all__ = ["AsyncThreadloomClient"]
