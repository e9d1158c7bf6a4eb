"""A manager's read of one message or of the latest leaf checks the tenant's session in the same statement.

``GET /sessions/{id}/messages/{messageId}`` and ``GET /sessions/{id}/leaf`` read the session's registry row,
then the message: two round trips on PostgreSQL. ``SessionManager.get_message`` and ``get_latest_leaf`` now
send one statement that answers no row when the namespace does not hold the session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from threadloom import SessionManager
from threadloom.errors import NotFoundError, SessionNotFoundError

from tests.contract.test_registered_appends import _StoreWithoutRegistryCheck
from tests.support.messages import text_message


def _manager(make_store: Callable[[], Any], namespace: str = "tenant") -> SessionManager:
    return SessionManager.create(make_store(), namespace=namespace)


def test_a_message_and_the_leaf_are_read_from_a_session_of_the_namespace(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = manager.create("read").id
    assert manager.get_latest_leaf(session_id) is None  # no message yet: a leaf of nothing
    assert manager.get_message(session_id, "m1") is None
    manager.append_message(session_id, text_message("m1", "first"))
    manager.append_message(session_id, text_message("m2", "second"))
    manager.append_message(session_id, text_message("b1", "a branch"), "m1")
    assert manager.get_message(session_id, "m2") == text_message("m2", "second")
    assert manager.get_latest_leaf(session_id) == text_message("b1", "a branch")
    assert manager.get_message(session_id, "nope") is None
    stamped = manager.get(session_id)
    manager.get_message(session_id, "m1")
    assert manager.get(session_id) == stamped  # a read does not stamp


def test_another_namespace_reads_nothing_and_keeps_nothing(make_store: Callable[[], Any]) -> None:
    owner = _manager(make_store)
    session_id = owner.create("private").id
    owner.append_message(session_id, text_message("m1", "a secret"))
    intruder = _manager(make_store, "intruder")
    for read in (lambda: intruder.get_message(session_id, "m1"), lambda: intruder.get_latest_leaf(session_id)):
        with pytest.raises(SessionNotFoundError):
            read()
        assert session_id not in intruder._sessions
    for read in (lambda: owner.get_message("no-such", "m1"), lambda: owner.get_latest_leaf("no-such")):
        with pytest.raises(SessionNotFoundError):
            read()
    assert "no-such" not in owner._sessions
    with pytest.raises(NotFoundError):
        owner.get_message(42, "m1")  # type: ignore[arg-type]


def test_a_session_deleted_elsewhere_is_not_found_any_more(make_store: Callable[[], Any]) -> None:
    manager = _manager(make_store)
    session_id = manager.create("gone").id
    manager.append_message(session_id, text_message("m1", "hello"))
    assert manager.get_latest_leaf(session_id) is not None
    assert _manager(make_store).delete(session_id)
    with pytest.raises(SessionNotFoundError):
        manager.get_message(session_id, "m1")
    assert session_id not in manager._sessions
    with pytest.raises(SessionNotFoundError):
        manager.get_latest_leaf(session_id)


def test_a_storage_without_the_check_reads_the_registry_first(make_store: Callable[[], Any]) -> None:
    manager = SessionManager.create(_StoreWithoutRegistryCheck(make_store()), namespace="tenant")
    session_id = manager.create("elsewhere").id
    manager.append_message(session_id, text_message("m1", "hello"))
    assert manager.get_message(session_id, "m1") == text_message("m1", "hello")
    assert manager.get_latest_leaf(session_id) == text_message("m1", "hello")
    intruder = SessionManager.create(_StoreWithoutRegistryCheck(make_store()), namespace="intruder")
    with pytest.raises(NotFoundError):
        intruder.get_message(session_id, "m1")
    with pytest.raises(NotFoundError):
        intruder.get_latest_leaf(session_id)


class _PromptElsewhere:
    """A prompt store outside the session's store (as DynamoDBPromptStore is): it holds one prompt."""

    def __init__(self) -> None:
        self.prompt: str | None = None

    def init(self, label: str) -> None:
        pass

    def get(self) -> str | None:
        return self.prompt

    def set(self, content: str) -> None:
        self.prompt = content


@pytest.mark.parametrize("kept", ["in the store", "elsewhere"])
def test_the_frozen_prompt_is_read_from_a_session_of_the_namespace(make_store: Callable[[], Any], kept: str) -> None:
    """``GET …/system-prompt`` on every turn: with the prompt in the session's own store the tenant's check is the
    same statement; a prompt kept elsewhere is read after the registry. Either way another namespace gets nothing."""
    store = make_store()

    def manager(namespace: str) -> SessionManager:
        built = SessionManager(store, namespace=namespace).with_context("memory")
        if kept == "elsewhere":
            return built.with_cached_prompt(per_session=lambda session_id: elsewhere)
        return built.with_cached_prompt()

    elsewhere = _PromptElsewhere()
    owner = manager("tenant")
    session_id = owner.create("prompted").id
    session = owner.get_session(session_id)
    session.append_context_block("memory", "Name: Alice")
    assert session.frozen_prompt_checks_registry is (kept == "in the store")
    assert manager("tenant").get_frozen_system_prompt(session_id) is None  # none frozen yet: nothing rendered
    prompt = session.freeze_system_prompt()
    assert "Name: Alice" in prompt
    assert manager("tenant").get_frozen_system_prompt(session_id) == prompt
    intruder = manager("intruder")
    for target in (session_id, "no-such-session"):
        with pytest.raises(SessionNotFoundError):
            intruder.get_frozen_system_prompt(target)
    assert not intruder._sessions


def test_a_prompt_kept_elsewhere_goes_with_its_session_though_this_process_never_built_it(
    make_store: Callable[[], Any],
) -> None:
    """A keyed session keeps its id when it is deleted and opened again, maybe for another subject: a prompt kept
    outside the store under that id (DynamoDB) must go with the session, whichever process deletes it."""
    import boto3
    from moto import mock_aws
    from threadloom.providers.dynamodb_prompt_store import DynamoDBPromptStore

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName="prompts",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )

        def manager() -> SessionManager:
            return (
                SessionManager(make_store(), namespace="tenant")
                .with_context("memory", scope="subject")
                .with_cached_prompt(
                    per_session=lambda sid: DynamoDBPromptStore("prompts", f"tenant#{sid}", client=client)
                )
            )

        first, second = manager(), manager()
        session_id = first.open_session("user-1", subject_id="alice").id
        first.get_session(session_id).append_context_block("memory", "Name: Alice")
        assert "Name: Alice" in first.get_session(session_id).freeze_system_prompt()
        assert second.delete(session_id)  # a process that never built the Session
        assert "Item" not in client.get_item(TableName="prompts", Key={"pk": {"S": f"tenant#{session_id}"}})
        assert second.open_session("user-1", subject_id="bob").id == session_id
        assert second.get_frozen_system_prompt(session_id) is None
        assert "Name: Alice" not in second.get_session(session_id).freeze_system_prompt()
        assert not second.delete("no-such-session")  # nothing to delete: no error
