"""The local server's host, origin and media-type checks (issue 23), by rule and over real HTTP.

The browser attacks are in ``test_local_server_browser.py``; here every rule of
``threadloom.local_access`` is checked on its own (each with a request that passes), and the
server's flag and environment variable are checked on a running server.
"""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom.local_access import AccessRules

from tests.support.local_server import RunningServer, local_server

PORT = 3000
RULES = AccessRules.for_server("127.0.0.1", PORT, environ={})
JSON = {"content-type": "application/json"}


def headers(host: str = f"localhost:{PORT}", **extra: str) -> dict[str, str]:
    return {"host": host, **{key.replace("_", "-"): value for key, value in extra.items()}}


@pytest.mark.parametrize(
    "host",
    [f"localhost:{PORT}", f"127.0.0.1:{PORT}", f"[::1]:{PORT}", f"LOCALHOST:{PORT}", f"[0:0:0:0:0:0:0:1]:{PORT}"],
)
def test_the_default_host_names_with_the_port_are_answered(host: str) -> None:
    allowed = RULES.check("GET", headers(host), has_body=False)
    if host.startswith("[0:"):  # the same address spelled otherwise is not a name the server was started for
        assert allowed is not None and allowed.status == 421
    else:
        assert allowed is None


@pytest.mark.parametrize(
    "host",
    [
        f"attacker.example:{PORT}",
        "localhost",  # port 80: not where the server listens
        "localhost:3001",
        f"localhost.:{PORT}",
        f"127.0.0.1.nip.io:{PORT}",
        f"localhost:{PORT}@attacker.example",
        "",
        "[::1",
        f"localhost:{PORT}:1",
    ],
)
def test_other_host_names_get_421_in_words(host: str) -> None:
    refusal = RULES.check("GET", headers(host), has_body=False)
    assert refusal is not None and refusal.status == 421 and refusal.code == "misdirected_request"
    assert "--allowed-hosts" in refusal.message


def test_allowed_hosts_add_names_from_the_flag_and_the_environment() -> None:
    rules = AccessRules.for_server(
        "192.168.1.5", PORT, ["box.lan", "proxy.example:8443"], environ={"THREADLOOM_ALLOWED_HOSTS": "other.lan"}
    )
    for host in (
        f"box.lan:{PORT}",
        "proxy.example:8443",
        f"other.lan:{PORT}",
        f"192.168.1.5:{PORT}",
        f"localhost:{PORT}",
    ):
        assert rules.check("GET", headers(host), has_body=False) is None, host
    assert rules.check("GET", headers("proxy.example:3000"), has_body=False) is not None
    assert rules.check("GET", headers(f"box.lan.attacker.example:{PORT}"), has_body=False) is not None


def test_a_wildcard_bind_adds_no_name() -> None:
    rules = AccessRules.for_server("0.0.0.0", PORT, environ={})
    assert rules.check("GET", headers(f"0.0.0.0:{PORT}"), has_body=False) is not None


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE", "OPTIONS"])
@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1:8000", "http://attacker.example", "null", f"http://localhost:{PORT}.attacker.example"]
)
def test_an_origin_other_than_the_servers_own_is_refused(method: str, origin: str) -> None:
    refusal = RULES.check(method, headers(origin=origin), has_body=False)
    assert refusal is not None and (refusal.status, refusal.code) == (403, "forbidden")
    assert RULES.check(method, headers(origin=f"http://localhost:{PORT}"), has_body=False) is None  # control


def test_listed_cors_origins_and_the_star_are_allowed() -> None:
    listed = AccessRules.for_server("127.0.0.1", PORT, environ={"THREADLOOM_CORS_ORIGINS": "https://app.example"})
    assert listed.check("POST", headers(origin="https://app.example"), has_body=False) is None
    assert listed.check("POST", headers(origin="https://evil.example"), has_body=False) is not None
    star = AccessRules.for_server("127.0.0.1", PORT, environ={"THREADLOOM_CORS_ORIGINS": "*"})
    assert star.check("POST", headers(origin="https://evil.example"), has_body=False) is None


