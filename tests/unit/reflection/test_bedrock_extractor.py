"""The Bedrock extractor through botocore's Stubber, which validates every request against the service model."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import Stubber
from threadloom.errors import CompactionError
from threadloom.reflection.bedrock import SYSTEM_PROMPT, BedrockFactExtractor, render_statements
from threadloom.reflection.facts import UserStatement

if TYPE_CHECKING:
    from collections.abc import Iterator

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
STATEMENTS = [
    UserStatement("u1", "Hi! My name is Ada, and please keep answers short."),
    UserStatement("u2", 'I like green tea. Say "ok" if you got it'),
]


@pytest.fixture
def client() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1")


@pytest.fixture
def stubber(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def answer(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        "metrics": {"latencyMs": 12},
    }


def expected_request() -> dict[str, Any]:
    return {
        "modelId": MODEL,
        "messages": [{"role": "user", "content": [{"text": render_statements(STATEMENTS)}]}],
        "inferenceConfig": {"maxTokens": 1024, "temperature": 0.0},
        "system": [{"text": SYSTEM_PROMPT}],
    }


def test_the_request_carries_each_user_message_with_its_id() -> None:
    lines = render_statements(STATEMENTS).splitlines()
    assert lines[0] == "Messages from the user, one JSON object per line:"
    assert [json.loads(line) for line in lines[1:]] == [
        {"message_id": "u1", "text": "Hi! My name is Ada, and please keep answers short."},
        {"message_id": "u2", "text": 'I like green tea. Say "ok" if you got it'},
    ]


def test_facts_the_model_lists_are_kept_when_their_message_states_them(client: Any, stubber: Stubber) -> None:
    facts = [
        {"key": "Name", "value": "Ada", "message_id": "u1"},
        {"key": "Prefers", "value": "keep answers short", "message_id": "u1"},
        {"key": "Likes", "value": "green tea", "message_id": "u2"},
    ]
    stubber.add_response("converse", answer("Here they are:\n" + json.dumps(facts)), expected_request())
    found = BedrockFactExtractor(MODEL, client=client)(STATEMENTS)
    assert [(fact.line, fact.message_id) for fact in found] == [
        ("Name: Ada", "u1"),
        ("Prefers: keep answers short", "u1"),
        ("Likes: green tea", "u2"),
    ]


def test_invented_values_and_unknown_messages_are_dropped(client: Any, stubber: Stubber) -> None:
    facts = [
        {"key": "Name", "value": "Ada Lovelace", "message_id": "u1"},  # not what u1 says
        {"key": "Likes", "value": "green tea", "message_id": "u9"},  # no such message
        {"key": "Likes", "value": "green tea", "message_id": "u1"},  # not in that message
        {"key": "Name", "value": 42, "message_id": "u1"},  # not text
        "Name: Ada",  # not an object
    ]
    stubber.add_response("converse", answer(json.dumps(facts)), expected_request())
    assert BedrockFactExtractor(MODEL, client=client)(STATEMENTS) == []


def test_an_answer_that_is_no_json_array_fails_so_the_queue_retries(client: Any, stubber: Stubber) -> None:
    stubber.add_response("converse", answer("The user is called Ada."), expected_request())
    with pytest.raises(CompactionError, match="did not answer with a JSON array"):
        BedrockFactExtractor(MODEL, client=client)(STATEMENTS)


def test_a_service_error_fails_with_its_code(client: Any, stubber: Stubber) -> None:
    stubber.add_client_error("converse", "AccessDeniedException", "no access", 403, expected_params=expected_request())
    with pytest.raises(CompactionError, match="AccessDeniedException"):
        BedrockFactExtractor(MODEL, client=client)(STATEMENTS)


def test_nothing_to_read_makes_no_call(client: Any, stubber: Stubber) -> None:
    assert BedrockFactExtractor(MODEL, client=client)([]) == []
