"""Sessions: create, list, read, rename, delete, fork and usage."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from threadloom.api import data_lifecycle
from threadloom.api.models import (
    Deleted,
    ForkIn,
    SessionCreate,
    SessionOpen,
    SessionOut,
    SessionPage,
    SessionRename,
    UsageIn,
)
from threadloom.api.runtime import get_runtime
from threadloom.api.use_cases import sessions as use_cases

from .common import (
    ANY,
    BODY,
    SESSION,
    idempotent_write,
    json_response,
    limits,
    manager,
    new_router,
    responses,
    subject,
    tenant,
)

router = new_router()
IdempotencyKey = Annotated[str | None, Header(alias="idempotency-key", description="Replays the first outcome")]


@router.post(
    "/sessions",
    summary="Create a session",
    tags=["sessions"],
    operation_id="createSession",
    responses=responses(201, SessionOut, "The new session", *ANY, *BODY, 404, 409),
)
def create_session(body: Annotated[SessionCreate, Body()], idempotency_key: IdempotencyKey = None) -> Response[Any]:
    caller = subject(router)
    if body.subject_id is not None and body.subject_id != caller and get_runtime().profile.has_subject_blocks:
        # The session would read and write that user's shared memory: only a service token acting for users may.
        authorizer = router.current_event.request_context.authorizer
        data_lifecycle.require_scope(
            authorizer.jwt_scopes, authorizer.jwt_claim, get_runtime().settings.act_for_users_scope
        )

    def run() -> tuple[int, SessionOut]:
        created = use_cases.create_session(
            manager(router),
            body.name,
            parent_session_id=body.parent_session_id,
            model=body.model,
            source=body.source,
            subject_id=body.subject_id or caller,
        )
        return 201, created

    return idempotent_write(router, idempotency_key, body.model_dump(mode="json"), run)


@router.post(
    "/sessions/open",
    summary="Get or create the session named by your own key (201 when created, 200 when it existed)",
    tags=["sessions"],
    operation_id="openSession",
    responses=responses(
        201, SessionOut, "The session, created now", *ANY, *BODY, also={200: (SessionOut, "The session, which existed")}
    ),
)
def open_session(body: Annotated[SessionOpen, Body()]) -> Response[Any]:
    out, created = use_cases.open_session(
        manager(router), body.key, name=body.name, model=body.model, source=body.source, subject_id=subject(router)
    )
    return json_response(201 if created else 200, out)


@router.get(
    "/sessions",
    summary="List sessions, most recent activity first",
    tags=["sessions"],
    operation_id="listSessions",
    responses=responses(200, SessionPage, "One page of sessions", *ANY),
)
def list_sessions(
    limit: Annotated[int | None, Query(ge=1)] = None, cursor: Annotated[str | None, Query()] = None
) -> SessionPage:
    return use_cases.list_sessions(manager(router), limits(), limit=limit, cursor=cursor)


@router.get(
    "/sessions/<sessionId>",
    summary="Session info",
    tags=["sessions"],
    operation_id="getSession",
    responses=responses(200, SessionOut, "The session", *SESSION),
)
def get_session(sessionId: str) -> SessionOut:
    return use_cases.get_session(manager(router), sessionId)


@router.patch(
    "/sessions/<sessionId>",
    summary="Rename a session or set its legal hold (the hold needs the admin scope)",
    tags=["sessions"],
    operation_id="renameSession",
    responses=responses(200, SessionOut, "The updated session", *SESSION, *BODY, 403),
)
def rename_session(sessionId: str, body: Annotated[SessionRename, Body()]) -> SessionOut:
    if body.legal_hold is not None:
        authorizer = router.current_event.request_context.authorizer
        data_lifecycle.require_scope(authorizer.jwt_scopes, authorizer.jwt_claim, get_runtime().settings.admin_scope)
    return use_cases.update_session(manager(router), sessionId, name=body.name, legal_hold=body.legal_hold)


@router.delete(
    "/sessions/<sessionId>",
    summary="Delete a session and everything derived from it",
    tags=["sessions"],
    operation_id="deleteSession",
    responses=responses(200, Deleted, "Deleted", *SESSION, 409),
)
def delete_session(sessionId: str) -> Deleted:
    data_lifecycle.delete_session(get_runtime(), tenant(router), sessionId)
    return Deleted()


@router.post(
    "/sessions/<sessionId>/fork",
    summary="Fork at a message",
    tags=["sessions"],
    operation_id="forkSession",
    responses=responses(201, SessionOut, "The new session holding the copied history", *SESSION, *BODY, 409),
)
def fork(sessionId: str, body: Annotated[ForkIn, Body()], idempotency_key: IdempotencyKey = None) -> Response[Any]:
    def run() -> tuple[int, SessionOut]:
        return 201, use_cases.fork(manager(router), sessionId, body.at_message_id, body.name)

    return idempotent_write(router, idempotency_key, body.model_dump(mode="json"), run)


@router.post(
    "/sessions/<sessionId>/usage",
    summary="Add token usage and cost (each increment and each total stays finite and bounded)",
    tags=["sessions"],
    operation_id="addUsage",
    responses=responses(200, SessionOut, "The session with its new totals", *SESSION, *BODY),
)
def add_usage(sessionId: str, body: Annotated[UsageIn, Body()]) -> Response[Any]:
    out = use_cases.add_usage(
        manager(router), sessionId, input_tokens=body.input_tokens, output_tokens=body.output_tokens, cost=body.cost
    )
    return json_response(200, out)
