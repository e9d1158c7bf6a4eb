"""Helpers for driving the API Lambda in-process: a fake context, a seeded runtime, event files."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from threadloom import SqliteStore
from threadloom.api.runtime import Runtime, Settings, set_runtime

if TYPE_CHECKING:
    from collections.abc import Iterator

    from threadloom.compaction.queue import CompactionRequest

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events" / "api"
TENANT = "user-123"
SESSION = "s-demo"


@dataclass
class FakeLambdaContext:
    function_name: str = "threadloom-api"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:eu-west-1:123456789012:function:threadloom-api"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


class RecordingQueue:
    """A compaction queue that only remembers what was enqueued."""

    def __init__(self) -> None:
        self.requests: list[CompactionRequest] = []

    def enqueue(self, request: CompactionRequest) -> None:
        self.requests.append(request)


def text(message_id: str, role: str, body: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": body}]}


SEED = [
    text("m1", "user", "How do pirates file their taxes?"),
    text("m2", "assistant", "Carefully: plunder counts as income."),
    text("m3", "user", "Do I need a receipt for each doubloon?"),
    text("m4", "assistant", "Arr, keep every receipt."),
]


def backend_store(request: Any) -> Any:
    """The store a ``params=["sqlite", "postgres"]`` fixture asks for: None (SQLite) or a PostgreSQL store."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_store_factory")()
    return None


def create_idempotency_table(name: str) -> None:
    """The idempotency table as the template makes it (inside a moto context): the record id is the key."""
    import boto3

    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )


def seeded_runtime(tmp_path: Path, store: Any = None, **settings: Any) -> tuple[Runtime, RecordingQueue]:
    """A fresh runtime (SQLite unless ``store`` is given): ``s-demo`` (4 messages) and ``s-other`` of ``user-123``."""
    skills = tmp_path / "skills"
    skills.mkdir(exist_ok=True)
    (skills / "pirate.md").write_text("---\ndescription: Talk like a pirate\n---\nSay arr.\n", encoding="utf-8")
    queue = RecordingQueue()
    runtime = Runtime(
        Settings(skills_dir=str(skills), sqlite_path=str(tmp_path / "api.db"), **settings),
        store=store if store is not None else SqliteStore(str(tmp_path / "api.db")),
        queue=queue,
    )
    registry = runtime.store.registry(TENANT)
    registry.create("Pirate taxes", session_id=SESSION)
    registry.create("Parrots", session_id="s-other")
    manager = runtime.manager(TENANT)
    manager.append_all(SESSION, [dict(message) for message in SEED])
    manager.append("s-other", text("p1", "user", "What do parrots eat?"))
    set_runtime(runtime)
    return runtime, queue


def profile_runtime(request: Any, tmp_path: Path, profile: dict[str, Any]) -> Iterator[Runtime]:
    """An installed runtime with ``profile`` on the backend a ``params=["sqlite", "postgres"]`` fixture asks for."""
    from threadloom.api.profile import parse_profile

    store = backend_store(request)
    runtime = Runtime(
        Settings(sqlite_path=str(tmp_path / "api.db")),
        store=store if store is not None else SqliteStore(str(tmp_path / "api.db")),
        profile=parse_profile(profile),
    )
    set_runtime(runtime)
    yield runtime
    set_runtime(None)


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def invoke(event: dict[str, Any]) -> tuple[int, Any]:
    from threadloom_api import lambda_handler

    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    body = response.get("body")
    content_type = {key.lower(): value for key, value in (response.get("headers") or {}).items()}.get(
        "content-type", ""
    )
    if body and not content_type.startswith("application/json"):
        return int(response["statusCode"]), body  # the inspector's HTML, JavaScript and CSS
    return int(response["statusCode"]), json.loads(body) if body else None


def gateway_event(
    method: str,
    path: str,
    body: Any = None,
    *,
    raw_body: bytes | None = None,
    query: dict[str, str] | None = None,
    tenant: Any = TENANT,
    headers: dict[str, str] | None = None,
    scopes: list[str] | None = None,
) -> dict[str, Any]:
    """An event exactly as an API Gateway HTTP API (payload 2.0, JWT authorizer) hands it to the function.

    ``path`` is given as the client typed it (percent-encoded); API Gateway passes ``rawPath``
    percent-decoded and cut at the first decoded ``?``, so this does the same. A ``raw_body``
    that is not UTF-8 arrives base64-encoded with ``isBase64Encoded: true``.
    """
    from urllib.parse import quote, unquote

    decoded = unquote(path).split("?", 1)[0]
    event = json.loads((EVENTS / "get_session.json").read_text(encoding="utf-8"))
    event["routeKey"] = event["requestContext"]["routeKey"] = "$default"
    event["rawPath"] = event["requestContext"]["http"]["path"] = decoded
    event["requestContext"]["http"]["method"] = method
    event["rawQueryString"] = "&".join(
        f"{quote(k, errors='surrogatepass')}={quote(v, errors='surrogatepass')}" for k, v in (query or {}).items()
    )
    if query:
        event["queryStringParameters"] = dict(query)
    claims = event["requestContext"]["authorizer"]["jwt"]["claims"]
    if tenant is None:
        del claims["sub"]
    else:
        claims["sub"] = tenant
    event["headers"].update({key.lower(): value for key, value in (headers or {}).items()})
    event["requestContext"]["authorizer"]["jwt"]["scopes"] = scopes
    if raw_body is not None:
        try:
            event["body"], event["isBase64Encoded"] = raw_body.decode("utf-8"), False
        except UnicodeDecodeError:
            event["body"], event["isBase64Encoded"] = base64.b64encode(raw_body).decode("ascii"), True
    elif body is not None:
        event["body"] = json.dumps(body)
    return event  # type: ignore[no-any-return]


def call(method: str, path: str, body: Any = None, **options: Any) -> tuple[int, Any]:
    """Invoke the handler with :func:`gateway_event` and parse the answer."""
    return invoke(gateway_event(method, path, body, **options))
