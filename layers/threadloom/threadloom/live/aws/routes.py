"""What each route of the WebSocket API does; the Lambda handler only parses the event and sends the reply back.

``$connect`` records the connection with the tenant the authorizer verified; every later message is scoped to that
stored tenant, so a client can only ever subscribe to its own tenant's sessions. Replies are the protocol's events
(``threadloom.live.events``), the same the local server sends.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from threadloom.errors import NotFoundError, StorageUnavailableError, ValidationError
from threadloom.live.events import error, parse_client_message
from threadloom.live.hub import MAX_SUBSCRIPTIONS_PER_CONNECTION
from threadloom.live.status import subscribe_reply

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.core.manager import SessionManager
    from threadloom.live.aws.connections import ConnectionsTable
    from threadloom.live.events import LiveEvent

logger = logging.getLogger(__name__)

MAX_CONNECTIONS_PER_TENANT = 1000
"""Connections one tenant may hold open at once by default (``LiveConnectionsPerTenant`` in template.yaml)."""
NOT_OPEN = "This connection is not open (or has expired): reconnect"
UNAVAILABLE = "Live status is unavailable right now: try again"


class WebSocketRoutes:
    """The four routes over the connections table and each tenant's ``SessionManager``.

    Parameters
    ----------
    connections:
        The connections table.
    manager_for:
        The configured manager of a tenant (``Runtime.manager``).
    max_subscriptions:
        Subscriptions one connection may hold (as on the local server).
    max_connections_per_tenant:
        Connections one tenant may hold open at once, so one tenant cannot take the stage's capacity.
    """

    def __init__(
        self,
        connections: ConnectionsTable,
        manager_for: Callable[[str], SessionManager],
        *,
        max_subscriptions: int = MAX_SUBSCRIPTIONS_PER_CONNECTION,
        max_connections_per_tenant: int = MAX_CONNECTIONS_PER_TENANT,
    ) -> None:
        self._connections = connections
        self._manager_for = manager_for
        self._max_subscriptions = max_subscriptions
        self._max_connections_per_tenant = max_connections_per_tenant

    def connect(self, connection_id: str, tenant: str, *, token_expires_at: int | None = None) -> bool:
        """Remember the connection and the tenant its verified token named, until that token expires.

        False, with nothing recorded, when the tenant already holds its most connections: refuse the handshake.
        """
        return self._connections.open(
            connection_id, tenant=tenant, token_expires_at=token_expires_at, limit=self._max_connections_per_tenant
        )

    def disconnect(self, connection_id: str) -> None:
        """Forget the connection and all its subscriptions."""
        self._connections.close(connection_id)

    def message(self, connection_id: str, body: str | None) -> LiveEvent | None:
        """Handle one client message; the event to send back, or None when there is nothing to say."""
        try:
            action = parse_client_message(body or "")
        except ValidationError as exc:
            return error(str(exc))
        try:
            opened = self._connections.open_connection(connection_id)
            if opened is None:  # unknown, or its token has expired
                return error(NOT_OPEN)
            tenant, expires_at = opened
            if action.action == "unsubscribe":
                self._connections.unsubscribe(connection_id, tenant=tenant, session_id=action.session_id)
                return None
            return self._subscribe(connection_id, tenant, action.session_id, expires_at)
        except StorageUnavailableError:
            logger.exception("Connections table unavailable while handling %s", action.action)
            return error(UNAVAILABLE)
        except ValidationError as exc:  # a key the table cannot hold: the caller's to fix, not a failed invocation
            return error(str(exc))

    def _subscribe(self, connection_id: str, tenant: str, session_id: str, expires_at: int) -> LiveEvent:
        reply = subscribe_reply(self._manager_for(tenant), session_id)
        if reply["type"] != "subscribed":
            return reply  # unknown here, including another tenant's session: nothing is subscribed
        try:
            subscribed = self._connections.subscribe(
                connection_id,
                tenant=tenant,
                session_id=session_id,
                expires_at=expires_at,
                limit=self._max_subscriptions,
            )
        except NotFoundError:
            return error(NOT_OPEN)
        except ValidationError as exc:
            return error(str(exc))
        if not subscribed:
            return error(f"Too many subscriptions on this connection (at most {self._max_subscriptions})")
        return reply


__all__ = ["MAX_CONNECTIONS_PER_TENANT", "NOT_OPEN", "UNAVAILABLE", "WebSocketRoutes"]
