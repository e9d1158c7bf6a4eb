"""``GET /sessions/{id}/export`` keeps within the profile's response cap: a larger export goes through S3.

A profile lowering ``limits.max_response_bytes`` below an export's size used to get 500 ``response_too_large``
although an export bucket was configured. Through the real handler, on SQLite and PostgreSQL, with moto for S3.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest
from moto import mock_aws
from threadloom import SqliteStore
from threadloom.api.data_lifecycle import RESPONSE_HEADROOM
from threadloom.api.profile import parse_profile
from threadloom.api.runtime import Runtime, set_runtime
from threadloom.lifecycle import export_sessions
from threadloom.lifecycle.derived import aws_client

from tests.support.api import SESSION, TENANT, FakeLambdaContext, load_event, seeded_runtime, text

BUCKET = "threadloom-exports"


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


def call(path: str) -> tuple[int, dict[str, str], str]:
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = "GET"
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    return int(response["statusCode"]), response.get("headers", {}), response.get("body", "")


def with_response_cap(runtime: Runtime, max_response_bytes: int) -> None:
    """The deployed profile, with its response cap lowered (the default export_inline_bytes stays 5 MiB)."""
    runtime._profile = parse_profile(
        {"blocks": [{"label": "memory", "kind": "writable"}], "limits": {"max_response_bytes": max_response_bytes}}
    )
    runtime._limits = None
    runtime._managers.clear()  # rebuilt from the profile on the next request


def export_size(runtime: Runtime) -> int:
    buffer = io.BytesIO()
    export_sessions(runtime.store.lifecycle(), TENANT, [SESSION], buffer)
    return len(buffer.getvalue())


def stored_object(url: str) -> bytes:
    key = urlparse(url).path.lstrip("/").removeprefix(f"{BUCKET}/")
    assert key.startswith(f"exports/{TENANT}/{SESSION}/")
    return boto3.client("s3", region_name="us-east-1").get_object(Bucket=BUCKET, Key=key)["Body"].read()  # type: ignore[no-any-return]


def test_an_export_over_the_profiles_response_cap_goes_through_s3(store: Any, tmp_path: Path) -> None:
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        runtime, _ = seeded_runtime(tmp_path, store=store, export_bucket=BUCKET)
        runtime.manager(TENANT).append(SESSION, text("m5", "user", "Doubloons, " * 3000))  # about 33 KB
        size = export_size(runtime)
        assert size > 2 * RESPONSE_HEADROOM
        # Given a profile whose response cap is below the export's size (THREADLOOM_EXPORT_INLINE_BYTES stays 5 MiB)
        with_response_cap(runtime, size - 1)
        # Then the export is a link to the file in S3, not 500 response_too_large
        status, headers, body = call(f"/sessions/{SESSION}/export")
        assert status == 303, body
        link = json.loads(body)
        assert headers["Location"] == link["url"] and link["bytes"] == size and link["sessions"] == 1
        assert stored_object(link["url"]).startswith(b'{"type":"header"')
        # A cap leaving the file no room for the headers sends it to S3 too; with that room it is answered inline
        with_response_cap(runtime, size + RESPONSE_HEADROOM - 1)
        assert call(f"/sessions/{SESSION}/export")[0] == 303
        with_response_cap(runtime, size + RESPONSE_HEADROOM)
        status, headers, body = call(f"/sessions/{SESSION}/export")
        assert status == 200 and headers["Content-Type"] == "application/x-ndjson"
        assert len(body.encode("utf-8")) == size


def test_without_a_bucket_an_export_over_the_cap_is_a_clear_400(store: Any, tmp_path: Path) -> None:
    runtime, _ = seeded_runtime(tmp_path, store=store)
    size = export_size(runtime)
    with_response_cap(runtime, size + RESPONSE_HEADROOM - 1)
    status, _, body = call(f"/sessions/{SESSION}/export")
    error = json.loads(body)["error"]
    assert status == 400 and error["code"] == "bad_request", body
    assert error["message"].startswith(f"The export is {size} bytes, more than a response can carry")
