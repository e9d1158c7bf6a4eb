"""ContextBlocks: loading, writes and their exact errors, keyed entries, skills tracking."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from threadloom.core.context import ContextBlocks, ContextConfig
from threadloom.errors import BlockLimitError, NotFoundError, ReadOnlyBlockError, ThreadloomError, ValidationError
from threadloom.tools.context_tools import build_context_tools

if TYPE_CHECKING:
    from tests.unit.context.conftest import Fakes


def make(*configs: ContextConfig, **kwargs: Any) -> ContextBlocks:
    return ContextBlocks(list(configs), **kwargs)


# -- load --------------------------------------------------------------------------------------------


def test_blocks_are_not_read_before_load(fake: Fakes) -> None:
    # Given a manager over a provider
    provider = fake.WritableText("hello")
    blocks = make(ContextConfig("memory", provider=provider))
    # When nothing has loaded yet
    # Then reads return nothing and the provider was never touched
    assert blocks.get_block("memory") is None
    assert blocks.get_blocks() == []
    assert not blocks.is_loaded
    assert provider.get_calls == 0


def test_load_sets_flags_by_duck_typing(fake: Fakes) -> None:
    # Given one provider of each kind, and a block without a provider
    blocks = make(
        ContextConfig("soul", description="Identity", provider=fake.ReadOnlyText("You are helpful.")),
        ContextConfig("memory", max_tokens=1100, provider=fake.WritableText(None)),
        ContextConfig("skills", provider=fake.SkillLibrary({"pirate": "Arr"})),
        ContextConfig("knowledge", provider=fake.WritableSearchIndex()),
        ContextConfig("both", provider=fake.SkillSearchLibrary()),
        ContextConfig("bare", description="No provider"),
    )
    # When loaded
    blocks.load()
    # Then flags, content (None -> "") and tokens follow the providers
    soul, memory, skills, knowledge, both, bare = blocks.get_blocks()
    assert (soul.content, soul.tokens, soul.description) == ("You are helpful.", 4, "Identity")
    assert (soul.writable, soul.is_skill, soul.is_searchable) == (False, False, False)
    assert (memory.content, memory.tokens, memory.max_tokens) == ("", 0, 1100)
    assert (memory.writable, memory.is_skill, memory.is_searchable) == (True, False, False)
    assert (skills.content, skills.writable, skills.is_skill, skills.is_searchable) == ("- pirate", False, True, False)
    assert (knowledge.writable, knowledge.is_skill, knowledge.is_searchable) == (True, False, True)
    assert (both.writable, both.is_skill, both.is_searchable) == (True, True, True)
    assert (bare.content, bare.tokens, bare.writable, bare.is_skill, bare.is_searchable) == ("", 0, False, False, False)
    assert blocks.is_loaded


def test_init_runs_before_get_once_per_load_pass(fake: Fakes) -> None:
    # Given two providers sharing one call log
    calls: list[str] = []
    first = fake.ReadOnlyText("a", calls=calls)
    second = fake.ReadOnlyText("b", calls=calls)
    blocks = make(ContextConfig("one", provider=first), ContextConfig("two", provider=second))
    # When loaded, then ensured again, and tools built twice
    blocks.load()
    blocks.ensure_loaded()
    build_context_tools(blocks)
    build_context_tools(blocks)
    # Then each provider was initialised once with its label, block by block, init before get
    assert calls == ["init:one", "get", "init:two", "get"]
    # When the system prompt is refreshed
    blocks.refresh_system_prompt()
    # Then init runs again, once per provider
    assert first.init_labels == ["one", "one"]
    assert second.init_labels == ["two", "two"]


def test_duplicate_labels_keep_first_position_show_last_content_write_to_first(fake: Fakes) -> None:
    # Given two configs with the label "memory" around another block
    first = fake.WritableText("first")
    second = fake.WritableText("second")
    blocks = make(
        ContextConfig("memory", description="one", provider=first),
        ContextConfig("soul", provider=fake.ReadOnlyText("hi")),
        ContextConfig("memory", description="two", provider=second),
    )
    # When loaded
    blocks.load()
    # Then one block keeps the first position but carries the second config's content
    assert [b.label for b in blocks.get_blocks()] == ["memory", "soul"]
    memory = blocks.get_block("memory")
    assert memory is not None
    assert (memory.content, memory.description) == ("second", "two")
    assert first.init_labels == ["memory"]
    assert second.init_labels == ["memory"]
    # When written
    blocks.set_block("memory", "new")
    # Then only the first config's provider receives the write
    assert first.writes == ["new"]
    assert second.writes == []


# -- set_block ---------------------------------------------------------------------------------------


@pytest.fixture
def standard(fake: Fakes) -> tuple[ContextBlocks, Any, Any]:
    memory = fake.WritableText("fact1")
    notes = fake.WritableText("")
    blocks = make(
        ContextConfig("soul", provider=fake.ReadOnlyText("You are helpful.")),
        ContextConfig("memory", description="Learned facts", max_tokens=10, provider=memory),
        ContextConfig("notes", provider=notes),
        ContextConfig("skills", provider=fake.WritableSkillLibrary()),
        ContextConfig("knowledge", provider=fake.WritableSearchIndex()),
    )
    return blocks, memory, notes


@pytest.mark.parametrize(
    ("label", "error", "message"),
    [
        ("soul", ReadOnlyBlockError, 'Block "soul" is readonly'),
        ("ghost", ReadOnlyBlockError, 'Block "ghost" is readonly'),
        (
            "skills",
            ReadOnlyBlockError,
            'Block "skills" is a keyed provider. Use setSkill() or setSearchEntry() instead.',
        ),
        (
            "knowledge",
            ReadOnlyBlockError,
            'Block "knowledge" is a keyed provider. Use setSkill() or setSearchEntry() instead.',
        ),
    ],
)
def test_set_block_refusals(
    standard: tuple[ContextBlocks, Any, Any], label: str, error: type[ThreadloomError], message: str
) -> None:
    # Given loaded-on-demand blocks
    blocks, _, _ = standard
    # When writing to a block that is read-only, unknown or keyed
    with pytest.raises(error) as caught:
        blocks.set_block(label, "text")
    # Then the reference's exact message is raised as a typed error
    assert str(caught.value) == message


def test_set_block_over_budget_raises_and_changes_nothing(standard: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a block with maxTokens 10
    blocks, memory, _ = standard
    # When writing 65 tokens
    with pytest.raises(BlockLimitError) as caught:
        blocks.set_block("memory", "word " * 50)
    # Then the exact limit message is raised, nothing is truncated or persisted
    assert str(caught.value) == 'Block "memory" exceeds maxTokens: 65 > 10'
    assert memory.writes == []
    block = blocks.get_block("memory")
    assert block is not None
    assert block.content == "fact1"


def test_set_block_persists_and_updates_memory(standard: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a frozen snapshot
    blocks, memory, _ = standard
    blocks.load()
    before = blocks.to_system_prompt()
    # When a regular block is replaced
    updated = blocks.set_block("memory", "User likes tea.")
    # Then the provider and the in-memory block change, with tokens recomputed, but the snapshot does not
    assert memory.writes == ["User likes tea."]
    assert updated == blocks.get_block("memory")
    assert (updated.content, updated.tokens, updated.max_tokens, updated.description) == (
        "User likes tea.",
        4,
        10,
        "Learned facts",
    )
    assert (updated.writable, updated.is_skill, updated.is_searchable) == (True, False, False)
    assert blocks.to_system_prompt() == before
    assert "User likes tea." not in before


def test_failed_provider_write_leaves_memory_unchanged(fake: Fakes) -> None:
    # Given a writable provider whose storage is down
    blocks = make(ContextConfig("memory", provider=fake.WritableText("old", fail_with="disk full")))
    # When written
    with pytest.raises(RuntimeError, match="disk full"):
        blocks.set_block("memory", "new")
    # Then the in-memory block still matches what is stored
    block = blocks.get_block("memory")
    assert block is not None
    assert block.content == "old"


def test_max_tokens_zero_is_enforced(fake: Fakes) -> None:
    # Given a block with maxTokens 0
    blocks = make(ContextConfig("scratch", max_tokens=0, provider=fake.WritableText()))
    # When writing empty content / Then it is accepted
    assert blocks.set_block("scratch", "").tokens == 0
    # When writing anything else / Then the budget of 0 refuses it
    with pytest.raises(BlockLimitError) as caught:
        blocks.set_block("scratch", "x")
    assert str(caught.value) == 'Block "scratch" exceeds maxTokens: 2 > 0'


# -- append_to_block ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [("fact1", "\nfact2", "fact1\nfact2"), ("fact1", "fact2", "fact1\nfact2"), ("", "x", "x")],
)
def test_append_separator(fake: Fakes, old: str, new: str, expected: str) -> None:
    # Given a block holding `old`
    provider = fake.WritableText(old)
    blocks = make(ContextConfig("memory", provider=provider))
    # When `new` is appended
    block = blocks.append_to_block("memory", new)
    # Then a newline separates them only when needed
    assert block.content == expected
    assert provider.writes == [expected]


def test_append_to_missing_block_raises_not_found(standard: tuple[ContextBlocks, Any, Any]) -> None:
    # Given no block "ghost"
    blocks, _, _ = standard
    # When appending to it / Then the "not found" message (not "readonly") is raised
    with pytest.raises(NotFoundError) as caught:
        blocks.append_to_block("ghost", "x")
    assert str(caught.value) == 'Block "ghost" not found'


def test_append_checks_budget_on_combined_text(standard: tuple[ContextBlocks, Any, Any]) -> None:
    # Given "fact1" in a block limited to 10 tokens
    blocks, _, _ = standard
    # When appending text that fits alone (10 tokens) but not combined
    with pytest.raises(BlockLimitError) as caught:
        blocks.append_to_block("memory", "a b c d e f g")
    # Then the combined count is reported
    assert str(caught.value) == 'Block "memory" exceeds maxTokens: 11 > 10'


def test_append_to_readonly_block_uses_readonly_message(standard: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a read-only block / When appending / Then the write is refused as readonly
    blocks, _, _ = standard
    with pytest.raises(ReadOnlyBlockError, match=r'^Block "soul" is readonly$'):
        blocks.append_to_block("soul", "x")


# -- keyed writes -------------------------------------------------------------------------------------


def test_set_skill_writes_and_refreshes_listing(fake: Fakes) -> None:
    # Given a writable skill library
    library = fake.WritableSkillLibrary({"tax": "Tax rules"})
    blocks = make(ContextConfig("skills", provider=library))
    # When a skill is stored
    blocks.set_skill("skills", "pirate", "Talk like a pirate", "Pirate speech")
    # Then the provider got it and the block shows the new listing with recomputed tokens
    assert library.writes == [("pirate", "Talk like a pirate", "Pirate speech")]
    block = blocks.get_block("skills")
    assert block is not None
    assert block.content == "- tax\n- pirate: Pirate speech"
    assert block.tokens == 8  # six words x 1.3, rounded up


def test_set_skill_keeps_content_when_listing_is_empty(fake: Fakes) -> None:
    # Given a skill library whose listing comes back empty after the write
    class Silent(fake.WritableSkillLibrary):  # type: ignore[name-defined,misc]
        def get(self) -> str | None:
            return None if self.writes else "- old"

    blocks = make(ContextConfig("skills", provider=Silent()))
    blocks.load()
    # When a skill is stored
    blocks.set_skill("skills", "new", "body")
    # Then the previous listing stays in place
    block = blocks.get_block("skills")
    assert block is not None
    assert block.content == "- old"


def test_set_search_entry_writes_and_refreshes_summary(fake: Fakes) -> None:
    # Given an empty writable search index
    index = fake.WritableSearchIndex()
    blocks = make(ContextConfig("knowledge", provider=index))
    # When an entry is indexed
    blocks.set_search_entry("knowledge", "k1", "Paris is in France")
    # Then the provider got it and the block shows the provider's summary
    assert index.writes == [("k1", "Paris is in France")]
    block = blocks.get_block("knowledge")
    assert block is not None
    assert (block.content, block.tokens) == ("1 entries indexed.", 5)


@pytest.mark.parametrize(
    ("method", "args", "error", "message"),
    [
        ("set_skill", ("memory", "k", "c"), ValidationError, 'Block "memory" is not a skill provider'),
        ("set_skill", ("ghost", "k", "c"), ValidationError, 'Block "ghost" is not a skill provider'),
        ("set_skill", ("docs", "k", "c"), ReadOnlyBlockError, 'Block "docs" does not support writes'),
        ("set_search_entry", ("memory", "k", "c"), ValidationError, 'Block "memory" is not a search provider'),
        ("set_search_entry", ("index", "k", "c"), ReadOnlyBlockError, 'Block "index" does not support writes'),
        ("load_skill", ("memory", "k"), ValidationError, 'Block "memory" is not a skill provider'),
        ("search_context", ("memory", "q"), ValidationError, 'Block "memory" is not a search provider'),
    ],
)
def test_keyed_operation_errors(
    fake: Fakes, method: str, args: tuple[str, ...], error: type[ThreadloomError], message: str
) -> None:
    # Given a regular block, a read-only skill library and a read-only search index
    blocks = make(
        ContextConfig("memory", provider=fake.WritableText()),
        ContextConfig("docs", provider=fake.SkillLibrary({"a": "b"})),
        ContextConfig("index", provider=fake.SearchIndex()),
    )
    # When a keyed operation targets the wrong kind of block
    with pytest.raises(error) as caught:
        getattr(blocks, method)(*args)
    # Then the reference's exact message is raised as a typed error
    assert str(caught.value) == message


def test_search_context_delegates_to_provider(fake: Fakes) -> None:
    # Given a search index with one entry
    blocks = make(ContextConfig("knowledge", provider=fake.SearchIndex({"k": "Paris is in France"})))
    # When searched / Then hits are the provider's text, and no hits are None
    assert blocks.search_context("knowledge", "paris") == "[k]\nParis is in France"
    assert blocks.search_context("knowledge", "berlin") is None


# -- skills tracking ----------------------------------------------------------------------------------


@pytest.fixture
def skills(fake: Fakes) -> tuple[ContextBlocks, list[set[str]], list[tuple[str, str]]]:
    changes: list[set[str]] = []
    unloads: list[tuple[str, str]] = []
    blocks = make(
        ContextConfig("skills", provider=fake.SkillLibrary({"pirate": "Arr", "tax": "Taxes", "blank": ""})),
        ContextConfig("skills2", provider=fake.SkillLibrary({"pirate": "Arr2"})),
        on_unload=lambda label, key: unloads.append((label, key)),
        on_loaded_skills_changed=changes.append,
    )
    return blocks, changes, unloads


def test_successful_load_is_tracked_and_reported(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a skill library and a listener
    blocks, changes, _ = skills
    # When a skill is loaded twice
    assert blocks.load_skill("skills", "pirate") == "Arr"
    assert blocks.load_skill("skills", "pirate") == "Arr"
    # Then it is tracked as "label:key" and the listener heard one change
    assert blocks.loaded_skill_keys() == {"skills:pirate"}
    assert changes == [{"skills:pirate"}]


def test_failed_load_is_not_tracked(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a skill library without the key "missing" (contract D7)
    blocks, changes, _ = skills
    # When loading it
    result = blocks.load_skill("skills", "missing")
    # Then nothing is returned, tracked or reported
    assert result is None
    assert blocks.loaded_skill_keys() == set()
    assert changes == []


def test_failing_provider_load_is_not_tracked(fake: Fakes) -> None:
    # Given a library whose load raises
    library = fake.SkillLibrary({"pirate": "Arr"})
    library.load_error = "bucket gone"
    blocks = make(ContextConfig("skills", provider=library))
    # When loading / Then the error propagates and nothing is tracked
    with pytest.raises(RuntimeError, match="bucket gone"):
        blocks.load_skill("skills", "pirate")
    assert blocks.loaded_skill_keys() == set()


def test_empty_document_counts_as_loaded(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a skill whose body is "" / When loaded / Then "" is returned and tracked
    blocks, _, _ = skills
    assert blocks.load_skill("skills", "blank") == ""
    assert blocks.loaded_skill_keys() == {"skills:blank"}


def test_unload_fires_callback_synchronously(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a loaded skill
    blocks, changes, unloads = skills
    blocks.load_skill("skills", "pirate")
    # When unloaded
    result = blocks.unload_skill("skills", "pirate")
    # Then it returns True, the callback already ran, and the listener saw the removal
    assert result is True
    assert unloads == [("skills", "pirate")]
    assert blocks.loaded_skill_keys() == set()
    assert changes == [{"skills:pirate"}, set()]


def test_unload_of_unloaded_skill_is_false_without_callback(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given nothing loaded / When unloading / Then False, and no callback or listener call
    blocks, changes, unloads = skills
    assert blocks.unload_skill("skills", "pirate") is False
    assert unloads == []
    assert changes == []


def test_loaded_skill_keys_is_a_copy(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given a loaded skill / When the returned set is mutated / Then tracking is unaffected
    blocks, _, _ = skills
    blocks.load_skill("skills", "pirate")
    blocks.loaded_skill_keys().clear()
    assert blocks.loaded_skill_keys() == {"skills:pirate"}


def test_restore_replaces_the_set(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given one loaded skill
    blocks, changes, _ = skills
    blocks.load_skill("skills", "pirate")
    # When restoring persisted ids without notification
    blocks.restore_loaded_skills(["skills:tax", "skills2:pirate"], notify=False)
    # Then the set is replaced and the listener stays quiet
    assert blocks.loaded_skill_keys() == {"skills:tax", "skills2:pirate"}
    assert blocks.loaded_skill_ids() == ["skills:tax", "skills2:pirate"]
    assert changes == [{"skills:pirate"}]
    # When restoring with notification (the default)
    blocks.restore_loaded_skills(["skills:pirate"])
    # Then the listener hears it; restoring the same ids again is not a change
    blocks.restore_loaded_skills(["skills:pirate"])
    assert changes == [{"skills:pirate"}, {"skills:pirate"}]


def test_clear_skill_state(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given loaded skills / When cleared / Then none remain, no unload callback fires
    blocks, changes, unloads = skills
    blocks.load_skill("skills", "pirate")
    blocks.clear_skill_state()
    assert blocks.loaded_skill_keys() == set()
    assert changes[-1] == set()
    assert unloads == []


# -- add / remove ---------------------------------------------------------------------------------------


def test_remove_block_drops_block_and_its_skills_only(skills: tuple[ContextBlocks, Any, Any]) -> None:
    # Given skills loaded from two blocks whose labels share a prefix
    blocks, changes, unloads = skills
    blocks.load_skill("skills", "pirate")
    blocks.load_skill("skills2", "pirate")
    # When removing "skills"
    removed = blocks.remove_block("skills")
    # Then only its own ids are dropped, no unload callback runs, and the listener hears the change
    assert removed is True
    assert blocks.get_block("skills") is None
    assert [c.label for c in blocks.configs] == ["skills2"]
    assert blocks.loaded_skill_keys() == {"skills2:pirate"}
    assert unloads == []
    assert changes[-1] == {"skills2:pirate"}
    # When removing an unknown label / Then False
    assert blocks.remove_block("nope") is False


def test_remove_block_removes_every_config_with_the_label(fake: Fakes) -> None:
    # Given a duplicated label
    blocks = make(
        ContextConfig("memory", provider=fake.WritableText("a")),
        ContextConfig("memory", provider=fake.WritableText("b")),
    )
    blocks.load()
    # When removed and reloaded / Then it does not come back
    assert blocks.remove_block("memory") is True
    blocks.refresh_system_prompt()
    assert blocks.get_blocks() == []


def test_add_block_loads_first_and_appends(fake: Fakes) -> None:
    # Given a manager with one block and a frozen snapshot
    soul = fake.ReadOnlyText("You are helpful.")
    blocks = make(ContextConfig("soul", provider=soul))
    new_provider = fake.WritableSkillLibrary({"pirate": "Arr"})
    # When a block is added before anything loaded
    added = blocks.add_block(ContextConfig("skills", description="Docs", provider=new_provider))
    # Then existing blocks were loaded, the new one was initialised and appended last
    assert soul.get_calls == 1
    assert new_provider.init_labels == ["skills"]
    assert [b.label for b in blocks.get_blocks()] == ["soul", "skills"]
    assert (added.content, added.description, added.is_skill, added.writable) == ("- pirate", "Docs", True, True)


def test_add_block_does_not_touch_frozen_prompt(fake: Fakes) -> None:
    # Given a frozen prompt
    blocks = make(ContextConfig("soul", provider=fake.ReadOnlyText("You are helpful.")))
    prompt = blocks.freeze_system_prompt()
    # When a block is added
    blocks.add_block(ContextConfig("memory", provider=fake.WritableText("x")))
    # Then the prompt stays frozen until refreshed
    assert blocks.freeze_system_prompt() == prompt
    assert "MEMORY" in blocks.refresh_system_prompt()


def test_add_duplicate_block_raises(standard: tuple[ContextBlocks, Any, Any], fake: Fakes) -> None:
    # Given a block "memory" / When adding another "memory" / Then the exact message is raised
    blocks, _, _ = standard
    with pytest.raises(ValidationError) as caught:
        blocks.add_block(ContextConfig("memory", provider=fake.WritableText()))
    assert str(caught.value) == 'Block "memory" already exists'
    assert [c.label for c in blocks.configs].count("memory") == 1


# -- reads batched per channel -------------------------------------------------------------------------


class _Channel:
    """A ReadChannel that records each batch it was asked for."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        self.answers = answers
        self.batches: list[list[str]] = []

    def read_together(self, statements: list[str]) -> list[str | None]:
        self.batches.append(list(statements))
        return [self.answers[statement] for statement in statements]


