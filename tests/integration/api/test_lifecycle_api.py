"""Lifecycle endpoints through the real handler: subject ids, legal hold, export/import (inline and via S3), erasure."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest
from moto import mock_aws
from threadloom.api.profile import parse_profile
from threadloom.api.runtime import set_runtime

from tests.support.api import SESSION, TENANT, FakeLambdaContext, load_event, seeded_runtime, text
from tests.support.crafted_exports import imported_id
from tests.support.lifecycle import NO_SHARED_BLOCKS_OR_KNOWLEDGE, scan_database

BUCKET = "threadloom-exports"
PROMPTS = "threadloom-prompts"
IDEMPOTENCY = "threadloom-idempotency"


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


def call(
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: str | None = None,
    scopes: list[str] | None = None,
    sub: str = TENANT,
    **headers: str,
) -> tuple[int, dict[str, str], str]:
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["authorizer"]["jwt"]["scopes"] = scopes
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
    event["headers"].update(headers)
    if body is not None:
        event["body"] = json.dumps(body)
    if raw is not None:
        event["body"] = raw
        event["headers"]["content-type"] = "application/x-ndjson"
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    return int(response["statusCode"]), response.get("headers", {}), response.get("body", "")


def test_sessions_record_their_subject_and_hold(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    status, _, body = call("POST", "/sessions", {"name": "Mine"})
    assert status == 201 and json.loads(body)["subjectId"] == TENANT and json.loads(body)["legalHold"] is False
    opened = call("POST", "/sessions/open", {"key": "conversation-7"})
    assert opened[0] == 201 and json.loads(opened[2])["subjectId"] == TENANT
    given = json.loads(call("POST", "/sessions", {"name": "For Zoe", "subjectId": "zoe"})[2])
    assert given["subjectId"] == "zoe"
    refused = call("PATCH", f"/sessions/{given['id']}", {"legalHold": True})
    assert refused[0] == 403 and "'threadloom/admin' scope" in json.loads(refused[2])["error"]["message"]
    admin = ["threadloom/admin"]
    held = call("PATCH", f"/sessions/{given['id']}", {"legalHold": True}, scopes=admin)
    assert held[0] == 200 and json.loads(held[2])["legalHold"] is True and json.loads(held[2])["name"] == "For Zoe"
    both = json.loads(call("PATCH", f"/sessions/{given['id']}", {"name": "Zoe", "legalHold": False}, scopes=admin)[2])
    assert both["name"] == "Zoe" and both["legalHold"] is False
    empty = call("PATCH", f"/sessions/{given['id']}", {})
    assert empty[0] == 400 and json.loads(empty[2])["error"]["message"] == "Send 'name', 'legalHold' or both"
    assert call("PATCH", "/sessions/nope", {"legalHold": True}, scopes=admin)[0] == 404
    assert call("PATCH", "/sessions/nope", {"legalHold": True})[0] == 403  # the scope first: nothing is revealed


def test_a_session_on_legal_hold_is_neither_deleted_nor_cleared_until_released(tmp_path: Path) -> None:
    """A hold keeps a session from retention; through the API it also keeps it from deletion and from
    clearing, which a token without the admin scope could otherwise do to what the hold preserves."""
    seeded_runtime(tmp_path)
    admin = ["threadloom/admin"]
    created = json.loads(call("POST", "/sessions", {"name": "Evidence"})[2])
    path = f"/sessions/{created['id']}"
    message = {"message": {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "keep me"}]}}
    assert call("POST", f"{path}/messages", message)[0] == 201
    assert call("PATCH", path, {"legalHold": True}, scopes=admin)[0] == 200
    for method, target in (("DELETE", path), ("POST", f"{path}/clear")):
        status, _, body = call(method, target)
        error = json.loads(body)["error"]
        assert status == 409 and error["code"] == "conflict" and "legal hold" in error["message"], body
    history = json.loads(call("GET", f"{path}/history")[2])
    assert [item["id"] for item in history["messages"]] == ["m1"]  # nothing was cleared or deleted
    # Control: released, the same token clears and deletes it
    assert call("PATCH", path, {"legalHold": False}, scopes=admin)[0] == 200
    assert call("POST", f"{path}/clear")[0] == 200
    assert call("DELETE", path)[0] == 200
    assert call("GET", path)[0] == 404


def test_export_then_import_the_upload(tmp_path: Path) -> None:
    runtime = seeded_runtime(tmp_path)[0]
    status, headers, exported = call("GET", f"/sessions/{SESSION}/export")
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson"
    records = [json.loads(line) for line in exported.splitlines()]
    assert [record["type"] for record in records] == ["header", "session", *["message"] * 4, "footer"]
    # Importing it where it already is changes nothing
    same = call("POST", "/sessions/import", raw=exported)
    assert same[0] == 200
    assert json.loads(same[2]) == {
        "imported": [],
        "unchanged": [SESSION],
        "messages": 0,
        "renamed": {},
        **NO_SHARED_BLOCKS_OR_KNOWLEDGE,
    }
    # After a delete, the upload restores it; its id was not minted for the namespace (it was chosen by
    # hand), so it comes back under the id the namespace gives it, with its message ids
    given = imported_id(runtime.store, TENANT, SESSION)
    assert call("DELETE", f"/sessions/{SESSION}")[0] == 200
    restored = call("POST", "/sessions/import", raw=exported)
    assert json.loads(restored[2]) == {
        "imported": [given],
        "unchanged": [],
        "messages": 4,
        "renamed": {SESSION: given},
        **NO_SHARED_BLOCKS_OR_KNOWLEDGE,
    }
    history = json.loads(call("GET", f"/sessions/{given}/history")[2])
    assert [message["id"] for message in history["messages"]] == ["m1", "m2", "m3", "m4"]
    # A session whose id was minted here comes back under that same id
    again = call("GET", f"/sessions/{given}/export")[2]
    assert call("DELETE", f"/sessions/{given}")[0] == 200
    back = json.loads(call("POST", "/sessions/import", raw=again)[2])
    assert back == {"imported": [given], "unchanged": [], "messages": 4, "renamed": {}, **NO_SHARED_BLOCKS_OR_KNOWLEDGE}
    # Another tenant gets its own copy under an id minted for it, and a damaged upload is a 400 that imports nothing
    theirs = call("POST", "/sessions/import", raw=exported, sub="someone-else")
    assert theirs[0] == 200 and json.loads(theirs[2])["renamed"] == {
        SESSION: imported_id(runtime.store, "someone-else", SESSION)
    }
    broken = call("POST", "/sessions/import", raw=exported[:-30], sub="someone-else")
    assert broken[0] == 400 and json.loads(broken[2])["error"]["code"] == "bad_request"
    assert call("GET", f"/sessions/{SESSION}/export", sub="someone-else")[0] == 404


def _aws_resources() -> None:
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    for table, key in ((PROMPTS, "pk"), (IDEMPOTENCY, "id")):
        dynamodb.create_table(
            TableName=table,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        )


def _deployed_runtime(tmp_path: Path) -> Any:
    runtime, _ = seeded_runtime(
        tmp_path,
        export_bucket=BUCKET,
        export_inline_bytes=200,
        prompt_table=PROMPTS,
        idempotency_table=IDEMPOTENCY,
    )
    runtime._profile = parse_profile(
        {"blocks": [{"label": "memory", "kind": "writable"}], "prompt_cache": {"backend": "dynamodb"}}
    )
    runtime._managers.clear()  # rebuilt from the deployed profile on the next request
    return runtime


def test_a_large_export_goes_through_s3_and_imports_back(tmp_path: Path) -> None:
    with mock_aws():
        _aws_resources()
        runtime = _deployed_runtime(tmp_path)
        given = imported_id(runtime.store, TENANT, SESSION)  # its id was chosen by hand: a restore renames it
        status, headers, body = call("GET", f"/sessions/{SESSION}/export")
        link = json.loads(body)
        assert status == 303 and headers["Location"] == link["url"] and link["expiresIn"] == 900
        key = urlparse(link["url"]).path.split(f"/{BUCKET}/", 1)[-1].lstrip("/")
        if key.startswith(BUCKET + "/"):
            key = key[len(BUCKET) + 1 :]
        assert key.startswith(f"exports/{TENANT}/{SESSION}/")
        stored = boto3.client("s3", region_name="us-east-1").get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert len(stored) == link["bytes"] and stored.startswith(b'{"type":"header"')
        # The operator keeps a copy under imports/ (deleting the session removes its exports/ files)
        backup = f"imports/{TENANT}/backup.jsonl"
        boto3.client("s3", region_name="us-east-1").put_object(Bucket=BUCKET, Key=backup, Body=stored)
        assert call("DELETE", f"/sessions/{SESSION}")[0] == 200
        assert "Contents" not in boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET, Prefix=key)
        imported = call("POST", "/sessions/import-from-s3", {"key": backup})
        assert imported[0] == 200 and json.loads(imported[2])["renamed"] == {SESSION: given}
        assert json.loads(imported[2])["imported"] == [given]
        outside = call("POST", "/sessions/import-from-s3", {"key": f"exports/other-tenant/{SESSION}/x.jsonl"})
        assert outside[0] == 400
        missing = call("POST", "/sessions/import-from-s3", {"key": f"imports/{TENANT}/none.jsonl"})
        assert missing[0] == 404
        # Deployed, the function may list the bucket only under a prefix GetObject does not name, so S3 answers
        # a missing key with AccessDenied (moto answers NoSuchKey): still a 404, not a 503 "storage unavailable"
        from botocore.exceptions import ClientError
        from threadloom.lifecycle.derived import aws_client

        def as_s3_without_listing(params: dict[str, Any], **_: Any) -> None:
            if params.get("Key", "").endswith("none.jsonl"):
                raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "GetObject")

        aws_client("s3").meta.events.register("before-parameter-build.s3.GetObject", as_s3_without_listing)
        denied = call("POST", "/sessions/import-from-s3", {"key": f"imports/{TENANT}/none.jsonl"})
        assert denied[0] == 404 and "No export file at" in json.loads(denied[2])["error"]["message"]


def test_erasure_needs_the_admin_scope(tmp_path: Path) -> None:
    seeded_runtime(tmp_path)
    status, _, body = call("POST", f"/subjects/{TENANT}/erase")
    assert status == 403 and json.loads(body) == {
        "error": {"code": "forbidden", "message": "This operation needs the 'threadloom/admin' scope"}
    }
    assert call("GET", f"/sessions/{SESSION}")[0] == 200


@pytest.mark.parametrize("subject", ["a/b", "a?b", "a#b", 'a"b', "a\\b", "auth0|42"])
def test_a_subject_a_path_cannot_carry_is_erased_by_naming_it_in_the_body(tmp_path: Path, subject: str) -> None:
    """A JWT ``sub`` may hold ``/``, ``?`` or ``#``, which ``/subjects/{subjectId}/erase`` cannot carry (no route,
    or the edge refuses the path); ``POST /subjects/erase`` takes it in the body, with the same scope."""
    seeded_runtime(tmp_path)
    created = json.loads(call("POST", "/sessions", {"name": "odd", "subjectId": subject})[2])
    kept = json.loads(call("POST", "/sessions", {"name": "other", "subjectId": "someone-else"})[2])
    assert call("POST", "/subjects/erase", {"subjectId": subject})[0] == 403  # the admin scope first
    status, _, body = call("POST", "/subjects/erase", {"subjectId": subject}, scopes=["threadloom/admin"])
    receipt = json.loads(body)
    assert status == 200 and receipt["subjectId"] == subject and receipt["counts"]["sessions"] == 1, body
    assert call("GET", f"/sessions/{created['id']}")[0] == 404
    assert call("GET", f"/sessions/{kept['id']}")[0] == 200
    refused = call("POST", "/subjects/erase", {"subjectId": ""}, scopes=["threadloom/admin"])
    assert refused[0] in (400, 422) and "subjectId" in refused[2]


def test_erasure_removes_the_subject_everywhere_and_is_audited(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with mock_aws():
        _aws_resources()
        runtime = _deployed_runtime(tmp_path)
        # Given the subject's sessions made through the API: one with a frozen prompt in DynamoDB,
        # an idempotent create (the record remembers the session), a fork, and an export in S3
        status, _, body = call("POST", "/sessions", {"name": "Zoe's garden"}, sub=TENANT, **{"idempotency-key": "k1"})
        zoe = json.loads(body)["id"]
        call("POST", f"/sessions/{zoe}/messages", {"message": text("z1", "user", "My kumquat tree is sick")})
        call("POST", f"/sessions/{zoe}/messages", {"message": text("z2", "assistant", "Kumquat rust, probably.")})
        assert call("GET", f"/sessions/{zoe}/system-prompt")[0] == 200
        fork = json.loads(call("POST", f"/sessions/{zoe}/fork", {"atMessageId": "z1", "name": "fork"})[2])["id"]
        assert call("GET", f"/sessions/{zoe}/export")[0] == 303
        other = json.loads(call("POST", "/sessions", {"name": "Other", "subjectId": "bob"})[2])["id"]
        call("POST", f"/sessions/{other}/messages", {"message": text("b1", "user", "papaya season")})
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        assert dynamodb.get_item(TableName=PROMPTS, Key={"pk": {"S": f"{TENANT}#{zoe}"}}).get("Item")
        # When an admin erases the subject (seeded sessions belong to it too: they carry no subject, so stay)
        caplog.set_level(logging.INFO)
        status, _, body = call("POST", f"/subjects/{TENANT}/erase", scopes=["threadloom/admin"])
        receipt = json.loads(body)
        # Then the receipt counts every kind, including what lived outside the database
        assert status == 200 and receipt["subjectId"] == TENANT
        counts = receipt["counts"]
        assert counts["sessions"] == 2 and counts["messages"] == 3 and counts["prompt_cache"] == 1
        assert counts["idempotency_records"] >= 1 and counts["export_objects"] == 1
        # And nothing of it remains in any table, item or object
        everything = scan_database(runtime.store)
        for value in (zoe, fork, "kumquat", "Kumquat", "Zoe's garden"):
            assert value not in everything
        assert "papaya" in everything
        for table in (PROMPTS, IDEMPOTENCY):
            items = json.dumps(dynamodb.scan(TableName=table)["Items"])
            assert zoe not in items and "kumquat" not in items.lower()
        listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET).get("Contents", [])
        assert not [item for item in listed if zoe in item["Key"]]
        # And a second erasure is empty
        again = json.loads(call("POST", f"/subjects/{TENANT}/erase", scopes=["threadloom/admin"])[2])
        assert not any(again["counts"].values())
    audit = [record for record in caplog.records if record.getMessage() == "subject erased"]
    assert audit, "the erasure is audited"
    logged = json.dumps([record.__dict__ for record in audit], default=str)
    assert "kumquat" not in logged.lower() and zoe not in logged and '"operator": "user-123"' in logged


def test_deleting_a_session_removes_its_prompt_cache_and_exports_from_any_instance(tmp_path: Path) -> None:
    with mock_aws():
        _aws_resources()
        runtime = _deployed_runtime(tmp_path)
        sid = json.loads(call("POST", "/sessions", {"name": "Short-lived"})[2])["id"]
        call("POST", f"/sessions/{sid}/messages", {"message": text("d1", "user", "a quince question")})
        assert call("GET", f"/sessions/{sid}/system-prompt")[0] == 200
        assert call("GET", f"/sessions/{sid}/export")[0] == 303
        runtime._managers.clear()  # another Lambda instance: the session was never loaded here
        assert call("DELETE", f"/sessions/{sid}")[0] == 200
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        assert dynamodb.get_item(TableName=PROMPTS, Key={"pk": {"S": f"{TENANT}#{sid}"}}).get("Item") is None
        listed = boto3.client("s3", region_name="us-east-1").list_objects_v2(Bucket=BUCKET).get("Contents", [])
        assert not [item for item in listed if sid in item["Key"]]
        assert call("DELETE", f"/sessions/{sid}")[0] == 404
