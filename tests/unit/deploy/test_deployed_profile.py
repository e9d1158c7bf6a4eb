"""The deployed profile's guards: no SQLite on Lambda, no migrating on requests, the sam-local tenant only there."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pytest
from threadloom.api.runtime import Settings, set_runtime
from threadloom.api.tenancy import resolve_tenant
from threadloom.errors import ValidationError

from tests.support.api import TENANT, invoke, load_event, seeded_runtime

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

LAMBDA = {"AWS_LAMBDA_FUNCTION_NAME": "threadloom-api"}
SAM_LOCAL = {"AWS_LAMBDA_FUNCTION_NAME": "ApiFunction", "AWS_SAM_LOCAL": "true"}


def test_sqlite_on_a_deployed_function_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError, match=r"own copy of the data in /tmp.*THREADLOOM_BACKEND=postgres"):
        Settings.from_env({**LAMBDA, "THREADLOOM_BACKEND": "sqlite"})
    with pytest.raises(ValidationError, match="own copy"):
        Settings.from_env(LAMBDA)  # sqlite is the default backend
    assert Settings.from_env({**LAMBDA, "THREADLOOM_BACKEND": "postgres"}).backend == "postgres"


def test_sqlite_stays_the_laptop_and_sam_local_default() -> None:
    assert Settings.from_env({}).backend == "sqlite"
    assert Settings.from_env(SAM_LOCAL).backend == "sqlite"


def test_the_deployed_profile_turns_request_time_migration_off() -> None:
    assert Settings.from_env({}).db_migrate is True
    assert Settings.from_env({"THREADLOOM_DB_MIGRATE": "false"}).db_migrate is False
    with pytest.raises(ValidationError, match="THREADLOOM_DB_MIGRATE"):
        Settings.from_env({"THREADLOOM_DB_MIGRATE": "sometimes"})


def test_the_local_tenant_is_read_only_under_sam_local() -> None:
    assert Settings.from_env({**SAM_LOCAL, "THREADLOOM_LOCAL_TENANT": "alice"}).local_tenant == "alice"
    deployed = {**LAMBDA, "THREADLOOM_BACKEND": "postgres", "THREADLOOM_LOCAL_TENANT": "alice"}
    assert Settings.from_env(deployed).local_tenant is None
    assert Settings.from_env({**deployed, "AWS_SAM_LOCAL": "1"}).local_tenant is None  # exactly "true", as sam sets it


def test_the_local_tenant_never_replaces_a_verified_or_missing_claim() -> None:
    verified = {"authorizer": {"jwt": {"claims": {"sub": "bob"}}}}
    assert resolve_tenant(verified, "sub", local_tenant="alice") == "bob"
    from threadloom.api.exceptions import UnauthenticatedError

    with pytest.raises(UnauthenticatedError):  # an authorizer ran but the claim is missing: still a 401
        resolve_tenant({"authorizer": {"jwt": {"claims": {}}}}, "sub", local_tenant="alice")
    assert resolve_tenant({}, "sub", local_tenant="alice") == "alice"
    with pytest.raises(UnauthenticatedError):
        resolve_tenant({}, "sub")


@pytest.fixture
def sam_local_event() -> dict[str, Any]:
    """GET /sessions as ``sam local start-api`` delivers it: no authorizer context."""
    event = copy.deepcopy(load_event("list_sessions"))
    del event["requestContext"]["authorizer"]
    return event


@pytest.fixture
def forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


def test_through_the_handler_sam_local_answers_as_the_local_tenant_and_deployed_answers_401(
    tmp_path: Path, sam_local_event: dict[str, Any], forget_runtime: None
) -> None:
    # Under sam local, with THREADLOOM_LOCAL_TENANT naming the seeded tenant: its sessions
    seeded_runtime(tmp_path, local_tenant=TENANT)
    status, body = invoke(sam_local_event)
    assert status == 200
    assert {session["id"] for session in body["sessions"]} == {"s-demo", "s-other"}

    # Deployed (no local tenant, whatever the environment says): the same event is a 401
    (tmp_path / "deployed").mkdir()
    seeded_runtime(tmp_path / "deployed", local_tenant=None)
    status, body = invoke(sam_local_event)
    assert status == 401
    assert body["error"]["code"]