class _Planned:
    """A provider whose get() can be planned as a read on a channel, keyed by the label init gave it."""

    def __init__(self, channel: _Channel, *, plan: bool = True) -> None:
        self.channel, self.plan, self.label = channel, plan, ""
        self.init_calls = self.get_calls = 0

    def init(self, label: str) -> None:
        self.init_calls += 1
        self.label = label

    def get(self) -> str | None:
        self.get_calls += 1
        return self.channel.answers[self.label]

    def block_read(self) -> Any:
        from threadloom.providers.protocols import BlockRead

        return BlockRead(self.channel, self.label, lambda answer: answer) if self.plan else None


def test_providers_on_one_channel_are_read_together_once_each_inited_once(fake: Fakes) -> None:
    # Given two channels, three planned providers, one that declines to plan and one plain provider
    one, other = _Channel({"memory": "facts", "knowledge": None, "declined": "as get"}), _Channel({"history": "3"})
    memory, knowledge, history, declined = _Planned(one), _Planned(one), _Planned(other), _Planned(one, plan=False)
    plain = fake.ReadOnlyText("soul text")
    blocks = make(
        ContextConfig("soul", provider=plain),
        ContextConfig("memory", provider=memory),
        ContextConfig("knowledge", provider=knowledge),
        ContextConfig("history", provider=history),
        ContextConfig("declined", provider=declined),
    )
    blocks.load()
    # Then each channel answered one batch, in configuration order, and no planned provider was asked get()
    assert one.batches == [["memory", "knowledge"]] and other.batches == [["history"]]
    assert (memory.get_calls, knowledge.get_calls, history.get_calls) == (0, 0, 0)
    # And the one that declined was read through get(), every provider init-ed exactly once
    assert declined.get_calls == 1
    assert [p.init_calls for p in (memory, knowledge, history, declined)] == [1, 1, 1, 1]
    # And the blocks hold what get() would have returned, in their configured order
    assert [(block.label, block.content) for block in blocks.get_blocks()] == [
        ("soul", "soul text"),
        ("memory", "facts"),
        ("knowledge", ""),
        ("history", "3"),
        ("declined", "as get"),
    ]


