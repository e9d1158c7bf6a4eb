"""History (root→leaf, paginated) and full-text search in one session or across the tenant's sessions."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query

from threadloom.api.models import BranchPointList, HistoryPage, SearchOut
from threadloom.api.use_cases import history as use_cases
from threadloom.errors import ValidationError
from threadloom.limits import HARD_LIMITS
from threadloom.search import query_problem

from .common import ANY, CHECKED, SESSION, json_text_response, limits, manager, new_router, responses

router = new_router()
Limit = Annotated[int | None, Query(ge=1)]
SearchQuery = Annotated[
    str, Query(min_length=1, max_length=HARD_LIMITS.max_query_chars, description='Words ANDed; "quoted phrases"')
]


@router.get(
    "/sessions/<sessionId>/history",
    summary="Root→leaf with compaction overlays applied, paged by count and by response bytes",
    tags=["history"],
    operation_id="getHistory",
    responses=responses(200, HistoryPage, "One page of the history", *SESSION, 409),
)
def history(
    sessionId: str,
    leafId: Annotated[str | None, Query()] = None,
    limit: Limit = None,
    cursor: Annotated[str | None, Query()] = None,
) -> Response[str]:
    body = use_cases.history_json(manager(router), sessionId, limits(), leaf_id=leafId, limit=limit, cursor=cursor)
    return json_text_response(body)


@router.get(
    "/sessions/<sessionId>/branch-points",
    summary="Messages with several children, each child with the latest leaf under it",
    tags=["history"],
    operation_id="listBranchPoints",
    responses=responses(200, BranchPointList, "The session's branch points", *CHECKED),
)
def branch_points(sessionId: str) -> BranchPointList:
    return use_cases.branch_points(manager(router), sessionId)


@router.get(
    "/sessions/<sessionId>/search",
    summary="Search one session",
    tags=["history"],
    operation_id="searchSession",
    responses=responses(200, SearchOut, "Matching messages, best first", *CHECKED),
)
def search_session(sessionId: str, q: SearchQuery, limit: Limit = None) -> SearchOut:
    _check_query(q)
    return use_cases.search_session(manager(router), sessionId, q, limit, limits())


@router.get(
    "/search",
    summary="Search across the tenant's sessions",
    tags=["history"],
    operation_id="searchAll",
    responses=responses(200, SearchOut, "Matching messages of this tenant's sessions", *ANY),
)
def search_all(q: SearchQuery, limit: Limit = None) -> SearchOut:
    _check_query(q)
    return use_cases.search_all(manager(router), q, limit, limits())


def _check_query(query: str) -> None:
    """Refuse (400) a query over the profile's ``max_query_chars`` or the dialect's word bounds.

    Left to the library, such a query would match nothing, or (before the bounds) hold a worker for seconds.
    """
    problem = query_problem(query, limits().max_query_chars)
    if problem is not None:
        raise ValidationError(problem)
