"""Export/import of subject and tenant blocks with their history (issue 26 item 6), on both backends.

Opt-in per export; an import writes them into the importing namespace only, refuses labels the
profile does not declare with that scope, is idempotent (same content: unchanged; other content:
a conflict, nothing written) and records an ``import`` version on top of the exported history.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from threadloom.errors import ConflictError, ValidationError
from threadloom.lifecycle import ExportFormatError, export_sessions, import_sessions
from threadloom.records import BlockChange

from tests.security.test_import_attacks import sealed
from tests.support.lifecycle import build_rich_session, manager_for

SOURCE = "tenant-a"
TARGET = "tenant-b"
SCOPES = {"memory": "subject", "house": "tenant"}


def write(store: Any, namespace: str, key: str, content: str, *, subject: str = "", session: str | None = None) -> int:
    scope = "subject" if subject else "tenant"
    block = store.shared_block(key, scope=scope, namespace=namespace, subject_id=subject)
    change = BlockChange(source="tool", session_id=session, message_ids=("m1",) if session else ())
    return int(block.write(content, based_on_version=None, change=change))


def history(store: Any, namespace: str, key: str, subject: str = "") -> list[Any]:
    scope = "subject" if subject else "tenant"
    block = store.shared_block(key, scope=scope, namespace=namespace, subject_id=subject)
    page, _ = block.versions(before=None, limit=1000, max_bytes=10**9)
    return list(reversed(page))


def current(store: Any, namespace: str, key: str, subject: str = "") -> tuple[str | None, int]:
    scope = "subject" if subject else "tenant"
    block = store.shared_block(key, scope=scope, namespace=namespace, subject_id=subject)
    content, version = block.current()
    return content, int(version)


def setup_source(store: Any, tmp_path: Path) -> str:
    """A session of alice; alice's memory in three versions, bob's memory, the tenant's house rules."""
    manager = manager_for(store, SOURCE, tmp_path / "skills")
    sid = build_rich_session(manager, "Garden", subject="alice")
    write(store, SOURCE, "memory", "Name: Alice", subject="alice", session=sid)
    write(store, SOURCE, "memory", "Name: Alice\nLikes: kumquats", subject="alice", session=sid)
    write(store, SOURCE, "memory", "Name: Alice\nLikes: lemons", subject="alice")
    write(store, SOURCE, "memory", "Name: Bob", subject="bob")
    write(store, SOURCE, "house", "Answer in English")
    return sid


def export(store: Any, sid: str, *, include: bool = True, key: bytes | None = None) -> bytes:
    buffer = io.BytesIO()
    export_sessions(store.lifecycle(), SOURCE, [sid], buffer, include_shared_blocks=include, signing_key=key)
    return buffer.getvalue()


def lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


def test_the_export_carries_shared_blocks_only_when_asked(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    without = lines(export(store, sid, include=False))
    assert not [record for record in without if record["type"] in ("shared_block", "block_version")]
    records = lines(export(store, sid))
    shared = [(r["scope"], r["subject_id"], r["key"], r["version"]) for r in records if r["type"] == "shared_block"]
    # alice's memory (the session's subject) and the tenant's house, never bob's memory
    assert shared == [("subject", "alice", "memory", 3), ("tenant", None, "house", 1)]
    versions = [(r["key"], r["version"], r["change"]["source"]) for r in records if r["type"] == "block_version"]
    assert versions == [("memory", 1, "tool"), ("memory", 2, "tool"), ("memory", 3, "tool"), ("house", 1, "tool")]
    kinds = [record["type"] for record in records]
    assert kinds.index("shared_block") > max(i for i, kind in enumerate(kinds) if kind in ("session", "message"))
    assert kinds[-1] == "footer" and records[-1]["records"] == len(records)


def test_import_writes_into_the_importing_namespace_with_history_and_an_import_version(
    store: Any, tmp_path: Path
) -> None:
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    report = import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), shared_block_scopes=SCOPES)
    assert report.shared_blocks_imported == ["subject/alice/memory", "tenant/house"]
    assert report.shared_blocks_unchanged == []
    assert current(store, TARGET, "memory", "alice") == ("Name: Alice\nLikes: lemons", 4)
    assert current(store, TARGET, "house") == ("Answer in English", 2)
    assert current(store, TARGET, "memory", "bob") == (None, 0)
    imported = history(store, TARGET, "memory", "alice")
    assert [(v.version, v.change.source) for v in imported] == [(1, "tool"), (2, "tool"), (3, "tool"), (4, "import")]
    assert imported[1].content == "Name: Alice\nLikes: kumquats"
    assert imported[3].change.note == f"imported from an export of namespace {SOURCE}"
    # A version's link to a session is kept only under the id the session was imported as
    (given,) = report.imported
    assert imported[0].change.session_id == given and imported[0].change.message_ids == ("m1",)
    # The exporter's blocks are untouched
    assert current(store, SOURCE, "memory", "alice") == ("Name: Alice\nLikes: lemons", 3)
    assert len(history(store, SOURCE, "memory", "alice")) == 3


