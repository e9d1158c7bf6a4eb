"""The session inspector: a single-page app shipped as files inside the package, with no build step.

The API handler serves ``index.html`` at ``/`` and every other file under ``/inspector/``,
so the local server and the deployed API show the same page. Only flat file names with a
known type are served, read through ``importlib.resources`` (works from a wheel, a zip or
the Lambda layer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit

ASSET_PREFIX = "/inspector/"
INDEX = "index.html"
CONFIG_NAME = "config.json"  # generated per request (where the live channel is), not a file
CONTENT_TYPES = {
    "html": "text/html; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "svg": "image/svg+xml",
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*\.(html|js|css|svg)$")
_POLICY = (
    "default-src 'self'; connect-src {connect}; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
)
_WEBSOCKET_HOST = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


def content_security_policy(websocket_url: str | None = None) -> str:
    """The page's policy: it loads nothing from elsewhere and connects only to its own origin and its live channel.

    ``'self'`` covers ``ws://`` / ``wss://`` on the page's own host and port (the local server's ``/ws``);
    a channel on another host (the AWS WebSocket API) is allowed by its origin alone, never ``ws:`` / ``wss:``
    as a whole, so a script injected into the page could not send data to any host it likes.
    """
    connect = "'self'"
    if websocket_url:
        parts = urlsplit(websocket_url)
        if parts.scheme in ("ws", "wss") and _WEBSOCKET_HOST.match(parts.netloc):
            connect += f" {parts.scheme}://{parts.netloc.lower()}"
    return _POLICY.format(connect=connect)


CONTENT_SECURITY_POLICY = content_security_policy()
"""The policy of a page whose live channel (if any) is on its own origin."""


@dataclass(frozen=True, slots=True)
class Asset:
    body: str
    content_type: str


def read_asset(name: str) -> Asset | None:
    """The packaged file ``name``, or None for an unknown or disallowed name."""
    match = _NAME.match(name)
    if match is None:
        return None
    resource = resources.files(__name__).joinpath(name)
    if not resource.is_file():
        return None
    return Asset(body=resource.read_text(encoding="utf-8"), content_type=CONTENT_TYPES[match.group(1)])


__all__ = [
    "ASSET_PREFIX",
    "CONFIG_NAME",
    "CONTENT_SECURITY_POLICY",
    "INDEX",
    "Asset",
    "content_security_policy",
    "read_asset",
]
