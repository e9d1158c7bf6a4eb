"""The HTTP API Lambda's entry point (``Handler: threadloom_api.lambda_handler``): the app lives in the package.

``threadloom.api.routes.app`` builds the resolver, its routes and error mapping, so the local server
(``threadloom serve``) and this function run the same code from the same wheel. ``/mcp`` is not served here:
the HTTP API sends it to the MCP function (``functions/mcp``), which ships the MCP SDK this package never loads.
"""

from __future__ import annotations

from threadloom.api.routes.app import app, lambda_handler, openapi_document, openapi_json, within_response_cap

__all__ = ["app", "lambda_handler", "openapi_document", "openapi_json", "within_response_cap"]
