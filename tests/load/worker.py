"""One Lambda-like worker of the load test: a process, one connection, one request at a time.

Run as ``python -m tests.load.worker CONFIG.json`` by :mod:`tests.load.run`. Like a Lambda execution
environment it imports the API function's handler once, and every request goes through
``lambda_handler`` with an API Gateway event; the runtime builds its ``PostgresStore`` from
``THREADLOOM_*`` variables (``from_environment``: one lazily opened connection per process).

The mix per request: appends (to the conversation the worker has open), history pages, a search
in the session or across the tenant, and opening a keyed conversation (keys are shared by the
workers of a tenant, so several workers append to one session at once). A failed append is
re-sent with the same message id, as a client does after a 503: appends are idempotent by id.

Protocol: the worker writes ``ready`` to its status file once warm, waits for a line on stdin, runs
until the ``time.time()`` in the end file (re-read before every request: a crash run moves it so
that every worker has time to recover), and writes its records as JSON to the result file.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_VOCABULARY = (
    "agent tool memory summary invoice travel booking refund weather flight hotel budget report "
    "deadline meeting customer order shipping python database index search history compaction"
)
WORDS = tuple(_VOCABULARY.split())
#: What a client does after a 503 before it tries again (the API sends Retry-After).
RETRY_PAUSE_S = 0.05
MIX = (("append", 0.6), ("history", 0.2), ("search", 0.1), ("open", 0.1))


@dataclass
class Pending:
    """The append a worker sends until it is acknowledged (the same id every time)."""

    session_id: str
    message_id: str
    body: dict[str, Any]


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


class Worker:
    """The requests of one worker, each through the real handler, recorded with their outcome."""

    def __init__(self, config: dict[str, Any]) -> None:
        from threadloom_api import lambda_handler

        from tests.support.api import FakeLambdaContext, gateway_event

        self.handler = lambda_handler
        self.context = FakeLambdaContext()
        self.gateway_event = gateway_event
        self.index: int = config["index"]
        self.tenant: str = config["tenant"]
        self.keys: list[str] = config["keys"]
        self.rng = random.Random(config["seed"])
        self.session_id: str | None = None
        self.pending: Pending | None = None
        self.sequence = 0
        #: (op, start wall time, seconds, status, error code, session id, message id, error message)
        self.records: list[list[Any]] = []

    def call(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None) -> tuple[int, Any]:
        event = self.gateway_event(method, path, body, query=query, tenant=self.tenant)
        try:
            response = self.handler(event, self.context)
        except Exception as error:  # an exception escaping the handler is the worst untyped error
            return 0, {"error": {"code": f"exception:{type(error).__name__}", "message": str(error)}}
        text = response.get("body") or "null"
        try:
            return int(response["statusCode"]), json.loads(text)
        except ValueError:
            return int(response["statusCode"]), {"error": {"code": "unparsable", "message": text[:200]}}

    def record(  # noqa: PLR0917 - one recorded outcome's fields
        self,
        op: str,
        started: float,
        seconds: float,
        status: int,
        answer: Any,
        session_id: str = "",
        message_id: str = "",
    ) -> None:
        failed = status == 0 or status >= 300
        error = answer.get("error") if failed and isinstance(answer, dict) else None
        code = str(error.get("code", "")) if isinstance(error, dict) else ""
        text = str(error.get("message", ""))[:300] if isinstance(error, dict) else ""
        self.records.append([op, started, seconds, status, code, session_id or self.session_id or "", message_id, text])

    def timed(self, op: str, method: str, path: str, body: Any = None, **options: Any) -> tuple[int, Any]:
        started, clock = time.time(), time.perf_counter()
        status, answer = self.call(method, path, body, **options)
        self.record(op, started, time.perf_counter() - clock, status, answer)
        return status, answer

    def open(self) -> int:
        key = self.rng.choice(self.keys)
        started, clock = time.time(), time.perf_counter()
        status, answer = self.call("POST", "/sessions/open", {"key": key, "source": "load-test"})
        if status in (200, 201):
            self.session_id = str(answer["id"])
        self.record("open", started, time.perf_counter() - clock, status, answer)
        return status

    def append(self) -> int:
        if self.pending is None:
            assert self.session_id is not None
            self.sequence += 1
            message_id = f"w{self.index}-{self.sequence}"
            role = "user" if self.sequence % 2 else "assistant"
            message = {"id": message_id, "role": role, "parts": [{"type": "text", "text": sentence(self.rng, 40)}]}
            self.pending = Pending(self.session_id, message_id, {"message": message})
        pending = self.pending
        started, clock = time.time(), time.perf_counter()
        status, answer = self.call("POST", f"/sessions/{pending.session_id}/messages", pending.body)
        seconds = time.perf_counter() - clock
        self.record("append", started, seconds, status, answer, pending.session_id, pending.message_id)
        if status in (200, 201):  # 201 stored now, 200 stored by an earlier attempt whose answer was lost
            self.pending = None
        return status

    def history(self) -> int:
        limit = self.rng.choice(("20", "50"))
        status, answer = self.timed("history", "GET", f"/sessions/{self.session_id}/history", query={"limit": limit})
        cursor = answer.get("nextCursor") if status == 200 and isinstance(answer, dict) else None
        if cursor and self.rng.random() < 0.3:  # the reader scrolls on: the next page
            status, _ = self.timed(
                "history", "GET", f"/sessions/{self.session_id}/history", query={"limit": limit, "cursor": cursor}
            )
        return status

    def search(self) -> int:
        words = self.rng.choice(WORDS)
        if self.rng.random() < 0.2:
            return self.timed("search", "GET", "/search", query={"q": words})[0]
        return self.timed("search", "GET", f"/sessions/{self.session_id}/search", query={"q": words})[0]

    def step(self) -> int:
        if self.session_id is None:
            return self.open()
        if self.pending is not None:  # an unacknowledged append comes first, as a client retrying it
            return self.append()
        point, op = self.rng.random(), "append"
        for name, weight in MIX:
            point -= weight
            if point < 0:
                op = name
                break
        method = {"append": self.append, "history": self.history, "search": self.search, "open": self.open}[op]
        return method()


def seed(worker: Worker, messages: int) -> list[list[Any]]:
    """Give every key's conversation ``messages`` messages (chain appends of 50) before the run."""
    acked: list[list[Any]] = []
    for key in worker.keys:
        status, answer = worker.call("POST", "/sessions/open", {"key": key, "source": "load-test"})
        if status not in (200, 201):
            raise RuntimeError(f"seeding: open {key} answered {status} {answer}")
        session_id = str(answer["id"])
        for first in range(0, messages, 50):
            chain = [
                {
                    "id": f"seed-{key}-{number}",
                    "role": "user" if number % 2 else "assistant",
                    "parts": [{"type": "text", "text": sentence(worker.rng, 40)}],
                }
                for number in range(first, min(messages, first + 50))
            ]
            status, answer = worker.call("POST", f"/sessions/{session_id}/messages", {"messages": chain})
            if status not in (200, 201):
                raise RuntimeError(f"seeding: append to {session_id} answered {status} {answer}")
            acked.extend(["seed", 0.0, 0.0, status, "", session_id, message["id"], ""] for message in chain)
    return acked


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    os.environ.update(config["environment"])
    worker = Worker(config)
    if config.get("seed_messages"):
        records = seed(worker, int(config["seed_messages"]))
        Path(config["result"]).write_text(json.dumps(records), encoding="utf-8")
        return
    worker.call("GET", "/sessions", query={"limit": "1"})  # warm: the first request connects, as a cold start
    Path(config["status"]).write_text("ready", encoding="utf-8")
    sys.stdin.readline()  # the start signal
    end_file = Path(config["end"])
    while time.time() < float(end_file.read_text(encoding="utf-8")):  # a crash run may move the end later
        status = worker.step()
        if status >= 500 or status == 0:
            time.sleep(RETRY_PAUSE_S)
    Path(config["result"]).write_text(json.dumps(worker.records), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
