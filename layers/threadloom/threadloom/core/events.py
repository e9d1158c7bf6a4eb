"""Status and error events (contract §5), change notices for live viewers, and the auto-compaction error path (D8)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)


class EventEmitter:
    """Delivers events to listeners; a failing listener is logged, never propagated into a write."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[dict[str, Any]], Any]] = []
        self._change_listeners: list[Callable[[dict[str, Any]], Any]] = []
        self.error_handler: Callable[[BaseException], Any] | None = None

    @property
    def has_listeners(self) -> bool:
        return bool(self._listeners)

    def add_listener(self, listener: Callable[[dict[str, Any]], Any]) -> None:
        self._listeners.append(listener)

    def add_change_listener(self, listener: Callable[[dict[str, Any]], Any]) -> None:
        self._change_listeners.append(listener)

    def _emit(self, event: dict[str, Any], listeners: list[Callable[[dict[str, Any]], Any]] | None = None) -> None:
        for listener in list(self._listeners if listeners is None else listeners):
            try:
                listener(event)
            except Exception:
                logger.exception("Session event listener failed")

    def emit_status(
        self, phase: str, token_estimate: int, token_threshold: int | None, compacted: dict[str, int] | None = None
    ) -> None:
        event: dict[str, Any] = {
            "type": "session_status",
            "phase": phase,
            "tokenEstimate": token_estimate,
            "tokenThreshold": token_threshold,
        }
        if compacted is not None:
            event["compacted"] = compacted
        self._emit(event)

    def emit_error(self, message: str) -> None:
        self._emit({"type": "session_error", "error": message})

    def emit_change(self, change: str, leaf_id: str | None = None) -> None:
        """Tell change listeners what kind of write happened (ids only, never content) so viewers can refresh."""
        if not self._change_listeners:
            return
        event: dict[str, Any] = {"type": "session_changed", "change": change}
        if leaf_id is not None:
            event["leafId"] = leaf_id
        self._emit(event, self._change_listeners)

    def emit_shared_change(self, label: str, scope: str) -> None:
        """Tell change listeners a block shared with other sessions changed (their frozen prompts are now stale)."""
        if self._change_listeners:
            self._emit({"type": "shared_block_changed", "label": label, "scope": scope}, self._change_listeners)

    def report_auto_error(self, error: BaseException) -> None:
        """Give an automatic-compaction failure to the handler (or the log) and broadcast it."""
        handler = self.error_handler
        if handler is not None:
            try:
                handler(error)
            except Exception as handler_error:
                logger.warning("Session auto-compaction error handler failed: %s", handler_error)
        else:
            logger.warning("Session auto-compaction failed: %s", error)
        self.emit_error(str(error))
