"""Issue 23 through the real handler: idempotency erasure by key, tenants with ``/`` in S3 keys, legal hold scope.

Each runs on SQLite and PostgreSQL, with moto for DynamoDB and S3.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from threadloom import SqliteStore
from threadloom.api.profile import parse_profile
from threadloom.api.runtime import set_runtime
from threadloom.lifecycle.derived import aws_client

from tests.support.api import TENANT, FakeLambdaContext, load_event, seeded_runtime, text

BUCKET = "threadloom-exports"
PROMPTS = "threadloom-prompts"
IDEMPOTENCY = "threadloom-idempotency"
ADMIN = ["threadloom/admin"]


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)
    aws_client.cache_clear()  # clients made inside one moto context are not reused in the next


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SqliteStore(str(tmp_path / "api.db"))
    return request.getfixturevalue("postgres_store_factory")()


def call(
    method: str, path: str, body: Any = None, *, sub: str = TENANT, scopes: list[str] | None = None, **headers: str
) -> tuple[int, Any]:
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["authorizer"]["jwt"]["scopes"] = scopes
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
    event["headers"].update(headers)
    if body is not None:
        event["body"] = json.dumps(body)
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    raw = response.get("body", "")
    try:
        return int(response["statusCode"]), json.loads(raw)
    except ValueError:
        return int(response["statusCode"]), raw


def deployed(tmp_path: Path, store: Any) -> Any:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    for table, key in ((PROMPTS, "pk"), (IDEMPOTENCY, "id")):
        dynamodb.create_table(
            TableName=table,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        )
    runtime, _ = seeded_runtime(
        tmp_path,
        store=store,
        export_bucket=BUCKET,
        export_inline_bytes=200,
        prompt_table=PROMPTS,
        idempotency_table=IDEMPOTENCY,
    )
    runtime._profile = parse_profile({"blocks": [{"label": "memory", "kind": "writable"}]})
    runtime._managers.clear()
    return runtime


def scans_during(run: Any) -> list[str]:
    """The DynamoDB Scan calls made while ``run()`` runs (the eraser's shared client)."""
    seen: list[str] = []
    client = aws_client("dynamodb")
    handler = client.meta.events.register("before-call.dynamodb.Scan", lambda **kwargs: seen.append("Scan"))
    try:
        run()
    finally:
        client.meta.events.unregister("before-call.dynamodb.Scan", handler)
    return seen


def test_deleting_a_session_named_colon_keeps_every_other_idempotency_record(tmp_path: Path, store: Any) -> None:
    with mock_aws():
        deployed(tmp_path, store)
        # Tenant A creates a session with an Idempotency-Key
        status, first = call("POST", "/sessions", {"name": "Mine"}, **{"idempotency-key": "k1"})
        assert status == 201
        # Tenant B owns a session whose id is ':' (as an import can make it) and deletes it
        store.registry("tenant-b").create("colon", session_id=":")
        call("POST", "/sessions/:/messages", {"message": text("c1", "user", "hello")}, sub="tenant-b")
        deleted: list[int] = []
        scans = scans_during(lambda: deleted.append(call("DELETE", "/sessions/:", sub="tenant-b")[0]))
        assert deleted == [200] and scans == []
        # A's retry replays its record: the same session, no duplicate
        status, again = call("POST", "/sessions", {"name": "Mine"}, **{"idempotency-key": "k1"})
        assert status == 201 and again["id"] == first["id"]
        listed = call("GET", "/sessions")[1]["sessions"]
        assert [session["id"] for session in listed].count(first["id"]) == 1
        assert len([session for session in listed if session["name"] == "Mine"]) == 1


def test_deleting_a_session_removes_its_own_idempotency_records_by_key(tmp_path: Path, store: Any) -> None:
    with mock_aws():
        deployed(tmp_path, store)
        created = call("POST", "/sessions", {"name": "Gone soon"}, **{"idempotency-key": "k2"})[1]
        sid = created["id"]
        append = {"message": text("g1", "user", "a medlar question")}
        assert call("POST", f"/sessions/{sid}/messages", append, **{"idempotency-key": "k3"})[0] == 201
        kept = call("POST", "/sessions", {"name": "Stays"}, **{"idempotency-key": "k4"})[1]
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        before = dynamodb.scan(TableName=IDEMPOTENCY)["Items"]
        assert call("DELETE", f"/sessions/{sid}")[0] == 200
        after = dynamodb.scan(TableName=IDEMPOTENCY)["Items"]
        assert sid not in json.dumps(after) and "medlar" not in json.dumps(after)
        assert kept["id"] in json.dumps(after) and len(after) == len(before) - 3  # its 2 records and its index item
        # The create's key runs again after the delete: a new session, as the record is gone
        status, recreated = call("POST", "/sessions", {"name": "Gone soon"}, **{"idempotency-key": "k2"})
        assert status == 201 and recreated["id"] != sid


def test_a_tenant_holding_a_slash_has_its_own_export_folder(tmp_path: Path, store: Any) -> None:
    with mock_aws():
        deployed(tmp_path, store)
        s3 = boto3.client("s3", region_name="us-east-1")
        # Tenant 'acme/x' exports its session 'y' through S3; tenant 'acme' has a session 'x'
        store.registry("acme/x").create("Nested", session_id="y")
        store.registry("acme").create("Plain", session_id="x")
        for sub, sid in (("acme/x", "y"), ("acme", "x")):
            for number in range(3):
                body = {"message": text(f"m{number}", "user", "a long enough text " * 10)}
                assert call("POST", f"/sessions/{sid}/messages", body, sub=sub)[0] == 201
            assert call("GET", f"/sessions/{sid}/export", sub=sub)[0] == 303
        keys = sorted(item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
        assert [key.rsplit("/", 1)[0] for key in keys] == ["exports/acme%2Fx/y", "exports/acme/x"]
        # Deleting acme's session 'x' leaves acme/x's exports
        assert call("DELETE", "/sessions/x", sub="acme")[0] == 200
        left = [item["Key"] for item in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
        assert [key.rsplit("/", 1)[0] for key in left] == ["exports/acme%2Fx/y"]
        # And 'acme' cannot import from acme/x's folder, which acme/x can
        status, refused = call("POST", "/sessions/import-from-s3", {"key": left[0]}, sub="acme")
        assert status == 400 and "must start with 'imports/acme/'" in refused["error"]["message"]
        status, unchanged = call("POST", "/sessions/import-from-s3", {"key": left[0]}, sub="acme/x")
        assert status == 200 and unchanged["unchanged"] == ["y"]


def test_a_legal_hold_needs_the_admin_scope(tmp_path: Path, store: Any) -> None:
    seeded_runtime(tmp_path, store=store)
    sid = call("POST", "/sessions", {"name": "Held?"})[1]["id"]
    status, refused = call("PATCH", f"/sessions/{sid}", {"legalHold": True})
    assert status == 403 and refused["error"]["message"] == "This operation needs the 'threadloom/admin' scope"
    assert call("GET", f"/sessions/{sid}")[1]["legalHold"] is False
    assert call("PATCH", f"/sessions/{sid}", {"name": "Renamed"})[0] == 200  # renaming needs no scope
    status, held = call("PATCH", f"/sessions/{sid}", {"legalHold": True}, scopes=ADMIN)
    assert status == 200 and held["legalHold"] is True
    assert call("PATCH", f"/sessions/{sid}", {"legalHold": False})[0] == 403
    assert call("GET", f"/sessions/{sid}")[1]["legalHold"] is True


def test_a_tenant_holding_a_slash_has_its_own_skills_in_s3(tmp_path: Path, store: Any) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="threadloom-skills")
        runtime, _ = seeded_runtime(tmp_path, store=store, skills_bucket="threadloom-skills", skills_prefix="skills/")
        nested = runtime._skills_for(None, None, "acme/x")
        plain = runtime._skills_for(None, None, "acme")
        assert nested is not None and plain is not None
        nested.set("notes", "acme/x's own skill", "Notes of acme/x")  # type: ignore[attr-defined]
        keys = [item["Key"] for item in s3.list_objects_v2(Bucket="threadloom-skills")["Contents"]]
        assert len(keys) == 1 and keys[0].startswith("skills/.tenants/") and "acme" not in keys[0]
        assert plain.load("notes") is None  # type: ignore[attr-defined]
        assert nested.load("notes") == "acme/x's own skill"  # type: ignore[attr-defined]


def test_a_write_is_answered_when_its_record_cannot_be_indexed(
    tmp_path: Path, store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with mock_aws():
        deployed(tmp_path, store)

        def throttled(**kwargs: Any) -> None:
            raise RuntimeError("throttled")

        client = aws_client("dynamodb")
        client.meta.events.register("before-call.dynamodb.UpdateItem", throttled)
        caplog.set_level(logging.WARNING)
        status, created = call("POST", "/sessions", {"name": "Answered"}, **{"idempotency-key": "k5"})
        assert status == 201
        assert any(record.getMessage() == "idempotency record not indexed" for record in caplog.records)
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", throttled)
        # Control: indexed again on the replay, so a delete now removes the record
        assert call("POST", "/sessions", {"name": "Answered"}, **{"idempotency-key": "k5"})[1]["id"] == created["id"]
        assert call("DELETE", f"/sessions/{created['id']}")[0] == 200
        items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=IDEMPOTENCY)["Items"]
        assert created["id"] not in json.dumps(items)
