"""The scheduled retention Lambda, fed the sample EventBridge event, with the prompt cache and exports in moto."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from threadloom import SqliteStore
from threadloom.api.profile import parse_profile
from threadloom.api.runtime import Runtime, Settings, set_runtime

from tests.support.api import FakeLambdaContext, text
from tests.support.lifecycle import scan_database

EVENT = Path(__file__).resolve().parents[3] / "events" / "retention_schedule.json"
PROMPTS = "prompts"
BUCKET = "exports"


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


def _runtime(tmp_path: Path, retention: dict[str, int] | None) -> Runtime:
    profile = {"blocks": [{"label": "memory", "kind": "writable"}], "prompt_cache": {"backend": "dynamodb"}}
    if retention is not None:
        profile["retention"] = retention
    runtime = Runtime(
        Settings(prompt_table=PROMPTS, export_bucket=BUCKET, compaction_mode="inline"),
        profile=parse_profile(profile),
        store=SqliteStore(str(tmp_path / "retention.db")),
    )
    set_runtime(runtime)
    return runtime


def _resources() -> None:
    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName=PROMPTS,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
    )
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)


def test_the_scheduled_event_removes_expired_sessions_and_their_cache(tmp_path: Path) -> None:
    from threadloom_retention import lambda_handler

    with mock_aws():
        _resources()
        runtime = _runtime(tmp_path, {"inactive_days": 30})
        manager = runtime.manager("tenant-a")
        old = manager.create("Old", subject_id="ann").id
        manager.append(old, text("o1", "user", "kumquat harvest notes"))
        manager.get_session(old).freeze_system_prompt()
        boto3.client("s3", region_name="us-east-1").put_object(
            Bucket=BUCKET, Key=f"exports/tenant-a/{old}/e.jsonl", Body=b"kumquat"
        )
        held = manager.create("Held").id
        recent = manager.create("Recent").id
        manager.append(recent, text("r1", "user", "papaya today"))
        with runtime.store.database.write() as tx:
            tx.execute(
                "UPDATE threadloom_sessions SET updated_at = '2020-01-01T00:00:00.000Z' WHERE id IN (:a, :b)",
                {"a": old, "b": held},
            )
        manager.set_legal_hold(held, True)
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        assert dynamodb.get_item(TableName=PROMPTS, Key={"pk": {"S": f"tenant-a#{old}"}}).get("Item")
        # When EventBridge invokes the function with the sample scheduled event
        result = lambda_handler(json.loads(EVENT.read_text(encoding="utf-8")), FakeLambdaContext())  # type: ignore[arg-type]
        # Then the expired session is gone everywhere; the held and the recent one stay
        assert result["swept"] is True and result["removed"] == 1 and result["complete"] is True
        assert result["counts"]["messages"] == 1 and result["counts"]["prompt_cache"] == 1
        assert result["counts"]["export_objects"] == 1
        assert dynamodb.get_item(TableName=PROMPTS, Key={"pk": {"S": f"tenant-a#{old}"}}).get("Item") is None
        assert boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0
        everything = scan_database(runtime.store)
        assert old not in everything and "kumquat" not in everything and "papaya" in everything
        assert {info.id for info in manager.list()} == {held, recent}


def test_without_retention_configured_the_function_does_nothing(tmp_path: Path) -> None:
    from threadloom_retention import lambda_handler

    runtime = _runtime(tmp_path, None)
    sid = runtime.manager("tenant-a").create("Old").id
    with runtime.store.database.write() as tx:
        tx.execute("UPDATE threadloom_sessions SET updated_at = '2020-01-01T00:00:00.000Z' WHERE id = :a", {"a": sid})
    result = lambda_handler(json.loads(EVENT.read_text(encoding="utf-8")), FakeLambdaContext())  # type: ignore[arg-type]
    assert result == {"swept": False, "reason": "retention.inactive_days is not set"}
    assert runtime.manager("tenant-a").get(sid) is not None


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_sweep_never_takes_a_shared_block_a_live_session_reads(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """Issue 26 item 6 through the scheduled function, on both backends: the old session of a user goes, the
    memory it taught (a subject block) and the tenant's rules stay for the user's live session, every version kept."""
    from threadloom_retention import lambda_handler

    store = request.getfixturevalue("postgres_store_factory")() if backend == "postgres" else None
    profile = {
        "blocks": [
            {"label": "memory", "kind": "writable", "scope": "subject"},
            {"label": "house", "kind": "writable", "scope": "tenant"},
        ],
        "retention": {"inactive_days": 30},
    }
    with mock_aws():
        _resources()
        runtime = Runtime(
            Settings(prompt_table=PROMPTS, export_bucket=BUCKET, compaction_mode="inline"),
            profile=parse_profile(profile),
            store=store if store is not None else SqliteStore(str(tmp_path / "retention.db")),
        )
        set_runtime(runtime)
        manager = runtime.manager("tenant-a")
        old = manager.create("Old", subject_id="ann").id
        live = manager.create("Live", subject_id="ann").id
        manager.get_session(old).replace_context_block("memory", "Name: Ann")
        manager.get_session(old).replace_context_block("house", "Answer in English")
        manager.get_session(live).append_context_block("memory", "Likes: figs")
        with runtime.store.database.write() as tx:
            tx.execute(
                "UPDATE threadloom_sessions SET updated_at = '2020-01-01T00:00:00.000Z' WHERE id = :a", {"a": old}
            )
        result = lambda_handler(json.loads(EVENT.read_text(encoding="utf-8")), FakeLambdaContext())  # type: ignore[arg-type]
        assert result["removed"] == 1 and result["counts"]["sessions"] == 1
        assert {info.id for info in manager.list()} == {live}
        session = runtime.manager("tenant-a").get_session(live)
        assert session.read_context_block("memory").content == "Name: Ann\nLikes: figs"  # type: ignore[union-attr]
        assert session.read_context_block("house").content == "Answer in English"  # type: ignore[union-attr]
        memory = runtime.store.shared_block("memory", scope="subject", namespace="tenant-a", subject_id="ann")
        versions, _ = memory.versions(before=None, limit=10, max_bytes=10**6)
        assert [version.version for version in versions] == [2, 1]
