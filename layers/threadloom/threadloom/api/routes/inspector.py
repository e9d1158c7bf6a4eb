"""The session inspector page: ``/`` and its files under ``/inspector/`` (no tenant: the page asks for a token)."""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.event_handler import Response

from threadloom.errors import NotFoundError
from threadloom.inspector import CONFIG_NAME, INDEX, content_security_policy, read_asset

from .common import json_response, new_router

router = new_router()
LOCAL_API_ID = "local"  # the local server's events say so (threadloom.local_server.to_event)
LOCAL_WEBSOCKET_PATH = "/ws"
HEADERS = {
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}


def _headers() -> dict[str, str]:
    """The page's headers; its CSP lets it connect to its own origin and this deployment's live channel only."""
    return {**HEADERS, "content-security-policy": content_security_policy(websocket_url())}


def _serve(name: str) -> Response[Any]:
    asset = read_asset(name)
    if asset is None:
        raise NotFoundError(f"No inspector file named {name!r}")
    return Response(status_code=200, content_type=asset.content_type, body=asset.body, headers=_headers())


def websocket_url() -> str | None:
    """Where a browser connects for live status.

    ``THREADLOOM_WEBSOCKET_URL`` when set; else the WebSocket API whose management endpoint the
    stack gives the function (``https://…/stage`` is ``wss://…/stage`` for clients); ``/ws`` on
    the local server; otherwise none (the page polls).
    """
    explicit = os.environ.get("THREADLOOM_WEBSOCKET_URL", "").strip()
    if explicit:
        return explicit
    endpoint = os.environ.get("THREADLOOM_WEBSOCKET_ENDPOINT", "").strip()
    if endpoint.startswith("https://"):
        return "wss://" + endpoint.removeprefix("https://")
    if router.current_event.request_context.api_id == LOCAL_API_ID:
        return LOCAL_WEBSOCKET_PATH
    return None


def _config() -> Response[Any]:
    url = websocket_url()
    response = json_response(200, {"websocketUrl": url})
    response.headers.update(_headers())
    return response


@router.get("/", summary="The session inspector page", tags=["inspector"], include_in_schema=False)
def index() -> Response[Any]:
    return _serve(INDEX)


@router.get("/inspector/<asset>", summary="A file of the inspector", tags=["inspector"], include_in_schema=False)
def asset(asset: str) -> Response[Any]:
    return _config() if asset == CONFIG_NAME else _serve(asset)
