"""A writable block's history: its versions (paged), one version, and a revert that is itself a new version."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from threadloom.api.models import BlockHistoryPage, BlockVersionOut, ContextBlockOut, ContextRevert
from threadloom.api.use_cases import block_history as use_cases

from .common import BODY, CHECKED, SESSION, limits, manager, new_router, responses

router = new_router()


@router.get(
    "/sessions/<sessionId>/context/<label>/history",
    summary="A writable block's versions, newest first, with who made each change; paged by count and bytes",
    tags=["context"],
    operation_id="getContextBlockHistory",
    responses=responses(200, BlockHistoryPage, "One page of versions", *CHECKED),
)
def history(
    sessionId: str,
    label: str,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> BlockHistoryPage:
    return use_cases.block_history(manager(router), sessionId, label, limits(), limit=limit, cursor=cursor)


@router.get(
    "/sessions/<sessionId>/context/<label>/history/<version>",
    summary="One stored version of a writable block",
    tags=["context"],
    operation_id="getContextBlockVersion",
    responses=responses(200, BlockVersionOut, "The version", *CHECKED),
)
def version(sessionId: str, label: str, version: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> BlockVersionOut:
    return use_cases.block_version(manager(router), sessionId, label, version)


@router.post(
    "/sessions/<sessionId>/context/<label>/revert",
    summary="Make an old version current again (itself a new version; 409 when basedOnVersion is stale)",
    tags=["context"],
    operation_id="revertContextBlock",
    responses=responses(200, ContextBlockOut, "The block as reverted", *SESSION, *BODY, 409),
)
def revert(sessionId: str, label: str, body: Annotated[ContextRevert, Body()]) -> ContextBlockOut:
    return use_cases.revert_block(
        manager(router), sessionId, label, version=body.version, based_on_version=body.based_on_version
    )
