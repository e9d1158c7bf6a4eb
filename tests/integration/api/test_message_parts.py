"""Parts are validated against the message format (AI SDK ``UIMessage``) on both backends (issue 30).

A text part with no ``text`` (``{"type": "text"}``) used to be stored (201) and shown as an empty
card. Through the real handler on SQLite and PostgreSQL, text and reasoning parts without a
string ``text`` are a clean 400 naming the part, and nothing is stored; every other part type
is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore, ValidationError
from threadloom.api.runtime import Runtime, set_runtime

from tests.support.api import SESSION, TENANT, call, seeded_runtime


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    if request.param == "postgres":
        store: Any = request.getfixturevalue("postgres_store_factory")()
    else:
        store = SqliteStore(str(tmp_path / "api.db"))
    runtime, _ = seeded_runtime(tmp_path, store=store)
    yield runtime
    set_runtime(None)


def history_ids() -> list[str]:
    status, body = call("GET", f"/sessions/{SESSION}/history")
    assert status == 200, body
    return [message["id"] for message in body["messages"]]


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"type": "text"}, "Part 1 of message 'bad' is a 'text' part and needs a string 'text'"),
        ({"type": "text", "text": None}, "is a 'text' part and needs a string 'text'"),
        ({"type": "text", "text": 42}, "is a 'text' part and needs a string 'text'"),
        ({"type": "text", "text": ["a"]}, "is a 'text' part and needs a string 'text'"),
        ({"type": "reasoning"}, "is a 'reasoning' part and needs a string 'text'"),
    ],
)
def test_a_text_part_without_text_is_a_clean_400_and_nothing_is_stored(
    runtime: Runtime, part: dict[str, Any], says: str
) -> None:
    before = history_ids()
    message = {"id": "bad", "role": "user", "parts": [{"type": "text", "text": "fine"}, part]}
    status, body = call("POST", f"/sessions/{SESSION}/messages", {"message": message})
    assert status == 400, body
    assert body["error"]["code"] == "bad_request"
    assert says in body["error"]["message"]
    assert history_ids() == before
    # The library refuses it the same way.
    with pytest.raises(ValidationError, match="needs a string 'text'"):
        runtime.manager(TENANT).get_session(SESSION).append_message(message)
    assert history_ids() == before


def test_other_parts_and_empty_text_are_still_accepted(runtime: Runtime) -> None:
    message = {
        "id": "ok",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": ""},
            {"type": "reasoning", "text": "thinking"},
            {"type": "data-weather", "data": {"city": "Lisbon"}},
            {"type": "file", "mediaType": "image/png", "url": "https://example.com/a.png"},
        ],
    }
    status, body = call("POST", f"/sessions/{SESSION}/messages", {"message": message})
    assert status == 201, body
    assert history_ids()[-1] == "ok"
