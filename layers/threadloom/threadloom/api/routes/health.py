"""Liveness with storage reachability (no tenant needed)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from threadloom.api.models import HealthOut
from threadloom.api.runtime import get_runtime

from .common import json_response, new_router, responses

router = new_router()


@router.get(
    "/health",
    summary="Liveness and storage reachability",
    tags=["health"],
    operation_id="health",
    responses=responses(200, HealthOut, "Storage reachable", also={503: (HealthOut, "Storage unreachable")}),
)
def health() -> Response[Any]:
    reachable = get_runtime().storage_reachable()
    body = HealthOut(status="ok" if reachable else "degraded", storage="reachable" if reachable else "unreachable")
    return json_response(200 if reachable else 503, body)
