"""One page of a long history at the cost of a page: a keyset on the stored depth, jump pointers, overlays at edges.

A page is the run of ``get_history(leaf)`` that starts at raw depth ``start`` of the leaf's path
(the cursor's keyset). Reaching depth ``d`` from the leaf through ``parent_id`` costs
``leaf depth - d`` steps, which makes reading a path page by page quadratic. Each row therefore
stores ``jump``, the seq of its ancestor at depth ``((depth - 1) // JUMP_SPAN) * JUMP_SPAN``
(migration 0005: set by appends, kept exact by triggers for every other writer). The walk to
depth ``d`` follows jumps while they land at depth ``d`` or deeper, then parents: about
``(leaf depth - d) / JUMP_SPAN + JUMP_SPAN`` hops, over ids only. A missing jump only means more
parent steps, never a wrong row. From the page's last row the page is read upwards through
``parent_id``; contents are read only for the rows the byte budget lets through.

Overlays: :func:`~threadloom.compaction.overlays.apply_compactions` scans the path from the root
and, at each position, takes the latest overlay starting there whose end is on the path at or
after it, then resumes after that end. A page always begins at a position that scan reaches (just
after the last item of the previous page), so resuming the scan there gives exactly the items of
the full read. An overlay that starts on the page and ends beyond it is checked with one more
walk: is its end the path's row at that depth?

Anchors: the walk of a page passes the ancestors at every multiple of ``JUMP_SPAN`` between the
leaf and the page. The reader returns the one where the next page's walk would start anyway
(:attr:`HistoryPageReader.next_anchor`, its seq and id) and a cursor hands it back, so the next
page starts there instead of at the leaf: O(page) rather than O(page + path / JUMP_SPAN). It is
only a shortcut: the walk starts there only while that row exists with that seq and id at the
page's last depth or deeper, and since writers never detach a message from its ancestors (a delete
moves the children to the nearest survivor) nor reuse a seq, such a row is still on the leaf's
path. Anything else walks from the leaf, as without it, and a changed path is still a
:class:`ConflictError` through ``after_id``.

Tenancy and decoding (PostgreSQL, migration 0008): given a namespace, the statement itself checks
that the session belongs to it, so a page needs no separate registry read; and it may send the
page's rows as one JSON value (already parsed messages here), which is cheaper to receive than
200 rows. A page that value cannot represent (a stored content that is not JSON) is read again as rows.
"""

from __future__ import annotations

import json
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from threadloom.compaction.markers import now_iso
from threadloom.compaction.overlays import compaction_message
from threadloom.core.messages import parse_stored_message, stored_message
from threadloom.errors import ConflictError, NotFoundError, SessionNotFoundError, StorageError
from threadloom.jscompat import compact_json
from threadloom.records import HistoryEntry, StoredCompaction

if TYPE_CHECKING:
    from threadloom.storage.database import Executor
    from threadloom.storage.dialect import SqlDialect

_Row = tuple[int, str, int, Any, bool]
"""A path row: (depth, id, bytes of the stored message, the stored message when the read brought it, checked).

The message is the stored text, or its parsed JSON when the statement sent the page as one value;
None when the read left it out (past the byte budget). ``checked``: the statement found the text a
well-formed message (the entry then carries it unparsed).
"""
_Planned = tuple[_Row | None, HistoryEntry | None]
"""An item decided on ids: a row whose content is still to read, or a finished summary entry."""
Anchor = tuple[int, str]
"""An ancestor of the leaf a page walk can start from: (seq, id)."""


