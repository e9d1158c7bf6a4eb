"""``ThreadloomSessionRepository`` under a Strands ``Agent`` with ``RepositorySessionManager``, on every backend."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType
from threadloom.core.manager import SessionManager
from threadloom.integrations.strands import ThreadloomSessionRepository

from examples.strands_chat import build_agent
from tests.integrations import driver
from tests.integrations.conftest import Target

MESSAGES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [{"text": "Look at this"}, {"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00\xff"}}}],
    },
    {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"reasoningText": {"text": "A chart.", "signature": "sig"}}},
            {"reasoningContent": {"redactedContent": b"\x00secret"}},
            {"toolUse": {"toolUseId": "t1", "name": "describe", "input": {"detail": ["axes", 2, None, True]}}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "t1",
                    "status": "success",
                    "content": [{"text": "A bar chart"}, {"json": {"bars": 3}}],
                }
            }
        ],
    },
    {"role": "assistant", "content": [{"text": "It is a bar chart with 3 bars."}, {"cachePoint": {"type": "default"}}]},
]


class FakeMultiAgent:
    """Just what the repository reads from a multi-agent orchestrator: an id and its state."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.id = "swarm-1"
        self.state = state

    def serialize_state(self) -> dict[str, Any]:
        return self.state


def test_records_round_trip_field_for_field(backend: Any, unique_key: str) -> None:
    repository = ThreadloomSessionRepository(backend)
    assert repository.read_session(unique_key) is None
    session = Session(session_id=unique_key, session_type=SessionType.AGENT)
    assert repository.create_session(session) is session
    assert repository.read_session(unique_key) == session
    with pytest.raises(SessionException):
        repository.create_session(session)

    agent = SessionAgent(agent_id="default", state={"plan": ["a", 1]}, conversation_manager_state={"removed": 0})
    repository.create_agent(unique_key, agent)
    assert repository.read_agent(unique_key, "default") == agent and repository.read_agent(unique_key, "x") is None
    changed = SessionAgent(agent_id="default", state={"plan": []}, conversation_manager_state={"removed": 2})
    repository.update_agent(unique_key, changed)
    assert repository.read_agent(unique_key, "default") == changed and changed.created_at == agent.created_at
    with pytest.raises(SessionException):
        repository.update_agent(unique_key, SessionAgent(agent_id="ghost", state={}, conversation_manager_state={}))

    originals = [SessionMessage.from_message(copy.deepcopy(m), index) for index, m in enumerate(MESSAGES)]
    for message in originals:
        repository.create_message(unique_key, "default", message)
    assert repository.list_messages(unique_key, "default") == originals  # bytes included
    assert repository.list_messages(unique_key, "default", limit=2, offset=1) == originals[1:3]
    assert repository.read_message(unique_key, "default", 2) == originals[2]
    assert repository.read_message(unique_key, "default", 9) is None

    redacted = copy.deepcopy(originals[0])
    redacted.redact_message = {"role": "user", "content": [{"text": "[redacted]"}]}
    repository.update_message(unique_key, "default", redacted)
    assert repository.read_message(unique_key, "default", 0) == redacted
    assert repository.list_messages(unique_key, "default")[0].to_message() == redacted.redact_message

    swarm = FakeMultiAgent({"status": "running", "node_history": ["a"]})
    assert repository.read_multi_agent(unique_key, "swarm-1") is None
    repository.create_multi_agent(unique_key, swarm)  # type: ignore[arg-type]
    swarm.state = {"status": "completed", "node_history": ["a", "b"]}
    repository.update_multi_agent(unique_key, swarm)  # type: ignore[arg-type]
    assert repository.read_multi_agent(unique_key, "swarm-1") == swarm.state