@pytest.mark.parametrize("site", ["cross-site", "same-site"])
def test_sec_fetch_site_from_another_page_is_refused_except_for_a_link_followed(site: str) -> None:
    for method in ("POST", "DELETE", "GET"):
        refusal = RULES.check(method, headers(sec_fetch_site=site, sec_fetch_mode="no-cors"), has_body=False)
        assert refusal is not None and refusal.status == 403, method
    navigation = headers(sec_fetch_site=site, sec_fetch_mode="navigate")
    assert RULES.check("GET", navigation, has_body=False) is None
    assert RULES.check("POST", navigation, has_body=False) is not None
    for own in ("same-origin", "none"):  # the server's own page, and a URL typed by the user
        assert RULES.check("POST", headers(sec_fetch_site=own, sec_fetch_mode="cors"), has_body=False) is None


def test_a_body_without_a_content_type_gets_415() -> None:
    refusal = RULES.check("POST", headers(), has_body=True)
    assert refusal is not None and (refusal.status, refusal.code) == (415, "unsupported_media_type")
    assert "Content-Type: application/json" in refusal.message
    assert RULES.check("POST", headers(content_type="application/json"), has_body=True) is None
    assert RULES.check("POST", headers(), has_body=False) is None  # a bodyless POST needs none (curl -X POST)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory: Path = tmp_path_factory.mktemp("access") / "data"
    with local_server(directory, env={"THREADLOOM_ALLOWED_HOSTS": "box.lan"}) as running:
        yield running


def send(
    server: RunningServer, method: str, path: str, body: bytes | None = None, extra: dict[str, str] | None = None
) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for key, value in {"host": f"127.0.0.1:{server.port}", **(extra or {})}.items():
            connection.putheader(key, value)
        if body is not None:
            connection.putheader("content-length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def test_a_running_server_refuses_a_rebound_host_and_answers_its_own(server: RunningServer) -> None:
    status, body = send(server, "GET", "/sessions", extra={"host": f"attacker.example:{server.port}"})
    assert status == 421 and body == {"error": {"code": "misdirected_request", "message": body["error"]["message"]}}
    assert "sessions" not in json.dumps(body)
    assert send(server, "GET", "/sessions", extra={"host": f"box.lan:{server.port}"})[0] == 200  # the env var
    assert send(server, "GET", "/sessions", extra={"host": f"localhost:{server.port}"})[0] == 200
    status, body = send(server, "GET", "/ws", extra={"host": f"attacker.example:{server.port}"})
    assert status == 421


def test_a_running_server_takes_no_body_without_content_type_and_no_urlencoded_json(server: RunningServer) -> None:
    before = send(server, "GET", "/sessions")[1]
    status, body = send(server, "POST", "/sessions", b'{"name": "no type"}')
    assert status == 415 and body["error"]["code"] == "unsupported_media_type"
    urlencoded = {"content-type": "application/x-www-form-urlencoded"}
    status, body = send(server, "POST", "/sessions", b'{"name": "urlencoded"}', urlencoded)
    assert status == 415 and body["error"]["code"] == "unsupported_media_type"
    assert send(server, "GET", "/sessions")[1] == before
    status, _ = send(server, "POST", "/sessions", b'{"name": "json"}', JSON)  # control
    assert status == 201


ROOT = Path(__file__).resolve().parents[2]
BODY_OPTION = re.compile(r"(?:^|\s)(?:-d|--data(?:-binary|-raw|-urlencode)?|--json|-F|--form|-T)(?:\s|=|$)")
CONTENT_TYPE = re.compile(r"-H\s+'content-type:\s*(application/json|application/x-ndjson)'", re.IGNORECASE)


def documented_curl_commands() -> list[tuple[str, str, str]]:
    """Every ``curl`` command line of README.md and docs/*.md (continuations joined), with the line after it."""
    commands = []
    for document in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = document.read_text(encoding="utf-8").replace("\\\n", " ").splitlines()
        for number, line in enumerate(lines):
            if re.search(r"\bcurl\s", line):
                shown = lines[number + 1] if number + 1 < len(lines) else ""
                commands.append((document.name, line, shown))
    return commands


def test_every_documented_curl_command_with_a_body_says_it_is_json() -> None:
    """Unless it shows a refusal on purpose (its answer, shown next, is an error)."""
    with_body = [command for command in documented_curl_commands() if BODY_OPTION.search(command[1])]
    assert len(with_body) >= 10  # the documents do send bodies: the check below is not vacuous
    missing = [
        f"{name}: {line.strip()}"
        for name, line, shown in with_body
        if not CONTENT_TYPE.search(line) and '"error"' not in shown and '["error"]' not in line
    ]
    assert missing == []
    # The pattern does catch a command without the header (so the assertion above can fail).
    assert not CONTENT_TYPE.search('curl -s -X POST localhost:3000/sessions -d \'{"name": "x"}\'')
