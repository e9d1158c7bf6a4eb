"""``sessions show``: a session's shape at a glance (tree, overlays, blocks, skills, usage) from its snapshot."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from rich.table import Table

from threadloom.cli.output import plural
from threadloom.lifecycle.export_format import PROMPT_KEY_PREFIX

if TYPE_CHECKING:
    from threadloom.storage.snapshot import SessionSnapshot

EXCERPT_CHARS = 60


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


def session_summary(snapshot: SessionSnapshot) -> dict[str, Any]:
    parents = {row.id: row.parent_id for row in snapshot.messages}
    children = Counter(row.parent_id for row in snapshot.messages if row.parent_id is not None)
    depth = 0
    node = snapshot.leaf_id
    while node is not None:
        depth += 1
        node = parents.get(node)
    prompt_key = f"{PROMPT_KEY_PREFIX}{snapshot.id}"
    prompt = next((block for block in snapshot.blocks if block.key == prompt_key), None)
    return {
        "id": snapshot.id,
        "name": snapshot.name,
        "parent_session_id": snapshot.parent_session_id,
        "subject_id": snapshot.subject_id,
        "legal_hold": snapshot.legal_hold,
        "end_reason": snapshot.end_reason,
        "created_at": snapshot.created_at,
        "updated_at": snapshot.updated_at,
        "tree": {
            "messages": len(snapshot.messages),
            "roots": sum(1 for row in snapshot.messages if row.parent_id is None),
            "leaves": sum(1 for row in snapshot.messages if row.id not in children),
            "branch_points": sum(1 for count in children.values() if count > 1),
            "latest_leaf": snapshot.leaf_id,
            "latest_path_length": depth,
        },
        "overlays": [
            {"id": c.id, "from": c.from_message_id, "to": c.to_message_id, "summary": c.summary}
            for c in snapshot.compactions
        ],
        "blocks": [
            {"key": block.key, "chars": len(block.content), "updated_at": block.updated_at}
            for block in snapshot.blocks
            if block.key != prompt_key
        ],
        "frozen_prompt_chars": len(prompt.content) if prompt else None,
        "loaded_skills": list(snapshot.loaded_skills),
        "usage": {
            "input_tokens": snapshot.input_tokens,
            "output_tokens": snapshot.output_tokens,
            "estimated_cost": snapshot.estimated_cost,
        },
    }


def summary_tables(summary: dict[str, Any]) -> list[Table]:
    facts = Table(show_header=False, title=f"Session {summary['id']}", title_justify="left")
    facts.add_column(style="bold")
    facts.add_column()
    tree, usage = summary["tree"], summary["usage"]
    branch_points = plural(tree["branch_points"], "branch point")
    rows = [
        ("name", summary["name"]),
        ("subject", summary["subject_id"] or "-"),
        ("legal hold", "yes" if summary["legal_hold"] else "no"),
        ("parent session", summary["parent_session_id"] or "-"),
        ("created", summary["created_at"]),
        ("last activity", summary["updated_at"]),
        ("messages", f"{tree['messages']} ({plural(tree['leaves'], 'leaf', 'leaves')}, {branch_points})"),
        ("latest leaf", f"{tree['latest_leaf'] or '-'} (path of {plural(tree['latest_path_length'], 'message')})"),
        ("frozen prompt", "-" if summary["frozen_prompt_chars"] is None else f"{summary['frozen_prompt_chars']} chars"),
        ("loaded skills", ", ".join(summary["loaded_skills"]) or "-"),
        ("usage", f"{usage['input_tokens']} tokens in, {usage['output_tokens']} out, cost {usage['estimated_cost']:g}"),
    ]
    for name, value in rows:
        facts.add_row(name, str(value))
    tables = [facts]
    if summary["overlays"]:
        overlays = Table("overlay", "from", "to", "summary", title="Compaction overlays", title_justify="left")
        for item in summary["overlays"]:
            overlays.add_row(item["id"], item["from"], item["to"], _excerpt(item["summary"]))
        tables.append(overlays)
    if summary["blocks"]:
        blocks = Table("block key", "chars", "updated", title="Context blocks", title_justify="left")
        for block in summary["blocks"]:
            blocks.add_row(block["key"], str(block["chars"]), block["updated_at"])
        tables.append(blocks)
    return tables


__all__ = ["session_summary", "summary_tables"]
