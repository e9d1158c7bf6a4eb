"""The in-process publisher: subscriptions held in memory, for the local server's ``/ws``.

Writes publish from request threads and the compaction worker; each connection only queues the
text (``Connection.send`` never blocks), so a slow or vanished client costs a write nothing.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from threadloom.live.events import encode

if TYPE_CHECKING:
    from threadloom.live.events import LiveEvent

MAX_SUBSCRIPTIONS_PER_CONNECTION = 100


class Connection(Protocol):
    """One client connection as the hub sees it."""

    def send(self, text: str) -> bool:
        """Queue ``text`` without blocking; False when the connection is gone (the hub then forgets it)."""
        ...


class LocalHub:
    """Subscriptions by ``(namespace, session_id)``; a ``StatusPublisher``."""

    def __init__(self, *, max_subscriptions_per_connection: int = MAX_SUBSCRIPTIONS_PER_CONNECTION) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[tuple[str, str], set[Connection]] = {}
        self._subscriptions: dict[Connection, set[tuple[str, str]]] = {}
        self.max_subscriptions_per_connection = max_subscriptions_per_connection

    def subscribe(self, connection: Connection, namespace: str, session_id: str) -> bool:
        """Add a subscription; False when the connection already holds the maximum."""
        key = (namespace, session_id)
        with self._lock:
            held = self._subscriptions.setdefault(connection, set())
            if key not in held and len(held) >= self.max_subscriptions_per_connection:
                return False
            held.add(key)
            self._subscribers.setdefault(key, set()).add(connection)
        return True

    def unsubscribe(self, connection: Connection, namespace: str, session_id: str) -> None:
        key = (namespace, session_id)
        with self._lock:
            self._subscriptions.get(connection, set()).discard(key)
            self._forget(connection, key)

    def drop(self, connection: Connection) -> None:
        """Forget every subscription of a closed connection."""
        with self._lock:
            for key in self._subscriptions.pop(connection, set()):
                self._forget(connection, key)

    def _forget(self, connection: Connection, key: tuple[str, str]) -> None:
        subscribers = self._subscribers.get(key)
        if subscribers is not None:
            subscribers.discard(connection)
            if not subscribers:
                del self._subscribers[key]

    def subscriber_count(self, namespace: str, session_id: str) -> int:
        with self._lock:
            return len(self._subscribers.get((namespace, session_id), ()))

    def publish(self, namespace: str, session_id: str, event: LiveEvent) -> None:
        with self._lock:
            targets = list(self._subscribers.get((namespace, session_id), ()))
        if not targets:
            return
        text = encode(event)
        for connection in targets:
            if not connection.send(text):
                self.drop(connection)


__all__ = ["MAX_SUBSCRIPTIONS_PER_CONNECTION", "Connection", "LocalHub"]
