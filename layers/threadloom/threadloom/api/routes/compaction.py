"""Compaction: compact now (202 with a request id when queued), status, list overlays, compact-and-split."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from threadloom.api.models import (
    CompactIn,
    CompactionList,
    CompactOut,
    OriginalsPage,
    SessionOut,
    SessionStatusOut,
    SplitIn,
)
from threadloom.api.runtime import get_runtime
from threadloom.api.use_cases import compaction as use_cases

from .common import BODY, CHECKED, SESSION, json_response, limits, manager, new_router, responses

router = new_router()


@router.post(
    "/sessions/<sessionId>/compact",
    summary="Compact now; 202 when handed to the compaction queue",
    tags=["compaction"],
    operation_id="compactSession",
    responses=responses(
        200,
        CompactOut,
        "Compacted now (or nothing to compact)",
        *SESSION,
        *BODY,
        409,
        also={202: (CompactOut, "Queued for the compaction worker; follow requestId at /sessions/{sessionId}/status")},
    ),
)
def compact(sessionId: str, body: Annotated[CompactIn | None, Body()] = None) -> Response[Any]:
    leaf_id = body.leaf_id if body is not None else None
    out, queued = use_cases.compact(manager(router), sessionId, leaf_id, get_runtime().queue)
    return json_response(202 if queued else 200, out)


@router.get(
    "/sessions/<sessionId>/status",
    summary="Phase, token estimate and threshold, and the latest compaction request",
    tags=["compaction"],
    operation_id="getSessionStatus",
    responses=responses(200, SessionStatusOut, "The session's live figures and latest compaction request", *CHECKED),
)
def session_status(sessionId: str) -> SessionStatusOut:
    return use_cases.session_status(manager(router), sessionId)


@router.get(
    "/sessions/<sessionId>/compactions",
    summary="Compaction overlays",
    tags=["compaction"],
    operation_id="listCompactions",
    responses=responses(200, CompactionList, "One page of the session's overlays, oldest first", *SESSION, 409),
)
def compactions(
    sessionId: str,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> CompactionList:
    return use_cases.compactions(manager(router), sessionId, limits(), limit=limit, cursor=cursor)


@router.get(
    "/sessions/<sessionId>/compactions/<compactionId>/originals",
    summary="The original messages an overlay replaces (its id with or without the compaction_ prefix)",
    tags=["compaction"],
    operation_id="listCompactionOriginals",
    responses=responses(200, OriginalsPage, "One page of the replaced messages, oldest first", *SESSION, 409),
)
def compaction_originals(
    sessionId: str,
    compactionId: str,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> OriginalsPage:
    return use_cases.compaction_originals(
        manager(router), sessionId, compactionId, limits(), limit=limit, cursor=cursor
    )


@router.post(
    "/sessions/<sessionId>/split",
    summary="End the session and continue in a new one seeded with a summary",
    tags=["compaction"],
    operation_id="splitSession",
    responses=responses(201, SessionOut, "The new session", *SESSION, *BODY),
)
def split(sessionId: str, body: Annotated[SplitIn, Body()]) -> Response[Any]:
    return json_response(201, use_cases.split(manager(router), sessionId, body.summary, body.name))
