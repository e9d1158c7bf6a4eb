"""Data lifecycle: export a session, import export files, erase a data subject (admin scope)."""

from __future__ import annotations

import io
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from threadloom.api import data_lifecycle
from threadloom.api.models import ErasureReceiptOut, ErrorOut, ExportLink, ImportFromS3, ImportOut, SubjectErase
from threadloom.api.runtime import get_runtime
from threadloom.api.use_cases.common import require_session

from .common import (
    ANY,
    BODY,
    ERROR_DESCRIPTIONS,
    SESSION,
    json_response,
    manager,
    new_router,
    responses,
    subject,
    tenant,
)

router = new_router()
JSONL = "application/x-ndjson"


@router.get(
    "/sessions/<sessionId>/export",
    summary="Export a session (JSONL, docs/export-format.md); large ones answer 303 with a presigned S3 URL",
    tags=["lifecycle"],
    operation_id="exportSession",
    responses={
        **responses(303, ExportLink, "Too large for a response: download it from the presigned URL", *SESSION),
        200: {"description": "The export file", "content": {JSONL: {"schema": {"type": "string"}}}},
    },
)
def export_session(
    sessionId: str,
    includeSharedBlocks: Annotated[
        bool,
        Query(description="Also export the session's subject blocks and the tenant blocks, with their history"),
    ] = False,
    includeKnowledge: Annotated[
        bool,
        Query(description="Also export the tenant's knowledge entries (its search blocks')"),
    ] = False,
) -> Response[Any]:
    require_session(manager(router), sessionId)
    result = data_lifecycle.export_session(
        get_runtime(),
        tenant(router),
        sessionId,
        include_shared_blocks=includeSharedBlocks,
        include_knowledge=includeKnowledge,
    )
    if isinstance(result, ExportLink):
        response = json_response(303, result)
        response.headers["Location"] = result.url
        return response
    filename = f"threadloom-{sessionId}.jsonl"
    return Response(
        status_code=200,
        content_type=JSONL,
        body=result.decode("utf-8"),
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.post(
    "/sessions/import",
    summary="Import an export file sent as the request body (all or nothing, idempotent; foreign ids renamed)",
    tags=["lifecycle"],
    operation_id="importSessions",
    openapi_extensions={"x-request-media-type": JSONL},
    responses={
        **responses(200, ImportOut, "What was imported and what was already there", *ANY, 403, 409, *BODY),
        415: {
            "description": f"{ERROR_DESCRIPTIONS[415]} (here: {JSONL})",
            "content": {"application/json": {"model": ErrorOut}},
        },
    },
)
def import_upload() -> ImportOut:
    body = router.current_event.decoded_body or ""
    stream = io.BytesIO(body.encode("utf-8"))
    return data_lifecycle.import_file(get_runtime(), tenant(router), stream, admin=_admin(), acting_for=_acting_for())


@router.post(
    "/sessions/import-from-s3",
    summary="Import an export file from the export bucket (imports/<tenant>/… or exports/<tenant>/…)",
    tags=["lifecycle"],
    operation_id="importSessionsFromS3",
    responses=responses(200, ImportOut, "What was imported and what was already there", *ANY, 403, 404, 409, *BODY),
)
def import_from_s3(body: Annotated[ImportFromS3, Body()]) -> ImportOut:
    return data_lifecycle.import_from_bucket(
        get_runtime(), tenant(router), body.key, admin=_admin(), acting_for=_acting_for()
    )


def _acting_for() -> tuple[str | None] | None:
    """The caller's subject when the file may hold no other (as ``POST /sessions`` decides); None: any subject."""
    authorizer = router.current_event.request_context.authorizer
    runtime = get_runtime()
    if not runtime.profile.has_subject_blocks or data_lifecycle.has_scope(
        authorizer.jwt_scopes, authorizer.jwt_claim, runtime.settings.act_for_users_scope
    ):
        return None
    return (subject(router),)


def _admin() -> bool:
    """Whether the caller's token has the admin scope (needed to bring in a session on legal hold)."""
    authorizer = router.current_event.request_context.authorizer
    return data_lifecycle.has_scope(authorizer.jwt_scopes, authorizer.jwt_claim, get_runtime().settings.admin_scope)


@router.post(
    "/subjects/<subjectId>/erase",
    summary="Erase every session of a data subject in this tenant, with forks and continuations (admin scope)",
    tags=["lifecycle"],
    operation_id="eraseSubject",
    responses=responses(200, ErasureReceiptOut, "The erasure receipt", *ANY, 403, 404),
)
def erase_subject(subjectId: str) -> ErasureReceiptOut:
    return _erase(subjectId)


@router.post(
    "/subjects/erase",
    summary="Erase a data subject named in the body, for an id a path cannot carry (admin scope)",
    tags=["lifecycle"],
    operation_id="eraseSubjectNamedInBody",
    responses=responses(200, ErasureReceiptOut, "The erasure receipt", *ANY, 403, *BODY),
)
def erase_subject_named_in_body(body: Annotated[SubjectErase, Body()]) -> ErasureReceiptOut:
    return _erase(body.subject_id)


def _erase(subject_id: str) -> ErasureReceiptOut:
    """The scope first (a caller without it learns nothing), then the erasure, audited by the operator's ``sub``."""
    authorizer = router.current_event.request_context.authorizer
    data_lifecycle.require_scope(authorizer.jwt_scopes, authorizer.jwt_claim, get_runtime().settings.admin_scope)
    operator = (authorizer.jwt_claim or {}).get("sub")
    return data_lifecycle.erase_subject(
        get_runtime(), tenant(router), subject_id, operator=operator if isinstance(operator, str) else None
    )
