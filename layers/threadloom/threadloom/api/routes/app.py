"""The HTTP API app: Powertools resolver, one router per resource, errors mapped in one module.

``lambda_handler`` is what Lambda calls (``functions/api/threadloom_api.py`` only re-exports it)
and what the local server calls for every request, so both run the same code from this package.
"""

from __future__ import annotations

import json
from functools import partial
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.shared.json_encoder import Encoder

from threadloom import correlation
from threadloom.api import snapstart
from threadloom.api.edge import check_event, cors_config, with_security_headers
from threadloom.api.exceptions import ResponseTooLargeError
from threadloom.api.idempotency import register_lambda_context
from threadloom.api.observability import logger, metrics, tracer
from threadloom.api.routes import ROUTERS
from threadloom.api.routes.common import SECURITY, security_schemes
from threadloom.api.routes.errors import error_for, register_error_handlers
from threadloom.api.runtime import get_runtime
from threadloom.errors import ThreadloomError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

TITLE = "Threadloom"
VERSION = "0.1.0"
CORS = cors_config()

# Bodies are UTF-8 JSON as threadloom.api.paging measures them: with Powertools' default (ASCII
# escapes) a page of non-ASCII text would be up to 3x the bytes its byte budget counted.
app = APIGatewayHttpResolver(
    cors=CORS,
    enable_validation=True,
    response_validation_error_http_code=HTTPStatus.INTERNAL_SERVER_ERROR,
    serializer=partial(json.dumps, separators=(",", ":"), ensure_ascii=False, cls=Encoder),
)
register_error_handlers(app)
snapstart.register()  # SnapStart: warm up and drop connections before the snapshot, reconnect after restore
for router in ROUTERS:
    app.include_router(router)


def openapi_document() -> dict[str, Any]:
    document = app.get_openapi_schema(
        title=TITLE, version=VERSION, security_schemes=security_schemes(), security=SECURITY
    ).model_dump(mode="json", by_alias=True, exclude_none=True)
    return with_error_envelope(document)


def with_error_envelope(document: dict[str, Any]) -> dict[str, Any]:
    """Powertools documents its own 422/500 bodies; ours are the error envelope, so say so."""
    envelope = {"$ref": "#/components/schemas/ErrorOut"}
    for methods in document.get("paths", {}).values():
        for operation in methods.values():
            for code, response in operation.get("responses", {}).items():
                if code in ("422", "500"):
                    response["content"] = {"application/json": {"schema": envelope}}
    schemas = document.get("components", {}).get("schemas", {})
    text = json.dumps(document.get("paths", {}))
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        if f"#/components/schemas/{unused}" not in text:
            schemas.pop(unused, None)
    return document


def openapi_json() -> str:
    """The OpenAPI 3.1 document (also exported to ``openapi.json`` by ``scripts/export_openapi.py``)."""
    return json.dumps(openapi_document(), indent=2)


@app.get("/openapi.json", include_in_schema=False)
def openapi() -> dict[str, Any]:
    return openapi_document()


def refused(event: dict[str, Any], error: ThreadloomError) -> dict[str, Any]:
    """The error envelope for a request refused before routing (with CORS headers when configured)."""
    status, code = error_for(error)
    return envelope(event, status, code, str(error))


def envelope(event: dict[str, Any], status: HTTPStatus, code: str, message: str) -> dict[str, Any]:
    """The error envelope as a Lambda response, for an answer no ``ThreadloomError`` maps to (a 405)."""
    headers = {"Content-Type": "application/json"}
    if CORS is not None:
        origin = next((value for key, value in (event.get("headers") or {}).items() if key.lower() == "origin"), None)
        headers.update(CORS.to_dict(origin))
    body = json.dumps({"error": {"code": code, "message": message}}, separators=(",", ":"))
    return {"statusCode": status.value, "headers": headers, "body": body, "isBase64Encoded": False}


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    register_lambda_context(context)
    with correlation.bound(logger.get_correlation_id()):  # the request id, for the compaction this request may queue
        return _resolve(event, context)


def _resolve(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = within_response_cap(event, _route(event, context), get_runtime().limits.max_response_bytes)
    return with_security_headers(response)


def within_response_cap(event: dict[str, Any], response: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Every list pages by bytes; should any answer still pass the cap, say so rather than let Lambda fail it."""
    body = response.get("body")
    if not isinstance(body, str) or len(body) <= max_bytes // 4 or len(body.encode("utf-8")) <= max_bytes:
        return response
    logger.error("response over the byte cap", size=len(body.encode("utf-8")), max_bytes=max_bytes)
    error = ResponseTooLargeError(
        f"The answer would pass the {max_bytes}-byte response limit; ask for less (a smaller limit or a page)"
    )
    return refused(event, error)


def _route(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        check_event(event, get_runtime().limits)
    except ThreadloomError as error:
        logger.info("request refused before routing", error_type=type(error).__name__)
        return refused(event, error)
    http = event.get("requestContext", {}).get("http", {})
    if str(http.get("method", "")).upper() == "HEAD":
        # HEAD is GET without the body: same status and headers (API Gateway sets Content-Length).
        get_event = {**event, "requestContext": {**event["requestContext"], "http": {**http, "method": "GET"}}}
        response = app.resolve(get_event, context)
        return {**response, "body": "", "isBase64Encoded": False}
    return app.resolve(event, context)
