"""Facts the user stated about themselves, and the memory-block edits they become.

Every extractor (offline patterns, a Bedrock model) produces ``Fact`` values; :func:`plan_edits` alone decides what
they do to the block, so both extractors edit it the same way. A block holds one fact per line, ``Key: value``.
A key that has one value (a name, pronouns, a favourite) is replaced when the user states a new value; any other
key gains a line unless the same line is already there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from threadloom.storage.reflections import NewProposal

if TYPE_CHECKING:
    from collections.abc import Sequence

    from threadloom.reflection.protocols import MemoryBlock

SINGLE_VALUED_KEYS = frozenset({"name", "preferred name", "pronouns"})
"""Keys (case-insensitive) with one value; also every key that starts with ``favorite``."""
MAX_FACT_CHARS = 200
"""A fact line longer than this is not a fact worth remembering; it is dropped."""


@dataclass(frozen=True, slots=True)
class UserStatement:
    """The text of one user message, with its id (the provenance of what is extracted from it)."""

    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Fact:
    """``key: value`` as the user stated it in message ``message_id``."""

    key: str
    value: str
    message_id: str

    @property
    def line(self) -> str:
        return f"{self.key}: {self.value}"

    @property
    def single_valued(self) -> bool:
        key = self.key.casefold()
        return key in SINGLE_VALUED_KEYS or key.startswith("favorite")


class FactExtractor(Protocol):
    """Anything that reads user statements and returns the facts they state, each naming its message."""

    def __call__(self, statements: Sequence[UserStatement]) -> list[Fact]: ...


def _key_of(line: str) -> str | None:
    key, separator, _ = line.partition(":")
    return key.strip().casefold() if separator else None


def plan_edits(facts: Sequence[Fact], block: MemoryBlock) -> list[NewProposal]:
    """The edits that bring ``facts`` into ``block``: one ``replace`` for changed values, one ``append`` per new line.

    The replace (all changed single-valued keys at once) is based on the block's version as read and comes first,
    so applying the edits in order never refuses the replace for an append of the same run. Facts already in the
    block, and repeats within ``facts``, are dropped; the latest value of a single-valued key wins.
    """
    latest: dict[str, Fact] = {}
    extra: dict[str, Fact] = {}
    for fact in facts:
        if not fact.key.strip() or not fact.value.strip() or len(fact.line) > MAX_FACT_CHARS or "\n" in fact.line:
            continue
        if fact.single_valued:
            latest[fact.key.casefold()] = fact
        else:
            extra.setdefault(fact.line.casefold(), fact)
    lines = block.content.splitlines()
    present = {line.strip().casefold() for line in lines}
    changed: dict[int, Fact] = {}
    appended: list[Fact] = []
    for key, fact in latest.items():
        index = next((i for i, line in enumerate(lines) if _key_of(line) == key), None)
        if index is None:
            appended.append(fact)
        elif lines[index].strip().casefold() != fact.line.casefold():
            changed[index] = fact
    appended += [fact for line, fact in extra.items() if line not in present]
    edits: list[NewProposal] = []
    if changed:
        content = "\n".join(changed[i].line if i in changed else line for i, line in enumerate(lines))
        sources = tuple(dict.fromkeys(fact.message_id for fact in changed.values()))
        edits.append(NewProposal(block.label, "replace", content, sources, block.version))
    edits += [NewProposal(block.label, "append", fact.line, (fact.message_id,)) for fact in appended]
    return edits


__all__ = ["MAX_FACT_CHARS", "SINGLE_VALUED_KEYS", "Fact", "FactExtractor", "UserStatement", "plan_edits"]
