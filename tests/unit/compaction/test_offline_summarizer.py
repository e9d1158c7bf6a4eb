"""ExtractiveSummarizer: deterministic, honest, four sections, previous summary carried, budget respected."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from threadloom.compaction import build_summary_prompt, create_compact_function
from threadloom.compaction.summarizers import ExtractiveSummarizer, Summarizer
from threadloom.compaction.summarizers.offline import EXTRACTIVE_NOTICE, parse_summary_prompt
from threadloom.tokens import estimate_string_tokens

if TYPE_CHECKING:
    from threadloom.records import Message

HEADINGS = ("## Topic", "## Key Points", "## Current State", "## Open Items")


def msg(mid: str, role: str, body: str, *tools: dict[str, Any]) -> Message:
    return {"id": mid, "role": role, "parts": [{"type": "text", "text": body}, *tools]}


def conversation() -> list[Message]:
    return [
        msg("u1", "user", "We need to migrate the billing service to Postgres. It runs on MySQL today."),
        msg(
            "a1",
            "assistant",
            "I checked the schema. There are 12 tables.",
            {
                "type": "tool-read",
                "toolName": "read",
                "toolCallId": "c",
                "input": {"f": "s.sql"},
                "output": "12 tables",
            },
        ),
        msg("u2", "user", "Great. TODO: keep the audit log. Can we do it without downtime?"),
    ]


def section(summary: str, heading: str) -> str:
    start = summary.index(heading) + len(heading) + 1
    nexts = [summary.index(h) for h in HEADINGS if summary.index(h) > summary.index(heading)]
    return summary[start : min(nexts) if nexts else len(summary)].strip()


def test_is_a_summarizer() -> None:
    # Given / When an instance is checked against the protocol
    # Then it satisfies it
    assert isinstance(ExtractiveSummarizer(), Summarizer)


def test_sections_and_notice() -> None:
    # Given a prompt built from a small conversation
    prompt = build_summary_prompt(conversation(), None, 400)
    # When summarized offline
    summary = ExtractiveSummarizer()(prompt)
    # Then it says it is extractive and has the four sections in order, filled from the conversation
    assert summary.startswith(EXTRACTIVE_NOTICE)
    assert "language model" in EXTRACTIVE_NOTICE
    positions = [summary.index(f"\n{h}\n") for h in HEADINGS]
    assert positions == sorted(positions)
    assert section(summary, "## Topic") == "We need to migrate the billing service to Postgres."
    points = section(summary, "## Key Points")
    assert "- user: We need to migrate the billing service to Postgres. It runs on MySQL today." in points
    assert "- assistant used tool read \u2192 12 tables" in points
    assert "Last tool used: read" in section(summary, "## Current State")
    open_items = section(summary, "## Open Items")
    assert "- TODO: keep the audit log." in open_items
    assert "- Can we do it without downtime?" in open_items


def test_deterministic() -> None:
    # Given one prompt
    prompt = build_summary_prompt(conversation(), None, 400)
    # When summarized twice by separate instances
    # Then the output is identical
    assert ExtractiveSummarizer()(prompt) == ExtractiveSummarizer()(prompt)


def test_previous_summary_is_carried_forward() -> None:
    # Given a first summary, then an update prompt with new turns
    first = ExtractiveSummarizer()(build_summary_prompt(conversation(), None, 400))
    new_turns = [msg("a2", "assistant", "Yes, with logical replication. I will set it up next.")]
    update_prompt = build_summary_prompt(new_turns, first, 400)
    # When the update is summarized
    updated = ExtractiveSummarizer()(update_prompt)
    # Then the old topic and points survive, the new turn is added, and the notice appears once
    assert section(updated, "## Topic") == "We need to migrate the billing service to Postgres."
    points = section(updated, "## Key Points")
    assert "We need to migrate the billing service" in points
    assert "- assistant: Yes, with logical replication. I will set it up next." in points
    assert updated.count(EXTRACTIVE_NOTICE) == 1
    assert "Last assistant reply: I will set it up next." in section(updated, "## Current State")


def test_budget_is_respected_by_dropping_oldest_points() -> None:
    # Given a long conversation and a tight target
    messages = [
        msg(f"m{i}", "user" if i % 2 == 0 else "assistant", f"Point number {i} about the system.") for i in range(60)
    ]
    prompt = build_summary_prompt(messages, None, 120)
    # When summarized
    summary = ExtractiveSummarizer()(prompt)
    # Then it stays near the target, notes the omission, and keeps the newest point
    assert estimate_string_tokens(summary) <= 120
    assert "earlier points omitted to stay near the target size" in summary
    assert "Point number 59" in summary


def test_omitted_count_accumulates_across_updates() -> None:
    # Given a previous summary that already omitted 7 points
    previous = "## Topic\nT\n\n## Key Points\n- (7 earlier points omitted to stay near the target size)\n- kept\n"
    many = [msg(f"m{i}", "user", f"Another fact {i} worth noting here.") for i in range(40)]
    # When an update with a tight target is summarized
    summary = ExtractiveSummarizer()(build_summary_prompt(many, previous, 110))
    # Then the new omission note counts the old omissions too
    note = next(line for line in summary.split("\n") if "omitted" in line)
    assert int(note.split("(")[1].split(" ")[0]) > 7


def test_parse_recovers_turns_tools_and_target() -> None:
    # Given a prompt with a multi-line text and a multi-line tool output
    messages = [
        msg("u", "user", "line one\n\nline three"),
        msg("a", "assistant", "ok", {"type": "tool-x", "toolName": "grep", "input": {"q": 1}, "output": "a\nb"}),
    ]
    # When parsed
    parsed = parse_summary_prompt(build_summary_prompt(messages, None, 321))
    # Then roles, texts, tools and the target are recovered
    assert parsed.target_tokens == 321
    assert parsed.previous_summary is None
    assert [(t.role, t.text) for t in parsed.turns] == [("user", "line one\n\nline three"), ("assistant", "ok")]
    assert parsed.turns[1].tools[0].name == "grep"
    assert parsed.turns[1].tools[0].input == '{"q":1}'
    assert parsed.turns[1].tools[0].output == "a\nb"


def test_unrecognised_prompt_still_yields_the_sections() -> None:
    # Given a prompt with none of the anchors
    # When summarized
    summary = ExtractiveSummarizer()("Please summarize something")
    # Then the four sections are present with explicit placeholders
    assert all(h in summary for h in HEADINGS)
    assert "Nothing recorded." in summary


def test_drives_create_compact_function_end_to_end() -> None:
    # Given the offline summarizer inside the reference compaction function
    messages = [msg(f"m{i}", "user" if i % 2 == 0 else "assistant", f"Message {i} says something.") for i in range(12)]
    compact = create_compact_function(ExtractiveSummarizer(), protect_head=1, tail_token_budget=10)
    # When it runs
    result = compact(messages)
    # Then it returns a non-empty extractive summary of the middle
    assert result is not None
    assert result.summary.startswith(EXTRACTIVE_NOTICE)
    assert "Message 9 says something." in result.summary


def test_rejects_tiny_sentence_limit() -> None:
    # Given / When an unusable sentence limit is configured
    # Then construction fails
    with pytest.raises(ValueError, match="sentence_chars"):
        ExtractiveSummarizer(sentence_chars=5)


def test_previous_summary_in_another_layout_is_kept_as_key_points() -> None:
    # Given a previous summary written without the four headings (for example by a model that ignored them)
    previous = "**Summary**\nThe user wants a Postgres migration.\n- Audit log must stay."
    # When an update is summarized offline
    summary = ExtractiveSummarizer()(build_summary_prompt([msg("u", "user", "Any news?")], previous, 400))
    # Then its lines survive as key points
    points = section(summary, "## Key Points")
    assert "- The user wants a Postgres migration." in points
    assert "- Audit log must stay." in points
