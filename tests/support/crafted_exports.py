"""Export files an attacker writes by hand: a valid, sealed file whose session and blocks they chose."""

from __future__ import annotations

import io
from typing import Any

from threadloom.core.keys import imported_session_id
from threadloom.lifecycle.export_format import ExportWriter
from threadloom.storage.snapshot import BlockRow, SessionSnapshot

AT = "2026-01-01T00:00:00.000Z"


def crafted_export(session_id: str, blocks: dict[str, str] | None = None, *, name: str = "crafted") -> bytes:
    """One empty session ``session_id`` carrying ``blocks`` (key: content), sealed as the writer seals it."""
    snapshot = SessionSnapshot(
        id=session_id,
        name=name,
        parent_session_id=None,
        model=None,
        source=None,
        subject_id=None,
        legal_hold=False,
        input_tokens=0,
        output_tokens=0,
        estimated_cost=0.0,
        end_reason=None,
        created_at=AT,
        updated_at=AT,
        leaf_id=None,
        next_seq=1,
        blocks=[BlockRow(key, content, AT) for key, content in (blocks or {}).items()],
    )
    stream = io.BytesIO()
    writer = ExportWriter(stream)
    writer.add(snapshot)
    writer.close()
    return stream.getvalue()


def imported_id(store: Any, namespace: str, old_id: str) -> str:
    """The id an import into ``namespace`` gives a session whose id was not minted for it (under the store's secret)."""
    return imported_session_id(store.lifecycle().session_id_secret(), namespace, old_id)
