"""Retention: sessions inactive for longer than the profile allows are removed whole, in bounded batches.

"Inactive" means the session's ``updated_at`` (every append, rename, usage report or split
moves it) is older than ``inactive_days``. A session under legal hold is never removed.
Each removal re-checks both conditions inside its own transaction, so a session that became
active or was held after it was listed stays, and a sweep stopped at any point (a Lambda
timeout, Ctrl-C) leaves only whole sessions behind; the next sweep continues.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from threadloom.clock import timestamp_text
from threadloom.errors import ValidationError
from threadloom.lifecycle.removal import Removal, remove_session

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from threadloom.lifecycle.protocols import DerivedDataEraser, LifecycleStorage
    from threadloom.storage.snapshot import ExpiredSession

DEFAULT_BATCH_SIZE = 100


@dataclass(frozen=True, slots=True)
class SweepReport:
    cutoff: str
    dry_run: bool
    expired: list[ExpiredSession] = field(default_factory=list)
    """Sessions removed (or, in a dry run, that would be)."""
    counts: dict[str, int] = field(default_factory=dict)
    complete: bool = True
    """False when the sweep stopped at ``max_sessions`` or ``should_continue``; run it again to go on."""


def cutoff_for(inactive_days: int, now: datetime | None = None) -> str:
    if isinstance(inactive_days, bool) or not isinstance(inactive_days, int) or inactive_days < 1:
        raise ValidationError("inactive_days must be a positive integer")
    moment = (now or datetime.now(UTC)) - timedelta(days=inactive_days)
    return timestamp_text(moment)


def sweep(
    storage: LifecycleStorage,
    *,
    inactive_days: int,
    namespace: str = "",
    now: datetime | None = None,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_sessions: int | None = None,
    erasers: Sequence[DerivedDataEraser] = (),
    should_continue: Callable[[], bool] | None = None,
    on_session: Callable[[ExpiredSession], None] | None = None,
) -> SweepReport:
    """Remove (or with ``dry_run`` only list) expired sessions; ``namespace=""`` sweeps every namespace."""
    if batch_size < 1:
        raise ValidationError("batch_size must be positive")
    cutoff = cutoff_for(inactive_days, now)
    removal = Removal()
    handled: list[ExpiredSession] = []
    after: ExpiredSession | None = None
    complete = True
    while True:
        batch = storage.expired_sessions(cutoff, namespace=namespace, limit=batch_size, after=after)
        if not batch:
            break
        for expired in batch:
            if (max_sessions is not None and len(handled) >= max_sessions) or (
                should_continue is not None and not should_continue()
            ):
                complete = False
                break
            if dry_run or remove_session(
                storage, expired.namespace, expired.id, removal, erasers=erasers, expired_before=cutoff
            ):
                handled.append(expired)
                if on_session is not None:
                    on_session(expired)
        if not complete or len(batch) < batch_size:
            break
        after = batch[-1]
    if removal.session_ids:
        storage.purge_deleted()
    return SweepReport(
        cutoff=cutoff,
        dry_run=dry_run,
        expired=handled,
        counts={} if dry_run else removal.ordered_counts(),
        complete=complete,
    )


__all__ = ["DEFAULT_BATCH_SIZE", "SweepReport", "cutoff_for", "sweep"]
