"""Compaction requests and the queues that carry them off the request path (contract D9).

When a compaction queue is configured, an append that crosses the token threshold only enqueues a
``CompactionRequest``; a worker (a background thread here, an SQS-triggered Lambda in the deployed app, see
``threadloom.compaction.sqs_queue``) runs the compaction later. Requests are idempotent by
``(namespace, session_id, leaf_id)``: repeating one while it is still waiting adds nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

from threadloom.errors import CompactionError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

MessageKind = Literal["compaction", "reflection"]
MESSAGE_KINDS: Final[tuple[MessageKind, ...]] = ("compaction", "reflection")
"""What a queued request asks for: a compaction, or a reflection (``threadloom.reflection``), which rides the same
queue so it runs off the request path, in order with the session's compactions (one FIFO group per session)."""


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """Ask for one session to be compacted, up to ``leaf_id`` (``None``: its latest leaf at the time it runs).

    ``requested_at`` is an ISO-8601 timestamp; ``create`` stamps the current UTC time. Construction validates the
    fields and raises ``ValidationError``, so a request read back with ``from_json`` is as sound as one built here.
    ``kind`` is ``compaction`` unless the request asks for a reflection of the session up to ``leaf_id``.

    Examples
    --------
    >>> request = CompactionRequest("tenant-1", "session-9", "msg-42", "2026-01-02T03:04:05.000Z")
    >>> CompactionRequest.from_json(request.to_json()) == request
    True
    """

    namespace: str
    session_id: str
    leaf_id: str | None
    requested_at: str
    kind: MessageKind = "compaction"

    def __post_init__(self) -> None:
        for name in ("namespace", "session_id", "requested_at"):
            if not isinstance(getattr(self, name), str):
                raise ValidationError(f"Compaction request field {name!r} must be a string")
        if self.leaf_id is not None and (not isinstance(self.leaf_id, str) or not self.leaf_id):
            raise ValidationError("Compaction request field 'leaf_id' must be a non-empty string or null")
        if self.kind not in MESSAGE_KINDS:
            raise ValidationError(f"Queued request kind must be one of {', '.join(MESSAGE_KINDS)}, not {self.kind!r}")
        try:
            datetime.fromisoformat(self.requested_at)
        except ValueError as exc:
            raise ValidationError(
                f"Compaction request field 'requested_at' is not an ISO-8601 timestamp: {self.requested_at!r}"
            ) from exc

    @classmethod
    def create(
        cls, namespace: str, session_id: str, leaf_id: str | None = None, *, kind: MessageKind = "compaction"
    ) -> CompactionRequest:
        """A request stamped with the current UTC time (millisecond precision, ``Z`` suffix)."""
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return cls(namespace=namespace, session_id=session_id, leaf_id=leaf_id, requested_at=now, kind=kind)

    @property
    def dedup_key(self) -> tuple[str | None, ...]:
        """What makes two requests the same request: ``(namespace, session_id, leaf_id)``, then the kind if not
        a compaction (so a compaction's keys are what they always were, and a reflection never collides with one)."""
        key: tuple[str | None, ...] = (self.namespace, self.session_id, self.leaf_id)
        return key if self.kind == "compaction" else (*key, self.kind)

    def to_json(self) -> str:
        """Compact JSON with the snake_case field names (the SQS message body); ``kind`` only when not compaction."""
        return json.dumps(
            {
                "namespace": self.namespace,
                "session_id": self.session_id,
                "leaf_id": self.leaf_id,
                "requested_at": self.requested_at,
                **({"kind": self.kind} if self.kind != "compaction" else {}),
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, data: str | bytes) -> CompactionRequest:
        """Parse ``to_json`` output; malformed JSON, a non-object or missing/ill-typed fields raise ``ValidationError``.

        Unknown fields are ignored, so producers may add some before consumers know them.
        """
        try:
            payload: Any = json.loads(data)
        except (ValueError, TypeError) as exc:
            raise ValidationError(f"Compaction request is not valid JSON: {exc}") from exc
        if not isinstance(payload, dict):
            raise ValidationError("Compaction request must be a JSON object")
        missing = [name for name in ("namespace", "session_id", "requested_at") if name not in payload]
        if missing:
            raise ValidationError(f"Compaction request is missing {', '.join(missing)}")
        return cls(
            namespace=payload["namespace"],
            session_id=payload["session_id"],
            leaf_id=payload.get("leaf_id"),
            requested_at=payload["requested_at"],
            kind=payload.get("kind", "compaction"),
        )


def request_key(request: CompactionRequest) -> str:
    """The key stored with the overlay so that handling ``request`` twice stores it once.

    For a request naming a leaf it is the SHA-256 hex of ``(namespace, session_id, leaf_id)``, the same value
    ``SqsCompactionQueue`` sends as ``MessageDeduplicationId``: re-sent triggers for one leaf are one request.
    A request without a leaf ("whatever is latest when it runs") also hashes its ``requested_at``; otherwise every
    such request of a session would share one key and only the first could ever compact.
    """
    parts: list[str | None] = list(request.dedup_key)
    if request.leaf_id is None:
        parts.append(request.requested_at)
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


@runtime_checkable
class CompactionQueue(Protocol):
    """Anything that accepts compaction requests; delivery is at least once, duplicates may be collapsed."""

    def enqueue(self, request: CompactionRequest) -> None: ...


class InProcessCompactionQueue:
    """The embedded default: one daemon worker thread compacting requests in arrival order.

    A request identical (same ``dedup_key``) to one still waiting is dropped; once the worker has picked a request up,
    an identical one is queued again, since messages may have arrived after the running compaction read its snapshot.
    Handler exceptions are logged and swallowed, so one failing session never stops the worker.

    The worker starts on the first ``enqueue`` after a handler is set (no thread exists before), and requests
    enqueued before ``set_handler`` wait for it. It is a daemon thread: requests still waiting when the process
    exits are lost (call ``close`` to finish them), which is acceptable for compaction, a pure optimisation.

    Examples
    --------
    >>> compactions = InProcessCompactionQueue(lambda request: print(request.session_id))
    >>> compactions.enqueue(CompactionRequest.create("tenant-1", "session-9"))
    >>> compactions.drain(timeout=5)  # doctest: +SKIP
    session-9
    True
    """

    def __init__(self, handler: Callable[[CompactionRequest], object] | None = None) -> None:
        self._handler = handler
        self._queue: queue.Queue[CompactionRequest | None] = queue.Queue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending: set[tuple[str | None, ...]] = set()
        self._unfinished = 0
        self._closed = False
        self._worker: threading.Thread | None = None

    def set_handler(self, handler: Callable[[CompactionRequest], object] | None) -> None:
        """Install (or replace) the function that compacts one request; starts the worker if requests wait."""
        with self._lock:
            self._handler = handler
            if handler is not None and self._unfinished:
                self._ensure_worker()

    def enqueue(self, request: CompactionRequest) -> None:
        """Queue ``request`` unless an identical one is still waiting; raises ``CompactionError`` after ``close``."""
        with self._lock:
            if self._closed:
                raise CompactionError("Compaction queue is closed")
            key = request.dedup_key
            if key in self._pending:
                logger.debug("Request already pending for session %r in namespace %r", key[1], key[0])
                return
            self._pending.add(key)
            self._unfinished += 1
            self._queue.put(request)
            if self._handler is not None:
                self._ensure_worker()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every accepted request has been handled; ``False`` if ``timeout`` seconds passed first."""
        if threading.current_thread() is self._worker:
            raise CompactionError("drain() cannot be called from the compaction handler")
        with self._idle:
            return self._idle.wait_for(lambda: self._unfinished == 0, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Refuse new requests, let the worker finish those already queued, and stop it.

        Returns ``True`` when the worker has stopped (or never ran) within ``timeout``. Requests that were waiting
        for a handler that was never set are discarded, with a warning.
        """
        with self._lock:
            self._closed = True
            worker = self._worker if self._worker is not None and self._worker.is_alive() else None
            if worker is None:
                if self._unfinished:
                    logger.warning("Compaction queue closed with %d request(s) never handled", self._unfinished)
                return True
            self._queue.put(None)
        if worker is threading.current_thread():
            return False
        worker.join(timeout)
        return not worker.is_alive()

    def _ensure_worker(self) -> None:
        """Start the worker thread unless it is running. Call with ``self._lock`` held."""
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, name="threadloom-compaction", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        while True:
            request = self._queue.get()
            if request is None:
                return
            with self._lock:
                self._pending.discard(request.dedup_key)
                handler = self._handler
            try:
                if handler is None:
                    logger.warning("No compaction handler set; dropping request for session %r", request.session_id)
                else:
                    handler(request)
            except Exception:
                logger.exception(
                    "Compaction failed for session %r in namespace %r", request.session_id, request.namespace
                )
            finally:
                with self._idle:
                    self._unfinished -= 1
                    if self._unfinished == 0:
                        self._idle.notify_all()


__all__ = [
    "MESSAGE_KINDS",
    "CompactionQueue",
    "CompactionRequest",
    "InProcessCompactionQueue",
    "MessageKind",
]
