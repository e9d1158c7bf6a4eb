"""Attacks on the local server from web pages, in a real headless Chromium (issue 23).

The local server has no token: any page the user visits could call it. Each test loads a page from
ANOTHER origin (a second HTTP server on 127.0.0.2, a different site from 127.0.0.1) that tries what a
hostile page can do without a preflight: form posts, ``no-cors`` fetches (a urlencoded body that looks
like JSON, a body without any Content-Type, bodyless POSTs) and a WebSocket to ``/ws``; then the server's
data is read back over HTTP to show nothing was written, and nothing was received. Each has a control: the
same request from the server's own origin (the inspector's page) succeeds, so a check that never fires
would fail the control. DNS rebinding is the state after the rebind: Chromium resolves ``rebound.test``
to 127.0.0.1 and loads the API under that name.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.browser.conftest import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS, PROFILE, _require_browser
from tests.support.local_server import RunningServer, call, local_server

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

ATTACKER_HOST = "127.0.0.2"
REBOUND_NAME = "rebound.test"
PLANTED = "PLANTED BY ANOTHER SITE"
SCRIPT_TIMEOUT_S = 10


class AttackerPages:
    """A plain HTTP server on another origin; ``page(html)`` publishes a page and gives its URL."""

    def __init__(self) -> None:
        pages: dict[str, bytes] = {}
        self.pages = pages

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = pages.get(self.path.split("?", 1)[0], b"<!doctype html><title>blank</title>")
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                return

        self.server = ThreadingHTTPServer((ATTACKER_HOST, 0), Handler)
        self.origin = f"http://{ATTACKER_HOST}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def page(self, name: str, html: str) -> str:
        self.pages[f"/{name}"] = html.encode("utf-8")
        return f"{self.origin}/{name}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _loopback_alias_available() -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((ATTACKER_HOST, 0))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    _require_browser()
    with local_server(tmp_path_factory.mktemp("cross-site") / "data", profile=PROFILE) as running:
        yield running


@pytest.fixture(scope="module")
def attacker() -> Iterator[AttackerPages]:
    if not _loopback_alias_available():
        reason = f"cannot bind {ATTACKER_HOST} for the second origin"
        if os.environ.get("THREADLOOM_REQUIRE_BROWSER") == "1":
            pytest.fail(f"Browser security tests are required here but {reason}")
        pytest.skip(reason)
    pages = AttackerPages()
    try:
        yield pages
    finally:
        pages.close()


@pytest.fixture(scope="module")
def driver(server: RunningServer) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile_dir = tempfile.mkdtemp(prefix="threadloom-chromium-security-")
    flags = (*CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", f"--host-resolver-rules=MAP {REBOUND_NAME} 127.0.0.1")
    for flag in flags:
        options.add_argument(flag)
    browser = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    browser.set_page_load_timeout(SCRIPT_TIMEOUT_S)
    browser.set_script_timeout(SCRIPT_TIMEOUT_S)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile_dir, ignore_errors=True)


def new_session(server: RunningServer, name: str) -> str:
    status, body = call(server.url, "POST", "/sessions", {"name": name})
    assert status == 201, body
    session_id = str(body["id"])
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Chart a course to Lisbon."}]}
    status, body = call(server.url, "POST", f"/sessions/{session_id}/messages", {"message": message})
    assert status in (200, 201), body
    return session_id


def memory_of(server: RunningServer, session_id: str) -> str:
    status, body = call(server.url, "GET", f"/sessions/{session_id}/context")
    assert status == 200, body
    return str(next(block["content"] for block in body["blocks"] if block["label"] == "memory"))


def message_count(server: RunningServer, session_id: str) -> int:
    status, body = call(server.url, "GET", f"/sessions/{session_id}/history")
    assert status == 200, body
    return len(body["messages"])


FETCHES = """
const [requests, done] = [arguments[0], arguments[arguments.length - 1]];
const outcomes = [];
for (const [url, init] of requests) {
  try {
    const response = await fetch(url, init);
    outcomes.push(response.type === "opaque" ? "opaque" : response.status);
  } catch (error) {
    outcomes.push("failed: " + error.message);
  }
}
done(outcomes);
"""


def run_fetches(driver: Any, requests: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Run fetches in order in the current page; what each gave (a status, ``opaque`` or a failure)."""
    return list(driver.execute_async_script(f"(async () => {{ {FETCHES} }})();", requests))


