"""The handlers' cold path stays lean: what importing each handler must not load (``bench/cold_start.py`` times it).

Each check runs in a fresh interpreter with the function folder and the layer on ``sys.path`` and the environment
of a deployed function (``LAMBDA_TASK_ROOT`` set, so Powertools' Tracer is on), then lists ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
LAYER = ROOT / "layers" / "threadloom"
DEPLOYED = {
    "AWS_LAMBDA_FUNCTION_NAME": "threadloom-test",
    "AWS_REGION": "eu-west-1",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "POWERTOOLS_SERVICE_NAME": "threadloom-test",
    "POWERTOOLS_METRICS_NAMESPACE": "ThreadloomTests",
    "THREADLOOM_BACKEND": "postgres",
    "THREADLOOM_DB_AUTH": "iam",
    "THREADLOOM_DB_HOST": "proxy.example.internal",
    "THREADLOOM_DB_MIGRATE": "false",
}
NEVER_AT_IMPORT = (
    "boto3",
    "botocore.client",  # X-Ray patches botocore once a session is created, not at start-up
    "aws_xray_sdk.ext",
    "jwt",  # the WebSocket authorizer's alone
    "pg8000",
    "threadloom.storage.postgres",
    "threadloom.storage.sqlite",
    "threadloom.compaction.summarizers.bedrock",
    "threadloom.api.profile",  # Pydantic models and YAML, read when the runtime is built
    "yaml",
    "aws_lambda_powertools.utilities.idempotency",  # imports boto3; loaded by the first keyed write
    "aws_lambda_powertools.event_handler.openapi.models",  # the OpenAPI document's models, for /openapi.json
    "mcp",  # the MCP SDK: the MCP function's alone (functions/mcp)
    "threadloom.mcp",
    "starlette",
)
PROFILE_AT_INIT = {
    "threadloom_api": ("threadloom.api.profile", "yaml"),
    "threadloom_compaction": ("threadloom.api.profile", "yaml"),
}
"""The API and compaction functions validate their profile at init (issue 26 item 7: an invalid one is logged once,
at start): every request or queued record reads it anyway, so the first invocation pays no more, and SnapStart
snapshots it loaded."""
HANDLERS = [
    ("api", "threadloom_api"),
    ("compaction", "threadloom_compaction"),
    ("live_publisher", "threadloom_live_publisher"),
]


def loaded_modules(function: str, code: str, **environment: str) -> set[str]:
    """The modules loaded after running ``code`` in a fresh interpreter set up like a deployed function."""
    folder = ROOT / "functions" / function
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(folder), str(LAYER), str(ROOT)]),
        "LAMBDA_TASK_ROOT": str(folder),
        **DEPLOYED,
        **environment,
    }
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    command = [sys.executable, "-c", probe]
    result = subprocess.run(command, check=False, env=env, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def never_at_import(handler: str) -> tuple[str, ...]:
    allowed = PROFILE_AT_INIT.get(handler, ())
    return tuple(name for name in NEVER_AT_IMPORT if name not in allowed)


def offending(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(module for module in modules if any(module == n or module.startswith(f"{n}.") for n in names))


@pytest.mark.parametrize(("function", "handler"), HANDLERS)
def test_importing_a_handler_loads_no_driver_client_or_optional_feature(function: str, handler: str) -> None:
    modules = loaded_modules(function, f"import {handler}")
    assert handler in modules and "aws_xray_sdk.core" in modules  # Tracer is on, as in Lambda
    assert offending(modules, never_at_import(handler)) == []


@pytest.mark.parametrize(("function", "handler"), HANDLERS)
def test_with_tracing_off_the_xray_sdk_is_not_imported(function: str, handler: str) -> None:
    modules = loaded_modules(function, f"import {handler}", POWERTOOLS_TRACE_DISABLED="true")
    assert offending(modules, ("aws_xray_sdk.core", "aws_xray_sdk.ext", *never_at_import(handler))) == []


def test_botocore_is_traced_as_soon_as_a_client_can_be_made() -> None:
    code = (
        "import threadloom_compaction, boto3, botocore.client\n"
        "boto3.client('sqs', region_name='eu-west-1')\n"
        "assert botocore.client._xray_enabled, 'botocore not patched'\n"
        "assert type(botocore.client.BaseClient._make_api_call).__name__ == 'BoundFunctionWrapper'"
    )
    assert "aws_xray_sdk.ext.botocore.patch" in loaded_modules("compaction", code)


def test_an_api_request_on_sqlite_loads_neither_postgres_nor_idempotency(tmp_path: Path) -> None:
    event: dict[str, Any] = json.loads((ROOT / "events/api/health.json").read_text(encoding="utf-8"))
    code = (
        "from tests.support.api import FakeLambdaContext\n"
        "from threadloom_api import lambda_handler\n"
        f"response = lambda_handler({event!r}, FakeLambdaContext())\n"
        "assert response['statusCode'] == 200, response"
    )
    local = {"AWS_LAMBDA_FUNCTION_NAME": "", "THREADLOOM_BACKEND": "sqlite"}  # SQLite is refused on Lambda
    modules = loaded_modules("api", code, THREADLOOM_SQLITE_PATH=str(tmp_path / "t.db"), **local)
    assert "threadloom.storage.sqlite.store" in modules
    assert offending(modules, ("pg8000", "threadloom.storage.postgres", "jwt", "boto3")) == []
    assert offending(modules, ("aws_lambda_powertools.utilities.idempotency",)) == []


def test_the_postgresql_backend_loads_no_sqlite_module() -> None:
    modules = loaded_modules("api", "import threadloom_api, threadloom.storage.postgres.store")
    assert "pg8000" in modules
    assert offending(modules, ("sqlite3", "threadloom.storage.sqlite")) == []


def test_the_snapstart_warm_up_loads_what_the_import_deferred(tmp_path: Path) -> None:
    code = (
        "import threadloom_api\n"
        "from threadloom.api import models, snapstart\n"
        "assert not models.SessionOut.__pydantic_complete__\n"
        "snapstart.before_snapshot()\n"
        "assert all(model.__pydantic_complete__ for model in (models.SessionOut, models.AppendIn, models.MessageIn))"
    )
    local = {"AWS_LAMBDA_FUNCTION_NAME": "", "THREADLOOM_BACKEND": "sqlite"}  # SQLite is refused on Lambda
    table = {"THREADLOOM_IDEMPOTENCY_TABLE": "threadloom-idempotency"}
    modules = loaded_modules("api", code, THREADLOOM_SQLITE_PATH=str(tmp_path / "t.db"), **local, **table)
    assert {"threadloom.api.profile", "yaml", "aws_lambda_powertools.utilities.idempotency", "boto3"} <= modules
    assert "aws_xray_sdk.ext.botocore.patch" in modules  # boto3 arrived traced


def test_the_api_function_never_loads_the_mcp_sdk_not_even_for_mcp(tmp_path: Path) -> None:
    """``/mcp`` is the MCP function's route; should a request reach the REST function, it is not found there."""
    event: dict[str, Any] = json.loads((ROOT / "events/api/health.json").read_text(encoding="utf-8"))
    local = {
        "AWS_LAMBDA_FUNCTION_NAME": "",
        "THREADLOOM_BACKEND": "sqlite",
        "THREADLOOM_SQLITE_PATH": str(tmp_path / "t.db"),
    }
    mcp_event = {
        **event,
        "rawPath": "/mcp",
        "requestContext": {
            **event["requestContext"],
            "http": {**event["requestContext"]["http"], "path": "/mcp", "method": "POST"},
        },
    }
    mcp_event["headers"] = {
        **event.get("headers", {}),
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
    }
    mcp_event["body"] = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    ping = (
        "from tests.support.api import FakeLambdaContext\n"
        "from threadloom_api import lambda_handler\n"
        f"response = lambda_handler({mcp_event!r}, FakeLambdaContext())\n"
        "assert response['statusCode'] in (401, 404), response\n"
    )
    assert offending(loaded_modules("api", ping, **local), ("mcp", "threadloom.mcp", "starlette")) == []


def test_the_mcp_function_loads_the_sdk_at_start_up_for_the_snapshot() -> None:
    modules = loaded_modules("mcp", "import threadloom_mcp")
    assert {"mcp.server.streamable_http_manager", "threadloom.mcp.server", "threadloom.mcp.http"} <= modules
    assert offending(modules, ("pg8000", "boto3", "threadloom.storage.postgres")) == []  # still on first use