def test_import_is_idempotent_and_a_changed_block_is_a_conflict_that_writes_nothing(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    import_sessions(store.lifecycle(), TARGET, io.BytesIO(data))
    again = import_sessions(store.lifecycle(), TARGET, io.BytesIO(data))
    assert again.shared_blocks_imported == [] and again.shared_blocks_unchanged == [
        "subject/alice/memory",
        "tenant/house",
    ]
    assert len(history(store, TARGET, "memory", "alice")) == 4
    # The importer changes the tenant block; the same file is now a conflict that says which block
    write(store, TARGET, "house", "Answer in French")
    with pytest.raises(ConflictError, match=r"tenant/house.*different content"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(data))
    assert current(store, TARGET, "house") == ("Answer in French", 3)
    # In a third namespace that has a conflicting block nothing at all is written, sessions included
    write(store, "tenant-c", "house", "Other rules")
    with pytest.raises(ConflictError):
        import_sessions(store.lifecycle(), "tenant-c", io.BytesIO(data))
    assert current(store, "tenant-c", "memory", "alice") == (None, 0)
    assert store.registry("tenant-c").list() == []


@pytest.mark.parametrize(
    ("scopes", "message"),
    [
        ({"house": "tenant"}, "subject block 'memory' is not a subject block"),
        ({"memory": "tenant", "house": "tenant"}, "subject block 'memory' is not a subject block"),
        ({"memory": "subject"}, "tenant block 'house' is not a tenant block"),
    ],
)
def test_labels_the_profile_does_not_declare_with_that_scope_are_refused(
    store: Any, tmp_path: Path, scopes: dict[str, str], message: str
) -> None:
    sid = setup_source(store, tmp_path)
    data = export(store, sid)
    with pytest.raises(ValidationError, match=message):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), shared_block_scopes=scopes)
    assert current(store, TARGET, "memory", "alice") == (None, 0)
    assert store.registry(TARGET).list() == []
    # Control: the profile that declares both imports it
    import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), shared_block_scopes=SCOPES)
    assert current(store, TARGET, "house")[0] == "Answer in English"


def test_a_signed_export_covers_the_shared_block_lines(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    key = b"a deployment secret"
    data = export(store, sid, key=key)
    tampered = data.replace(b"Answer in English", b"Answer in Klingon")
    with pytest.raises(ExportFormatError, match="checksum mismatch"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(tampered), signing_key=key)
    assert current(store, TARGET, "house") == (None, 0)
    import_sessions(store.lifecycle(), TARGET, io.BytesIO(data), signing_key=key)
    assert current(store, TARGET, "house")[0] == "Answer in English"


def test_shared_block_records_are_validated(store: Any, tmp_path: Path) -> None:
    sid = setup_source(store, tmp_path)
    records = lines(export(store, sid))[:-1]
    block = next(r for r in records if r["type"] == "shared_block" and r["scope"] == "tenant")
    block["subject_id"] = "someone"  # a tenant block names no subject
    with pytest.raises(ExportFormatError, match="a tenant block none"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed(records)))
    block["subject_id"] = None
    version = next(r for r in records if r["type"] == "block_version" and r["key"] == "house")
    version["version"] = 9  # past the block's own version
    with pytest.raises(ExportFormatError, match="must rise and not pass"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed(records)))
    version["version"] = 0  # versions start at 1
    with pytest.raises(ExportFormatError, match="must rise and not pass"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed(records)))
    version["version"] = 1
    version["change"]["source"] = "wizard"
    with pytest.raises(ExportFormatError, match="change source 'wizard'"):
        import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed(records)))
    version["change"]["source"] = "tool"
    import_sessions(store.lifecycle(), TARGET, io.BytesIO(sealed(records)))  # control: the repaired file imports
    assert current(store, TARGET, "house")[0] == "Answer in English"