class _GatedChannel(_Channel):
    """A channel that can read statements only when a first single-value read finds nothing."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        super().__init__(answers)
        self.gated: list[tuple[str, list[str]]] = []

    def read_when_missing(self, first: str, statements: list[str]) -> tuple[str | None, list[str | None] | None]:
        self.gated.append((first, list(statements)))
        found = self.answers.get(first)
        return found, None if found is not None else [self.answers[statement] for statement in statements]


class _PromptStore:
    """A stored prompt on a channel, offering its read as a single-value BlockRead."""

    def __init__(self, channel: _Channel) -> None:
        self.channel = channel
        self.get_calls = 0
        self.stored: list[str] = []

    def get(self) -> str | None:
        self.get_calls += 1
        return self.channel.answers.get("prompt")

    def set(self, content: str) -> None:
        self.stored.append(content)
        self.channel.answers["prompt"] = content

    def block_read(self) -> Any:
        from threadloom.providers.protocols import BlockRead

        return BlockRead(self.channel, "prompt", lambda answer: answer, single_value=True)


class _SingleValue(_Planned):
    def block_read(self) -> Any:
        from threadloom.providers.protocols import BlockRead

        return BlockRead(self.channel, self.label, lambda answer: answer, single_value=True) if self.plan else None


def test_a_missing_prompt_and_its_blocks_are_read_in_one_gated_read(fake: Fakes) -> None:
    # Given a new session: no stored prompt, two single-value block reads on the prompt's channel,
    # one on another channel, and one provider that declines to plan
    one = _GatedChannel({"memory": "facts", "knowledge": "2 entries", "declined": "as get"})
    other = _Channel({"history": "3"})
    memory, knowledge, history, declined = (
        _SingleValue(one),
        _SingleValue(one),
        _SingleValue(other),
        _Planned(one, plan=False),
    )
    store = _PromptStore(one)
    blocks = make(
        ContextConfig("memory", provider=memory),
        ContextConfig("knowledge", provider=knowledge),
        ContextConfig("history", provider=history),
        ContextConfig("declined", provider=declined),
        prompt_store=store,
    )
    # When the prompt is frozen
    prompt = blocks.freeze_system_prompt()
    # Then the prompt and the blocks on its channel were one read, the other channel one batch,
    # the declined provider one get(), and no planned provider was asked get() or init-ed twice
    assert one.gated == [("prompt", ["memory", "knowledge"])] and one.batches == []
    assert other.batches == [["history"]] and declined.get_calls == 1 and store.get_calls == 0
    assert (memory.get_calls, knowledge.get_calls, history.get_calls) == (0, 0, 0)
    assert [p.init_calls for p in (memory, knowledge, history, declined)] == [1, 1, 1, 1]
    # And the prompt holds what the providers returned, and was stored once
    assert "facts" in prompt and "2 entries" in prompt and "3" in prompt and "as get" in prompt
    assert store.stored == [prompt] and blocks.is_loaded


def test_a_stored_prompt_read_through_the_gate_reads_no_block(fake: Fakes) -> None:
    # Given a stored prompt on a channel that gates
    one = _GatedChannel({"prompt": "FROZEN", "memory": "facts", "declined": "as get"})
    memory, declined = _SingleValue(one), _Planned(one, plan=False)
    store = _PromptStore(one)
    blocks = make(
        ContextConfig("memory", provider=memory), ContextConfig("declined", provider=declined), prompt_store=store
    )
    # When the prompt is frozen, it is the stored one, from one gated read
    assert blocks.freeze_system_prompt() == "FROZEN"
    assert one.gated == [("prompt", ["memory"])] and one.batches == []
    # And no block was read: not the planned one, nor the one that declined to plan
    assert memory.get_calls == 0 and declined.get_calls == 0 and not blocks.is_loaded and store.stored == []
    # And loading later reads each block once
    blocks.load()
    assert one.batches == [["memory"]] and declined.get_calls == 1


def _memory_blocks(channel: _Channel) -> tuple[ContextBlocks, _PromptStore]:
    """A memory block and a prompt store, both read on ``channel``."""
    store = _PromptStore(channel)
    return make(ContextConfig("memory", provider=_SingleValue(channel)), prompt_store=store), store


def test_without_a_gating_channel_the_prompt_is_read_alone_first(fake: Fakes) -> None:
    # Given a channel that can only read together, and no stored prompt
    one = _Channel({"memory": "facts"})
    blocks, store = _memory_blocks(one)
    # When the prompt is frozen: the prompt alone, then the blocks, as before
    prompt = blocks.freeze_system_prompt()
    assert store.get_calls == 1 and one.batches == [["memory"]] and "facts" in prompt


def test_a_loaded_session_reads_its_prompt_alone_even_on_a_gating_channel(fake: Fakes) -> None:
    # Given a session whose blocks are loaded (its first freeze read them through the gate)
    one = _GatedChannel({"memory": "facts"})
    blocks, store = _memory_blocks(one)
    first = blocks.freeze_system_prompt()
    assert len(one.gated) == 1 and store.get_calls == 0
    # When another request of the same process freezes again (a prompt refreshed elsewhere is stored)
    one.answers["prompt"] = "REFRESHED ELSEWHERE"
    # Then the prompt is read alone, and the blocks are not read again
    assert blocks.freeze_system_prompt() == "REFRESHED ELSEWHERE" != first
    assert len(one.gated) == 1 and store.get_calls == 1 and one.batches == []
