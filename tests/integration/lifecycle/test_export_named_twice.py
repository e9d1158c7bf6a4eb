"""An export naming a session twice writes it once, so the file still imports (on each backend)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from threadloom.lifecycle import export_sessions, import_sessions

from tests.support.lifecycle import build_rich_session, manager_for

NS = "tenant-a"


def test_a_session_named_twice_is_exported_once_in_first_order(store: Any, tmp_path: Path) -> None:
    # Given two sessions of the namespace
    manager = manager_for(store, NS, tmp_path / "skills")
    first = build_rich_session(manager, "Garden", subject="alice")
    second = build_rich_session(manager, "Kitchen", subject="alice", word="lemon")
    # When the caller names the first one again, before and after the second
    buffer = io.BytesIO()
    seen: list[str] = []
    report = export_sessions(store.lifecycle(), NS, [first, first, second, first], buffer, on_session=seen.append)
    # Then each is written once, in the order first named, and counted once
    records = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert [record["id"] for record in records if record["type"] == "session"] == [first, second]
    assert seen == [first, second]
    assert report.sessions == 2 and report.messages == 2 * len(store.lifecycle().read_session(NS, first).messages)
    assert records[-1]["type"] == "footer"
    # And the file imports (into another namespace: the ids are renamed, each session once)
    imported = import_sessions(store.lifecycle(), "tenant-b", io.BytesIO(buffer.getvalue()))
    assert sorted(imported.renamed) == sorted([first, second]) and len(imported.imported) == 2
