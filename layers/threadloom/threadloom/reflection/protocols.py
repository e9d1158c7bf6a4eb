"""What reflection needs of memory blocks: read one with its version, apply an edit with provenance.

Today's implementation is ``session_blocks.SessionMemoryBlocks`` (the session's own writable blocks); the
subject-scoped, versioned blocks of issue 26 items 1-3 implement the same protocol, and the worker does not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from threadloom.storage.reflections import EditOperation

REFLECTION_ACTOR: Final = "reflection"
"""Who made an edit that a reflection proposed (the block history's actor)."""


@dataclass(frozen=True, slots=True)
class MemoryBlock:
    """A block's content and the version that content is (what a replacement must be based on)."""

    label: str
    content: str
    version: str


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where an edit comes from: the messages it was extracted from, the job that made it, the proposal it was."""

    source_message_ids: tuple[str, ...]
    request_key: str
    proposal_id: str
    actor: str = REFLECTION_ACTOR


@dataclass(frozen=True, slots=True)
class BlockEdit:
    """Append ``content`` as a line, or replace the block with it if it is still at ``based_on_version``."""

    label: str
    operation: EditOperation
    content: str
    based_on_version: str | None
    provenance: Provenance


class MemoryBlocks(Protocol):
    """The blocks a reflection reads and edits (those of one session today; one subject's once scopes land)."""

    def read_block(self, label: str) -> MemoryBlock:
        """The block now; ``NotFoundError`` when it does not exist, ``ReadOnlyBlockError`` when it is not writable."""
        ...

    def apply_edit(self, edit: BlockEdit) -> MemoryBlock:
        """Apply ``edit`` and return the block after it.

        A replacement whose ``based_on_version`` is no longer the block's raises ``ConflictError``; a block over its
        budget raises ``BlockLimitError``. Nothing is written then.
        """
        ...


__all__ = ["REFLECTION_ACTOR", "BlockEdit", "MemoryBlock", "MemoryBlocks", "Provenance"]
