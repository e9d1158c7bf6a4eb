"""Reflection: reflect now (202 when queued), list the proposals, approve or reject one (docs/reflection.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from threadloom.api.models import ProposalList, ProposalOut, ReflectIn, ReflectOut
from threadloom.api.runtime import get_runtime
from threadloom.api.use_cases import reflection as use_cases

from .common import BODY, CHECKED, SESSION, json_response, limits, manager, new_router, responses

router = new_router()

ProposalStatusQuery = Literal["pending", "applying", "applied", "rejected", "failed"]


@router.post(
    "/sessions/<sessionId>/reflect",
    summary="Reflect the conversation into memory; 202 when handed to the queue",
    tags=["reflection"],
    operation_id="reflectSession",
    responses=responses(
        200,
        ReflectOut,
        "Reflected now (no queue): the outcome and this run's proposals",
        *SESSION,
        *BODY,
        409,
        also={202: (ReflectOut, "Queued; its proposals appear at /sessions/{sessionId}/proposals")},
    ),
)
def reflect(sessionId: str, body: Annotated[ReflectIn | None, Body()] = None) -> Response[Any]:
    runtime = get_runtime()
    leaf_id = body.leaf_id if body is not None else None
    out, queued = use_cases.reflect(
        manager(router), sessionId, leaf_id, runtime.jobs.reflection_worker(), runtime.queue
    )
    return json_response(202 if queued else 200, out)


@router.get(
    "/sessions/<sessionId>/proposals",
    summary="Memory edits reflection proposed, oldest first (filter by status)",
    tags=["reflection"],
    operation_id="listProposals",
    responses=responses(200, ProposalList, "One page of the session's proposals", *CHECKED),
)
def proposals(
    sessionId: str,
    status: Annotated[ProposalStatusQuery | None, Query()] = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query()] = None,
) -> ProposalList:
    return use_cases.proposals(manager(router), sessionId, limits(), status=status, limit=limit, cursor=cursor)


@router.post(
    "/sessions/<sessionId>/proposals/<proposalId>/approve",
    summary="Apply a pending proposal to its block",
    tags=["reflection"],
    operation_id="approveProposal",
    responses=responses(200, ProposalOut, "The proposal, applied", *SESSION, 409),
)
def approve(sessionId: str, proposalId: str) -> ProposalOut:
    worker = get_runtime().jobs.reflection_worker()
    return use_cases.approve(manager(router), sessionId, proposalId, worker)


@router.post(
    "/sessions/<sessionId>/proposals/<proposalId>/reject",
    summary="Reject a pending proposal; its block is not touched",
    tags=["reflection"],
    operation_id="rejectProposal",
    responses=responses(200, ProposalOut, "The proposal, rejected", *SESSION, 409),
)
def reject(sessionId: str, proposalId: str) -> ProposalOut:
    return use_cases.reject(manager(router), sessionId, proposalId)
