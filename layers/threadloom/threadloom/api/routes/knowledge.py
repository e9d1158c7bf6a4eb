"""A tenant's searchable knowledge: the entries the model stored under a ``search`` block, to read and remove.

An entry's key is any text the model chose (slashes included), so it travels in the query
string, not the path.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from threadloom.api.models import Deleted, SearchEntryOut, SearchEntryPage
from threadloom.api.use_cases import knowledge as use_cases

from .common import ANY, limits, manager, new_router, responses

router = new_router()
KEY = Annotated[str, Query(min_length=1, description="The entry's key, as the model gave it to set_context")]


@router.get(
    "/knowledge/<label>",
    summary="The entries of a searchable block, shared by the tenant's sessions, in key order; paged",
    tags=["knowledge"],
    operation_id="listKnowledgeEntries",
    responses=responses(200, SearchEntryPage, "One page of entries", *ANY, 404),
)
def entries(
    label: str,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> SearchEntryPage:
    return use_cases.search_entries(manager(router), label, limits(), limit=limit, cursor=cursor)


@router.get(
    "/knowledge/<label>/entry",
    summary="One entry of a searchable block",
    tags=["knowledge"],
    operation_id="getKnowledgeEntry",
    responses=responses(200, SearchEntryOut, "The entry", *ANY, 404),
)
def entry(label: str, key: KEY) -> SearchEntryOut:
    return use_cases.search_entry(manager(router), label, key)


@router.delete(
    "/knowledge/<label>/entry",
    summary="Remove an entry and its search terms (prompts already frozen keep their count until refreshed)",
    tags=["knowledge"],
    operation_id="deleteKnowledgeEntry",
    responses=responses(200, Deleted, "Removed", *ANY, 404),
)
def delete_entry(label: str, key: KEY) -> Deleted:
    return use_cases.delete_search_entry(manager(router), label, key)
