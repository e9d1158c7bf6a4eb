"""In-memory fake providers for the context-block tests.

Providers are duck typed, so each capability (``set``, ``load``, ``search``) is a
separate class: a provider "has" a method only if its class defines one.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest


class ReadOnlyText:
    """A read-only block: ``init`` and ``get`` only; records every call."""

    def __init__(self, content: str | None = None, calls: list[str] | None = None) -> None:
        self.content = content
        self.init_labels: list[str] = []
        self.get_calls = 0
        self.calls = calls if calls is not None else []

    def init(self, label: str) -> None:
        self.init_labels.append(label)
        self.calls.append(f"init:{label}")

    def get(self) -> str | None:
        self.get_calls += 1
        self.calls.append("get")
        return self.content


class WritableText(ReadOnlyText):
    """A writable block; ``fail_with`` makes ``set`` raise, like a storage outage."""

    def __init__(self, content: str | None = None, fail_with: str | None = None) -> None:
        super().__init__(content)
        self.writes: list[str] = []
        self.fail_with = fail_with

    def set(self, content: str) -> None:
        if self.fail_with is not None:
            raise RuntimeError(self.fail_with)
        self.writes.append(content)
        self.content = content


class SkillLibrary:
    """Read-only skills: ``get`` lists ``- key: description``, ``load`` returns the body."""

    def __init__(self, skills: dict[str, str] | None = None, descriptions: dict[str, str] | None = None) -> None:
        self.skills = dict(skills or {})
        self.descriptions = dict(descriptions or {})
        self.load_error: str | None = None
        self.init_labels: list[str] = []

    def init(self, label: str) -> None:
        self.init_labels.append(label)

    def get(self) -> str | None:
        if not self.skills:
            return None
        lines = [
            f"- {key}: {self.descriptions[key]}" if key in self.descriptions else f"- {key}" for key in self.skills
        ]
        return "\n".join(lines)

    def load(self, key: str) -> str | None:
        if self.load_error is not None:
            raise RuntimeError(self.load_error)
        return self.skills.get(key)


class WritableSkillLibrary(SkillLibrary):
    """Skills the model may add to through ``set_context``."""

    def __init__(self, skills: dict[str, str] | None = None, descriptions: dict[str, str] | None = None) -> None:
        super().__init__(skills, descriptions)
        self.writes: list[tuple[str, str, str | None]] = []

    def set(self, key: str, content: str, description: str | None = None) -> None:
        self.writes.append((key, content, description))
        self.skills[key] = content
        if description is not None:
            self.descriptions[key] = description


class SearchIndex:
    """Read-only search: ``get`` summarizes, ``search`` does a substring match."""

    def __init__(self, entries: dict[str, str] | None = None) -> None:
        self.entries = dict(entries or {})
        self.search_error: str | None = None
        self.queries: list[str] = []

    def get(self) -> str | None:
        return f"{len(self.entries)} entries indexed." if self.entries else None

    def search(self, query: str) -> str | None:
        self.queries.append(query)
        if self.search_error is not None:
            raise RuntimeError(self.search_error)
        hits = [f"[{key}]\n{text}" for key, text in self.entries.items() if query.lower() in text.lower()]
        return "\n\n".join(hits) if hits else None


class WritableSearchIndex(SearchIndex):
    """A search index the model may add entries to."""

    def __init__(self, entries: dict[str, str] | None = None) -> None:
        super().__init__(entries)
        self.writes: list[tuple[str, str]] = []

    def set(self, key: str, content: str) -> None:
        self.writes.append((key, content))
        self.entries[key] = content


class SkillSearchLibrary(WritableSkillLibrary):
    """A provider that can both load documents and search them."""

    def search(self, query: str) -> str | None:
        hits = [f"[{key}]\n{text}" for key, text in self.skills.items() if query.lower() in text.lower()]
        return "\n\n".join(hits) if hits else None


class PromptStore:
    """A writable provider holding the frozen prompt."""

    def __init__(self, value: str | None = None) -> None:
        self.value = value
        self.get_calls = 0
        self.writes: list[str] = []

    def get(self) -> str | None:
        self.get_calls += 1
        return self.value

    def set(self, content: str) -> None:
        self.writes.append(content)
        self.value = content


class RacingPromptStore(PromptStore):
    """A store with a conditional write where another process froze first, after our ``get``."""

    def __init__(self, competitor: str) -> None:
        super().__init__(None)
        self.competitor = competitor
        self.conditional_writes: list[str] = []

    def set_if_absent(self, content: str) -> str:
        self.conditional_writes.append(content)
        if self.value is None:
            self.value = self.competitor  # the other invocation's write lands first
        return self.value


@dataclass(frozen=True)
class Fakes:
    """The fake provider classes, handed to tests through the ``fake`` fixture."""

    ReadOnlyText: type[ReadOnlyText] = ReadOnlyText
    WritableText: type[WritableText] = WritableText
    SkillLibrary: type[SkillLibrary] = SkillLibrary
    WritableSkillLibrary: type[WritableSkillLibrary] = WritableSkillLibrary
    SearchIndex: type[SearchIndex] = SearchIndex
    WritableSearchIndex: type[WritableSearchIndex] = WritableSearchIndex
    SkillSearchLibrary: type[SkillSearchLibrary] = SkillSearchLibrary
    PromptStore: type[PromptStore] = PromptStore
    RacingPromptStore: type[RacingPromptStore] = RacingPromptStore


@pytest.fixture
def fake() -> Fakes:
    """Access to the fake provider classes."""
    return Fakes()
