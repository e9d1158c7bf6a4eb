"""The HTTP edge over real HTTP: ``make serve``'s server refuses bad input in the envelope and speaks CORS."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest

from tests.support.local_server import local_server

pytestmark = pytest.mark.e2e
ORIGIN = "https://app.example"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with local_server(tmp_path_factory.mktemp("edge") / "d", env={"THREADLOOM_CORS_ORIGINS": ORIGIN}) as running:
        yield running.port


def send(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def envelope(data: bytes) -> tuple[str, str]:
    parsed = json.loads(data)
    assert set(parsed) == {"error"}
    return parsed["error"]["code"], parsed["error"]["message"]


def test_a_body_that_is_not_utf8_is_400(port: int) -> None:
    status, _, data = send(port, "POST", "/sessions", b"\xff", {"content-type": "application/json"})
    assert status == 400 and envelope(data) == (
        "bad_request",
        "The request body is not valid UTF-8 text (byte 0xff at position 0)",
    )


@pytest.mark.parametrize("media_type", ["text/plain", "application/xml", "multipart/form-data; boundary=x"])
def test_other_media_types_are_415(port: int, media_type: str) -> None:
    status, _, data = send(port, "POST", "/sessions", b"name=x", {"content-type": media_type})
    assert status == 415 and envelope(data)[0] == "unsupported_media_type"


def test_invalid_json_is_explained(port: int) -> None:
    status, _, data = send(port, "POST", "/sessions", b'{"name": "x"', {"content-type": "application/json"})
    assert status == 400
    assert envelope(data)[1] == "The request body is not valid JSON: Expecting ',' delimiter at line 1, column 13"


def test_preflight_and_cors_headers_from_the_same_setting_as_lambda(port: int) -> None:
    status, headers, data = send(
        port,
        "OPTIONS",
        "/sessions",
        headers={"origin": ORIGIN, "access-control-request-method": "POST", "access-control-request-headers": "x"},
    )
    assert status == 204 and data == b""
    assert headers["access-control-allow-origin"] == ORIGIN
    status, headers, _ = send(port, "GET", "/sessions", headers={"origin": ORIGIN})
    assert status == 200 and headers["access-control-allow-origin"] == ORIGIN
    # A page on an origin not listed is refused by the local server before the handler (local_access).
    status, headers, data = send(port, "GET", "/sessions", headers={"origin": "https://other.example"})
    assert status == 403 and "access-control-allow-origin" not in headers
    assert envelope(data)[0] == "forbidden"


def test_head_is_get_without_a_body(port: int) -> None:
    status, headers, data = send(port, "HEAD", "/sessions")
    assert status == 200 and data == b"" and headers["content-type"] == "application/json"


def test_ids_a_path_cannot_carry_are_refused_and_accepted_ones_read_back(port: int) -> None:
    json_headers = {"content-type": "application/json"}
    created = json.loads(send(port, "POST", "/sessions", b'{"name": "ids"}', json_headers)[2])["id"]
    bad = json.dumps({"message": {"id": "my id", "role": "user", "parts": []}}).encode()
    status, _, data = send(port, "POST", f"/sessions/{created}/messages", bad, json_headers)
    assert status == 400 and "A-Z a-z 0-9" in envelope(data)[1]
    good = json.dumps({"message": {"id": "a.b~c:d@e", "role": "user", "parts": []}}).encode()
    assert send(port, "POST", f"/sessions/{created}/messages", good, json_headers)[0] == 201
    assert send(port, "GET", f"/sessions/{created}/messages/a.b~c:d@e")[0] == 200
    assert send(port, "GET", f"/sessions/{created}/messages/my%20id")[0] == 404
    # Percent-encoded as many clients send it (encodeURIComponent), decoded as API Gateway decodes it.
    assert send(port, "GET", f"/sessions/{created}/messages/a.b~c%3Ad%40e")[0] == 200
    assert send(port, "GET", f"/sessions/{created}/messages/a.b~c%3Ad%40e%3Fx")[0] == 200  # cut at the "?"
