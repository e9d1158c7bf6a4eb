"""Rich sessions for lifecycle tests, and everything observable about a session, for comparisons."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from threadloom import SessionManager
from threadloom.providers.local_skills import LocalSkillProvider


def text(message_id: str, role: str, body: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": body}]}


def manager_for(store: Any, namespace: str, skills_dir: Path) -> SessionManager:
    """The configuration every lifecycle test uses: a writable block, a skill store, a cached prompt."""
    skills_dir.mkdir(parents=True, exist_ok=True)
    (skills_dir / "pirate.md").write_text("---\ndescription: Talk like a pirate\n---\nSay arr.\n", encoding="utf-8")
    return (
        SessionManager.create(store, namespace=namespace)
        .with_context("memory", description="Learned facts", max_tokens=1100)
        .with_context("skills", provider=LocalSkillProvider(skills_dir))
        .with_cached_prompt()
    )


def build_rich_session(manager: SessionManager, name: str, *, subject: str | None = None, word: str = "kumquat") -> str:
    """A session with branches, a compaction overlay, a written block, a loaded skill, a frozen prompt and usage."""
    info = manager.create(name, model="model-x", source="tests", subject_id=subject)
    sid = info.id
    manager.append_all(
        sid,
        [
            text(f"{sid}-u1", "user", f"I grow {word} trees in my garden."),
            text(f"{sid}-a1", "assistant", "Lovely, how many trees?"),
            text(f"{sid}-u2", "user", "Twelve of them."),
            text(f"{sid}-a2", "assistant", "That is a small orchard."),
        ],
    )
    manager.append(sid, text(f"{sid}-u2b", "user", "Actually thirteen."), f"{sid}-a1")  # a second branch
    manager.append(sid, text(f"{sid}-a2b", "assistant", "Thirteen it is."), f"{sid}-u2b")
    manager.add_compaction(sid, f"The user grows {word} trees.", f"{sid}-u1", f"{sid}-a1")
    session = manager.get_session(sid)
    session.tools()["set_context"].execute({"label": "memory", "content": f"Grows {word} trees."})
    session.tools()["load_context"].execute({"label": "skills", "key": "pirate"})
    session.freeze_system_prompt()
    manager.add_usage(sid, 120, 80, 0.25)
    return sid


def observable(manager: SessionManager, session_id: str) -> dict[str, Any]:
    """What the public API shows of a session: histories of every leaf, branches, overlays, blocks, usage…"""
    info = manager.get(session_id)
    assert info is not None
    session = manager.get_session(session_id)
    storage = manager.store.session_provider(session_id)
    snapshot = manager.store.lifecycle().read_session(manager.namespace, session_id)
    ids = [row.id for row in snapshot.messages]
    parents = {row.parent_id for row in snapshot.messages}
    leaves = [message_id for message_id in ids if message_id not in parents]
    return {
        "info": dataclasses.asdict(info),
        "latest_leaf": session.get_latest_leaf(),
        "histories": {leaf: _stable(session.get_history(leaf)) for leaf in leaves},
        "branches": {message_id: session.get_branches(message_id) for message_id in ids},
        "path_lengths": {leaf: storage.get_path_length(leaf) for leaf in leaves},
        "estimates": {leaf: storage.get_token_estimate(leaf) for leaf in leaves},
        "compactions": [
            (c.id, c.summary, c.from_message_id, c.to_message_id, c.created_at) for c in session.get_compactions()
        ],
        "blocks": [(b.label, b.content) for b in session.get_context_blocks()],
        "prompt": session.freeze_system_prompt(),
        "loaded_skills": sorted(session.get_loaded_skill_keys()),
        "search": sorted((hit.id, hit.content) for hit in session.search("trees")),  # ranking is per backend
        "messages": [(row.id, row.parent_id, row.seq, row.created_at) for row in snapshot.messages],
    }


def _stable(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An overlay's synthetic message is dated at read time, so that one field is left out of comparisons."""
    return [
        {key: value for key, value in message.items() if key != "createdAt"}
        if str(message["id"]).startswith("compaction_")
        else message
        for message in history
    ]


def scan_database(store: Any) -> str:
    """Every value of every table of the store's database (FTS shadow tables included), as one text to search."""
    values: list[str] = []
    with store.database.read() as tx:
        if store.sql.name == "sqlite":
            tables = [row[0] for row in tx.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
        else:
            tables = [
                row[0]
                for row in tx.query(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
                )
            ]
        assert "threadloom_messages" in tables
        for table in tables:
            for row in tx.query(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, (bytes, bytearray, memoryview)):
                        values.append(bytes(value).decode("latin-1"))
                    elif value is not None:
                        values.append(str(value))
    return "\n".join(values)


NO_SHARED_BLOCKS_OR_KNOWLEDGE = {
    "sharedBlocksImported": [],
    "sharedBlocksUnchanged": [],
    "sharedBlockVersions": 0,
    "knowledgeEntriesImported": 0,
    "knowledgeEntriesUnchanged": 0,
}
"""What an import answer says of shared blocks and knowledge entries when the file has none."""
