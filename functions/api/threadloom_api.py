"""The HTTP API Lambda's entry point (``Handler: threadloom_api.lambda_handler``): the app lives in the package.

``threadloom.api.routes.app`` builds the resolver, its routes and error mapping, so the local server
(``threadloom serve``) and this function run the same code from the same wheel. ``/mcp`` is not served here:
the HTTP API sends it to the MCP function (``functions/mcp``), which ships the MCP SDK this one never loads.
The deployment profile is checked once here, at init: an invalid one is logged once and every request gets the
``invalid_profile`` refusal (``threadloom.api.startup``) instead of a 500 ``internal_error`` per request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom.api import startup
from threadloom.api.routes.app import app, openapi_document, openapi_json, within_response_cap
from threadloom.api.routes.app import lambda_handler as api_handler

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

PROFILE_PROBLEM = startup.profile_problem()


def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Every path to the REST app; nothing while the profile is invalid."""
    if PROFILE_PROBLEM is not None:
        return startup.refusal()
    answer: dict[str, Any] = api_handler(event, context)
    return answer


__all__ = [
    "PROFILE_PROBLEM",
    "api_handler",
    "app",
    "lambda_handler",
    "openapi_document",
    "openapi_json",
    "within_response_cap",
]
