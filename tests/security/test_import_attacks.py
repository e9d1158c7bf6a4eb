"""Attacks on session import (issue 23), through the real handler on SQLite and PostgreSQL, and the CLI.

Each class of hostile file is sent next to a control: the same file without the attack imports,
so a refusal is the attack's and a check that never refuses would fail its control.
Classes: JSON nesting (a 500 RecursionError before), an over-long line (read whole before), compaction ids
outside the id alphabet, timestamps that escape retention, and signed exports (unsigned or tampered).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import io
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from threadloom import SqliteStore
from threadloom.api.runtime import get_runtime, set_runtime
from threadloom.lifecycle import ExportFormatError, import_sessions
from threadloom.lifecycle.export_format import SIGNING_KEY_VARIABLE, max_line_bytes
from threadloom.limits import DEFAULT_LIMITS

from tests.support.api import FakeLambdaContext, load_event, seeded_runtime
from tests.support.crafted_exports import imported_id

TENANT = "importer"
SID = "imported-1"
KEY = "a deployment secret"


@pytest.fixture(autouse=True)
def _forget_runtime() -> Iterator[None]:
    yield
    set_runtime(None)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SqliteStore(str(tmp_path / "api.db"))
    return request.getfixturevalue("postgres_store_factory")()


def records(session_id: str = SID) -> list[dict[str, Any]]:
    """A valid export's records (header to last body record) of one session with two messages and an overlay."""
    at = "2026-01-01T11:00:00.000Z"
    return [
        {"type": "header", "format": "threadloom-export", "version": 1, "exported_at": at, "namespace": TENANT},
        {
            "type": "session",
            "id": session_id,
            "name": "Imported",
            "parent_session_id": None,
            "model": None,
            "source": None,
            "subject_id": None,
            "legal_hold": False,
            "end_reason": None,
            "created_at": at,
            "updated_at": at,
            "usage": {"input_tokens": 0, "output_tokens": 0, "estimated_cost": 0.0},
            "leaf_id": "m2",
            "next_seq": 4,
        },
        *[
            {
                "type": "message",
                "session_id": session_id,
                "id": mid,
                "parent_id": parent,
                "seq": seq,
                "created_at": at,
                "message": {"id": mid, "role": role, "parts": [{"type": "text", "text": f"text of {mid}"}]},
            }
            for mid, parent, seq, role in (("m1", None, 1, "user"), ("m2", "m1", 2, "assistant"))
        ],
        {
            "type": "compaction",
            "session_id": session_id,
            "id": "c1",
            "seq": 3,
            "summary": "a summary",
            "from_message_id": "m1",
            "to_message_id": "m1",
            "request_key": None,
            "created_at": at,
        },
    ]


def sealed(body: list[dict[str, Any]], *, key: str | None = None, lines: list[bytes] | None = None) -> bytes:
    """The records as a file with a correct footer (checksum, and an HMAC when ``key`` is given)."""
    raw = lines if lines is not None else [(json.dumps(record) + "\n").encode() for record in body]
    footer: dict[str, Any] = {
        "type": "footer",
        "sessions": sum(1 for line in raw if line.startswith((b'{"type": "session"', b'{"type":"session"'))),
        "records": len(raw) + 1,
        "sha256": hashlib.sha256(b"".join(raw)).hexdigest(),
    }
    if key is not None:
        footer["hmac_sha256"] = hmac.new(key.encode(), b"".join(raw), hashlib.sha256).hexdigest()
    return b"".join(raw) + (json.dumps(footer) + "\n").encode()


