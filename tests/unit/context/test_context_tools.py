"""Generated context tools: which exist, their schemas, descriptions and every result string."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from threadloom.core.context import ContextBlocks, ContextConfig
from threadloom.tools.base import Tool
from threadloom.tools.context_tools import build_context_tools

if TYPE_CHECKING:
    from tests.unit.context.conftest import Fakes


@pytest.fixture
def kit(fake: Fakes) -> dict[str, Any]:
    """A full set of blocks: read-only, two regular writable, a writable skill library and a search index."""
    providers: dict[str, Any] = {
        "soul": fake.ReadOnlyText("You are helpful."),
        "memory": fake.WritableText(""),
        "notes": fake.WritableText("first"),
        "skills": fake.WritableSkillLibrary({"pirate": "Arr", "tax": "Taxes"}, {"pirate": "Talk like a pirate"}),
        "knowledge": fake.WritableSearchIndex({"paris": "Paris is in France"}),
    }
    unloads: list[tuple[str, str]] = []
    blocks = ContextBlocks(
        [
            ContextConfig("soul", description="Identity", provider=providers["soul"]),
            ContextConfig("memory", description="Learned facts", max_tokens=1100, provider=providers["memory"]),
            ContextConfig("notes", provider=providers["notes"]),
            ContextConfig("skills", description="Loadable docs", provider=providers["skills"]),
            ContextConfig("knowledge", description="Searchable docs", provider=providers["knowledge"]),
        ],
        on_unload=lambda label, key: unloads.append((label, key)),
    )
    return {"blocks": blocks, "tools": build_context_tools(blocks), "providers": providers, "unloads": unloads}


# -- which tools ------------------------------------------------------------------------------------


def test_no_tools_for_readonly_blocks(fake: Fakes) -> None:
    # Given only read-only blocks / When tools are built / Then there are none
    blocks = ContextBlocks([ContextConfig("soul", provider=fake.ReadOnlyText("hi")), ContextConfig("bare")])
    assert build_context_tools(blocks) == {}


def test_all_four_tools_in_order(kit: dict[str, Any]) -> None:
    # Given writable, skill and search blocks / Then all four tools exist, each a Tool named after its key
    tools = kit["tools"]
    assert list(tools) == ["set_context", "load_context", "unload_context", "search_context"]
    assert all(isinstance(tool, Tool) and tool.name == name for name, tool in tools.items())


def test_building_tools_loads_blocks(kit: dict[str, Any]) -> None:
    # Given tools built on a fresh manager / Then the blocks were loaded for them
    assert kit["blocks"].is_loaded


# -- set_context ----------------------------------------------------------------------------------------


def test_set_context_description(kit: dict[str, Any]) -> None:
    # Given the kit's writable blocks
    description = kit["tools"]["set_context"].description
    # Then each writable block has its exact line, in order, and read-only ones are absent
    lines = description.split("\n")
    assert lines[0] == "Write to a context block. Available blocks:"
    assert lines[1:5] == [
        '- "memory" (writable): Learned facts',
        '- "notes" (writable): no description',
        '- "skills" (skill collection, keyed entries): Loadable docs',
        '- "knowledge" (searchable, keyed entries): Searchable docs',
    ]
    assert lines[5] == ""
    assert "metadata: { title, description }" in description
    assert "soul" not in description


def test_set_context_schema_with_keyed_blocks(kit: dict[str, Any]) -> None:
    # Given writable keyed blocks
    schema = kit["tools"]["set_context"].input_schema
    # Then the schema has label/content/action and the metadata object
    assert schema["type"] == "object"
    assert schema["required"] == ["label", "content"]
    props = schema["properties"]
    assert props["label"] == {
        "type": "string",
        "enum": ["memory", "notes", "skills", "knowledge"],
        "description": "Block label to write to",
    }
    assert props["content"]["type"] == "string"
    assert props["action"]["enum"] == ["replace", "append"]
    metadata = props["metadata"]
    assert metadata["type"] == "object"
    assert set(metadata["properties"]) == {"title", "description"}
    assert metadata["properties"]["title"]["type"] == "string"
    assert metadata["properties"]["description"]["type"] == "string"
    assert '"skills", "knowledge"' in metadata["description"]


def test_set_context_without_keyed_writable_blocks_has_no_metadata(fake: Fakes) -> None:
    # Given a regular writable block and a read-only skill library
    blocks = ContextBlocks(
        [
            ContextConfig("memory", provider=fake.WritableText()),
            ContextConfig("docs", provider=fake.SkillLibrary({"a": "b"})),
        ]
    )
    tool = build_context_tools(blocks)["set_context"]
    # Then neither the schema nor the description mention metadata
    assert "metadata" not in tool.input_schema["properties"]
    assert "metadata" not in tool.description
    assert tool.input_schema["properties"]["label"]["enum"] == ["memory"]


def test_set_context_replace_and_usage(kit: dict[str, Any]) -> None:
    # Given set_context / When replacing a budgeted block and an unbudgeted one
    set_context = kit["tools"]["set_context"]
    # Then the usage strings are exact
    assert set_context.execute({"label": "memory", "content": "User likes coffee."}) == (
        "Written to memory. Usage: 0% (5/1100 tokens)"
    )
    assert set_context.execute({"label": "memory", "content": "x" * 1980}) == (
        "Written to memory. Usage: 45% (495/1100 tokens)"
    )
    assert set_context.execute({"label": "notes", "content": "Hello world", "action": "replace"}) == (
        "Written to notes. Usage: 3 tokens"
    )
    assert kit["providers"]["notes"].writes == ["Hello world"]


def test_set_context_append_and_unknown_action(kit: dict[str, Any]) -> None:
    # Given "first" in notes
    set_context = kit["tools"]["set_context"]
    # When appending
    assert set_context.execute({"label": "notes", "content": "second", "action": "append"}) == (
        "Written to notes. Usage: 3 tokens"
    )
    # Then a newline separates the parts
    assert kit["blocks"].get_block("notes").content == "first\nsecond"
    # When an unknown action is given / Then it replaces
    set_context.execute({"label": "notes", "content": "only", "action": "prepend"})
    assert kit["blocks"].get_block("notes").content == "only"


def test_set_context_errors(kit: dict[str, Any], fake: Fakes) -> None:
    # Given set_context
    blocks = kit["blocks"]
    blocks.add_block(ContextConfig("tiny", max_tokens=10, provider=fake.WritableText()))
    blocks.add_block(ContextConfig("docs", provider=fake.SkillLibrary({"a": "b"})))
    set_context = kit["tools"]["set_context"]
    # When the label is unknown / readonly / over budget / a keyed block without writes
    # Then each result is the exact error string (lowercase "block" for unknown labels)
    assert set_context.execute({"label": "ghost", "content": "x"}) == 'Error: block "ghost" not found'
    assert set_context.execute({"label": "soul", "content": "x"}) == 'Error: Block "soul" is readonly'
    assert set_context.execute({"label": "tiny", "content": "word " * 50}) == (
        'Error: Block "tiny" exceeds maxTokens: 65 > 10'
    )
    assert set_context.execute({"label": "docs", "content": "x"}) == 'Error: Block "docs" does not support writes'


def test_set_context_zero_budget_usage(fake: Fakes) -> None:
    # Given a block with maxTokens 0
    blocks = ContextBlocks([ContextConfig("scratch", max_tokens=0, provider=fake.WritableText())])
    set_context = build_context_tools(blocks)["set_context"]
    # When writing nothing / Then the usage has no percentage; anything else is refused
    assert set_context.execute({"label": "scratch", "content": ""}) == "Written to scratch. Usage: 0 tokens"
    assert set_context.execute({"label": "scratch", "content": "x"}) == (
        'Error: Block "scratch" exceeds maxTokens: 2 > 0'
    )


def test_set_context_skill_entry_with_title(kit: dict[str, Any]) -> None:
    # Given a writable skill library
    set_context = kit["tools"]["set_context"]
    library = kit["providers"]["skills"]
    # When writing with a title only, then with a title and description
    first = set_context.execute({"label": "skills", "content": "Arr!", "metadata": {"title": "Pirate style"}})
    second = set_context.execute(
        {"label": "skills", "content": "Arr!!", "metadata": {"title": "Pirate style", "description": "Speak"}}
    )
    # Then the key comes from the title, the title doubles as description, and action is ignored
    assert first == second == 'Indexed "pirate-style" in skills.'
    assert library.writes == [("pirate-style", "Arr!", "Pirate style"), ("pirate-style", "Arr!!", "Speak")]
    assert "- pirate-style: Speak" in kit["blocks"].get_block("skills").content


def test_set_context_skill_entry_without_metadata(kit: dict[str, Any]) -> None:
    # Given no metadata / When writing to a skill block
    result = kit["tools"]["set_context"].execute({"label": "skills", "content": "no key", "action": "append"})
    # Then the key is the content slug plus hash, and no description is stored
    assert result == 'Indexed "no-key-1nprufp" in skills.'
    assert kit["providers"]["skills"].writes == [("no-key-1nprufp", "no key", None)]


def test_set_context_search_entry_ignores_description(kit: dict[str, Any]) -> None:
    # Given a writable search index
    set_context = kit["tools"]["set_context"]
    # When writing with metadata
    result = set_context.execute(
        {"label": "knowledge", "content": "Rome is in Italy", "metadata": {"title": "Rome", "description": "ignored"}}
    )
    # Then the entry is indexed under the title's slug and the summary refreshes
    assert result == 'Indexed "rome" in knowledge.'
    assert kit["providers"]["knowledge"].writes == [("rome", "Rome is in Italy")]
    assert kit["blocks"].get_block("knowledge").content == "2 entries indexed."


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"content": "x"},
        {"label": 3, "content": "x"},
        {"label": "memory"},
        {"label": "memory", "content": None},
        {"label": "memory", "content": ["x"]},
        {"label": "skills", "content": "x", "metadata": "title"},
        {"label": "skills", "content": "x", "metadata": {"title": 5}},
        {"label": "skills", "content": "x", "metadata": {"description": ["a"]}},
    ],
)
def test_set_context_rejects_malformed_arguments(kit: dict[str, Any], args: dict[str, Any]) -> None:
    # Given malformed arguments / When executed / Then an error string comes back and nothing is written
    result = kit["tools"]["set_context"].execute(args)
    assert result.startswith("Error: ")
    assert kit["providers"]["memory"].writes == []
    assert kit["providers"]["skills"].writes == []


def test_tool_execute_tolerates_non_mapping_arguments(kit: dict[str, Any]) -> None:
    # Given arguments that are not an object / When executed / Then each tool answers with an error string
    for tool in kit["tools"].values():
        assert tool.execute(None).startswith("Error: ")
        assert tool.execute(["label"]).startswith("Error: ")  # type: ignore[arg-type]


# -- load_context / unload_context ------------------------------------------------------------------------


def test_load_context_schema_and_description(kit: dict[str, Any]) -> None:
    # Given the kit's skill block
    tool = kit["tools"]["load_context"]
    # Then the description names it quoted and the schema is exact
    assert '"skills"' in tool.description
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["skills"], "description": "Skill block label"},
            "key": {"type": "string", "description": "Skill key to load"},
        },
        "required": ["label", "key"],
    }


def test_load_context_results(kit: dict[str, Any]) -> None:
    # Given load_context over a library with "pirate"
    load = kit["tools"]["load_context"]
    blocks = kit["blocks"]
    # When loading an existing, a missing and a non-skill label
    assert load.execute({"label": "skills", "key": "pirate"}) == "Arr"
    assert load.execute({"label": "skills", "key": "nope"}) == "Not found: nope"
    assert load.execute({"label": "memory", "key": "pirate"}) == (
        'Error: "memory" is not a skill block. Skill blocks: skills'
    )
    # Then only the successful load is tracked (contract D7)
    assert blocks.loaded_skill_keys() == {"skills:pirate"}


def test_load_context_wraps_provider_errors(kit: dict[str, Any]) -> None:
    # Given a library whose load raises / When loading / Then the error becomes a string, nothing tracked
    kit["providers"]["skills"].load_error = "bucket gone"
    assert kit["tools"]["load_context"].execute({"label": "skills", "key": "pirate"}) == "Error: bucket gone"
    assert kit["blocks"].loaded_skill_keys() == set()


def test_skill_error_lists_every_skill_label(fake: Fakes) -> None:
    # Given two skill blocks
    blocks = ContextBlocks(
        [
            ContextConfig("skills", provider=fake.SkillLibrary({"a": "b"})),
            ContextConfig("docs", provider=fake.SkillLibrary({"c": "d"})),
        ]
    )
    tools = build_context_tools(blocks)
    # When another label is used / Then both labels are listed, comma-separated
    expected = 'Error: "ghost" is not a skill block. Skill blocks: skills, docs'
    assert tools["load_context"].execute({"label": "ghost", "key": "a"}) == expected
    assert tools["unload_context"].execute({"label": "ghost", "key": "a"}) == expected
    assert '"skills", "docs"' in tools["load_context"].description


def test_unload_context_description_lists_loaded_skills_at_build_time(kit: dict[str, Any]) -> None:
    # Given no loaded skills / Then the description says so
    assert kit["tools"]["unload_context"].description.endswith(" No skills currently loaded.")
    # When two skills are loaded and the tools rebuilt
    blocks = kit["blocks"]
    blocks.load_skill("skills", "tax")
    blocks.load_skill("skills", "pirate")
    rebuilt = build_context_tools(blocks)["unload_context"]
    # Then the new description lists them in load order; the old tool is unchanged
    assert rebuilt.description.endswith(" Currently loaded: skills:tax, skills:pirate.")
    assert kit["tools"]["unload_context"].description.endswith(" No skills currently loaded.")
    assert rebuilt.input_schema["properties"]["key"] == {"type": "string", "description": "Skill key to unload"}
    assert rebuilt.input_schema["required"] == ["label", "key"]


def test_unload_context_results(kit: dict[str, Any]) -> None:
    # Given a loaded skill
    tools = kit["tools"]
    tools["load_context"].execute({"label": "skills", "key": "pirate"})
    # When unloading it twice
    first = tools["unload_context"].execute({"label": "skills", "key": "pirate"})
    second = tools["unload_context"].execute({"label": "skills", "key": "pirate"})
    # Then the first reclaims and fires the callback, the second reports it is not loaded
    assert first == 'Unloaded "pirate" from skills. Context reclaimed.'
    assert second == 'Skill "pirate" is not currently loaded in "skills".'
    assert kit["unloads"] == [("skills", "pirate")]


def test_unload_context_does_not_swallow_callback_errors(fake: Fakes) -> None:
    # Given an unload callback that fails
    def explode(label: str, key: str) -> None:
        raise RuntimeError(f"rewrite failed for {label}:{key}")

    blocks = ContextBlocks([ContextConfig("skills", provider=fake.SkillLibrary({"a": "b"}))], on_unload=explode)
    tools = build_context_tools(blocks)
    tools["load_context"].execute({"label": "skills", "key": "a"})
    # When unloading / Then the failure propagates instead of becoming a string
    with pytest.raises(RuntimeError, match="rewrite failed for skills:a"):
        tools["unload_context"].execute({"label": "skills", "key": "a"})


@pytest.mark.parametrize(
    "args", [{}, {"label": "skills"}, {"key": "pirate"}, {"label": "skills", "key": 1}, {"label": None, "key": "a"}]
)
def test_load_and_unload_reject_malformed_arguments(kit: dict[str, Any], args: dict[str, Any]) -> None:
    # Given malformed arguments / When executed / Then error strings, nothing tracked
    assert kit["tools"]["load_context"].execute(args).startswith("Error: ")
    assert kit["tools"]["unload_context"].execute(args).startswith("Error: ")
    assert kit["blocks"].loaded_skill_keys() == set()


def test_labels_are_fixed_when_tools_are_built(kit: dict[str, Any], fake: Fakes) -> None:
    # Given tools built before a second skill block was added
    kit["blocks"].add_block(ContextConfig("more", provider=fake.SkillLibrary({"x": "y"})))
    # When the old tool is used with the new label / Then it is rejected
    assert kit["tools"]["load_context"].execute({"label": "more", "key": "x"}) == (
        'Error: "more" is not a skill block. Skill blocks: skills'
    )


# -- search_context ---------------------------------------------------------------------------------------


def test_search_context_schema_and_description(kit: dict[str, Any]) -> None:
    # Given the kit's search block
    tool = kit["tools"]["search_context"]
    # Then the description names it quoted and the schema is exact
    assert '"knowledge"' in tool.description
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["knowledge"], "description": "Searchable block label"},
            "query": {"type": "string", "description": "Search query"},
        },
        "required": ["label", "query"],
    }


def test_search_context_results(kit: dict[str, Any]) -> None:
    # Given an index holding one entry
    search = kit["tools"]["search_context"]
    # When searching with hits, without hits, and a non-searchable label
    assert search.execute({"label": "knowledge", "query": "paris"}) == "[paris]\nParis is in France"
    assert search.execute({"label": "knowledge", "query": "berlin"}) == "No results found."
    assert search.execute({"label": "memory", "query": "paris"}) == (
        'Error: "memory" is not searchable. Searchable blocks: knowledge'
    )
    # When the provider fails / Then the error is wrapped
    kit["providers"]["knowledge"].search_error = "index offline"
    assert search.execute({"label": "knowledge", "query": "paris"}) == "Error: index offline"
    # When the query is missing / Then an error string, and the provider is not asked
    asked = len(kit["providers"]["knowledge"].queries)
    assert search.execute({"label": "knowledge"}).startswith("Error: ")
    assert len(kit["providers"]["knowledge"].queries) == asked


# -- a provider that both loads and searches -----------------------------------------------------------------


def test_provider_with_load_and_search(fake: Fakes) -> None:
    # Given a provider with get, set, load and search
    library = fake.SkillSearchLibrary({"pirate": "Talk like a pirate"})
    blocks = ContextBlocks([ContextConfig("lib", description="Both", provider=library)])
    tools = build_context_tools(blocks)
    # Then it is in every tool, described as a skill collection and rendered as searchable
    assert list(tools) == ["set_context", "load_context", "unload_context", "search_context"]
    assert '- "lib" (skill collection, keyed entries): Both' in tools["set_context"].description
    assert "LIB (Both) [searchable]" in blocks.freeze_system_prompt()
    # When written through set_context / Then the write goes through set_skill (with a description)
    result = tools["set_context"].execute({"label": "lib", "content": "Be brief", "metadata": {"title": "Style"}})
    assert result == 'Indexed "style" in lib.'
    assert library.writes == [("style", "Be brief", "Style")]
    # And it can be loaded and searched
    assert tools["load_context"].execute({"label": "lib", "key": "pirate"}) == "Talk like a pirate"
    assert tools["search_context"].execute({"label": "lib", "query": "brief"}) == "[style]\nBe brief"
    assert blocks.loaded_skill_keys() == {"lib:pirate"}
