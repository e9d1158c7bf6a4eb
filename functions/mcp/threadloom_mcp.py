"""The MCP function's entry point (``Handler: threadloom_mcp.lambda_handler``): ``/mcp`` on the HTTP API.

A function of its own so that the REST function's package and cold start stay without the MCP SDK: this one
ships the SDK and its dependencies (requirements.txt) and gets Threadloom from the same layer as the others.
``threadloom.mcp.http`` does the work (the REST API's edge checks and tenancy, then the SDK's stateless
Streamable HTTP transport), so the local server and this function answer ``/mcp`` with the same code.

The SDK's server modules are imported here, at start-up, rather than on the first request as the shared
module does: SnapStart then snapshots them with the rest of the initialised process.
"""

from __future__ import annotations

import mcp.server.streamable_http_manager  # noqa: F401  (loaded into the SnapStart snapshot)
import threadloom.mcp.server  # noqa: F401  (the tools and resources, likewise)
from threadloom.mcp.http import lambda_handler

__all__ = ["lambda_handler"]