def changed(change: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
    body = copy.deepcopy(records())
    change(body)
    return body


def upload(data: bytes, *, sub: str = TENANT) -> tuple[int, Any]:
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/sessions/import"
    event["requestContext"]["http"]["method"] = "POST"
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
    event["headers"]["content-type"] = "application/x-ndjson"
    event["body"] = data.decode("utf-8")
    response = lambda_handler(event, FakeLambdaContext())  # type: ignore[arg-type]
    return int(response["statusCode"]), json.loads(response["body"])


def get(path: str) -> int:
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    return int(lambda_handler(event, FakeLambdaContext())["statusCode"])  # type: ignore[arg-type]


def refused(data: bytes, message: str) -> None:
    """The upload is a 400 whose message names the problem, and nothing was stored."""
    status, body = upload(data)
    assert status == 400, body
    assert body["error"]["code"] == "bad_request" and message in body["error"]["message"], body
    assert get(f"/sessions/{SID}") == 404
    assert get(f"/sessions/{given_id()}") == 404


def given_id() -> str:
    """The id the importer's namespace gives ``SID`` (not minted for it, so renamed)."""
    return imported_id(get_runtime().store, TENANT, SID)


def imports(data: bytes, session_id: str | None = None) -> None:
    """The control: the upload is imported (``SID`` under the id the namespace gives it, unless told otherwise)."""
    status, body = upload(data)
    expected = session_id or given_id()
    assert status == 200 and body["imported"] == [expected], body
    assert body["renamed"] == ({} if session_id else {SID: expected}), body


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_a_deeply_nested_line_is_a_clean_400(tmp_path: Path, store: Any) -> None:
    seeded_runtime(tmp_path, store=store)
    deep = json.dumps(nested(2)).replace('"leaf"', "[" * 100_000 + "]" * 100_000)
    attack = sealed(changed(lambda body: body[1].update(name="x")))
    attack = attack.replace(b'"name": "x"', b'"name": "x", "extra": ' + deep.encode())
    lines = attack.splitlines(keepends=True)[:-1]
    refused(sealed([], lines=lines), "nests JSON arrays or objects too deeply")
    imports(sealed(records()))


def test_a_message_nested_past_the_limit_is_refused_as_the_api_does(tmp_path: Path, store: Any) -> None:
    seeded_runtime(tmp_path, store=store)

    def deep(body: list[dict[str, Any]]) -> None:
        body[2]["message"]["parts"][0]["data"] = nested(DEFAULT_LIMITS.max_nesting_depth + 5)

    refused(sealed(changed(deep)), "Line 3")
    imports(sealed(records()))


@pytest.mark.parametrize("bad_id", ["../../x y/?#", "", ".", "a/b", "x" * 300])
def test_a_compaction_id_outside_the_id_alphabet_is_refused(tmp_path: Path, store: Any, bad_id: str) -> None:
    seeded_runtime(tmp_path, store=store)
    refused(sealed(changed(lambda body: body[4].update(id=bad_id))), "compaction id")
    imports(sealed(changed(lambda body: body[4].update(id="c1:~@._-"))))


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (1, "9999-12-31T23:59:59.999Z", "is in the future"),
        (1, "zzzz", "is not a UTC timestamp"),
        (1, "2026-02-30T00:00:00.000Z", "is not a real date and time"),
        # Arabic-Indic digits matched the pattern's \d and strptime read them, and SQLite sorted the
        # stored text after every ASCII date, so the session never expired
        (1, "\u0662\u0660\u0662\u0666-01-01T00:00:00.000Z", "is not a UTC timestamp"),
        (1, "2026-01-01 11:00:00", "is not a UTC timestamp"),
        (2, "9999-01-01T00:00:00.000Z", "is in the future"),
        (4, "zzzz", "is not a UTC timestamp"),
    ],
)
def test_a_timestamp_that_would_escape_retention_is_refused(
    tmp_path: Path, store: Any, where: int, value: str, message: str
) -> None:
    seeded_runtime(tmp_path, store=store)
    field = "updated_at" if where == 1 else "created_at"
    refused(sealed(changed(lambda body: body[where].update({field: value}))), message)
    imports(sealed(changed(lambda body: body[where].update({field: "2001-09-09T01:46:40.000Z"}))))


def test_an_over_long_line_is_refused_before_it_is_read_whole(store: Any) -> None:
    cap = max_line_bytes(DEFAULT_LIMITS)
    head = sealed(records()).splitlines(keepends=True)[:1]
    long_line = b'{"type":"session","name":"' + b"a" * (8 * cap) + b'"}\n'
    stream = _Stream(head[0] + long_line)
    tracemalloc.start()
    try:
        with pytest.raises(ExportFormatError, match=f"Line 2 is longer than {cap} bytes"):
            import_sessions(store.lifecycle(), TENANT, stream)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * cap + 2 * 1024 * 1024, f"peak {peak} bytes for a line of {len(long_line)}"
    # Control: the same measure sees a line read whole (what the import did before)
    tracemalloc.start()
    try:
        io.BufferedReader(_Stream(long_line)).readline()
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert whole >= len(long_line)