def planting_fetches(server: RunningServer, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """What a page can send to plant memory without a preflight, plus a preflighted JSON one."""
    url = f"{server.url}/sessions/{session_id}/tools/set_context"
    body = json.dumps({"input": {"label": "memory", "content": PLANTED}})
    return [
        (url, {"method": "POST", "mode": "no-cors", "body": body,
               "headers": {"content-type": "application/x-www-form-urlencoded"}}),
        (url, {"method": "POST", "mode": "no-cors", "body": body, "headers": {"content-type": "text/plain"}}),
        (url, {"method": "POST", "mode": "no-cors", "body": body}),  # a string body: text/plain
        (url, {"method": "POST", "mode": "cors", "body": body, "headers": {"content-type": "application/json"}}),
    ]  # fmt: skip


NO_CONTENT_TYPE = """
const [url, body, done] = arguments;
// A Blob without a type: the request carries no Content-Type header at all.
fetch(url, {method: "POST", mode: "no-cors", body: new Blob([body])})
  .then((response) => done(response.type), (error) => done("failed: " + error.message));
"""


def test_a_page_on_another_origin_cannot_plant_memory(
    driver: Any, server: RunningServer, attacker: AttackerPages
) -> None:
    session_id = new_session(server, "planting target")
    before = memory_of(server, session_id)
    driver.get(attacker.page("plant", "<!doctype html><title>Cute cats</title>"))
    outcomes = run_fetches(driver, planting_fetches(server, session_id))
    assert outcomes[:3] == ["opaque"] * 3 and str(outcomes[3]).startswith("failed")
    body = json.dumps({"input": {"label": "memory", "content": PLANTED}})
    url = f"{server.url}/sessions/{session_id}/tools/set_context"
    assert driver.execute_async_script(NO_CONTENT_TYPE, url, body) == "opaque"
    time.sleep(0.3)  # opaque answers resolve when the response arrives; let the handler finish regardless
    assert memory_of(server, session_id) == before
    assert PLANTED not in memory_of(server, session_id)


def test_control_the_servers_own_page_writes_memory(driver: Any, server: RunningServer) -> None:
    session_id = new_session(server, "planting control")
    driver.get(f"{server.url}/health")  # a page of the server's own origin without a CSP
    url = f"{server.url}/sessions/{session_id}/tools/set_context"
    body = json.dumps({"input": {"label": "memory", "content": PLANTED}})
    outcomes = run_fetches(
        driver, [(url, {"method": "POST", "body": body, "headers": {"content-type": "application/json"}})]
    )
    assert outcomes == [200]
    assert PLANTED in memory_of(server, session_id)


def test_a_page_on_another_origin_cannot_clear_or_delete_with_bodyless_requests(
    driver: Any, server: RunningServer, attacker: AttackerPages
) -> None:
    session_id = new_session(server, "clearing target")
    assert message_count(server, session_id) == 1
    driver.get(attacker.page("clear", "<!doctype html><title>Weather</title>"))
    clear = f"{server.url}/sessions/{session_id}/clear"
    outcomes = run_fetches(
        driver,
        [
            (clear, {"method": "POST", "mode": "no-cors"}),
            (f"{server.url}/sessions/{session_id}", {"method": "DELETE", "mode": "cors"}),
            (f"{server.url}/sessions", {"method": "POST", "mode": "no-cors"}),
        ],
    )
    assert outcomes[0] == "opaque" and str(outcomes[1]).startswith("failed") and outcomes[2] == "opaque"
    time.sleep(0.3)
    assert message_count(server, session_id) == 1
    status, _ = call(server.url, "GET", f"/sessions/{session_id}")
    assert status == 200


def test_control_the_servers_own_page_clears_with_a_bodyless_post(driver: Any, server: RunningServer) -> None:
    session_id = new_session(server, "clearing control")
    driver.get(f"{server.url}/health")
    outcomes = run_fetches(driver, [(f"{server.url}/sessions/{session_id}/clear", {"method": "POST"})])
    assert outcomes == [200]
    assert message_count(server, session_id) == 0


def form_page(action: str, fields: dict[str, str], enctype: str) -> str:
    inputs = "".join(
        f"<input type='hidden' name='{html.escape(name)}' value='{html.escape(value)}'>"
        for name, value in fields.items()
    )
    return (
        "<!doctype html><title>Win a prize</title>"
        f"<form id='f' method='POST' action='{action}' enctype='{enctype}'>{inputs}</form>"
        "<script>document.getElementById('f').submit()</script>"
    )


@pytest.mark.parametrize("enctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_form_on_another_origin_cannot_post_to_the_server(
    driver: Any, server: RunningServer, attacker: AttackerPages, enctype: str
) -> None:
    session_id = new_session(server, f"form target {enctype}")
    action = f"{server.url}/sessions/{session_id}/tools/set_context"
    # text/plain sends 'name=value': the name opens a JSON object and the value closes it.
    fields = {'{"input": {"label": "memory", "content": "' + PLANTED + '", "x": "': '"}}'}
    driver.get(attacker.page(f"form-{enctype.replace('/', '-')}", form_page(action, fields, enctype)))
    _wait_for_url(driver, server.url)
    clear_action = f"{server.url}/sessions/{session_id}/clear"
    driver.get(attacker.page("form-clear", form_page(clear_action, {}, "application/x-www-form-urlencoded")))
    _wait_for_url(driver, server.url)
    assert PLANTED not in memory_of(server, session_id)
    assert message_count(server, session_id) == 1
    assert "forbidden" in driver.find_element("tag name", "body").text


def test_control_a_form_on_the_servers_own_origin_is_answered(driver: Any, server: RunningServer) -> None:
    session_id = new_session(server, "form control")
    driver.get(f"{server.url}/health")
    driver.execute_script(
        "const form = document.createElement('form');"
        "form.method = 'POST'; form.action = arguments[0]; document.body.appendChild(form); form.submit();",
        f"{server.url}/sessions/{session_id}/clear",
    )
    _wait_for_url(driver, f"{server.url}/sessions/")
    assert message_count(server, session_id) == 0


def _wait_for_url(driver: Any, prefix: str) -> None:
    deadline = time.monotonic() + SCRIPT_TIMEOUT_S
    while (
        not driver.current_url.startswith(prefix) or driver.execute_script("return document.readyState") != "complete"
    ):
        assert time.monotonic() < deadline, f"the form did not reach {prefix}: {driver.current_url}"
        time.sleep(0.05)


WEBSOCKET = """
const [url, sessionId, protocols, done] = arguments;
const events = [];
let socket;
try {
  socket = new WebSocket(url, protocols);
} catch (error) {
  done(["failed: " + error.message]);
  return;
}
socket.onopen = () => { events.push("open"); socket.send(JSON.stringify({action: "subscribe", sessionId})); };
socket.onmessage = (message) => { events.push(message.data); socket.close(); };
socket.onclose = () => done(events);
setTimeout(() => done(events), 4000);
"""


def test_a_page_on_another_origin_cannot_watch_a_session(
    driver: Any, server: RunningServer, attacker: AttackerPages
) -> None:
    session_id = new_session(server, "watched target")
    driver.get(attacker.page("watch", "<!doctype html><title>News</title>"))
    events = driver.execute_async_script(WEBSOCKET, server.ws_url, session_id, [])
    assert events == []


def test_control_the_servers_own_page_watches_a_session(driver: Any, server: RunningServer) -> None:
    session_id = new_session(server, "watched control")
    driver.get(f"{server.url}/health")
    events = driver.execute_async_script(WEBSOCKET, server.ws_url, session_id, [])
    assert events[0] == "open" and json.loads(events[1])["type"] == "subscribed"


def test_a_rebound_host_name_gets_no_data(driver: Any, server: RunningServer) -> None:
    new_session(server, "rebinding target")
    driver.get(f"http://{REBOUND_NAME}:{server.port}/sessions")
    text = driver.find_element("tag name", "body").text
    assert "misdirected_request" in text and "rebinding target" not in text
    driver.get(f"http://localhost:{server.port}/sessions")  # control: the server's own name
    assert "rebinding target" in driver.find_element("tag name", "body").text


def answers(server: RunningServer, path: str = "/health") -> int | str:
    try:
        with urllib.request.urlopen(f"{server.url}{path}", timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError as error:
        return f"no answer ({type(error).__name__})"


def test_a_page_on_another_origin_cannot_freeze_the_server_with_a_navigation_to_mcp(
    driver: Any, server: RunningServer, attacker: AttackerPages
) -> None:
    """A navigation is a GET the access rules let through; at /mcp it used to open the MCP transport's
    event stream, which never ended, and the server, which runs one request at a time, stopped answering."""
    assert answers(server) == 200
    driver.get(attacker.page("frame-mcp.html", f'<!doctype html><iframe src="{server.url}/mcp"></iframe>'))
    frame = driver.find_element("tag name", "iframe")
    driver.switch_to.frame(frame)
    assert "method_not_allowed" in driver.find_element("tag name", "body").text  # answered, not left open
    driver.switch_to.default_content()
    driver.get("about:blank")
    assert answers(server) == 200
    assert answers(server, "/mcp") == 405


def test_the_inspector_page_may_connect_only_to_its_own_origin(
    driver: Any, server: RunningServer, attacker: AttackerPages
) -> None:
    driver.get(f"{server.url}/")
    elsewhere = f"ws://{ATTACKER_HOST}:{attacker.server.server_address[1]}/ws"
    outcome = driver.execute_async_script(
        """
        const [url, done] = arguments;
        document.addEventListener("securitypolicyviolation", (event) => done("blocked " + event.violatedDirective));
        try { new WebSocket(url); } catch (error) { done("blocked " + error.name); }
        setTimeout(() => done("allowed"), 3000);
        """,
        elsewhere,
    )
    assert str(outcome).startswith("blocked")
    # The inspector's own channel, offering the live subprotocol as live.js does: selected, subscribed.
    events = driver.execute_async_script(
        WEBSOCKET, server.ws_url, new_session(server, "csp control"), ["threadloom.live"]
    )
    assert events[0] == "open" and json.loads(events[1])["type"] == "subscribed"


class HandshakeRecorder:
    """A WebSocket server standing in for a deployed live channel: it records each handshake's URL and subprotocols."""

    def __init__(self) -> None:
        from websockets.sync.server import serve

        self.handshakes: list[tuple[str, str]] = []

        def record(connection: Any, request: Any) -> None:
            """Every handshake, before the subprotocol is negotiated."""
            self.handshakes.append((request.path, request.headers.get("Sec-WebSocket-Protocol", "")))

        def handler(connection: Any) -> None:
            for _ in connection:  # hold the channel open until the page leaves
                pass

        self.server = serve(handler, "127.0.0.1", 0, subprotocols=["threadloom.live"], process_request=record)
        self.url = f"ws://127.0.0.1:{self.server.socket.getsockname()[1]}/dev"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def recorder() -> Iterator[HandshakeRecorder]:
    recording = HandshakeRecorder()
    try:
        yield recording
    finally:
        recording.close()


@pytest.fixture(scope="module")
def deployed_like(tmp_path_factory: pytest.TempPathFactory, recorder: HandshakeRecorder) -> Iterator[RunningServer]:
    """The inspector served with its live channel elsewhere, as on AWS (THREADLOOM_WEBSOCKET_URL)."""
    _require_browser()
    directory = tmp_path_factory.mktemp("deployed-like") / "data"
    with local_server(directory, profile=PROFILE, env={"THREADLOOM_WEBSOCKET_URL": recorder.url}) as running:
        yield running


def test_the_inspector_sends_its_token_as_a_subprotocol_never_in_the_url(
    driver: Any, deployed_like: RunningServer, recorder: HandshakeRecorder
) -> None:
    session_id = new_session(deployed_like, "token transport")
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJsb2NhbCJ9.c2lnbmF0dXJl"  # the local server checks none
    driver.get(f"{deployed_like.url}/health")
    driver.execute_script("sessionStorage.setItem('threadloom.token', arguments[0])", token)
    driver.get(f"{deployed_like.url}/#/sessions/{session_id}")
    deadline = time.monotonic() + SCRIPT_TIMEOUT_S
    while not recorder.handshakes:
        assert time.monotonic() < deadline, "the inspector opened no live channel"
        time.sleep(0.05)
    path, protocols = recorder.handshakes[-1]
    assert path == "/dev" and token not in path
    assert [name.strip() for name in protocols.split(",")] == ["threadloom.live", f"threadloom.token.{token}"]
    driver.execute_script("sessionStorage.clear()")
    driver.get("about:blank")  # the page leaves, so its channel closes before the recorder stops
