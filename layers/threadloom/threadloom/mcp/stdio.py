"""``threadloom mcp``: the server over stdio for a local agent (a desktop app's config launches it).

One process serves one client as one tenant (``--namespace``) on one store (SQLite or PostgreSQL),
configured by the same profile as the HTTP API (``THREADLOOM_PROFILE``), so the agent gets the same
blocks and tools. stdout carries the protocol only; logs go to stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import anyio

from threadloom.mcp.binding import CURRENT, Binding


def binding_for(store: Any, namespace: str, session_id: str | None = None) -> Binding:
    """The tenant's manager on ``store``, configured by the profile (as the HTTP API configures it)."""
    from threadloom.api.runtime import Runtime, Settings

    settings = Settings(
        profile_path=os.environ.get("THREADLOOM_PROFILE") or None,
        skills_dir=os.environ.get("THREADLOOM_SKILLS_DIR") or None,
        compaction_mode="inline",  # no worker thread in a process that ends with its client
    )
    runtime = Runtime(settings, store=store)
    limits = runtime.limits
    return Binding(
        manager=runtime.manager(limits.check_tenant(namespace)), limits=limits, session_id=session_id, notifies=True
    )


async def serve(binding: Binding) -> None:
    """Serve one client on stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    from threadloom.mcp.server import build_server, initialization_options

    CURRENT.set(binding)
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, initialization_options(server))


def run(store: Any, namespace: str, session_id: str | None = None) -> None:
    """Serve over stdio (blocking); the store is the caller's to close."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    binding = binding_for(store, namespace, session_id)
    if session_id is not None and binding.manager.get(session_id) is None:
        from threadloom.errors import NotFoundError

        raise NotFoundError(f"Session {session_id!r} not found in namespace {namespace!r}; create it first")
    anyio.run(serve, binding)


__all__ = ["binding_for", "run", "serve"]
