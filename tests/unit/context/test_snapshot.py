"""The system-prompt snapshot: render, freeze (with and without a store), refresh, estimate."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from threadloom.core.context import ContextBlocks, ContextConfig
from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from tests.unit.context.conftest import Fakes, PromptStore, WritableText

SEP = "═" * 46


def memory_blocks(fake: Fakes, store: PromptStore | None = None) -> tuple[ContextBlocks, WritableText]:
    memory = fake.WritableText("likes tea")
    return ContextBlocks([ContextConfig("memory", provider=memory)], store), memory


def rendered(content: str) -> str:
    return f"{SEP}\nMEMORY [writable]\n{SEP}\n{content}"


def test_golden_vector_through_providers(fake: Fakes) -> None:
    # Given the §4.6 example configured with real (fake) providers
    blocks = ContextBlocks(
        [
            ContextConfig("soul", description="Identity", provider=fake.ReadOnlyText("You are helpful.")),
            ContextConfig("empty", provider=fake.ReadOnlyText(None)),
            ContextConfig(
                "memory", description="Learned facts", max_tokens=1100, provider=fake.WritableText("User likes coffee.")
            ),
            ContextConfig("notes", max_tokens=500, provider=fake.WritableText("")),
            ContextConfig(
                "skills",
                provider=fake.SkillLibrary({"pirate": "Arr", "tax": "Taxes"}, {"pirate": "Talk like a pirate"}),
            ),
            ContextConfig("knowledge", description="Searchable knowledge base", provider=fake.SearchIndex()),
        ]
    )
    # When frozen
    prompt = blocks.freeze_system_prompt()
    # Then the rendered text is exactly the reference's
    assert prompt == (
        f"{SEP}\nSOUL (Identity) [readonly]\n{SEP}\nYou are helpful.\n\n"
        f"{SEP}\nMEMORY (Learned facts) [0% \u2014 5/1100 tokens] [writable]\n{SEP}\nUser likes coffee.\n\n"
        f"{SEP}\nNOTES [0% \u2014 0/500 tokens] [writable]\n{SEP}\n\n\n"
        f"{SEP}\nSKILLS [loadable]\n{SEP}\n- pirate: Talk like a pirate\n- tax\n\n"
        f"{SEP}\nKNOWLEDGE (Searchable knowledge base) [searchable]\n{SEP}\n"
    )


def test_to_system_prompt_requires_load(fake: Fakes) -> None:
    # Given blocks never loaded / When asked for the prompt / Then the exact error is raised
    blocks, _ = memory_blocks(fake)
    with pytest.raises(ValidationError) as caught:
        blocks.to_system_prompt()
    assert str(caught.value) == "Context blocks not loaded. Call load() first."


def test_snapshot_is_sticky_until_refresh_snapshot(fake: Fakes) -> None:
    # Given a rendered snapshot
    blocks, memory = memory_blocks(fake)
    blocks.load()
    first = blocks.to_system_prompt()
    # When the block is written
    blocks.set_block("memory", "likes coffee")
    # Then the snapshot does not change
    assert blocks.to_system_prompt() == first == rendered("likes tea")
    # When the snapshot is refreshed from memory
    gets_before = memory.get_calls
    refreshed = blocks.refresh_snapshot()
    # Then it shows the write without re-reading the provider
    assert refreshed == blocks.to_system_prompt() == rendered("likes coffee")
    assert memory.get_calls == gets_before


def test_freeze_without_store_renders_once(fake: Fakes) -> None:
    # Given no prompt store
    blocks, _ = memory_blocks(fake)
    # When frozen, written, and frozen again
    first = blocks.freeze_system_prompt()
    blocks.set_block("memory", "likes coffee")
    second = blocks.freeze_system_prompt()
    # Then the first render sticks in memory
    assert first == second == rendered("likes tea")


def test_freeze_miss_renders_and_persists(fake: Fakes) -> None:
    # Given an empty prompt store
    store = fake.PromptStore()
    blocks, _ = memory_blocks(fake, store)
    # When frozen
    prompt = blocks.freeze_system_prompt()
    # Then the render is persisted
    assert prompt == rendered("likes tea")
    assert store.writes == [prompt]


def test_freeze_hit_returns_stored_without_loading(fake: Fakes) -> None:
    # Given a store that already holds a prompt (e.g. from an earlier invocation)
    store = fake.PromptStore("stored prompt")
    blocks, memory = memory_blocks(fake, store)
    # When frozen
    prompt = blocks.freeze_system_prompt()
    # Then the stored prompt is returned and no provider is read or written
    assert prompt == "stored prompt"
    assert not blocks.is_loaded
    assert memory.get_calls == 0
    assert store.writes == []


def test_stored_empty_prompt_counts_as_stored(fake: Fakes) -> None:
    # Given a store holding ""
    store = fake.PromptStore("")
    blocks, memory = memory_blocks(fake, store)
    # When frozen / Then "" is returned as is, without rendering
    assert blocks.freeze_system_prompt() == ""
    assert memory.get_calls == 0
    assert store.writes == []


def test_empty_prompt_is_persisted(fake: Fakes) -> None:
    # Given no blocks at all and an empty store
    store = fake.PromptStore()
    blocks = ContextBlocks([], store)
    # When frozen / Then "" is stored, so the next freeze is a hit
    assert blocks.freeze_system_prompt() == ""
    assert store.writes == [""]
    assert store.value == ""


def test_freeze_miss_reuses_existing_in_memory_snapshot(fake: Fakes) -> None:
    # Given an in-memory snapshot, a later write, and an empty store
    store = fake.PromptStore()
    blocks, _ = memory_blocks(fake, store)
    blocks.load()
    older = blocks.to_system_prompt()
    blocks.set_block("memory", "likes coffee")
    # When frozen
    prompt = blocks.freeze_system_prompt()
    # Then the older snapshot is returned and persisted, not a fresh render
    assert prompt == older == rendered("likes tea")
    assert store.writes == [older]


def test_freeze_uses_conditional_write_and_returns_the_winner(fake: Fakes) -> None:
    # Given a store with a conditional write where another invocation froze first
    store = fake.RacingPromptStore("their prompt")
    blocks, _ = memory_blocks(fake, store)
    # When frozen
    prompt = blocks.freeze_system_prompt()
    # Then the first freeze wins: its prompt is returned and becomes the in-memory snapshot
    assert prompt == "their prompt"
    assert store.conditional_writes == [rendered("likes tea")]
    assert store.writes == []
    assert blocks.to_system_prompt() == "their prompt"


def test_refresh_reloads_rerenders_and_persists(fake: Fakes) -> None:
    # Given a frozen prompt in a store, then the provider's content changes behind our back
    store = fake.PromptStore()
    blocks, memory = memory_blocks(fake, store)
    blocks.freeze_system_prompt()
    memory.content = "likes cocoa"
    # When refreshed
    prompt = blocks.refresh_system_prompt()
    # Then providers were re-initialised and re-read, and the new prompt is cached and persisted
    assert prompt == rendered("likes cocoa")
    assert memory.init_labels == ["memory", "memory"]
    assert store.writes == [rendered("likes tea"), prompt]
    assert blocks.freeze_system_prompt() == prompt
    assert blocks.to_system_prompt() == prompt


def test_estimate_prefers_snapshot_then_store(fake: Fakes) -> None:
    # Given a store holding a prompt and no snapshot
    store = fake.PromptStore("stored")
    blocks, memory = memory_blocks(fake, store)
    # When estimating / Then the stored prompt is used, nothing loaded
    assert blocks.system_prompt_for_estimate() == "stored"
    assert memory.get_calls == 0
    # When a snapshot exists / Then it wins over the store
    blocks.load()
    blocks.to_system_prompt()
    assert blocks.system_prompt_for_estimate() == rendered("likes tea")


def test_estimate_fallback_renders_without_caching_or_persisting(fake: Fakes) -> None:
    # Given an empty store and no snapshot
    store = fake.PromptStore()
    blocks, _ = memory_blocks(fake, store)
    # When estimating
    estimate = blocks.system_prompt_for_estimate()
    # Then a fresh render is returned but neither cached nor persisted
    assert estimate == rendered("likes tea")
    assert store.writes == []
    blocks.set_block("memory", "likes coffee")
    assert blocks.system_prompt_for_estimate() == rendered("likes coffee")
    assert blocks.to_system_prompt() == rendered("likes coffee")
