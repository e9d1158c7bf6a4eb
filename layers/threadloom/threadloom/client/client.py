"""``ThreadloomClient``: the deployed HTTP API with the methods of the library's ``SessionManager``.

Code written against ``SessionManager`` (and agent-framework adapters) runs against the API by
swapping the object; ``get_session`` gives a ``RemoteSession`` with the methods of ``Session``.
The tenant is whatever the bearer token's claim says, so there is no ``namespace`` argument.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from threadloom.client import wire
from threadloom.client.session import RemoteSession
from threadloom.client.transport import RetryPolicy, Transport, path
from threadloom.errors import NotFoundError
from threadloom.records import OMITTED, Omitted
from threadloom.tools.session_search import build_session_search_tool

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from types import TracebackType

    import httpx

    from threadloom.records import Message, SearchResult, SessionInfo, StoredCompaction
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
        self._http = Transport(
            base_url,
            token=token,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff=backoff, max_backoff=max_backoff),
            headers=headers,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ThreadloomClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def health(self) -> dict[str, Any]:
        return self._http.request("GET", "/health")  # type: ignore[no-any-return]

    def openapi(self) -> dict[str, Any]:
        """The API's OpenAPI 3.1 document, as the server describes itself."""
        return self._http.request("GET", "/openapi.json")  # type: ignore[no-any-return]

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
    ) -> SessionInfo:
        body = {"name": name, "parentSessionId": parent_session_id, "model": model, "source": source}
        return wire.session_info(self._http.request("POST", "/sessions", body=body, idempotent=True))

    create_session = create

    def open_session(
        self, key: str, *, name: str | None = None, model: str | None = None, source: str | None = None
    ) -> SessionInfo:
        """The session for your own conversation key, created on first use (see ``SessionManager.open_session``)."""
        body = {"key": key, "name": name, "model": model, "source": source}
        return wire.session_info(self._http.request("POST", "/sessions/open", body=body, idempotent=True))

    def get(self, session_id: str) -> SessionInfo | None:
        try:
            return wire.session_info(self._http.request("GET", path("sessions", session_id)))
        except NotFoundError:
            return None

    def list_page(self, *, limit: int, cursor: str | None = None) -> tuple[builtins.list[SessionInfo], str | None]:
        """One page of sessions, most recent activity first, and the cursor of the next (None on the last)."""
        out = self._http.request("GET", "/sessions", params={"limit": limit, "cursor": cursor})
        return [wire.session_info(item) for item in out["sessions"]], out.get("nextCursor") or None

    def iter_sessions(self, *, page_size: int | None = None) -> Iterator[SessionInfo]:
        """Every session, fetched a page at a time as the iterator is consumed."""
        cursor: str | None = None
        while True:
            page, cursor = self.list_page(limit=page_size or self.page_size, cursor=cursor)
            yield from page
            if cursor is None:
                return

    def list(self) -> builtins.list[SessionInfo]:
        return builtins.list(self.iter_sessions())

    def count(self) -> int:
        return sum(1 for _ in self.iter_sessions())

    def rename(self, session_id: str, name: str) -> SessionInfo:
        return wire.session_info(self._http.request("PATCH", path("sessions", session_id), body={"name": name}))

    def set_legal_hold(self, session_id: str, hold: bool) -> SessionInfo:
        """Keep the session through retention sweeps (``True``) or let it expire again."""
        return wire.session_info(self._http.request("PATCH", path("sessions", session_id), body={"legalHold": hold}))

    def status(self, session_id: str) -> dict[str, Any]:
        """Phase, token estimate and threshold, and the latest compaction request (``GET .../status``)."""
        return self.get_session(session_id).status()

    # -------------------------------------------------------------- lifecycle

    def export_session(self, session_id: str) -> bytes:
        """The session's export file (JSON Lines, docs/export-format.md), following the API to S3 when it is large."""
        response = self._http.send("GET", path("sessions", session_id, "export"))
        if response.status_code == 303:
            return self._http.download(response.json()["url"])
        return response.content

    def import_sessions(self, data: bytes | str) -> dict[str, Any]:
        """Import an export file (all or nothing, ids kept); importing it again changes nothing."""
        content = data.encode("utf-8") if isinstance(data, str) else data
        response = self._http.send(
            "POST", "/sessions/import", content=content, content_type="application/x-ndjson", idempotent=True
        )
        return dict(response.json())

    def import_from_s3(self, key: str) -> dict[str, Any]:
        """Import an export file already in the stack's export bucket."""
        return dict(self._http.request("POST", "/sessions/import-from-s3", body={"key": key}, idempotent=True))

    def erase_subject(self, subject_id: str) -> dict[str, Any]:
        """Erase every session of a data subject (needs the admin scope); returns the receipt."""
        return dict(self._http.request("POST", path("subjects", subject_id, "erase"), idempotent=True))

    def delete(self, session_id: str) -> bool:
        try:
            self._http.request("DELETE", path("sessions", session_id))
        except NotFoundError:
            return False
        return True

    # --------------------------------------------------------------- messages

    def append(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        return self.get_session(session_id).append_message(message, parent_id).id

    def upsert(self, session_id: str, message: Message, parent_id: str | Omitted | None = OMITTED) -> str:
        """Append the message, or replace it when its id is already stored."""
        session = self.get_session(session_id)
        if not session.append_message(message, parent_id).inserted:
            session.update_message(message)
        return str(message["id"])

    def append_all(
        self, session_id: str, messages: builtins.list[Message], parent_id: str | Omitted | None = OMITTED
    ) -> str | None:
        """Append a chain (atomic up to 500 messages; longer chains are sent in consecutive requests)."""
        return self.get_session(session_id).append_messages(messages, parent_id)

    def get_history(self, session_id: str, leaf_id: str | None = None) -> builtins.list[Message]:
        return self.get_session(session_id).get_history(leaf_id)

    def iter_history(
        self, session_id: str, leaf_id: str | None = None, *, page_size: int | None = None
    ) -> Iterator[Message]:
        return self.get_session(session_id).iter_history(leaf_id, page_size=page_size)

    def get_branches(self, session_id: str, message_id: str) -> builtins.list[Message]:
        return self.get_session(session_id).get_branches(message_id)

    def get_message_count(self, session_id: str) -> int:
        return self.get_session(session_id).get_path_length()

    def clear_messages(self, session_id: str) -> None:
        self.get_session(session_id).clear_messages()

    def delete_messages(self, session_id: str, message_ids: builtins.list[str]) -> None:
        self.get_session(session_id).delete_messages(message_ids)

    # ------------------------------------------------------- fork and compact

    def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        body = {"atMessageId": at_message_id, "name": name}
        return wire.session_info(
            self._http.request("POST", path("sessions", session_id, "fork"), body=body, idempotent=True)
        )

    def get_compactions(self, session_id: str) -> builtins.list[StoredCompaction]:
        return self.get_session(session_id).get_compactions()

    def compact_and_split(self, session_id: str, summary: str, name: str | None = None) -> SessionInfo:
        body = {"summary": summary, "name": name}
        return wire.session_info(self._http.request("POST", path("sessions", session_id, "split"), body=body))

    def add_usage(self, session_id: str, input_tokens: int, output_tokens: int, cost: float) -> SessionInfo:
        body = {"inputTokens": input_tokens, "outputTokens": output_tokens, "cost": cost}
        return wire.session_info(self._http.request("POST", path("sessions", session_id, "usage"), body=body))

    # ----------------------------------------------------------------- search

    def search(self, query: str, *, limit: int = 20) -> builtins.list[SearchResult]:
        """Search across the tenant's sessions."""
        out = self._http.request("GET", "/search", params={"q": query, "limit": limit})
        return [wire.search_result(hit) for hit in out["results"]]

    def tools(self) -> dict[str, Tool]:
        """``session_search`` over the tenant's sessions, formatted exactly as the library's."""
        tool = build_session_search_tool(lambda query, limit: self.search(query, limit=limit))
        return {tool.name: tool}


__all__ = ["ThreadloomClient"]
