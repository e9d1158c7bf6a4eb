"""Helpers for driving Threadloom's MCP server with the ``mcp`` SDK's own client, over each transport."""

from __future__ import annotations

import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.api import FakeLambdaContext, gateway_event

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import mcp_types

ROOT = Path(__file__).resolve().parents[2]
THREADLOOM = str(Path(sys.executable).with_name("threadloom"))


def stdio_parameters(database: Path | str, namespace: str, *extra: str) -> StdioServerParameters:
    """``threadloom --database DB --create --namespace NS mcp``, as a desktop app's config launches it."""
    arguments = ["--database", str(database), "--create", "--namespace", namespace, "mcp", *extra]
    return StdioServerParameters(command=THREADLOOM, args=arguments, cwd=str(ROOT))


def gateway_transport(tenant: str | None, scopes: list[str] | None = None) -> httpx2.MockTransport:
    """An HTTP transport that hands each request to the MCP function as API Gateway (payload 2.0) would.

    The JWT authorizer has run: the event carries the tenant's claims (none when ``tenant`` is None)
    and the token's ``scopes``.
    """
    from threadloom_mcp import lambda_handler

    async def handle(request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        headers = {key: value for key, value in request.headers.items() if key.lower() not in ("host",)}
        query = dict(request.url.params.multi_items()) if request.url.query else None
        event = gateway_event(
            request.method,
            request.url.path,
            raw_body=body or None,
            tenant=tenant,
            headers=headers,
            query=query,
            scopes=scopes,
        )
        response = await anyio.to_thread.run_sync(lambda_handler, event, FakeLambdaContext())
        return httpx2.Response(
            response["statusCode"], headers=response.get("headers") or {}, content=response.get("body", "").encode()
        )

    return httpx2.MockTransport(handle)


@asynccontextmanager
async def lambda_client(
    tenant: str | None, path: str = "/mcp", *, scopes: list[str] | None = None
) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP against the Lambda handler (no network)."""
    transport = gateway_transport(tenant, scopes)
    async with (
        httpx2.AsyncClient(transport=transport, base_url="https://api.example.com") as http,
        Client(streamable_http_client(f"https://api.example.com{path}", http_client=http)) as client,
    ):
        yield client


@asynccontextmanager
async def url_client(url: str, token: str | None = None) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP against a real port."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def text_of(result: mcp_types.CallToolResult) -> str:
    """The one text block a Threadloom tool answers with."""
    (block,) = result.content
    assert block.type == "text"
    return block.text


def json_of(result: mcp_types.CallToolResult) -> Any:
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


def message(message_id: str, role: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


async def remember_a_fact(client: Client) -> str:
    """What an agent does to remember: a session, the user's message, the fact in the memory block."""
    session_id = str(json_of(await client.call_tool("create_session", {"name": "Pets"}))["id"])
    stored = json_of(
        await client.call_tool(
            "append_message", {"sessionId": session_id, "message": message("m1", "user", "My cat is called Miso")}
        )
    )
    assert stored["inserted"] is True
    written = await client.call_tool(
        "set_context", {"sessionId": session_id, "label": "memory", "content": "The user's cat is called Miso."}
    )
    assert not written.is_error and text_of(written).startswith("Written to memory."), text_of(written)
    return session_id


__all__ = [
    "gateway_transport",
    "json_of",
    "lambda_client",
    "message",
    "remember_a_fact",
    "stdio_parameters",
    "text_of",
    "url_client",
]
