"""Threadloom as a Strands ``SessionRepository`` (``pip install 'threadloom[strands]'``).

>>> repository = ThreadloomSessionRepository(manager)  # SessionManager or ThreadloomClient
>>> agent = Agent(session_manager=RepositorySessionManager(session_id="user-42", session_repository=repository))

Each agent's conversation is its own Threadloom session (key ``strands:<session>/<agent>``),
one message per Strands message with the message id as Threadloom id, so the history is
linear, searchable and compactable. The Strands records (the session, each agent's state,
multi-agent state) are kept as data messages of a second session (key ``strands:<session>``).
``list_messages`` reads with compaction overlays applied: a compacted range comes back as one
assistant text message carrying the summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar

from threadloom.extras import require_extra

require_extra("the Strands session repository", "strands")  # one line naming the extra

from strands.session.session_repository import SessionRepository  # noqa: E402
from strands.types.exceptions import SessionException  # noqa: E402
from strands.types.session import Session, SessionAgent, SessionMessage, encode_bytes_values  # noqa: E402

from threadloom.compaction.markers import COMPACTION_PREFIX  # noqa: E402
from threadloom.errors import NotFoundError  # noqa: E402
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
    from collections.abc import Callable

    from strands.multiagent import MultiAgentBase

    from threadloom.integrations.backend import ThreadloomBackend
    from threadloom.records import Message

SOURCE: Final = "strands"
_Answer = TypeVar("_Answer")
SESSION_RECORD: Final = "session"


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The readable projection of a Strands message's content blocks."""
    parts: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        if "text" in block:
            parts.append(text_part(str(block["text"])))
        elif "toolUse" in block:
            use = block["toolUse"]
            parts.append(tool_call_part(str(use.get("toolUseId")), str(use.get("name")), use.get("input")))
        elif "toolResult" in block:
            result = block["toolResult"]
            texts = [item["text"] for item in result.get("content") or [] if isinstance(item.get("text"), str)]
            parts.append(
                tool_result_part(
                    str(result.get("toolUseId")), "\n".join(texts) or encode_bytes_values(result.get("content"))
                )
            )
        elif "reasoningContent" in block:
            reasoning = block["reasoningContent"].get("reasoningText") or {}
            parts.append(reasoning_part(str(reasoning.get("text", ""))))
        else:
            parts.append(marker_part(SOURCE, next(iter(block), "content")))
    return parts


def record_message(record_id: str, record: dict[str, Any]) -> Message:
    return to_message(SOURCE, "system", [{"type": f"data-{SOURCE}-record", "data": record}], record, record_id)


