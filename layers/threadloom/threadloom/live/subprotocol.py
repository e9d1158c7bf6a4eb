"""The WebSocket subprotocols of the live-status channel: how a browser names the protocol and carries its token.

A browser cannot set ``Authorization`` on a WebSocket handshake, and a token in the URL (``?token=``) ends up
in proxy and access logs. So a browser offers two subprotocols in ``Sec-WebSocket-Protocol``:
``threadloom.live`` (the one the server selects and echoes) and ``threadloom.token.<jwt>`` (read by the
deployed ``$connect`` authorizer, never echoed). A JWT is base64url parts joined by dots, all of which are
characters a subprotocol name may hold, so the token travels unchanged. The local server checks no token and
selects ``threadloom.live`` alone.
"""

from __future__ import annotations

LIVE_SUBPROTOCOL = "threadloom.live"
TOKEN_SUBPROTOCOL_PREFIX = "threadloom.token."
SUBPROTOCOL_HEADER = "sec-websocket-protocol"


def offered_subprotocols(header: str | None) -> list[str]:
    """The subprotocols a client offered, in its order (the header is a comma-separated list)."""
    return [name.strip() for name in (header or "").split(",") if name.strip()]


def token_from_subprotocols(header: str | None) -> str:
    """The JWT a client offered as ``threadloom.token.<jwt>``; empty when it offered none."""
    for name in offered_subprotocols(header):
        if name.startswith(TOKEN_SUBPROTOCOL_PREFIX):
            return name[len(TOKEN_SUBPROTOCOL_PREFIX) :]
    return ""


def selected_subprotocol(header: str | None) -> str | None:
    """What the server answers in ``Sec-WebSocket-Protocol``: ``threadloom.live`` if offered, else nothing.

    A browser that offered subprotocols drops the connection unless the answer names one of them, and the
    token subprotocol must never be echoed (it would travel back in a response header).
    """
    return LIVE_SUBPROTOCOL if LIVE_SUBPROTOCOL in offered_subprotocols(header) else None


__all__ = [
    "LIVE_SUBPROTOCOL",
    "SUBPROTOCOL_HEADER",
    "TOKEN_SUBPROTOCOL_PREFIX",
    "offered_subprotocols",
    "selected_subprotocol",
    "token_from_subprotocols",
]
