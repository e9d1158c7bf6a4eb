"""plan_edits: new facts append a line, a changed single value replaces its line, repeats add nothing."""

from __future__ import annotations

from threadloom.reflection.facts import Fact, plan_edits
from threadloom.reflection.protocols import MemoryBlock
from threadloom.storage.reflections import NewProposal


def block(content: str) -> MemoryBlock:
    return MemoryBlock("memory", content, "v1")


def test_new_facts_become_one_append_each_with_their_message() -> None:
    facts = [Fact("Name", "Ada", "u1"), Fact("Prefers", "tea", "u2")]
    assert plan_edits(facts, block("")) == [
        NewProposal("memory", "append", "Name: Ada", ("u1",)),
        NewProposal("memory", "append", "Prefers: tea", ("u2",)),
    ]


def test_facts_already_in_the_block_and_repeats_add_nothing() -> None:
    facts = [Fact("Name", "ada", "u1"), Fact("Prefers", "tea", "u2"), Fact("Prefers", "Tea", "u3")]
    assert plan_edits(facts, block("Name: Ada\nPrefers: tea")) == []


def test_a_new_value_of_a_single_valued_key_replaces_its_line_based_on_the_version_read() -> None:
    facts = [Fact("Name", "Ada", "u1"), Fact("Name", "Bea", "u4"), Fact("Favorite tea", "Assam", "u5")]
    edits = plan_edits(facts, block("Name: Ada\nFavorite tea: Earl Grey\nPrefers: tea"))
    assert edits == [
        NewProposal("memory", "replace", "Name: Bea\nFavorite tea: Assam\nPrefers: tea", ("u4", "u5"), "v1"),
    ]


def test_many_valued_keys_gain_lines() -> None:
    edits = plan_edits([Fact("Prefers", "short answers", "u1")], block("Prefers: tea"))
    assert edits == [NewProposal("memory", "append", "Prefers: short answers", ("u1",))]


def test_empty_or_oversized_facts_are_dropped() -> None:
    facts = [Fact("Name", " ", "u1"), Fact("Prefers", "x" * 300, "u2"), Fact("", "y", "u3")]
    assert plan_edits(facts, block("")) == []
