"""Reading a 10,000-message history page by page through the API handler, against one library read.

Target (issue: history paging that costs a page): all 200-message pages of a 10k history through
``GET /sessions/{id}/history`` take at most 2x one ``get_history()`` of the library, on each
backend. "Through the handler" is the time inside ``lambda_handler`` (the harness building
request events and parsing the replies, the client's work, is printed apart). Samples of the one
read and of the paged read alternate in one run (the machine may be loaded: compare the ratios),
with the previous design (a whole read sliced for every page) for reference.

Run: .venv/bin/python bench/history_paging.py [--postgres postgresql://postgres@127.0.0.1:5432/test]
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
PAGE = 200
SAMPLES = 7
TENANT = "bench-tenant"
SESSION = "s-paging"
TEXT = "The quick brown fox jumps over the lazy dog while the agent takes careful notes. "


class _Context:
    function_name = "threadloom-api"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:threadloom-api"
    aws_request_id = "00000000-0000-0000-0000-000000000000"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


_TEMPLATE = json.loads((ROOT / "events" / "api" / "get_session.json").read_text(encoding="utf-8"))


def history_event(query: dict[str, str]) -> dict[str, Any]:
    """A ``GET /sessions/{id}/history`` event as API Gateway (HTTP API, JWT authorizer) sends it."""
    event: dict[str, Any] = copy.deepcopy(_TEMPLATE)
    path = f"/sessions/{SESSION}/history"
    event["routeKey"] = event["requestContext"]["routeKey"] = "$default"
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = "GET"
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    event["queryStringParameters"] = query
    event["rawQueryString"] = "&".join(f"{key}={value}" for key, value in query.items())
    return event


def all_pages_through_the_handler(in_handler: list[float] | None = None) -> int:
    """Every page of the history; returns how many messages came back.

    ``in_handler`` collects the seconds spent inside the handler: building each request event
    and decoding each reply is the client's work, not the API's.
    """
    from threadloom_api import lambda_handler

    count, cursor = 0, None
    while True:
        query = {"limit": str(PAGE), **({"cursor": cursor} if cursor else {})}
        event = history_event(query)
        started = time.perf_counter()
        response = lambda_handler(event, _Context())  # type: ignore[arg-type]
        if in_handler is not None:
            in_handler.append(time.perf_counter() - started)
        body = json.loads(response["body"])
        assert response["statusCode"] == 200, body
        count += len(body["messages"])
        cursor = body["nextCursor"]
        if cursor is None:
            return count


def all_pages_from_storage(storage: Any, leaf: str) -> int:
    """The same pages read from storage directly (no handler), to tell storage cost from request cost.

    Each page hands the next its walk anchor, as the handler's cursor does.
    """
    count, start, after, anchor = 0, 0, None, None
    while True:
        page = storage.get_history_page(
            leaf, start=start, limit=PAGE, max_bytes=5 * 2**20, after_id=after, walk_from=anchor
        )
        count += len(page.entries)
        last = page.entries[-1]
        if last.next_depth >= page.path_length:
            return count
        start, after, anchor = last.next_depth, last.last_id, page.next_anchor


def median_ms(action: Any, repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def measure(name: str, store: Any, folder: str) -> float:
    profile = load_profile()  # the default profile, with compaction out of the way of the measurement
    profile = profile.model_copy(update={"compaction": profile.compaction.model_copy(update={"threshold": 10**12})})
    settings = Settings(skills_dir=folder, sqlite_path=str(Path(folder) / "unused.db"))
    runtime = Runtime(settings, profile=profile, store=store)
    set_runtime(runtime)
    runtime.store.registry(TENANT).create("Paging", session_id=SESSION)
    manager = runtime.manager(TENANT)
    text = {"type": "text", "text": TEXT * 2}
    for start in range(0, LENGTH, 500):
        chain = [{"id": f"m{i}", "role": "user", "parts": [text]} for i in range(start, start + 500)]
        manager.append_all(SESSION, chain)
    manager.add_compaction(SESSION, "an early summary", "m100", "m900")  # overlays are applied page by page
    session = manager.get_session(SESSION)
    leaf = session.get_latest_leaf()
    assert leaf is not None
    expected = len(session.get_history())
    assert all_pages_through_the_handler() == expected  # warm: imports, connections

    # Samples of the one read and of the paged read alternate, so machine drift hits both alike.
    library_samples, paged_samples, client_samples = [], [], []
    for _ in range(SAMPLES):
        library_samples.append(median_ms(session.get_history, 1))
        in_handler: list[float] = []
        client_samples.append(median_ms(lambda: all_pages_through_the_handler(in_handler), 1))  # noqa: B023
        paged_samples.append(sum(in_handler) * 1000)
    library, paged = statistics.median(library_samples), statistics.median(paged_samples)
    with_client = statistics.median(client_samples)
    storage = median_ms(lambda: all_pages_from_storage(session.storage, str(leaf["id"])), 3)
    pages = -(-expected // PAGE)
    sliced = median_ms(lambda: [session.get_history(leaf["id"])[i : i + PAGE] for i in range(0, expected, PAGE)], 1)
    print(f"{name}: {LENGTH:,} messages ({expected:,} with the overlay applied), pages of {PAGE}")
    print(f"  one library read (get_history)          {library:8.1f} ms")
    print(f"  all {pages} pages through the API handler    {paged:8.1f} ms")
    print(f"  ratio pages / one read                  {paged / library:8.2f}  (target <= 2)")
    print(f"  with the client's requests and parsing  {with_client:8.1f} ms")
    print(f"  the same pages, storage reads alone     {storage:8.1f} ms  ({storage / library:.2f}x one read)")
    print(f"  a whole read sliced per page (before)   {sliced:8.1f} ms  ({sliced / library:.1f}x one read)")
    set_runtime(None)
    return paged / library


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--postgres", metavar="URL", help="also measure PostgreSQL on this server (in a scratch database)"
    )
    options = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(str(Path(folder) / "bench.db"))
        ratios.append(measure("SQLite file", store, folder))
        store.close()
        if options.postgres:
            from threadloom.storage.postgres.store import PostgresStore

            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from scratch import scratch_postgres

            with scratch_postgres(options.postgres) as url:
                store = PostgresStore(url)
                ratios.append(measure("PostgreSQL", store, folder))
                store.close()
    return 0 if all(ratio <= 2 for ratio in ratios) else 1


if __name__ == "__main__":
    sys.exit(main())
