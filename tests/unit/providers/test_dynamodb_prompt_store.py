"""DynamoDBPromptStore: the frozen system prompt, first freeze wins across instances and threads."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.dynamodb.models.table import Table
from threadloom.errors import StorageUnavailableError, ValidationError
from threadloom.providers.dynamodb_prompt_store import DynamoDBPromptStore, default_dynamodb_client
from threadloom.providers.protocols import WritableContextProvider, is_writable_provider

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_dynamodb.client import DynamoDBClient

TABLE = "threadloom-prompts"


@pytest.fixture
def dynamodb() -> Iterator[DynamoDBClient]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def raw_item(client: DynamoDBClient, key: str) -> dict[str, Any] | None:
    return client.get_item(TableName=TABLE, Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")


def test_first_freeze_wins_across_store_instances(dynamodb: DynamoDBClient) -> None:
    # Given two stores for the same session, as two Lambda invocations would build them
    first = DynamoDBPromptStore(TABLE, "tenant#s1", client=dynamodb)
    second = DynamoDBPromptStore(TABLE, "tenant#s1", client=dynamodb)

    # When both freeze different renders, one after the other
    kept_by_first = first.freeze("prompt A")
    kept_by_second = second.freeze("prompt B")

    # Then both get the first prompt, which is what is stored
    assert kept_by_first == kept_by_second == "prompt A"
    assert second.get() == "prompt A"


def test_first_freeze_wins_in_a_threaded_race(dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given moto's conditional put made atomic (DynamoDB's is; moto checks and writes without a lock)
    atomic = threading.Lock()
    original_put_item = Table.put_item

    def locked_put_item(self: Table, *args: Any, **kwargs: Any) -> Any:
        with atomic:
            return original_put_item(self, *args, **kwargs)

    monkeypatch.setattr(Table, "put_item", locked_put_item)

    # And eight invocations released at once, each with its own store and its own render
    start = threading.Barrier(8)
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def invoke(index: int) -> None:
        store = DynamoDBPromptStore(TABLE, "tenant#race", client=dynamodb)
        start.wait()
        try:
            results[index] = store.freeze(f"prompt {index}")
        except BaseException as exc:  # pragma: no cover - surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=invoke, args=(index,)) for index in range(8)]

    # When they all freeze concurrently
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    # Then every invocation got the same prompt, and it is the one stored
    assert errors == []
    assert len(results) == 8
    assert len(set(results.values())) == 1
    assert DynamoDBPromptStore(TABLE, "tenant#race", client=dynamodb).get() == next(iter(results.values()))


def test_empty_prompt_counts_as_frozen(dynamodb: DynamoDBClient) -> None:
    # Given an empty prompt frozen first
    store = DynamoDBPromptStore(TABLE, "k", client=dynamodb)
    store.freeze("")

    # When another freeze and a read follow
    kept = store.freeze("later")
    stored = store.get()

    # Then the empty string is kept, as the reference treats "" as a stored value
    assert kept == ""
    assert stored == ""


def test_set_overwrites_a_frozen_prompt(dynamodb: DynamoDBClient) -> None:
    # Given a frozen prompt
    store = DynamoDBPromptStore(TABLE, "k", client=dynamodb)
    store.freeze("old")

    # When it is refreshed
    store.set("new")

    # Then reads and later freezes see the refreshed prompt
    assert store.get() == "new"
    assert DynamoDBPromptStore(TABLE, "k", client=dynamodb).freeze("ignored") == "new"


def test_delete_removes_the_prompt_and_a_later_freeze_stores_again(dynamodb: DynamoDBClient) -> None:
    # Given a frozen prompt and an unrelated session's prompt
    store = DynamoDBPromptStore(TABLE, "tenant#s1", client=dynamodb)
    other = DynamoDBPromptStore(TABLE, "tenant#s2", client=dynamodb)
    store.freeze("one")
    other.freeze("two")

    # When the session is deleted (twice: deleting nothing is fine)
    store.delete()
    store.delete()

    # Then its prompt is gone, the other remains, and freezing starts over
    assert store.get() is None
    assert raw_item(dynamodb, "tenant#s1") is None
    assert other.get() == "two"
    assert store.freeze("fresh") == "fresh"


def test_get_of_a_missing_prompt_is_none(dynamodb: DynamoDBClient) -> None:
    # Given an empty table
    store = DynamoDBPromptStore(TABLE, "nobody", client=dynamodb)

    # When the prompt is read
    stored = store.get()

    # Then there is none
    assert stored is None


def test_ttl_sets_expires_at(dynamodb: DynamoDBClient) -> None:
    # Given a store with a one-day TTL
    store = DynamoDBPromptStore(TABLE, "k", client=dynamodb, ttl_seconds=86_400)
    before = int(time.time())

    # When a prompt is frozen
    store.freeze("prompt")

    # Then the item carries an epoch-seconds expiry one day ahead
    item = raw_item(dynamodb, "k")
    assert item is not None
    assert before + 86_400 <= int(item["expires_at"]["N"]) <= int(time.time()) + 86_400
    assert item["prompt"] == {"S": "prompt"}


def test_expired_item_not_yet_removed_by_dynamodb_counts_as_absent(dynamodb: DynamoDBClient) -> None:
    # Given an item whose TTL has passed but which DynamoDB has not deleted yet
    dynamodb.put_item(
        TableName=TABLE,
        Item={"pk": {"S": "k"}, "prompt": {"S": "stale"}, "expires_at": {"N": str(int(time.time()) - 10)}},
    )
    store = DynamoDBPromptStore(TABLE, "k", client=dynamodb)

    # When it is read and then frozen
    stored = store.get()
    kept = store.freeze("fresh")

    # Then the stale prompt is ignored and replaced
    assert stored is None
    assert kept == "fresh"
    assert store.get() == "fresh"


def test_item_without_a_prompt_attribute_is_replaced_by_freeze(dynamodb: DynamoDBClient) -> None:
    # Given a malformed item under the key
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "k"}, "other": {"S": "x"}})
    store = DynamoDBPromptStore(TABLE, "k", client=dynamodb)

    # When a prompt is frozen
    kept = store.freeze("prompt")

    # Then it is stored
    assert kept == "prompt"
    assert store.get() == "prompt"


def test_freeze_reads_back_when_the_failed_write_returns_no_item() -> None:
    # Given DynamoDB refuses the conditional write without returning the old item, and the read finds it
    client = boto3.client("dynamodb", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_client_error("put_item", service_error_code="ConditionalCheckFailedException", http_status_code=400)
    stubber.add_response("get_item", {"Item": {"pk": {"S": "k"}, "prompt": {"S": "winner"}}})

    # When a prompt is frozen
    with stubber:
        kept = DynamoDBPromptStore(TABLE, "k", client=client).freeze("loser")

    # Then the stored prompt is returned
    assert kept == "winner"
    stubber.assert_no_pending_responses()


def test_missing_table_raises_storage_unavailable_naming_it() -> None:
    # Given a store whose table does not exist
    with mock_aws():
        store = DynamoDBPromptStore("no-such-table", "k", client=boto3.client("dynamodb", region_name="us-east-1"))

        # When any operation runs
        # Then each raises StorageUnavailableError naming the table
        for operation in (store.get, lambda: store.set("x"), lambda: store.freeze("x"), store.delete):
            with pytest.raises(StorageUnavailableError, match='"no-such-table" does not exist'):
                operation()


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "AccessDeniedException", "InternalServerError"]
)
def test_other_failures_raise_storage_unavailable(code: str) -> None:
    # Given DynamoDB fails the request (after botocore's retries)
    client = boto3.client("dynamodb", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_client_error("put_item", service_error_code=code, http_status_code=400)

    # When a prompt is frozen
    with stubber, pytest.raises(StorageUnavailableError, match=code) as raised:
        DynamoDBPromptStore(TABLE, "k", client=client).freeze("x")

    # Then the botocore error is chained, not raised
    assert raised.value.__cause__ is not None


def test_prompt_over_the_item_limit_is_refused_before_writing(dynamodb: DynamoDBClient) -> None:
    # Given a prompt larger than a DynamoDB item can hold
    store = DynamoDBPromptStore(TABLE, "k", client=dynamodb)

    # When it is frozen
    with pytest.raises(ValidationError, match="too large"):
        store.freeze("x" * 410_000)

    # Then nothing was stored
    assert store.get() is None


@pytest.mark.parametrize(
    ("table", "key", "ttl"), [("", "k", None), (TABLE, "", None), (TABLE, "k" * 2049, None), (TABLE, "k", 0)]
)
def test_bad_construction_arguments_raise_validation_error(table: str, key: str, ttl: int | None) -> None:
    # Given bad constructor arguments
    # When the store is built
    # Then it refuses with ValidationError
    with pytest.raises(ValidationError):
        DynamoDBPromptStore(table, key, ttl_seconds=ttl)


def test_default_client_is_created_lazily(dynamodb: DynamoDBClient) -> None:
    # Given no cached default client
    default_dynamodb_client.cache_clear()
    try:
        # When a store is built without a client
        store = DynamoDBPromptStore(TABLE, "k")

        # Then no client exists until the first call
        assert default_dynamodb_client.cache_info().currsize == 0
        assert store.freeze("p") == "p"
        assert default_dynamodb_client.cache_info().currsize == 1
    finally:
        default_dynamodb_client.cache_clear()


def test_store_is_a_writable_context_provider() -> None:
    # Given a store (building one makes no AWS call)
    store = DynamoDBPromptStore(TABLE, "k", client=boto3.client("dynamodb", region_name="us-east-1"))

    # When it is classified the way ContextBlocks does
    # Then it is a writable provider
    assert isinstance(store, WritableContextProvider)
    assert is_writable_provider(store)
