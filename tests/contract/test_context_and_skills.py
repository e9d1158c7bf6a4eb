"""Auto-wired context blocks, the persisted frozen prompt, tools and stored skill state on a real store."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from threadloom import ReadOnlyBlockError, Session
from threadloom.errors import QuotaExceededError, ValidationError

from tests.support.messages import load_part, text_message


class StaticText:
    def __init__(self, text: str) -> None:
        self.text = text

    def get(self) -> str | None:
        return self.text


class DictSkills:
    def __init__(self, documents: dict[str, str]) -> None:
        self.documents = documents

    def get(self) -> str | None:
        return "\n".join(f"- {key}" for key in self.documents) or None

    def load(self, key: str) -> str | None:
        return self.documents.get(key)


def configured(store: Any, session_id: str = "s1", skills: DictSkills | None = None) -> Session:
    session = (
        Session.create(store)
        .for_session(session_id)
        .with_context("soul", provider=StaticText("You are helpful."))
        .with_context("memory", description="Learned facts", max_tokens=1100)
        .with_cached_prompt()
    )
    if skills is not None:
        session.with_context("skills", provider=skills)
    return session


def test_auto_wired_blocks_persist_per_session(store: Any, make_store: Callable[[], Any]) -> None:
    configured(store, "a").replace_context_block("memory", "User likes coffee.")
    assert configured(make_store(), "a").get_context_block("memory").content == "User likes coffee."  # type: ignore[union-attr]
    assert configured(make_store(), "b").get_context_block("memory").content == ""  # type: ignore[union-attr]


def test_frozen_prompt_is_persisted_and_sticky_until_refresh(store: Any, make_store: Callable[[], Any]) -> None:
    session = configured(store)
    session.replace_context_block("memory", "User likes coffee.")
    frozen = session.freeze_system_prompt()
    assert "MEMORY (Learned facts) [0% — 5/1100 tokens] [writable]" in frozen
    session.append_context_block("memory", "User prefers dark roast.")
    restarted = configured(make_store())
    assert restarted.freeze_system_prompt() == frozen
    refreshed = restarted.refresh_system_prompt()
    assert "User prefers dark roast." in refreshed
    assert configured(make_store()).freeze_system_prompt() == refreshed


def test_first_freeze_wins_across_processes(make_store: Callable[[], Any]) -> None:
    # Two "processes" render different prompts concurrently; both must return the single stored one
    results: list[str] = []
    failures: list[BaseException] = []
    barrier = threading.Barrier(2, timeout=60)  # a thread that fails before it arrives breaks it, never hangs it

    def freeze(text: str) -> None:
        try:
            session = (
                Session.create(make_store())
                .for_session("race")
                .with_context("soul", provider=StaticText(text))
                .with_cached_prompt()
            )
            barrier.wait()
            results.append(session.freeze_system_prompt())
        except BaseException as error:  # reported below, with the thread's own traceback
            barrier.abort()
            failures.append(error)

    threads = [threading.Thread(target=freeze, args=(text,)) for text in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert len(results) == 2 and results[0] == results[1]


def test_set_context_tool_writes_durably(store: Any, make_store: Callable[[], Any]) -> None:
    tools = configured(store).tools()
    result = tools["set_context"].execute({"label": "memory", "content": "Likes tea.", "action": "replace"})
    assert result == "Written to memory. Usage: 0% (3/1100 tokens)"
    assert tools["set_context"].execute({"label": "soul", "content": "x"}) == 'Error: Block "soul" is readonly'
    assert configured(make_store()).get_context_block("memory").content == "Likes tea."  # type: ignore[union-attr]


def test_readonly_block_write_raises_typed_error(store: Any) -> None:
    with pytest.raises(ReadOnlyBlockError, match='Block "soul" is readonly'):
        configured(store).replace_context_block("soul", "nope")


def test_loaded_skills_are_stored_and_survive_restart(store: Any, make_store: Callable[[], Any]) -> None:
    # D7: stored state, only successful loads count
    skills = DictSkills({"pirate": "Talk like a pirate", "tax": "Tax rules"})
    tools = configured(store, skills=skills).tools()
    assert tools["load_context"].execute({"label": "skills", "key": "pirate"}) == "Talk like a pirate"
    assert tools["load_context"].execute({"label": "skills", "key": "missing"}) == "Not found: missing"
    restarted = configured(make_store(), skills=skills)
    assert restarted.get_loaded_skill_keys() == {"skills:pirate"}
    assert "Currently loaded: skills:pirate." in restarted.tools()["unload_context"].description


@pytest.mark.parametrize("static", [False, True])
def test_unload_rewrites_the_tool_result_synchronously(store: Any, make_store: Callable[[], Any], static: bool) -> None:
    skills = DictSkills({"pirate": "Talk like a pirate"})
    session = configured(store, skills=skills)
    session.tools()["load_context"].execute({"label": "skills", "key": "pirate"})
    session.append_message(text_message("u1", "be a pirate"))
    session.append_message(
        {"id": "a1", "role": "assistant", "parts": [load_part("skills", "pirate", "Talk like a pirate", static=static)]}
    )
    result = session.tools()["unload_context"].execute({"label": "skills", "key": "pirate"})
    assert result == 'Unloaded "pirate" from skills. Context reclaimed.'
    assert session.get_message("a1")["parts"][0]["output"] == "[skill unloaded: pirate]"  # type: ignore[index]
    assert configured(make_store(), skills=skills).get_loaded_skill_keys() == set()
    again = session.tools()["unload_context"].execute({"label": "skills", "key": "pirate"})
    assert again == 'Skill "pirate" is not currently loaded in "skills".'


def test_clear_messages_forgets_skills_and_refreshes_prompt(store: Any) -> None:
    skills = DictSkills({"pirate": "Arr"})
    session = configured(store, skills=skills)
    session.freeze_system_prompt()
    session.replace_context_block("memory", "new fact")
    session.tools()["load_context"].execute({"label": "skills", "key": "pirate"})
    session.append_message(text_message("m1"))
    session.clear_messages()
    assert session.get_loaded_skill_keys() == set()
    assert "new fact" in session.freeze_system_prompt()
    assert session.get_history() == []


def test_search_provider_block_on_store(store: Any) -> None:
    provider = store.search_provider()
    session = Session.create(store).for_session("s").with_context("knowledge", description="KB", provider=provider)
    tools = session.tools()
    assert (
        tools["set_context"].execute(
            {"label": "knowledge", "content": "The cat sat on the mat", "metadata": {"title": "Cats"}}
        )
        == 'Indexed "cats" in knowledge.'
    )
    assert tools["search_context"].execute({"label": "knowledge", "query": "cats mats"}) == (
        "[cats]\nThe cat sat on the mat"
    )
    tools["set_context"].execute({"label": "knowledge", "content": "Dogs bark", "metadata": {"title": "Cats"}})
    assert tools["search_context"].execute({"label": "knowledge", "query": "cat"}) == "No results found."
    assert session.get_context_block("knowledge").content == "1 entries indexed."  # type: ignore[union-attr]


def test_search_entries_are_listed_read_and_removed_with_their_terms(make_store: Any) -> None:
    """What the model stored under a search block can be seen and taken back, and its terms go with it."""
    provider = make_store().search_provider(scope="tenant-a", max_entries=3)
    provider.init("knowledge")
    for key, content in (("beta", "The lighthouse keeper"), ("alpha", "Tides and moons"), ("gamma", "Gulls")):
        provider.set(key, content)
    other = make_store().search_provider(scope="tenant-b")
    other.init("knowledge")
    other.set("alpha", "Tenant B's own lighthouse")

    assert [entry.key for entry in provider.entries(limit=10)] == ["alpha", "beta", "gamma"]
    assert [entry.key for entry in provider.entries(after="alpha", limit=1)] == ["beta"]
    beta = provider.entry("beta")
    assert beta is not None and beta.content == "The lighthouse keeper"
    assert beta.created_at.endswith("Z") and beta.updated_at >= beta.created_at
    with pytest.raises(QuotaExceededError):
        provider.set("delta", "over the quota")

    assert provider.delete("beta") is True
    assert provider.delete("beta") is False
    assert provider.entry("beta") is None
    assert provider.search("lighthouse") is None  # its terms left the index with it
    assert provider.get() == "2 entries indexed."
    provider.set("delta", "Another lighthouse")  # the quota has room again
    assert provider.search("lighthouse") == "[delta]\nAnother lighthouse"
    assert provider.delete("gamma") is True
    provider.set("beta", "The lighthouse keeper, again")  # a removed key can come back
    assert provider.search("keeper") == "[beta]\nThe lighthouse keeper, again"

    # Another tenant's entry under the same label and key was never touched, and cannot be reached.
    assert other.search("lighthouse") == "[alpha]\nTenant B's own lighthouse"
    assert [entry.key for entry in other.entries(limit=10)] == ["alpha"]
    assert provider.entry("alpha") is not None and provider.entry("alpha").content == "Tides and moons"  # type: ignore[union-attr]


def test_an_entry_needs_its_block_label(store: Any) -> None:
    """Stored under no label, an entry could be listed, exported or removed by no one, so it is refused."""
    provider = store.search_provider(scope="tenant-a")
    with pytest.raises(ValidationError, match=r"call init\(label\) first"):
        provider.set("alpha", "Tides and moons")
    provider.init("knowledge")
    assert provider.entries(limit=10) == []  # nothing was stored by the refused call
    provider.set("alpha", "Tides and moons")
    assert [entry.key for entry in provider.entries(limit=10)] == ["alpha"]
