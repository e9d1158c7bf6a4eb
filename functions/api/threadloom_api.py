"""The HTTP API Lambda: Powertools resolver, one router per resource, errors mapped in one module."""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths
from threadloom.api.idempotency import register_lambda_context
from threadloom.api.observability import logger, metrics, tracer
from threadloom_api_errors import register_error_handlers
from threadloom_api_routes import ROUTERS

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

TITLE = "Threadloom"
VERSION = "0.1.0"

app = APIGatewayHttpResolver(
    enable_validation=True, response_validation_error_http_code=HTTPStatus.INTERNAL_SERVER_ERROR
)
register_error_handlers(app)
for router in ROUTERS:
    app.include_router(router)


def openapi_json() -> str:
    """The OpenAPI 3.1 document (also exported to ``openapi.json`` by ``scripts/export_openapi.py``)."""
    return app.get_openapi_json_schema(title=TITLE, version=VERSION)


@app.get("/openapi.json", include_in_schema=False)
def openapi() -> dict[str, Any]:
    return app.get_openapi_schema(title=TITLE, version=VERSION).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True)
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    register_lambda_context(context)
    return app.resolve(event, context)
