"""Fork at message 10,000 copied inside the database against the old fork, and 5,000 children paged by keyset.

Issue figures: a fork at message 10,000 wrote 10k rows through the client in one request (1.0 s);
``/branches`` of a message with 5,000 children was one unpaginated 1.3 MB response. Printed side by
side in one run, per backend (the machine may be loaded: compare the ratios):

- fork: ``POST /sessions/{id}/fork`` through the API handler (the new server-side copy), the new
  ``SessionManager.fork`` alone, and the old algorithm (``SessionManager.fork_by_appending``: read
  the history, append copies), medians of interleaved rounds;
- branches: every 200-child page through the handler, the first and the last page alone (keyset:
  the same cost wherever a page starts), the largest page in bytes, and the old single response.

Run: .venv/bin/python bench/fork_and_branches.py [--postgres postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "functions" / "api")]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # keep the figures readable
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from threadloom import SqliteStore  # noqa: E402
from threadloom.api.profile import load_profile  # noqa: E402
from threadloom.api.runtime import Runtime, Settings, set_runtime  # noqa: E402

LENGTH = 10_000
CHILDREN = 5_000
PAGE = 200
ROUNDS = 3
TENANT = f"bench-{uuid.uuid4()}"  # a namespace of its own, so a shared database is no problem
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "
_TEMPLATE = json.loads((ROOT / "events" / "api" / "get_session.json").read_text(encoding="utf-8"))


class _Context:
    function_name = "threadloom-api"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:threadloom-api"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def call(method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> tuple[int, str]:
    """The handler's status and raw body for an event as API Gateway (HTTP API, JWT authorizer) sends it."""
    from threadloom_api import lambda_handler

    event: dict[str, Any] = copy.deepcopy(_TEMPLATE)
    event["routeKey"] = event["requestContext"]["routeKey"] = "$default"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    event["queryStringParameters"] = query
    event["rawQueryString"] = "&".join(f"{key}={value}" for key, value in (query or {}).items())
    event["body"] = json.dumps(body) if body is not None else None
    response = lambda_handler(event, _Context())  # type: ignore[arg-type]
    return int(response["statusCode"]), str(response["body"])


def median_ms(timings: list[float]) -> float:
    return statistics.median(timings) * 1000


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def measure_fork(name: str, runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    source = manager.create_session("Long voyage").id
    text = {"type": "text", "text": TEXT}
    for start in range(0, LENGTH, 500):
        manager.append_all(
            source, [{"id": f"m{i}", "role": "user", "parts": [text]} for i in range(start, start + 500)]
        )
    leaf = f"m{LENGTH - 1}"

    def through_handler() -> None:
        status, body = call("POST", f"/sessions/{source}/fork", {"atMessageId": leaf, "name": "fork"})
        assert status == 201, body

    new_api, new_library, old = [], [], []
    for _ in range(ROUNDS):  # interleaved, so a burst of load hits every variant alike
        new_api.append(timed(through_handler))
        new_library.append(timed(lambda: manager.fork(source, leaf, "fork")))
        old.append(timed(lambda: manager.fork_by_appending(source, leaf, "old fork")))
    print(f"{name}: fork at message {LENGTH:,} (median of {ROUNDS})")
    print(f"  POST /fork through the API handler (new)  {median_ms(new_api):8.1f} ms")
    print(f"  SessionManager.fork (new, copy in the DB) {median_ms(new_library):8.1f} ms")
    print(f"  old fork (read history, append copies)    {median_ms(old):8.1f} ms")
    print(f"  ratio old / new (library)                 {median_ms(old) / median_ms(new_library):8.1f}x")


def measure_branches(name: str, runtime: Runtime) -> None:
    manager = runtime.manager(TENANT)
    session_id = manager.create_session("Many answers").id
    session = manager.get_session(session_id)
    session.append_message({"id": "q", "role": "user", "parts": [{"type": "text", "text": "Pick a name"}]})
    for index in range(CHILDREN):
        answer = {"id": f"a{index:04d}", "role": "assistant", "parts": [{"type": "text", "text": TEXT * 3}]}
        session.append_message(answer, "q")
    path = f"/sessions/{session_id}/messages/q/branches"

    def all_pages() -> tuple[int, int, int, str]:
        count, pages, largest, cursor, last_cursor = 0, 0, 0, None, ""
        while True:
            query = {"limit": str(PAGE), **({"cursor": cursor} if cursor else {})}
            status, raw = call("GET", path, query=query)
            assert status == 200, raw
            body = json.loads(raw)
            count, pages, largest = count + len(body["messages"]), pages + 1, max(largest, len(raw.encode()))
            if body["nextCursor"] is None:
                return count, pages, largest, last_cursor
            last_cursor = cursor = body["nextCursor"]

    count, pages, largest, last_cursor = all_pages()  # warm, and the last page's cursor
    assert count == CHILDREN
    every = [timed(all_pages) for _ in range(ROUNDS)]
    first = [timed(lambda: call("GET", path, query={"limit": str(PAGE)})) for _ in range(5)]
    last = [timed(lambda: call("GET", path, query={"limit": str(PAGE), "cursor": last_cursor})) for _ in range(5)]
    unpaged = json.dumps({"messages": session.get_branches("q")}, separators=(",", ":")).encode()
    read_all = [timed(lambda: session.get_branches("q")) for _ in range(ROUNDS)]
    print(f"{name}: /branches of a message with {CHILDREN:,} children, pages of {PAGE}")
    print(f"  all {pages} pages through the API handler       {median_ms(every):8.1f} ms")
    print(f"  first page alone                          {median_ms(first):8.1f} ms")
    print(f"  last page alone (keyset)                  {median_ms(last):8.1f} ms")
    print(f"  largest page                              {largest / 1024:8.1f} KB")
    print(
        f"  before: one response of every child       {len(unpaged) / 1024:8.1f} KB "
        f"(library read of all {CHILDREN:,}: {median_ms(read_all):.1f} ms)"
    )


def runtime_for(store: Any, folder: str) -> Runtime:
    profile = load_profile()  # the default profile, with compaction out of the way of the measurement
    profile = profile.model_copy(update={"compaction": profile.compaction.model_copy(update={"threshold": None})})
    settings = Settings(skills_dir=folder, sqlite_path=str(Path(folder) / "unused.db"))
    runtime = Runtime(settings, profile=profile, store=store)
    set_runtime(runtime)
    return runtime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", metavar="URL", help="also measure PostgreSQL at this URL")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(str(Path(folder) / "bench.db"))
        runtime = runtime_for(store, folder)
        measure_fork("SQLite file", runtime)
        measure_branches("SQLite file", runtime)
        store.close()
        if options.postgres:
            from threadloom.storage.postgres.store import PostgresStore

            runtime = runtime_for(PostgresStore(options.postgres), folder)
            measure_fork("PostgreSQL", runtime)
            measure_branches("PostgreSQL", runtime)
        set_runtime(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
