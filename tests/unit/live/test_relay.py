"""The relay message between the VPC functions and the publisher function: round trip, refusals, groups, chunks."""

from __future__ import annotations

import json

import pytest
from threadloom.errors import ValidationError
from threadloom.live.aws.relay import (
    MAX_CONNECTIONS_PER_MESSAGE,
    RelayMessage,
    deduplication_id,
    message_group_id,
    relay_messages,
)
from threadloom.live.events import SessionStatus, encode, session_changed, session_status

EVENT = session_status("s1", SessionStatus("compacting", 4321, 100_000), compacted={"tokensBefore": 9000})


def test_a_message_survives_the_queue_unchanged() -> None:
    message = RelayMessage("tenant-a", "s1", ("c1", "c2"), EVENT)
    assert RelayMessage.from_json(message.to_json()) == message
    assert message.data() == encode(EVENT).encode("utf-8")  # exactly what the local server sends


def test_ids_with_any_characters_round_trip() -> None:
    message = RelayMessage("tenant#ä", "s 1/%", ("L0SM9cOFvHcCIhw=",), session_changed("s 1/%", "append", "m1"))
    assert RelayMessage.from_json(message.to_json()) == message


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("not json", "not JSON"),
        ("[]", "JSON object"),
        ('{"v": 2}', "version"),
        ('{"v": 1, "namespace": "", "sessionId": "s1"}', "namespace"),
        ('{"v": 1, "namespace": "t", "sessionId": "s1", "connections": "c1"}', "connections"),
        ('{"v": 1, "namespace": "t", "sessionId": "s1", "connections": [""]}', "connections"),
        (
            '{"v": 1, "namespace": "t", "sessionId": "s1", "connections": ["c1"], "event": {"type": "subscribed"}}',
            "event",
        ),
        (
            '{"v": 1, "namespace": "t", "sessionId": "s1", "connections": ["c1"],'
            ' "event": {"type": "session_changed", "sessionId": "s2", "change": "append"}}',
            "another session",
        ),
    ],
)
def test_malformed_bodies_are_refused_saying_why(body: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        RelayMessage.from_json(body)


def test_one_group_per_session_whatever_the_ids() -> None:
    groups = {
        message_group_id("tenant-a", "s1"),
        message_group_id("tenant-b", "s1"),
        message_group_id("tenant-a", "s2"),
        message_group_id("tenant-a:s", "1"),
        message_group_id("tenant-a", ":s1"),
    }
    assert len(groups) == 5
    assert message_group_id("tenant-a", "s1") == message_group_id("tenant-a", "s1")
    long_group = message_group_id("t" * 300, "s" * 300)
    assert len(long_group) <= 128 and all("!" <= char <= "~" for char in long_group)


def test_every_message_gets_its_own_deduplication_id() -> None:
    assert len({deduplication_id() for _ in range(100)}) == 100


def test_many_subscribers_are_split_over_messages_and_none_means_no_message() -> None:
    subscribers = [f"c{index}" for index in range(MAX_CONNECTIONS_PER_MESSAGE + 1)]
    messages = relay_messages("tenant-a", "s1", subscribers, EVENT)
    assert [len(message.connection_ids) for message in messages] == [MAX_CONNECTIONS_PER_MESSAGE, 1]
    assert [c for message in messages for c in message.connection_ids] == subscribers
    assert all(len(message.to_json().encode()) < 256 * 1024 for message in messages)  # SQS's message limit
    assert relay_messages("tenant-a", "s1", [], EVENT) == []
    assert json.loads(messages[1].to_json())["event"] == EVENT
