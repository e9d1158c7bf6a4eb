"""Helpers for driving the API Lambda in-process: a fake context, a seeded runtime, event files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from threadloom import SqliteStore
from threadloom.api.runtime import Runtime, Settings, set_runtime

if TYPE_CHECKING:
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


def seeded_runtime(tmp_path: Path, **settings: Any) -> tuple[Runtime, RecordingQueue]:
    """A fresh SQLite runtime with ``s-demo`` (4 messages) and ``s-other`` (about parrots) for ``user-123``."""
    skills = tmp_path / "skills"
    skills.mkdir(exist_ok=True)
    (skills / "pirate.md").write_text("---\ndescription: Talk like a pirate\n---\nSay arr.\n", encoding="utf-8")
    queue = RecordingQueue()
    runtime = Runtime(
        Settings(skills_dir=str(skills), sqlite_path=str(tmp_path / "api.db"), **settings),
        store=SqliteStore(str(tmp_path / "api.db")),
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