def test_the_conversation_is_a_readable_threadloom_session(backend: Any, unique_key: str) -> None:
    repository = ThreadloomSessionRepository(backend)
    repository.create_session(Session(session_id=unique_key, session_type=SessionType.AGENT))
    for index, message in enumerate(MESSAGES):
        repository.create_message(unique_key, "default", SessionMessage.from_message(copy.deepcopy(message), index))
    conversation = backend.open_session(f"strands:{unique_key}/default")
    history = backend.get_history(conversation.id)
    assert [m["id"] for m in history] == ["0", "1", "2", "3"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    call, result = history[1]["parts"][2], history[2]["parts"][0]
    assert (call["type"], call["toolCallId"], call["input"]) == (
        "tool-describe",
        "t1",
        {"detail": ["axes", 2, None, True]},
    )
    assert (result["toolCallId"], result["output"]) == ("t1", "A bar chart")
    assert history[3]["parts"][0] == {"type": "text", "text": "It is a bar chart with 3 bars."}


@pytest.mark.parametrize("target", ["sqlite", "postgres"], indirect=True)
def test_a_compaction_overlay_reads_as_one_message_numbered_after_what_it_replaces(
    backend: SessionManager, unique_key: str
) -> None:
    repository = ThreadloomSessionRepository(backend)
    for index in range(6):
        text = {"role": "user" if index % 2 == 0 else "assistant", "content": [{"text": f"turn {index}"}]}
        repository.create_message(unique_key, "default", SessionMessage.from_message(text, index))
    conversation = backend.open_session(f"strands:{unique_key}/default").id
    backend.add_compaction(conversation, "Turns 1 to 3 happened.", "1", "3")
    listed = repository.list_messages(unique_key, "default")
    assert [m.message_id for m in listed] == [0, 3, 4, 5]
    assert listed[1].message == {"role": "assistant", "content": [{"text": "Turns 1 to 3 happened."}]}


def test_agent_turns_with_tool_calls_resume_in_a_new_process(target: Target, unique_key: str) -> None:
    first = driver.run(
        "strands", target.spec, unique_key, ["Remember that the launch is on Friday", "Remember that Ana leads QA"]
    )
    assert first["answers"] == ["Noted. I now remember 1 thing(s).", "Noted. I now remember 2 thing(s)."]
    assert sum("toolUse" in block for m in first["final"] for block in m["content"]) == 2

    second = driver.in_new_process("strands", target.spec, unique_key, ["What do you remember?"])
    assert second["restored"] == first["final"]
    assert second["answers"] == ["I remember: the launch is on Friday; Ana leads QA."]
    assert len(second["final"]) == len(first["final"]) + 2


def test_agent_state_survives_a_restart(backend: Any, unique_key: str) -> None:
    agent = build_agent(ThreadloomSessionRepository(backend), unique_key)
    agent.state.set("favourite", {"colour": "teal"})
    agent("What do you remember?")
    again = build_agent(ThreadloomSessionRepository(backend), unique_key)
    assert again.state.get("favourite") == {"colour": "teal"} and len(again.messages) == 2


def test_a_repository_that_outlives_its_conversation_starts_it_afresh(backend: Any, unique_key: str) -> None:
    # Given a repository kept for the process's life, whose conversation retention then deletes
    repository = ThreadloomSessionRepository(backend)
    agent = build_agent(repository, unique_key)
    agent.state.set("favourite", {"colour": "teal"})
    agent("Remember that the launch is on Friday")
    keys = [f"strands:{unique_key}", f"strands:{unique_key}/{agent.agent_id}"]
    for key in keys:
        assert backend.delete(backend.open_session(key).id)  # a keyed session: the id the repository holds
    # When the same repository serves that conversation again, it finds it new, not an error
    again = build_agent(repository, unique_key)
    assert again.messages == [] and again.state.get("favourite") is None
    assert again("What do you remember?") is not None
    # and what it writes from then on is stored under the same keys
    restored = build_agent(ThreadloomSessionRepository(backend), unique_key)
    assert restored.messages == again.messages and len(restored.messages) == 2
