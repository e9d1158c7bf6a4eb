"""Threadloom as an OpenAI Agents SDK ``Session`` (``pip install 'threadloom[openai-agents]'``).

>>> agent_session = ThreadloomSession("user-42", manager)  # SessionManager, ThreadloomClient or AsyncThreadloomClient
>>> result = await Runner.run(agent, "Hi", session=agent_session)

Every item the SDK stores (messages, function calls and outputs, reasoning, hosted-tool
calls, anything newer) is kept verbatim and returned field for field. ``get_items`` reads the
history with compaction overlays applied: a compacted range comes back as one
``{"role": "assistant", "content": <summary>}`` item in its place, so the model sees the
summary instead of the originals (which stay stored).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from threadloom.extras import require_extra

require_extra("the OpenAI Agents SDK session", "openai-agents")  # one line naming the extra

from agents.memory.session_settings import SessionSettings, resolve_session_limit  # noqa: E402

from threadloom.errors import NotFoundError  # noqa: E402
from threadloom.integrations.backend import as_async, is_async  # noqa: E402
from threadloom.integrations.messages import (  # noqa: E402
    marker_part,
    plain_text,
    reasoning_part,
    stored_record,
    text_part,
    to_message,
    tool_call_part,
    tool_result_part,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agents.items import TResponseInputItem

    from threadloom.integrations.backend import AsyncThreadloomBackend, ThreadloomBackend
    from threadloom.records import Message

SOURCE: Final = "openai-agents"
_Answer = TypeVar("_Answer")


def _content_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [text_part(content)]
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            text = block.get("text") if isinstance(block.get("text"), str) else block.get("refusal")
            if isinstance(text, str):
                parts.append(text_part(text))
            else:
                parts.append(marker_part(SOURCE, str(block.get("type", "content"))))
    return parts


def item_to_message(item: TResponseInputItem) -> Message:
    """The Threadloom message that stores ``item`` (its projection in ``parts``, the item itself in metadata)."""
    record: dict[str, Any] = copy.deepcopy(dict(item))
    kind = record.get("type") or ("message" if "role" in record else "item")
    if kind == "message":
        return to_message(SOURCE, str(record.get("role", "user")), _content_parts(record.get("content")), record)
    if kind == "function_call":
        part = tool_call_part(str(record.get("call_id")), str(record.get("name")), record.get("arguments"))
        return to_message(SOURCE, "assistant", [part], record)
    if kind == "function_call_output":
        return to_message(
            SOURCE, "assistant", [tool_result_part(str(record.get("call_id")), record.get("output"))], record
        )
    if kind == "reasoning":
        texts = [s.get("text", "") for s in record.get("summary") or [] if isinstance(s, dict)]
        return to_message(SOURCE, "assistant", [reasoning_part("\n".join(texts))], record)
    return to_message(SOURCE, "assistant", [marker_part(SOURCE, str(kind))], record)


def message_to_item(message: Message) -> TResponseInputItem:
    """The stored item, or, for a message the SDK did not write (a compaction overlay), a plain text item."""
    record = stored_record(message, SOURCE)
    if isinstance(record, dict):
        return cast("TResponseInputItem", record)
    role = message.get("role") if message.get("role") in ("user", "assistant", "system") else "assistant"
    return cast("TResponseInputItem", {"role": role, "content": plain_text(message)})


class ThreadloomSession:
    """An SDK ``Session`` whose items live in the Threadloom session named by ``session_id``.

    The Threadloom session is created on first use (``open_session(session_id)``), so the same
    ``session_id`` resumes the conversation from any process. An ``AsyncThreadloomClient`` is
    awaited on the SDK's event loop; a synchronous ``SessionManager``/``ThreadloomClient`` runs
    in a worker thread, off the event loop.
    """

    def __init__(
        self,
        session_id: str,
        manager: ThreadloomBackend | AsyncThreadloomBackend,
        *,
        session_settings: SessionSettings | None = None,
        name: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings: SessionSettings | None = session_settings or SessionSettings()
        self.manager = manager
        self._backend = as_async(manager)
        self._name = name
        self._threadloom_id: str | None = None

    @property
    def threadloom_session_id(self) -> str:
        """The Threadloom session holding this conversation (opened on first access).

        With an asynchronous manager it is known once any method has been awaited (or after
        ``await open()``); before that, reading it raises ``RuntimeError``.
        """
        if self._threadloom_id is None:
            if is_async(self.manager):
                raise RuntimeError("await session.open() first: an asynchronous manager cannot be called here")
            manager = cast("ThreadloomBackend", self.manager)
            self._threadloom_id = manager.open_session(self.session_id, name=self._name, source=SOURCE).id
        return self._threadloom_id

    async def open(self) -> str:
        """The Threadloom session's id, opening (creating) it on first use."""
        if self._threadloom_id is None:
            info = await self._backend.open_session(self.session_id, name=self._name, source=SOURCE)
            self._threadloom_id = info.id
        return self._threadloom_id

    async def _on(self, action: Callable[[str], Awaitable[_Answer]]) -> _Answer:
        """``action`` on the Threadloom session, opened again once if it was deleted since it was opened.

        A session object may live as long as its process, and retention (or an operator) may delete an
        idle conversation meanwhile. A keyed session keeps its id, so the conversation starts afresh.
        """
        try:
            return await action(await self.open())
        except NotFoundError:
            self._threadloom_id = None
            return await action(await self.open())

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all when None), oldest first."""
        limit = resolve_session_limit(limit, self.session_settings)
        history = await self._on(self._backend.get_history)
        if limit is not None:
            history = history[-limit:] if limit > 0 else []
        return [message_to_item(message) for message in history]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appended as one chain: all of a turn's items are stored, or none."""
        if items:
            converted = [item_to_message(item) for item in items]
            await self._on(lambda session_id: self._backend.append_all(session_id, converted))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (the latest leaf)."""

        async def pop(session_id: str) -> Message | None:
            leaf = await self._backend.get_session(session_id).get_latest_leaf()
            if leaf is not None:
                await self._backend.delete_messages(session_id, [str(leaf["id"])])
            return leaf

        leaf = await self._on(pop)
        return message_to_item(leaf) if leaf is not None else None

    async def clear_session(self) -> None:
        await self._on(self._backend.clear_messages)


__all__ = ["SOURCE", "ThreadloomSession", "item_to_message", "message_to_item"]
