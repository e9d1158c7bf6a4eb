"""Threadloom as a LangChain ``BaseChatMessageHistory`` (``pip install 'threadloom[langchain]'``).

>>> history = ThreadloomChatMessageHistory("user-42", manager)  # SessionManager or ThreadloomClient
>>> RunnableWithMessageHistory(chain, lambda session_id: ThreadloomChatMessageHistory(session_id, manager))

Messages are stored with ``message_to_dict`` and come back as the same classes with the same
fields (content, tool calls, ids, additional kwargs, response metadata). ``messages`` reads with
compaction overlays applied: a compacted range comes back as one ``AIMessage`` with the summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar

from threadloom.extras import require_extra

require_extra("the LangChain chat history", "langchain")  # one line naming the extra

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, message_to_dict, messages_from_dict  # noqa: E402

from threadloom.errors import NotFoundError  # noqa: E402
from threadloom.integrations.messages import (  # noqa: E402
    marker_part,
    plain_text,
    stored_record,
    text_part,
    to_message,
    tool_call_part,
    tool_result_part,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.messages import BaseMessage

    from threadloom.integrations.backend import ThreadloomBackend
    from threadloom.records import Message

SOURCE: Final = "langchain"
_Answer = TypeVar("_Answer")
ROLES: Final = {"human": "user", "ai": "assistant", "system": "system", "tool": "assistant", "function": "assistant"}


def _parts(message: BaseMessage) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if isinstance(message.content, str):
        if message.content:
            parts.append(text_part(message.content))
    else:
        for block in message.content:
            if isinstance(block, str):
                parts.append(text_part(block))
            elif isinstance(block.get("text"), str):
                parts.append(text_part(block["text"]))
            else:
                parts.append(marker_part(SOURCE, str(block.get("type", "content"))))
    for call in getattr(message, "tool_calls", None) or []:
        parts.append(tool_call_part(str(call.get("id")), str(call.get("name")), call.get("args")))
    call_id = getattr(message, "tool_call_id", None)
    if isinstance(call_id, str):
        parts = [tool_result_part(call_id, plain_text({"parts": parts}), getattr(message, "name", None))]
    return parts


def to_threadloom(message: BaseMessage) -> Message:
    return to_message(SOURCE, ROLES.get(message.type, "assistant"), _parts(message), message_to_dict(message))


def from_threadloom(message: Message) -> BaseMessage:
    record = stored_record(message, SOURCE)
    if isinstance(record, dict):
        return messages_from_dict([record])[0]
    text = plain_text(message)
    if message.get("role") == "user":
        return HumanMessage(content=text)
    if message.get("role") == "system":
        return SystemMessage(content=text)
    return AIMessage(content=text)


class ThreadloomChatMessageHistory(BaseChatMessageHistory):
    """The chat history of the Threadloom session named by ``session_id`` (created on first use)."""

    def __init__(self, session_id: str, manager: ThreadloomBackend, *, name: str | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.manager = manager
        self._name = name
        self._threadloom_id: str | None = None

    @property
    def threadloom_session_id(self) -> str:
        if self._threadloom_id is None:
            self._threadloom_id = self.manager.open_session(self.session_id, name=self._name, source=SOURCE).id
        return self._threadloom_id

    def _on(self, action: Callable[[str], _Answer]) -> _Answer:
        """``action`` on the Threadloom session, opened again once if it was deleted since it was opened.

        A history object may live as long as its process, and retention (or an operator) may delete an
        idle conversation meanwhile. A keyed session keeps its id, so the conversation starts afresh.
        """
        try:
            return action(self.threadloom_session_id)
        except NotFoundError:
            self._threadloom_id = None
            return action(self.threadloom_session_id)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return [from_threadloom(message) for message in self._on(self.manager.get_history)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Appended as one chain: all of them are stored, or none."""
        if messages:
            converted = [to_threadloom(message) for message in messages]
            self._on(lambda session_id: self.manager.append_all(session_id, converted))

    def clear(self) -> None:
        self._on(self.manager.clear_messages)


__all__ = ["SOURCE", "ThreadloomChatMessageHistory", "from_threadloom", "to_threadloom"]
