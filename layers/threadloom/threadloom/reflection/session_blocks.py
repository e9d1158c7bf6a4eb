"""``MemoryBlocks`` over today's blocks: the writable blocks of one session, through ``core``'s guarded writes.

Today's blocks keep no versions, so the version here is a digest of the content: a replacement based on
content that changed since it was read is refused, as the versioned path will. The check and the write are two
steps (the versioned store makes them one); the provenance of an edit is kept with its proposal
(``threadloom_reflection_proposals``) until blocks keep a history of their own. An append is also read, then
written whole, as every append of today's blocks is; the versioned path merges appends in order.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from threadloom.errors import ConflictError, NotFoundError, ReadOnlyBlockError
from threadloom.reflection.protocols import MemoryBlock

if TYPE_CHECKING:
    from threadloom.core.session import Session
    from threadloom.reflection.protocols import BlockEdit


def content_version(content: str) -> str:
    """The version of a block without a stored one: the first 16 hex digits of its content's SHA-256."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


class SessionMemoryBlocks:
    """The writable blocks of ``session``."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def read_block(self, label: str) -> MemoryBlock:
        """The block as stored now (the blocks are re-read: another process may have written since)."""
        self._session.blocks.load()
        block = self._session.get_context_block(label)
        if block is None:
            raise NotFoundError(f'Block "{label}" not found')
        if not block.writable or block.is_skill or block.is_searchable:
            raise ReadOnlyBlockError(f'Block "{label}" is not a writable block; reflection cannot edit it')
        return MemoryBlock(label, block.content, content_version(block.content))

    def apply_edit(self, edit: BlockEdit) -> MemoryBlock:
        current = self.read_block(edit.label)
        if edit.operation == "replace":
            if edit.based_on_version != current.version:
                raise ConflictError(
                    f'Block "{edit.label}" changed since this edit was proposed '
                    f"(version {current.version}, the edit is based on {edit.based_on_version})"
                )
            block = self._session.replace_context_block(edit.label, edit.content)
        else:
            block = self._session.append_context_block(edit.label, edit.content)
        return MemoryBlock(edit.label, block.content, content_version(block.content))


__all__ = ["SessionMemoryBlocks", "content_version"]