class _Stream(io.RawIOBase):
    """A pipe-like stream over bytes that cannot seek, so nothing is copied from a buffer it already holds."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(len(buffer), len(self._data) - self._at)
        buffer[:size] = self._data[self._at : self._at + size]
        self._at += size
        return size


def test_signed_exports_refuse_unsigned_and_tampered_files(
    tmp_path: Path, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded_runtime(tmp_path, store=store)
    monkeypatch.setenv(SIGNING_KEY_VARIABLE, KEY)
    refused(sealed(records()), "the file is not signed")
    # Tampered: the text changed and the checksum recomputed, which the HMAC does not allow
    signed = sealed(records(), key=KEY)
    footer = json.loads(signed.splitlines()[-1])
    tampered = sealed(changed(lambda body: body[2]["message"]["parts"][0].update(text="planted")), key=None)
    tampered = tampered.rsplit(b"\n", 2)[0] + b"\n"
    resealed = json.loads(
        sealed(changed(lambda body: body[2]["message"]["parts"][0].update(text="planted"))).splitlines()[-1]
    )
    resealed["hmac_sha256"] = footer["hmac_sha256"]
    refused(tampered + (json.dumps(resealed) + "\n").encode(), "signature mismatch")
    refused(sealed(records(), key="another key"), "signature mismatch")
    imports(signed)


def test_an_export_is_signed_and_imports_back_only_with_its_key(
    tmp_path: Path, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded_runtime(tmp_path, store=store)
    monkeypatch.setenv(SIGNING_KEY_VARIABLE, KEY)
    imports(sealed(records(), key=KEY))
    from threadloom_api import lambda_handler

    event = copy.deepcopy(load_event("get_session"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/sessions/{given_id()}/export"
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = TENANT
    exported = lambda_handler(event, FakeLambdaContext())["body"].encode()  # type: ignore[arg-type]
    footer = json.loads(exported.splitlines()[-1])
    body = exported.rsplit(b"\n", 2)[0] + b"\n"
    assert footer["hmac_sha256"] == hmac.new(KEY.encode(), body, hashlib.sha256).hexdigest()
    store.registry(TENANT).delete(given_id())
    monkeypatch.setenv(SIGNING_KEY_VARIABLE, "rotated")
    refused(exported, "signature mismatch")
    monkeypatch.delenv(SIGNING_KEY_VARIABLE)
    imports(exported, given_id())  # signing off: the checksum still holds; the id minted for the namespace is kept


def run_cli(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "threadloom.cli", *args]
    return subprocess.run(
        command,
        check=False,
        input=stdin.decode() if stdin else None,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_the_cli_refuses_a_hostile_file_without_a_traceback_and_names_a_foreign_namespace(tmp_path: Path) -> None:
    database = str(tmp_path / "cli.db")
    hostile = tmp_path / "deep.jsonl"
    lines = sealed(records()).splitlines(keepends=True)[:-1]
    lines[1] = lines[1].replace(b'"name": "Imported"', b'"name": "Imported", "x": ' + b"[" * 100_000 + b"]" * 100_000)
    hostile.write_bytes(sealed([], lines=lines))
    done = run_cli("--database", database, "--create", "--namespace", TENANT, "import", str(hostile))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "nests JSON arrays or objects too deeply" in done.stderr
    good = tmp_path / "good.jsonl"
    good.write_bytes(sealed(records()))
    elsewhere = run_cli("--database", database, "--namespace", "someone", "import", str(good))
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert f"exported from namespace '{TENANT}'" in elsewhere.stderr and "into namespace 'someone'" in elsewhere.stderr
    # Control: the file's own namespace gets no note
    same = run_cli("--database", str(tmp_path / "other.db"), "--create", "--namespace", TENANT, "import", str(good))
    assert same.returncode == 0 and "exported from namespace" not in same.stderr, same.stderr


def test_a_prompt_line_may_be_longer_than_other_records_but_not_unbounded(store: Any) -> None:
    limits = DEFAULT_LIMITS.with_overrides(
        {
            "max_message_bytes": 1024,
            "max_block_bytes": 1024,
            "max_summary_bytes": 1024,
            "max_entry_bytes": 1024,
            "max_response_bytes": 262144,
        }
    )
    cap = max_line_bytes(limits)

    def with_prompt(content: str) -> bytes:
        body = records()
        body.append({"type": "prompt", "session_id": SID, "content": content, "updated_at": "2026-01-01T11:00:00.000Z"})
        raw = [(json.dumps(record, separators=(",", ":")) + "\n").encode() for record in body]
        return sealed([], lines=raw)

    # A frozen prompt longer than the cap of other lines (but within max_response_bytes) imports
    report = import_sessions(store.lifecycle(), TENANT, io.BytesIO(with_prompt("p" * (cap + 1000))), limits=limits)
    assert report.imported == [imported_id(store, TENANT, SID)]
    # A prompt line past its own cap is refused before it is read whole; the control above imported
    prompt_cap = 6 * 262144 + 64 * 1024
    with pytest.raises(ExportFormatError, match=f"Line 6 is longer than {prompt_cap} bytes"):
        import_sessions(store.lifecycle(), TENANT, io.BytesIO(with_prompt("p" * (prompt_cap + 10))), limits=limits)
    # And a message line of the prompt's size is refused at the smaller cap
    big = changed(lambda body: body[2]["message"]["parts"][0].update(text="m" * (cap + 1000)))
    with pytest.raises(ExportFormatError, match=f"Line 3 is longer than {cap} bytes"):
        import_sessions(store.lifecycle(), TENANT, io.BytesIO(sealed(big)), limits=limits)


def test_the_cli_with_a_profile_refuses_a_block_key_the_profile_does_not_write(tmp_path: Path) -> None:
    from threadloom.api.profile import DEFAULT_PROFILE_PATH

    profile = str(DEFAULT_PROFILE_PATH)

    from tests.support.crafted_exports import crafted_export

    database = str(tmp_path / "cli.db")
    planted = tmp_path / "planted.jsonl"
    planted.write_bytes(crafted_export("1", {"memory_chat_1": "planted for the session chat_1"}))
    refused = run_cli(
        "--database", database, "--create", "import", str(planted), "--profile", str(DEFAULT_PROFILE_PATH)
    )
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert "'memory_chat_1' is not a block this deployment stores" in refused.stderr
    # Control: the session's own memory block under the same profile imports
    own = tmp_path / "own.jsonl"
    own.write_bytes(crafted_export("1", {"memory_1": "its own memory"}))
    done = run_cli("--database", database, "--create", "import", str(own), "--profile", profile)
    assert done.returncode == 0, done.stderr
