"""A compaction commits only if the messages it summarized are still as it read them (contract §4), on every backend.

The summary is computed outside any transaction, for seconds when a model writes it. A message edited
(a redaction) or deleted meanwhile would otherwise be overridden by a summary of the text as it was:
what the model reads next would bring back what the user took out. The fence holds a digest of each
summarized message and the commit checks them under the session's lock, which every edit takes too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import CompactResult, Session
from threadloom.compaction import create_compact_function
from threadloom.errors import CompactionError, ConflictError
from threadloom.limits import Limits

from tests.support.messages import text_message

WORDS = "word " * 30


def conversation(store: Any, summarize: Callable[[str], str]) -> Session:
    function = create_compact_function(summarize, protect_head=1, tail_token_budget=10, min_tail_messages=1)
    session = Session.create(store).for_session("s").on_compaction(function)
    session.append_messages([text_message(f"m{index}", f"note SECRET-{index} {WORDS}") for index in range(8)])
    return session


def texts(store: Any) -> dict[str, str]:
    return {m["id"]: m["parts"][0].get("text", "") for m in Session.create(store).for_session("s").get_history()}


@pytest.mark.parametrize("change", ["edit", "delete"])
def test_a_summarized_message_changed_meanwhile_stops_the_commit(
    store: Any, make_store: Callable[[], Any], change: str
) -> None:
    elsewhere = Session.create(make_store()).for_session("s")
    statuses: list[str] = []

    def summarize(prompt: str) -> str:
        if change == "edit":  # another request redacts a message while the summary is written
            elsewhere.update_message(text_message("m2", "REDACTED"))
        else:
            elsewhere.delete_messages(["m3"])
        return "SUMMARY OF " + " ".join(word for word in prompt.split() if word.startswith("SECRET"))

    session = conversation(store, summarize).on_event(
        lambda event: statuses.append(event["phase"]) if event.get("type") == "session_status" else None
    )
    with pytest.raises(ConflictError, match="was changed or removed since this compaction read it"):
        session.compact(request_key="k1")
    # Nothing was stored: the history reads as the other request left it, and its watchers saw the end
    assert session.get_compactions() == []
    history = texts(make_store())
    assert not any(text.startswith("SUMMARY") for text in history.values())
    if change == "edit":
        assert history["m2"] == "REDACTED"
    else:
        assert "m3" not in history and "m2" in history
    assert statuses[-2:] == ["compacting", "idle"]
    # Asked again, it summarizes what is there now
    assert session.compact(request_key="k2") is not None
    assert ("SECRET-2" if change == "edit" else "SECRET-3") not in session.get_compactions()[0].summary


def test_a_message_after_the_summarized_range_may_change(store: Any, make_store: Callable[[], Any]) -> None:
    """Control: the kept tail is not summarized, so an edit there does not stop the commit."""
    elsewhere = Session.create(make_store()).for_session("s")

    def summarize(prompt: str) -> str:
        elsewhere.update_message(text_message("m7", "edited in the kept tail"))
        return "SUMMARY"

    session = conversation(store, summarize)
    result = session.compact(request_key="k1")
    assert result is not None and result.to_message_id != "m7"
    assert texts(make_store())["m7"] == "edited in the kept tail"


def test_a_summary_over_the_limit_is_refused_and_nothing_is_stored(store: Any) -> None:
    big = "x" * 50_000
    session = (
        Session.create(store)
        .for_session("s")
        .with_limits(Limits(max_summary_bytes=1024))
        .on_compaction(
            lambda msgs, ctx: CompactResult(from_message_id=msgs[1]["id"], to_message_id=msgs[-2]["id"], summary=big)
        )
    )
    session.append_messages([text_message(f"m{index}", "w " * 20) for index in range(6)])
    with pytest.raises(CompactionError, match="compaction summary"):
        session.compact(request_key="k")
    assert session.get_compactions() == []
