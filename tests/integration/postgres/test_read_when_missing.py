"""threadloom_read_when_missing (0014, 0015): a stored prompt alone, or its owner's block reads in order, in one call"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import characters, lists, none, one_of, text
from threadloom.storage.postgres.sql import PostgresSql, text_array

pytestmark = pytest.mark.postgres

CALL = PostgresSql.read_when_missing_call


OWNER = {"namespace": "tenant", "sid": "s1"}


def call(admin: Any, key: str, reads: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    composed = PostgresSql.read_when_missing((PostgresSql.get_block, {**OWNER, "key": key}), reads)
    assert composed is not None
    sql, params, _ = composed
    return [row[0] for row in admin.run(sql, **params)]


def test_a_stored_prompt_is_the_whole_answer_and_a_missing_one_brings_every_read_in_order(admin: Any) -> None:
    admin.run(
        "INSERT INTO threadloom_context_blocks (namespace, session_id, key, content, updated_at) VALUES"
        " ('tenant', 's1', 'prompt', 'FROZEN', now()),"
        " ('tenant', 's1', 'memory', 'facts \"quoted\" {braced}, \\ and NULL', now()),"
        " ('other', 's1', 'other prompt', 'OTHER', now()), ('tenant', 's2', 'memory', 'NOT MINE', now())"
    )
    admin.run(
        "INSERT INTO threadloom_sessions (id, namespace, name, created_at, updated_at, activity_seq)"
        " VALUES ('s1', 'tenant', 'one', now(), now(), 1), ('s2', 'tenant', 'two', now(), now(), 2)"
    )
    reads = [
        (PostgresSql.count_sessions, {"namespace": "tenant"}),
        (PostgresSql.get_block, {**OWNER, "key": "memory"}),
        (PostgresSql.get_block, {**OWNER, "key": "absent"}),
        (PostgresSql.count_entries, {"scope": "tenant", "label": "knowledge"}),
    ]
    assert call(admin, "prompt", reads) == ["FROZEN"]
    assert call(admin, "no prompt", reads) == [None, "2", 'facts "quoted" {braced}, \\ and NULL', None, "0"]
    assert call(admin, "no prompt", []) == [None]
    # another owner's prompt is not this owner's: its blocks are read
    assert call(admin, "other prompt", reads)[0] is None
    # a block read of another owner is not composed (the function reads the prompt's owner only)
    elsewhere = [(PostgresSql.get_block, {"namespace": "tenant", "sid": "s2", "key": "memory"})]
    assert PostgresSql.read_when_missing((PostgresSql.get_block, {**OWNER, "key": "p"}), elsewhere) is None
    # a read the function does not know is not composed
    assert PostgresSql.read_when_missing((PostgresSql.get_block, {**OWNER, "key": "p"}), [("SELECT 1", {})]) is None
    assert PostgresSql.read_when_missing((PostgresSql.count_sessions, {"namespace": "t"}), []) is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lists(one_of(none(), text(characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))), max_size=6))
def test_text_array_literals_read_back_as_the_values(admin: Any, values: list[str | None]) -> None:
    [[read]] = admin.run("SELECT CAST(:values AS text[])", values=text_array(values))
    assert read == values
