"""The frozen prompt is the one write that commits without waiting for the WAL flush, and only on its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from threadloom import Session

from tests.support.messages import text_message

pytestmark = pytest.mark.postgres

# A trigger records the commit setting each write to the blocks table runs under (the setting is
# read at commit, and nothing else changes it within the transaction).
RECORD_SETTING = """
CREATE TABLE commit_settings (key TEXT, setting TEXT, lock_timeout TEXT);
CREATE FUNCTION record_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_settings
        VALUES (NEW.key, current_setting('synchronous_commit'), current_setting('lock_timeout'));
    RETURN NEW;
END $$;
CREATE TRIGGER record_commit_setting AFTER INSERT OR UPDATE ON threadloom_context_blocks
    FOR EACH ROW EXECUTE FUNCTION record_commit_setting();
"""


def settings(store: Any) -> list[tuple[str, str]]:
    rows = store.database.query_once("SELECT key, setting FROM commit_settings ORDER BY key")
    return [(str(key), str(setting)) for key, setting in rows]


STOP_RECORDING = """
DROP TRIGGER IF EXISTS record_commit_setting ON threadloom_context_blocks;
DROP FUNCTION IF EXISTS record_commit_setting();
DROP TABLE IF EXISTS commit_settings;
"""


@pytest.fixture
def store(make_store: Callable[[], Any]) -> Iterator[Any]:
    """A store whose blocks table records the commit setting of each write (removed afterwards)."""
    store = make_store()
    store.migrate()
    with store.database.write() as tx:
        tx.execute(STOP_RECORDING + RECORD_SETTING)  # no parameters: one simple-protocol message
    yield store
    with store.database.write() as tx:
        tx.execute(STOP_RECORDING)


def test_a_frozen_prompt_commits_without_the_flush_and_every_other_write_with_it(store: Any) -> None:
    memory = store.context_provider("memory-s", session_id="s")
    session = (
        Session.create(store).for_session("s").with_context("memory", description="Facts", provider=memory)
    ).with_cached_prompt()
    session.replace_context_block("memory", "The user likes tea.")  # a block: durable
    prompt = session.freeze_system_prompt()  # the frozen prompt: a cache
    session.append_message(text_message("m1"))
    assert "The user likes tea." in prompt
    assert settings(store) == [("_system_prompt_s", "off"), ("memory-s", "on")]
    # the prompt's insert keeps the store's lock timeout (one statement ahead of it sets both)
    assert store.database.query_once("SELECT lock_timeout FROM commit_settings WHERE key = '_system_prompt_s'") == [
        ["2s"]
    ]
    # and nothing of it stays on the connection
    assert store.database.query_once("SELECT current_setting('synchronous_commit')") == [["on"]]


def test_a_prompt_frozen_inside_an_open_transaction_takes_that_transactions_durability(store: Any) -> None:
    session = Session.create(store).for_session("s").with_cached_prompt()
    with store.database.write():
        session.freeze_system_prompt()
    assert settings(store) == [("_system_prompt_s", "on")]
