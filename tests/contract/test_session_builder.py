"""A Session's wiring is fixed at its first use, and a change after it is refused, not silently half-made.

``for_session`` after a first append used to rename the object (its events, its compaction labels,
the provenance of its tools' block changes) while its storage stayed wired to the first id: two
conversations written into one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import Session, ValidationError
from threadloom.records import HistoryPolicy

from tests.support.messages import text_message

#: Each builder method that wires storage or blocks, with arguments it would accept before first use.
WIRING: dict[str, Callable[[Session], Any]] = {
    "for_session": lambda session: session.for_session("other"),
    "in_namespace": lambda session: session.in_namespace("other-tenant"),
    "for_subject": lambda session: session.for_subject("alice"),
    "with_context": lambda session: session.with_context("notes", description="More", max_tokens=100),
    "with_cached_prompt": lambda session: session.with_cached_prompt(),
    "with_block_history": lambda session: session.with_block_history(HistoryPolicy(keep_versions=3)),
}


@pytest.mark.parametrize("method", list(WIRING))
def test_wiring_after_first_use_is_refused_and_the_session_keeps_its_own(store: Any, method: str) -> None:
    # Given a session used once
    session = Session.create(store).for_session("first").with_context("memory", description="Facts", max_tokens=500)
    session.append_message(text_message("m1", "hello"))
    events: list[dict[str, Any]] = []
    session.on_event(events.append)  # listeners may still be added: they wire nothing
    # When its wiring is changed afterwards
    with pytest.raises(ValidationError, match=rf"{method}\(\) must come before the session's first use.*'first'"):
        WIRING[method](session)
    # Then it is still the same conversation, in name and in storage
    assert session.session_id == "first" and session.namespace == "" and session.subject_id is None
    session.append_message(text_message("m2", "again"))
    assert [message["id"] for message in session.get_history()] == ["m1", "m2"]
    assert [block.label for block in session.get_context_blocks()] == ["memory"]
    assert {event["type"] for event in events} == {"session_status"}  # the listener added late heard the append
    # And another conversation is another Session, empty until written
    other = Session.create(store).for_session("other")
    assert other.get_history() == []
    other.append_message(text_message("o1", "elsewhere"))
    assert [message["id"] for message in other.get_history()] == ["o1"]
    assert [message["id"] for message in session.get_history()] == ["m1", "m2"]


def test_the_builder_chains_before_first_use(store: Any) -> None:
    # Given every wiring method called before the first use, in any order
    session = Session.create(store)
    for wire in reversed(list(WIRING.values())):
        assert wire(session) is session
    # Then the last word of each holds when the session is first used
    session.append_message(text_message("m1", "hello"))
    assert session.session_id == "other" and session.namespace == "other-tenant" and session.subject_id == "alice"
    assert [block.label for block in session.get_context_blocks()] == ["notes"]
    assert [message["id"] for message in Session.create(store).for_session("other").get_history()] == ["m1"]
