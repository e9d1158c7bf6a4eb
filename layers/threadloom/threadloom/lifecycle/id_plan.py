"""Which id each session of an import file gets in the importing namespace.

Decided from that namespace alone, so an import's answer never tells whether another tenant holds
an id (``transfer.import_sessions`` uses it for its first pass).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from threadloom.core.keys import imported_session_id, is_minted_for
from threadloom.errors import ConflictError, ValidationError

if TYPE_CHECKING:
    from threadloom.lifecycle.protocols import LifecycleStorage
    from threadloom.storage.snapshot import SessionSnapshot


class IdPlan:
    """The id each session of a file gets in the importing namespace, decided from that namespace alone.

    An id is kept when the namespace holds it (the session is the caller's own: unchanged, or a
    conflict) or when it was minted for the namespace and nobody holds it. Any other id (another
    tenant's, a legacy or hand-written id nobody holds) is replaced by the id minted from the
    namespace and the old id, so the same file imports to the same ids every time. Whether another
    tenant holds an id never changes the answer (held elsewhere and held by nobody are renamed
    alike), so an import reveals no other tenant's sessions.
    """

    def __init__(self, storage: LifecycleStorage, namespace: str, *, keep_ids: bool = False) -> None:
        self._storage = storage
        self._keep_ids = keep_ids
        self._namespace = namespace
        self._secret = storage.session_id_secret()
        self._targets: dict[str, str] = {}
        self.renames: dict[str, str] = {}
        self.fresh: dict[str, None] = {}
        self.present: dict[str, None] = {}
        self.held: list[str] = []
        """Ids in the file of the new sessions it places on legal hold."""
        self.messages = 0

    def add(self, snapshot: SessionSnapshot) -> None:
        old = target = snapshot.id
        owner = self._storage.session_namespace(old)
        if self._keep_ids:
            if owner not in (None, self._namespace):
                raise ConflictError(
                    f"Session {old!r} is held by namespace {owner!r}; its id cannot be kept (nothing was imported)"
                )
        elif not (owner == self._namespace or (owner is None and is_minted_for(self._secret, self._namespace, old))):
            target = imported_session_id(self._secret, self._namespace, old)
            self.renames[old] = target
            owner = self._storage.session_namespace(target)
        if target in self.fresh or target in self.present:
            first = next(key for key, value in self._targets.items() if value == target)
            raise ValidationError(
                f"Sessions {first!r} and {old!r} of the file would both be imported as {target!r}; "
                "import them from separate files (nothing was imported)"
            )
        self._targets[old] = target
        if owner is None:
            self.fresh[target] = None
            self.messages += len(snapshot.messages)
            if snapshot.legal_hold:
                self.held.append(old)
        elif owner == self._namespace:
            self.present[target] = None
        else:
            # Only a trusted library caller choosing this very id can get here (it needs the secret)
            raise ConflictError(f"Session {old!r} cannot be imported as {target!r}; nothing was imported")

    def target(self, session_id: str) -> str | None:
        """The id a session of the file is imported under (None: not in the file)."""
        return self._targets.get(session_id)

    def renamed(self, snapshot: SessionSnapshot) -> SessionSnapshot:
        """``snapshot`` under its id in the namespace, with its block keys and its parent to match."""
        old, new = snapshot.id, self._targets[snapshot.id]
        parent = snapshot.parent_session_id
        if parent is not None and not self._keep_ids:
            if parent in self._targets:
                parent = self._targets[parent]
            elif self._storage.session_namespace(parent) != self._namespace:
                parent = None  # a parent outside the file and the namespace is no parent here
        if new == old and parent == snapshot.parent_session_id:
            return snapshot
        blocks = [replace(block, key=block.key[: len(block.key) - len(old)] + new) for block in snapshot.blocks]
        return replace(snapshot, id=new, parent_session_id=parent, blocks=blocks)
