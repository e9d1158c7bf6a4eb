"""``ThreadloomClient``: the deployed HTTP API with the methods of the library's ``SessionManager``.

Code written against ``SessionManager`` (and agent-framework adapters) runs against the API by
swapping the object; ``get_session`` gives a ``RemoteSession`` with the methods of ``Session``.
The tenant is whatever the bearer token's claim says, so there is no ``namespace`` argument.
Each method runs one operation of :mod:`threadloom.client.operations`, which
``AsyncThreadloomClient`` runs too.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from threadloom.client import operations as ops
from threadloom.client.session import RemoteSession
from threadloom.client.transport import Connection, RetryPolicy, Transport
from threadloom.records import OMITTED, Omitted
from threadloom.tools.session_search import build_session_search_tool

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from types import TracebackType

    import httpx

    from threadloom.records import Message, SearchEntry, SearchResult, SessionInfo, StoredCompaction
    from threadloom.tools.base import Tool


class ThreadloomClient:
    """A synchronous client of the Threadloom HTTP API.

    Writes carry an ``Idempotency-Key``; throttling (429), 502/503/504, connection failures
    and "this key is still in progress" (409) are retried with exponential backoff
    (``Retry-After`` honoured) when repeating the request is safe. Failures raise the
    library's exceptions (``NotFoundError``, ``ConflictError``...); an unreachable service
    raises ``ServiceUnreachableError``, a ``StorageUnavailableError``.

    Examples
    --------
    >>> with ThreadloomClient("http://127.0.0.1:3000", token=jwt) as client:
    ...     info = client.create("Support chat")
    ...     client.append(info.id, {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.page_size = page_size
        retry = RetryPolicy(max_retries=max_retries, backoff=backoff, max_backoff=max_backoff)
        self._http = Transport(Connection(base_url, token, timeout, retry, headers), transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ThreadloomClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def health(self) -> dict[str, Any]:
        return self._http.run(ops.health())

    def openapi(self) -> dict[str, Any]:
        """The API's OpenAPI 3.1 document, as the server describes itself."""
        return self._http.run(ops.openapi())

    # --------------------------------------------------------------- sessions

    def get_session(self, session_id: str) -> RemoteSession:
        """A handle on one session (no request is made)."""
        return RemoteSession(self._http, session_id, page_size=self.page_size)

    def create(
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
        return self._http.run(ops.create(name, parent_session_id, model, source, subject_id))

    create_session = create

    def open_session(
        self, key: str, *, name: str | None = None, model: str | None = None, source: str | None = None
    ) -> SessionInfo:
        """The session for your own conversation key, created on first use (see ``SessionManager.open_session``)."""
        return self._http.run(ops.open_session(key, name, model, source))

    def get(self, session_id: str) -> SessionInfo | None:
        return self._http.run(ops.get(session_id))

    def list_page(self, *, limit: int, cursor: str | None = None) -> tuple[builtins.list[SessionInfo], str | None]:
        """One page of sessions, most recent activity first, and the cursor of the next (None on the last)."""
        return self._http.run(ops.sessions_page(limit, cursor))

    def iter_sessions(self, *, page_size: int | None = None) -> Iterator[SessionInfo]:
        """Every session, fetched a page at a time as the iterator is consumed."""
        return self._http.pages(lambda cursor: ops.sessions_page(page_size or self.page_size, cursor))

    def list(self) -> builtins.list[SessionInfo]:
        return builtins.list(self.iter_sessions())

    def count(self) -> int:
        return sum(1 for _ in self.iter_sessions())

    def rename(self, session_id: str, name: str) -> SessionInfo:
        return self._http.run(ops.update(session_id, {"name": name}))

    def set_legal_hold(self, session_id: str, hold: bool) -> SessionInfo:
        """Keep the session through retention sweeps (``True``) or let it expire again."""
        return self._http.run(ops.update(session_id, {"legalHold": hold}))

    def status(self, session_id: str) -> dict[str, Any]:
        """Phase, token estimate and threshold, and the latest compaction request (``GET .../status``)."""
        return self._http.run(ops.status(session_id))

    # -------------------------------------------------------------- lifecycle

    def export_session(
        self, session_id: str, *, include_shared_blocks: bool = False, include_knowledge: bool = False
    ) -> bytes:
        """The session's export file (JSON Lines, docs/export-format.md), following the API to S3 when it is large;
        ``include_shared_blocks`` adds the subject and tenant blocks with their history, ``include_knowledge``
        the tenant's knowledge entries (its search blocks')."""
        return self._http.run(
            ops.export_session(
                session_id, include_shared_blocks=include_shared_blocks, include_knowledge=include_knowledge
            )
        )

    def import_sessions(self, data: bytes | str) -> dict[str, Any]:
        """Import an export file (all or nothing; ids not the tenant's own are renamed, see ``renamed``)."""
        return self._http.run(ops.import_sessions(data))

    def import_from_s3(self, key: str) -> dict[str, Any]:
        """Import an export file already in the stack's export bucket."""
        return self._http.run(ops.import_from_s3(key))

    def erase_subject(self, subject_id: str) -> dict[str, Any]:
        """Erase every session of a data subject (needs the admin scope); returns the receipt."""
        return self._http.run(ops.erase_subject(subject_id))

    def delete(self, session_id: str) -> bool:
        return self._http.run(ops.delete(session_id))

    # --------------------------------------------------------------- messages

    def append(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        return self._http.run(ops.append_message(session_id, message, parent_id, None)).id

    def upsert(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        """Append the message, or replace it when its id is already stored."""
        return self._http.run(ops.upsert(session_id, message, parent_id))

    def append_all(
        self, session_id: str, messages: builtins.list[Message], parent_id: str | Omitted | None = OMITTED
    ) -> str | None:
        """Append a chain (atomic up to 500 messages; longer chains are sent in consecutive requests)."""
        return self._http.run(ops.append_messages(session_id, messages, parent_id))

    def get_history(self, session_id: str, leaf_id: str | None = None) -> builtins.list[Message]:
        return self._http.run(ops.get_history(session_id, leaf_id, self.page_size))

    def iter_history(
        self, session_id: str, leaf_id: str | None = None, *, page_size: int | None = None
    ) -> Iterator[Message]:
        return self.get_session(session_id).iter_history(leaf_id, page_size=page_size)

    def get_branches(self, session_id: str, message_id: str) -> builtins.list[Message]:
        return self._http.run(
            ops.collect(lambda cursor: ops.branches_page(session_id, message_id, self.page_size, cursor))
        )

    def get_message_count(self, session_id: str) -> int:
        return self._http.run(ops.get_path_length(session_id, None, self.page_size))

    def clear_messages(self, session_id: str) -> None:
        self._http.run(ops.clear_messages(session_id))

    def delete_messages(self, session_id: str, message_ids: builtins.list[str]) -> None:
        self._http.run(ops.delete_messages(session_id, message_ids))

    # ------------------------------------------------------- fork and compact

    def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        return self._http.run(ops.fork(session_id, at_message_id, name))

    def get_compactions(self, session_id: str) -> builtins.list[StoredCompaction]:
        return self._http.run(ops.get_compactions(session_id))

    def compact_and_split(self, session_id: str, summary: str, name: str | None = None) -> SessionInfo:
        return self._http.run(ops.compact_and_split(session_id, summary, name))

    def add_usage(self, session_id: str, input_tokens: int, output_tokens: int, cost: float) -> SessionInfo:
        return self._http.run(ops.add_usage(session_id, input_tokens, output_tokens, cost))

    # ----------------------------------------------------------------- search

    def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        """Search across the tenant's sessions."""
        return self._http.run(ops.search(query, limit))

    def tools(self) -> dict[str, Tool]:
        """``session_search`` over the tenant's sessions, formatted exactly as the library's."""
        tool = build_session_search_tool(lambda query, limit: self.search(query, limit=limit))
        return {tool.name: tool}

    # -------------------------------------------------------------- knowledge

    def knowledge_page(
        self, label: str, *, limit: int, cursor: str | None = None
    ) -> tuple[builtins.list[SearchEntry], str | None]:
        """One page of a searchable block's entries (the tenant's, shared by its sessions), in key order."""
        return self._http.run(ops.knowledge_page(label, limit, cursor))

    def iter_knowledge(self, label: str, *, page_size: int | None = None) -> Iterator[SearchEntry]:
        """Every entry of the searchable block ``label``, a page fetched at a time."""
        return self._http.pages(lambda cursor: ops.knowledge_page(label, page_size or self.page_size, cursor))

    def knowledge_entry(self, label: str, key: str) -> SearchEntry | None:
        return self._http.run(ops.knowledge_entry(label, key))

    def delete_knowledge_entry(self, label: str, key: str) -> bool:
        """Remove an entry and its search terms; False when there was none."""
        return self._http.run(ops.delete_knowledge_entry(label, key))


__all__ = ["ThreadloomClient"]
