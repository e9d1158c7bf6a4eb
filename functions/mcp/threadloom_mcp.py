"""The MCP function's entry point (``Handler: threadloom_mcp.lambda_handler``): ``/mcp`` on the HTTP API.

A function of its own so that the REST function's package and cold start stay without the MCP SDK: this one
ships the SDK and its dependencies (requirements.txt) and gets Threadloom from the same layer as the others.
``threadloom.mcp.http`` does the work (the REST API's edge checks and tenancy, then the SDK's stateless
Streamable HTTP transport), so the local server and this function answer ``/mcp`` with the same code.

The SDK's server modules are imported here, at start-up, rather than on the first request as the shared
module does: SnapStart then snapshots them with the rest of the initialised process. The deployment profile is
checked at init too, as the REST function does (``threadloom.api.startup``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp.server.streamable_http_manager  # noqa: F401  (loaded into the SnapStart snapshot)
import threadloom.mcp.server  # noqa: F401  (the tools and resources, likewise)
from threadloom.api import startup
from threadloom.mcp.http import lambda_handler as mcp_handler

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

PROFILE_PROBLEM = startup.profile_problem()


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One ``/mcp`` request to the MCP server; nothing while the profile is invalid."""
    if PROFILE_PROBLEM is not None:
        return startup.refusal()
    answer: dict[str, Any] = mcp_handler(event, context)
    return answer


__all__ = ["PROFILE_PROBLEM", "lambda_handler"]
