"""threadloom_append_message (one message, 0013) answers and writes exactly as threadloom_append_within (0012).

The library sends every single-message append to the scalar function and chains to the
set-returning one. The same script of appends, retries and refusals runs through each
function on its own session; the answers, the SQLSTATEs and the stored rows must match.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pg8000.exceptions import DatabaseError

pytestmark = pytest.mark.postgres

WITHIN = (
    "SELECT out_parent_id, out_inserted, out_path_tokens FROM threadloom_append_within("
    ":sid, ARRAY[CAST(:id AS text)], ARRAY[CAST(:role AS text)], ARRAY[CAST(:content AS text)],"
    " ARRAY[CAST(:tokens AS bigint)], ARRAY[CAST(:vector AS text)], :omitted, :parent, :expected, :at, :lock)"
)
MESSAGE = (
    "SELECT threadloom_append_message(:sid, :id, :role, :content, CAST(:tokens AS bigint), :vector,"
    " :omitted, :parent, :expected, :at, :lock)"
)
STORED = (
    "SELECT id, seq, parent_id, role, content, depth, tokens, path_tokens, search_vector::text, jump"
    " FROM threadloom_messages WHERE session_id = :sid ORDER BY seq"
)
AT = datetime(2026, 12, 3, tzinfo=UTC)

# (id, parent: "omitted" | None | id, expected leaf, tokens)
SCRIPT: list[tuple[str, str | None, str | None, int]] = [
    ("m1", "omitted", None, 5),
    ("m2", "omitted", None, 7),
    ("m2", "omitted", None, 99),  # a retry: the stored answer, nothing written
    ("m3", "m1", None, 3),  # a branch off m1
    ("m4", "omitted", "m3", 4),  # the expected leaf holds
    ("m5", "omitted", "m1", 4),  # the leaf moved: TL409
    ("m6", "nope", None, 4),  # the parent is missing: TL404
    ("r1", None, None, 2),  # a second root
    ("m1", None, None, 1),  # a retry of the first message, with a different parent
    ("m7", "omitted", None, 0),
    ("x:y:z", None, None, 3),  # an id with the answer's separator in it
    ("m8", "x:y:z", None, 1),
    ("m8", "x:y:z", None, 1),
]


@pytest.fixture
def connection(admin: Any) -> Any:
    """A plain pg8000 connection to the migrated worker database."""
    return admin


def run_script(connection: Any, sql: str, session_id: str) -> list[Any]:
    answers: list[Any] = []
    for message_id, parent, expected, tokens in SCRIPT:
        params = {
            "sid": session_id,
            "id": message_id,
            "role": "user",
            "content": f'{{"id":"{message_id}"}}',
            "tokens": tokens,
            "vector": f"'{message_id}':1",
            "omitted": parent == "omitted",
            "parent": None if parent == "omitted" else parent,
            "expected": expected,
            "at": AT,
            "lock": "2000",
        }
        try:
            rows = connection.run(sql, **params)
        except DatabaseError as error:
            fields = error.args[0]
            answers.append(("error", fields["C"], fields.get("D")))
            continue
        if sql is MESSAGE:
            answer = rows[0][0]
            path, has_parent, parent_id = answer[1:].partition(":")
            answers.append((parent_id if has_parent else None, answer[0] == "t", int(path)))
        else:
            [(parent_id, inserted, path)] = rows
            answers.append((parent_id, inserted, int(path)))
    return answers


def test_the_one_message_function_answers_and_stores_what_the_chain_function_does(connection: Any) -> None:
    within = run_script(connection, WITHIN, "within")
    message = run_script(connection, MESSAGE, "message")
    assert message == within
    # the script reached every branch: inserts, retries and both refusals
    assert ("m1", True, 12) in within and ("m1", False, 12) in within
    assert [answer[1] for answer in within if answer[0] == "error"] == ["TL409", "TL404"]
    assert connection.run(STORED, sid="message") == connection.run(STORED, sid="within")
    heads = "SELECT leaf_id, next_seq FROM threadloom_session_heads WHERE session_id = :sid"
    assert connection.run(heads, sid="message") == connection.run(heads, sid="within") == [["m8", 9]]
    assert within[-2:] == [("x:y:z", True, 4), ("x:y:z", False, 4)]


def test_an_id_that_ends_a_compaction_overlay_is_refused_by_both(connection: Any) -> None:
    for sql, session_id in ((WITHIN, "within-overlay"), (MESSAGE, "message-overlay")):
        connection.run(MESSAGE, **_params(session_id, "m1"))
        connection.run(MESSAGE, **_params(session_id, "m2"))
        connection.run(
            "INSERT INTO threadloom_compactions (session_id, id, seq, summary, from_message_id, to_message_id,"
            " created_at) VALUES (:sid, 'c1', 1, 'summary', 'm1', 'm2', :at)",
            sid=session_id,
            at=AT,
        )
        with pytest.raises(DatabaseError) as refused:
            connection.run(sql, **_params(session_id, "m2"))
        assert refused.value.args[0]["C"] == "TL001"


def _params(session_id: str, message_id: str) -> dict[str, Any]:
    return {
        "sid": session_id,
        "id": message_id,
        "role": "user",
        "content": "{}",
        "tokens": 1,
        "vector": None,
        "omitted": True,
        "parent": None,
        "expected": None,
        "at": AT,
        "lock": None,
    }