class ThreadloomSessionRepository(SessionRepository):
    """Strands sessions, agents, messages and multi-agent state in Threadloom."""

    def __init__(self, manager: ThreadloomBackend, *, key_prefix: str = "strands:") -> None:
        self.manager = manager
        self.key_prefix = key_prefix
        self._ids: dict[str, str] = {}

    def _session_id(self, key: str) -> str:
        """The Threadloom session for ``key`` (opened once per repository)."""
        cached = self._ids.get(key)
        if cached is None:
            cached = self._ids[key] = self.manager.open_session(self.key_prefix + key, source=SOURCE).id
        return cached

    def _on(self, key: str, action: Callable[[str], _Answer]) -> _Answer:
        """``action`` on the session of ``key``, opened again once if it was deleted since it was opened.

        A repository lives as long as its process, and retention (or an operator) may delete an idle
        conversation meanwhile. A keyed session keeps its id, so opening the key again gives the
        same id back, and the framework finds the conversation empty, as if it were new.
        """
        try:
            return action(self._session_id(key))
        except NotFoundError:
            self._ids.pop(key, None)
            return action(self._session_id(key))

    def _on_conversation(self, session_id: str, agent_id: str, action: Callable[[str], _Answer]) -> _Answer:
        return self._on(f"{session_id}/{agent_id}", action)

    def _read_record(self, session_id: str, record_id: str) -> dict[str, Any] | None:
        message = self._on(session_id, lambda records: self.manager.get_session(records).get_message(record_id))
        record = stored_record(message, SOURCE) if message is not None else None
        return record if isinstance(record, dict) else None

    def _write_record(self, session_id: str, record_id: str, record: dict[str, Any]) -> None:
        self._on(session_id, lambda records: self.manager.upsert(records, record_message(record_id, record)))

    # ----------------------------------------------------------------- session

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        if self._read_record(session.session_id, SESSION_RECORD) is not None:
            raise SessionException(f"Session {session.session_id} already exists")
        self._write_record(session.session_id, SESSION_RECORD, session.to_dict())
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        record = self._read_record(session_id, SESSION_RECORD)
        return Session.from_dict(record) if record is not None else None

    # ------------------------------------------------------------------ agents

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        self._write_record(session_id, f"agent.{session_agent.agent_id}", session_agent.to_dict())

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        record = self._read_record(session_id, f"agent.{agent_id}")
        return SessionAgent.from_dict(record) if record is not None else None

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        previous = self.read_agent(session_id, session_agent.agent_id)
        if previous is None:
            raise SessionException(f"Agent {session_agent.agent_id} in session {session_id} does not exist")
        session_agent.created_at = previous.created_at
        self._write_record(session_id, f"agent.{session_agent.agent_id}", session_agent.to_dict())

    # ---------------------------------------------------------------- messages

    def create_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        message = self._to_message(session_message)
        self._on_conversation(session_id, agent_id, lambda sid: self.manager.append_all(sid, [message]))

    def read_message(self, session_id: str, agent_id: str, message_id: int, **kwargs: Any) -> SessionMessage | None:
        stored = self._on_conversation(
            session_id,
            agent_id,
            lambda sid: self.manager.get_session(sid).get_message(str(message_id)),
        )
        record = stored_record(stored, SOURCE) if stored is not None else None
        return SessionMessage.from_dict(record) if isinstance(record, dict) else None

    def update_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        """Replace a message in place (Strands does this to redact content flagged by a guardrail)."""
        previous = self.read_message(session_id, agent_id, session_message.message_id)
        if previous is None:
            raise SessionException(f"Message {session_message.message_id} does not exist")
        session_message.created_at = previous.created_at
        message = self._to_message(session_message)
        self._on_conversation(session_id, agent_id, lambda sid: self.manager.upsert(sid, message))

    def list_messages(
        self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0, **kwargs: Any
    ) -> list[SessionMessage]:
        def read(conversation: str) -> list[SessionMessage]:
            history = self.manager.get_history(conversation)
            window = history[offset : offset + limit] if limit is not None else history[offset:]
            if any(str(message.get("id", "")).startswith(COMPACTION_PREFIX) for message in window):
                compactions = self.manager.get_compactions(conversation)
                ends = {f"{COMPACTION_PREFIX}{c.id}": c.to_message_id for c in compactions}
            else:
                ends = {}
            return [self._from_message(message, ends) for message in window]

        return self._on_conversation(session_id, agent_id, read)

    @staticmethod
    def _to_message(session_message: SessionMessage) -> Message:
        visible = session_message.to_message()  # the redacted version when there is one
        return to_message(
            SOURCE,
            str(visible.get("role", "user")),
            _parts(dict(visible)),
            session_message.to_dict(),
            str(session_message.message_id),
        )

    @staticmethod
    def _from_message(message: Message, ends: dict[str, str]) -> SessionMessage:
        record = stored_record(message, SOURCE)
        if isinstance(record, dict):
            return SessionMessage.from_dict(record)
        # A compaction overlay: numbered as the last message it replaces, so the next index stays free.
        end = ends.get(str(message.get("id")), "")
        role: Literal["user", "assistant"] = "user" if message.get("role") == "user" else "assistant"
        return SessionMessage(
            message={"role": role, "content": [{"text": plain_text(message)}]},
            message_id=int(end) if end.isdigit() else -1,
        )

    # ------------------------------------------------------------ multi-agent

    def create_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        self._write_record(session_id, f"multi_agent.{multi_agent.id}", multi_agent.serialize_state())

    def read_multi_agent(self, session_id: str, multi_agent_id: str, **kwargs: Any) -> dict[str, Any] | None:
        return self._read_record(session_id, f"multi_agent.{multi_agent_id}")

    def update_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        if self.read_multi_agent(session_id, multi_agent.id) is None:
            raise SessionException(f"MultiAgent state {multi_agent.id} in session {session_id} does not exist")
        self._write_record(session_id, f"multi_agent.{multi_agent.id}", multi_agent.serialize_state())


__all__ = ["SOURCE", "ThreadloomSessionRepository"]
