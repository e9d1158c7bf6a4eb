"""Messages: append (one or a chain), read, update, delete, branches, the latest leaf and clear."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query
from aws_lambda_powertools.metrics import MetricUnit

from threadloom.api.models import AppendIn, AppendOut, BranchPage, Deleted, LeafOut, MessageOut, MessageUpdate
from threadloom.api.observability import metrics
from threadloom.api.use_cases import messages as use_cases

from .common import BODY, CHECKED, SESSION, idempotent_write, limits, manager, new_router, responses

router = new_router()
IdempotencyKey = Annotated[str | None, Header(alias="idempotency-key", description="Replays the first outcome")]
IfMatch = Annotated[str | None, Header(alias="if-match", description="Expected latest leaf id (like expectedLeafId)")]


@router.post(
    "/sessions/<sessionId>/messages",
    summary="Append a message (201; 200 when its id was already stored) or a chain of messages",
    tags=["messages"],
    operation_id="appendMessages",
    responses=responses(
        201,
        AppendOut,
        "Stored; a chain reports where its first message attached",
        *SESSION,
        *BODY,
        409,
        also={200: (AppendOut, "Every id was already stored: nothing changed")},
    ),
)
def append(
    sessionId: str,
    body: Annotated[AppendIn, Body()],
    idempotency_key: IdempotencyKey = None,
    if_match: IfMatch = None,
) -> Response[Any]:
    if if_match and body.expected_leaf_id is None:
        body = body.model_copy(update={"expected_leaf_id": if_match.strip('"')})

    def run() -> tuple[int, AppendOut]:
        out, inserted = use_cases.append(manager(router), sessionId, body, limits())
        metrics.add_metric(name="MessagesAppended", unit=MetricUnit.Count, value=len(out.ids or [1]) if inserted else 0)
        return (201 if inserted else 200), out

    return idempotent_write(router, idempotency_key, body.model_dump(mode="json", exclude_unset=True), run)


@router.get(
    "/sessions/<sessionId>/messages/<messageId>",
    summary="Read a message",
    tags=["messages"],
    operation_id="getMessage",
    responses=responses(200, MessageOut, "The stored message", *SESSION),
)
def get_message(sessionId: str, messageId: str) -> MessageOut:
    return use_cases.get_message(manager(router), sessionId, messageId)


@router.put(
    "/sessions/<sessionId>/messages/<messageId>",
    summary="Replace a message",
    tags=["messages"],
    operation_id="updateMessage",
    responses=responses(200, MessageOut, "The message as stored now", *CHECKED, *BODY),
)
def update_message(sessionId: str, messageId: str, body: Annotated[MessageUpdate, Body()]) -> MessageOut:
    return use_cases.update_message(manager(router), sessionId, messageId, body.message.as_message(), limits())


@router.delete(
    "/sessions/<sessionId>/messages/<messageId>",
    summary="Delete a message (its children are re-attached to its parent)",
    tags=["messages"],
    operation_id="deleteMessage",
    responses=responses(200, Deleted, "Deleted", *CHECKED),
)
def delete_message(sessionId: str, messageId: str) -> Deleted:
    use_cases.delete_message(manager(router), sessionId, messageId)
    return Deleted()


@router.get(
    "/sessions/<sessionId>/messages/<messageId>/branches",
    summary="Children of a message, oldest first, paginated",
    tags=["messages"],
    operation_id="listBranches",
    responses=responses(200, BranchPage, "One page of the message's children", *CHECKED),
)
def branches(
    sessionId: str,
    messageId: str,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> BranchPage:
    return use_cases.branches(manager(router), sessionId, messageId, limits(), limit=limit, cursor=cursor)


@router.get(
    "/sessions/<sessionId>/leaf",
    summary="The latest leaf",
    tags=["messages"],
    operation_id="getLeaf",
    responses=responses(200, LeafOut, "The latest leaf (null in an empty session)", *SESSION),
)
def leaf(sessionId: str) -> LeafOut:
    return use_cases.leaf(manager(router), sessionId)


@router.post(
    "/sessions/<sessionId>/clear",
    summary="Delete every message",
    tags=["messages"],
    operation_id="clearMessages",
    responses=responses(200, Deleted, "Cleared", *CHECKED),
)
def clear(sessionId: str) -> Deleted:
    use_cases.clear(manager(router), sessionId)
    return Deleted()
