"""Smoke test of a running Threadloom API: a short conversation, then clean up.

Run it against a fresh deploy (the stack's ``ApiUrl`` output and a JWT from your issuer) or against the local
server (any token; it is ignored there). Each check prints one line; the first failure stops the run with
exit status 1 and says what came back. Needs only the Python standard library.

    python scripts/smoke_test.py https://abc123.execute-api.eu-west-1.amazonaws.com/ --token "$TOKEN"
    python scripts/smoke_test.py --outputs outputs.json --token "$TOKEN"   # aws cloudformation describe-stacks ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

TIMEOUT_S = 30.0


class SmokeFailure(Exception):
    """A check that did not get what a working deployment answers."""


class Client:
    def __init__(self, base_url: str, token: str | None) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: Any = None, *, expect: int) -> Any:
        headers = {"accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["content-type"] = "application/json"
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                status, text = response.status, response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode("utf-8", "replace")
        except (urllib.error.URLError, TimeoutError) as error:
            raise SmokeFailure(f"{method} {path}: cannot reach {self.base_url}: {error}") from error
        if status != expect:
            hint = " (is the token valid for this API's issuer and audience?)" if status == 401 else ""
            raise SmokeFailure(f"{method} {path}: expected HTTP {expect}, got {status}{hint}: {text[:300]}")
        return json.loads(text) if text else None


def text_message(message_id: str, role: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def run(client: Client) -> list[str]:
    """The checks, in order; returns one line per check passed."""
    passed: list[str] = []
    health = client.call("GET", "/health", expect=200)
    if health.get("storage") != "reachable":
        raise SmokeFailure(f"GET /health: storage is not reachable: {health}")
    passed.append("health: the API answers and its storage is reachable")

    marker = f"smoke{uuid.uuid4().hex[:8]}"  # a word only this run's messages contain
    session = client.call("POST", "/sessions", {"name": "smoke test"}, expect=201)
    sid = urllib.parse.quote(session["id"], safe="")
    passed.append("created a session")
    try:
        question = text_message("smoke-u1", "user", f"Is the {marker} deploy alive?")
        answer = text_message("smoke-a1", "assistant", f"Yes, the {marker} deploy answers.")
        client.call("POST", f"/sessions/{sid}/messages", {"message": question}, expect=201)
        client.call("POST", f"/sessions/{sid}/messages", {"message": answer}, expect=201)
        passed.append("appended a user and an assistant message")

        history = client.call("GET", f"/sessions/{sid}/history", expect=200)
        ids = [message["id"] for message in history["messages"]]
        if ids != ["smoke-u1", "smoke-a1"]:
            raise SmokeFailure(f"GET history: expected ['smoke-u1', 'smoke-a1'], got {ids}")
        passed.append("history returns both, in order")

        hits = client.call("GET", f"/sessions/{sid}/search?q={marker}", expect=200)
        found = sorted(hit["id"] for hit in hits["results"])
        if found != ["smoke-a1", "smoke-u1"]:
            raise SmokeFailure(f"GET search: expected both messages, got {found}")
        passed.append("search finds them")

        prompt = client.call("GET", f"/sessions/{sid}/system-prompt", expect=200)
        if not isinstance(prompt.get("systemPrompt"), str):
            raise SmokeFailure(f"GET system-prompt: no systemPrompt in {prompt}")
        passed.append("the system prompt renders")
    finally:
        client.call("DELETE", f"/sessions/{sid}", expect=200)
    passed.append("deleted the session")
    return passed


def base_url_from(arguments: argparse.Namespace) -> str:
    if arguments.base_url:
        return str(arguments.base_url)
    outputs = json.loads(open(arguments.outputs, encoding="utf-8").read())  # noqa: PTH123, SIM115
    if isinstance(outputs, dict) and "Stacks" in outputs:
        outputs = outputs["Stacks"][0]["Outputs"]
    for output in outputs:
        if output.get("OutputKey") == "ApiUrl":
            return str(output["OutputValue"])
    raise SmokeFailure(f"{arguments.outputs} has no ApiUrl output")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a short conversation against a Threadloom API.")
    parser.add_argument("base_url", nargs="?", help="the API's base URL (the stack's ApiUrl output)")
    parser.add_argument("--outputs", help="stack outputs as JSON (aws cloudformation describe-stacks), for ApiUrl")
    parser.add_argument("--token", default=os.environ.get("THREADLOOM_TOKEN"), help="JWT (default: $THREADLOOM_TOKEN)")
    arguments = parser.parse_args(argv)
    if not arguments.base_url and not arguments.outputs:
        parser.error("give the base URL or --outputs")
    try:
        base_url = base_url_from(arguments)
        for line in run(Client(base_url, arguments.token)):
            print(f"ok  {line}")
    except SmokeFailure as failure:
        print(f"FAILED  {failure}", file=sys.stderr)
        return 1
    print(f"smoke test passed against {base_url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