class HistoryPageReader:
    """Reads pages of one leaf's history with ``tx`` (a read transaction, or one statement at a time).

    ``leaf_depth`` may be None: the first page read learns it (one statement less per page).
    ``compactions`` may be None where the dialect's page statement brings them (PostgreSQL: one
    round trip per page instead of two). ``namespace``, where the dialect's page statement checks
    it (PostgreSQL), makes a session outside it a :class:`SessionNotFoundError` before anything of
    it is read; elsewhere the caller checks. ``leaf_id`` None, where the dialect has
    ``history_page_rows_at_head`` (PostgreSQL): the session's latest leaf, found by the first
    page statement; :attr:`leaf_id` then names it (None for a session without messages).
    """

    def __init__(
        self,
        tx: Executor,
        sql: type[SqlDialect],
        session_id: str,
        *,
        leaf_id: str | None,
        leaf_depth: int | None,
        compactions: list[StoredCompaction] | None,
        namespace: str | None = None,
    ) -> None:
        self._tx = tx
        self._namespace = namespace
        self._together = True
        self._sql = sql
        self._session_id = session_id
        self._leaf_id = leaf_id
        self._leaf_depth = leaf_depth
        self._by_start: dict[str, list[StoredCompaction]] = {}
        self._overlays_known = compactions is not None
        for compaction in compactions or ():
            self._by_start.setdefault(compaction.from_message_id, []).append(compaction)
        self._on_path: dict[str, int | None] = {}
        self._created_at: str | None = None
        self._anchor: Anchor | None = None
        self.next_anchor: Anchor | None = None
        """Where the walk of the page after the one just read can start (None: from the leaf)."""

    def read(
        self, start: int, *, limit: int, max_bytes: int, after_id: str | None, walk_from: Anchor | None = None
    ) -> list[HistoryEntry]:
        """Up to ``limit`` items from raw depth ``start`` within ``max_bytes`` (never fewer than one).

        ``after_id`` is the row the previous page ended on (at ``start - 1``): when it is no longer
        there the tree changed under the cursor, which is a :class:`ConflictError`. ``walk_from`` is
        the previous page's :attr:`next_anchor` (a shortcut, checked by the statement).
        """
        self._anchor = walk_from
        entries: list[HistoryEntry] = []
        used = 0
        depth = start
        anchor = after_id if start > 0 else None
        while len(entries) < limit:
            if self._leaf_depth is not None and depth > self._leaf_depth:
                break
            last = depth + limit - len(entries) - 1
            if self._leaf_depth is not None:
                last = min(last, self._leaf_depth)
            first = depth - 1 if anchor is not None else depth
            rows = self._rows(first, last, budget=max_bytes - used, hint=last + limit)
            if self._leaf_depth is None:
                if self._leaf_id is None:  # read from the head: the session has no messages
                    return entries
                raise NotFoundError(f"Message {self._leaf_id!r} not found in session {self._session_id!r}")
            last = min(last, self._leaf_depth)
            if anchor is not None:
                if not rows or rows[0][0] != depth - 1 or rows[0][1] != anchor:
                    raise ConflictError(
                        "The history changed since this cursor was issued; read it again without a cursor"
                    )
                rows, anchor = rows[1:], None
            if depth > self._leaf_depth:
                break
            if not rows or rows[0][0] != depth or rows[-1][0] != last:
                raise StorageError(
                    f"The stored path of session {self._session_id!r} is inconsistent near depth {depth}"
                )
            planned, depth, used, full = self._plan(
                rows,
                depth=depth,
                last=last,
                used=used,
                max_bytes=max_bytes,
                room=limit - len(entries),
                started=bool(entries),
            )
            entries += self._materialize(planned)
            if full and entries:  # a page whose rows were all unreadable reads on: never empty before the end
                break
        return entries

    def count(self) -> int:
        """``len(get_history(leaf))`` from the overlays alone: the path length minus what chosen overlays hide.

        The full read emits every row except the ranges it replaces, and it can only choose an
        overlay whose both ends are on the path; so it is enough to locate those ends (one walk
        each) and replay the choice from overlay start to overlay start.
        """
        if self._leaf_depth is None:
            raise ValueError("count() needs the leaf depth")
        total = self._leaf_depth + 1
        starts: dict[int, list[tuple[StoredCompaction, int]]] = {}
        for from_id, compactions in self._by_start.items():
            start = self._depth_on_path(from_id)
            if start is None:
                continue
            for compaction in compactions:
                end = self._depth_on_path(compaction.to_message_id)
                if end is not None:
                    starts.setdefault(start, []).append((compaction, end))
        position = 0
        for start in sorted(starts):
            if start < position:
                continue  # inside a range already replaced
            end = next((end for _, end in reversed(starts[start]) if end >= start), None)
            if end is not None:
                total -= end - start
                position = end + 1
        return total

    # ------------------------------------------------------------------ steps

    def _plan(
        self,
        rows: list[_Row],
        *,
        depth: int,
        last: int,
        used: int,
        max_bytes: int,
        room: int,
        started: bool,
    ) -> tuple[list[_Planned], int, int, bool]:
        """Decide the items of ``rows`` by ids alone: which rows a summary replaces and where bytes run out.

        Returns the planned items (a row still to read, or a finished summary entry), the depth to
        continue from, the bytes used and whether the page is full (by count or bytes).
        """
        first = depth
        on_page = {row[1]: row[0] for row in rows}
        self._on_path.update(on_page)  # rows of the path: count() then locates overlay ends here for free
        starts = self._by_start
        span = rows[: min(last - depth + 1, room)]
        size = sum([row[2] for row in span]) + len(span)
        if used + size <= max_bytes and starts.keys().isdisjoint(on_page):
            # No overlay starts here and the rows fit: each is an item, as the loop below would decide
            return [(row, None) for row in span], depth + len(span), used + size, len(span) >= room
        planned: list[_Planned] = []
        while depth <= last:
            if len(planned) >= room:
                return planned, depth, used, True
            row = rows[depth - first]
            chosen = self._overlay_at(row[1], depth, on_page, last) if row[1] in starts else None
            item: _Planned
            if chosen is None:
                size, item, after = row[2], (row, None), depth + 1
            else:
                compaction, end = chosen
                summary = compaction_message(compaction, self._now())
                size = len(compact_json(summary).encode("utf-8"))
                entry = HistoryEntry(message=summary, size=size, last_id=compaction.to_message_id, next_depth=end + 1)
                item, after = (None, entry), end + 1
            if (started or planned) and used + size + 1 > max_bytes:
                return planned, depth, used, True
            used += size + 1
            planned.append(item)
            depth = after
        return planned, depth, used, len(planned) >= room

    def _materialize(self, planned: list[_Planned]) -> list[HistoryEntry]:
        """Build the entries, reading the contents the first read left out (one walk up from the deepest)."""
        missing = [row for row, _ in planned if row is not None and row[3] is None]
        late: dict[str, str] = {}
        if missing:
            found = self._tx.query(
                self._sql.history_page_contents,
                {"sid": self._session_id, "start": missing[-1][1], "first": missing[0][0]},
            )
            late = {str(row[1]): str(row[2]) for row in found}
        entries: list[HistoryEntry] = []
        for row, entry in planned:
            if entry is not None:
                entries.append(entry)
                continue
            assert row is not None
            if row[4] and row[3] is not None:  # checked by the statement: parsed only if someone asks
                entries.append(HistoryEntry(None, row[2], row[1], row[0] + 1, text=row[3]))
                continue
            content = row[3] if row[3] is not None else late.get(row[1], "")
            message = parse_stored_message(content) if isinstance(content, str) else stored_message(content)
            if message is not None:  # a corrupt row is skipped, as get_history skips it
                entries.append(HistoryEntry(message=message, size=row[2], last_id=row[1], next_depth=row[0] + 1))
        return entries

    def _overlay_at(
        self, message_id: str, depth: int, on_page: dict[str, int], last: int
    ) -> tuple[StoredCompaction, int] | None:
        """The overlay the full read would apply at this position and the depth of its end, if any."""
        for compaction in reversed(self._by_start.get(message_id, ())):
            end = on_page.get(compaction.to_message_id)
            if end is None:
                end = self._end_beyond(compaction.to_message_id, last)
            if end is not None and end >= depth:
                return compaction, end
        return None

    def _end_beyond(self, message_id: str, last: int) -> int | None:
        """The depth of ``message_id`` if it is on the path below this page, else None."""
        depth = self._depth_on_path(message_id)
        return depth if depth is not None and depth > last else None

    def _depth_on_path(self, message_id: str) -> int | None:
        """The depth of ``message_id`` if it is on the leaf's path, else None (memoized; one walk)."""
        if message_id in self._on_path:
            return self._on_path[message_id]
        depth: int | None = None
        meta = self._tx.query(self._sql.get_message_meta, {"sid": self._session_id, "id": message_id})
        if meta and self._leaf_depth is not None and int(meta[0][1]) <= self._leaf_depth:
            candidate = int(meta[0][1])
            rows = self._rows(candidate, candidate, budget=-1)
            if rows and rows[0][:2] == (candidate, message_id):
                depth = candidate
        self._on_path[message_id] = depth
        return depth

    def _rows(self, first: int, last: int, *, budget: int, hint: int | None = None) -> list[_Row]:
        """The path's rows at depths ``first..last``; learns the leaf depth, the overlays and the next anchor."""
        params: dict[str, object] = {
            "namespace": self._namespace,
            "sid": self._session_id,
            "first": first,
            "last": last,
            "budget": budget,
            "hint": hint,
            "overlays": not self._overlays_known,
            "together": self._together,
        }
        statement = self._sql.history_page_rows_at_head
        if self._leaf_id is not None or not statement:
            anchor = self._anchor or (None, None)
            params.update(leaf=self._leaf_id, anchor_seq=anchor[0], anchor_id=anchor[1])
            statement = self._sql.history_page_rows
        found = self._tx.query(statement, params)
        rows: list[_Row] = []
        together: list[_Row] | None = None
        if hint is not None:
            self.next_anchor = None
        for depth, message_id, size, content, checked in found:
            if depth >= 0:
                rows.append((depth, message_id, size or 0, content, bool(checked)))
            elif depth == -1:  # the leaf's own row: its depth (and which leaf, when read from the head)
                self._leaf_id = str(message_id)
                self._leaf_depth = int(size)
            elif depth == -2:
                self.next_anchor = (int(size), str(message_id))
            elif depth == -3:
                self._learn_overlays(str(content))
            elif depth == -4:  # the session is not in the namespace: the statement read nothing of it
                raise SessionNotFoundError(f"Session {self._session_id!r} not found")
            else:  # -5: the rows as one JSON array
                together = _page_rows(str(content), first, int(size))
                if together is None:  # a stored content is not JSON: read this page as rows
                    self._together = False
                    return self._rows(first, last, budget=budget, hint=hint)
        self._overlays_known = True
        if together is not None:
            return together
        rows.sort(key=itemgetter(0))
        return rows

    def _learn_overlays(self, content: str) -> None:
        for item in json.loads(content):
            compaction = StoredCompaction(
                id=item[0], summary=item[1], from_message_id=item[2], to_message_id=item[3], created_at=item[4]
            )
            self._by_start.setdefault(compaction.from_message_id, []).append(compaction)

    @property
    def leaf_id(self) -> str | None:
        """The leaf whose history was read (the latest one, when the reader was given None)."""
        return self._leaf_id

    @property
    def path_length(self) -> int:
        """Rows root→leaf (known once a page was read)."""
        return 0 if self._leaf_depth is None else self._leaf_depth + 1

    def _now(self) -> str:
        if self._created_at is None:
            self._created_at = now_iso()
        return self._created_at


def _page_rows(text: str, first: int, count: int) -> list[_Row] | None:
    """The rows of a page sent as one JSON array (depth order from ``first``), or None if it does not parse as one.

    Contents are spliced in unparsed on the server, so a stored content that is not JSON spoils the
    whole value; the caller then reads the page as rows, where such a row is skipped.
    """
    try:
        items = json.loads(text)
    except ValueError:
        return None
    if not isinstance(items, list) or len(items) != count:
        return None
    rows: list[_Row] = []
    for expected, item in enumerate(items, start=first):
        if (
            not isinstance(item, list)
            or len(item) != 4
            or item[0] != expected
            or not isinstance(item[1], str)
            or type(item[2]) is not int
        ):
            return None
        rows.append((expected, item[1], item[2], item[3], False))
    return rows
