"""``MemoryBlocks`` over a session's writable blocks, through ``core``'s versioned write path.

The blocks a session sees include those it shares (``scope: subject`` or ``tenant``), so a reflection
run in one conversation edits the memory every conversation of the same user reads. Each edit is a
new block version whose provenance names the reflection, the session and the messages the facts
came from (``GET .../context/{label}/history`` shows it); a replacement based on a version that is
no longer current is refused by the store in the same transaction as the write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadloom.errors import ConflictError, NotFoundError, ReadOnlyBlockError, StaleVersionError
from threadloom.records import BlockChange
from threadloom.reflection.protocols import MemoryBlock

if TYPE_CHECKING:
    from threadloom.core.session import Session
    from threadloom.records import ContextBlock
    from threadloom.reflection.protocols import BlockEdit


def _version(block: ContextBlock) -> str:
    return str(block.version or 0)


class SessionMemoryBlocks:
    """The writable blocks of ``session``, its shared ones included."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def read_block(self, label: str) -> MemoryBlock:
        """The block as stored now (another process, or another session of the subject, may have written since)."""
        block = self._session.read_context_block(label)
        if block is None:
            raise NotFoundError(f'Block "{label}" not found')
        if not block.writable or block.is_skill or block.is_searchable:
            raise ReadOnlyBlockError(f'Block "{label}" is not a writable block; reflection cannot edit it')
        return MemoryBlock(label, block.content, _version(block))

    def apply_edit(self, edit: BlockEdit) -> MemoryBlock:
        self.read_block(edit.label)  # refuses a missing or read-only block before anything is written
        change = BlockChange(
            source="reflection",
            session_id=self._session.session_id or None,
            message_ids=edit.provenance.source_message_ids,
            note=f"reflection {edit.provenance.request_key}, proposal {edit.provenance.proposal_id}",
        )
        if edit.operation == "replace":
            based_on = edit.based_on_version
            if based_on is None or not based_on.isdigit():
                raise ConflictError(
                    f'Block "{edit.label}" edit is based on version {based_on!r}, which is not a stored version; '
                    "reflect again"
                )
            try:
                block = self._session.replace_context_block(
                    edit.label, edit.content, based_on_version=int(based_on), change=change
                )
            except StaleVersionError as stale:
                raise ConflictError(
                    f'Block "{edit.label}" changed since this edit was proposed '
                    f"(version {stale.current_version}, the edit is based on {based_on})"
                ) from stale
        else:
            block = self._session.append_context_block(edit.label, edit.content, change=change)
        return MemoryBlock(edit.label, block.content, _version(block))


__all__ = ["SessionMemoryBlocks"]
