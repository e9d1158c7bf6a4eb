"""Context blocks, the frozen system prompt, and the model tools (specs and execution)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from threadloom.api import service
from threadloom.api.models import (
    ContextBlockList,
    ContextBlockOut,
    ContextWindowOut,
    ContextWrite,
    SystemPromptOut,
    ToolCallIn,
    ToolCallOut,
    ToolFormat,
    ToolsOut,
)
from threadloom.api.runtime import get_runtime

from threadloom_api_routes.common import ERROR_RESPONSES, limits, manager, new_router

router = new_router()


@router.get("/sessions/<sessionId>/context", summary="All context blocks", tags=["context"])
def blocks(sessionId: str) -> ContextBlockList:
    return service.context_blocks(manager(router), sessionId)


@router.get("/sessions/<sessionId>/context/<label>", summary="One context block", tags=["context"])
def block(sessionId: str, label: str) -> ContextBlockOut:
    return service.context_block(manager(router), sessionId, label)


@router.put(
    "/sessions/<sessionId>/context/<label>",
    summary="Replace or append to a writable block",
    tags=["context"],
    responses=ERROR_RESPONSES,
)
def write_block(sessionId: str, label: str, body: Annotated[ContextWrite, Body()]) -> ContextBlockOut:
    return service.write_context_block(
        manager(router), sessionId, label, content=body.content, mode=body.mode, limits=limits()
    )


@router.get(
    "/sessions/<sessionId>/context-window",
    summary="Token breakdown (prompt, blocks, history) against the threshold; frozen vs fresh prompt",
    tags=["context"],
    responses=ERROR_RESPONSES,
)
def context_window(sessionId: str) -> ContextWindowOut:
    compaction = get_runtime().profile.compaction
    return service.context_window(manager(router), sessionId, compaction.threshold if compaction.enabled else None)


@router.get("/sessions/<sessionId>/system-prompt", summary="The frozen system prompt", tags=["context"])
def system_prompt(sessionId: str) -> SystemPromptOut:
    return service.system_prompt(manager(router), sessionId)


@router.post("/sessions/<sessionId>/system-prompt/refresh", summary="Re-render the system prompt", tags=["context"])
def refresh_system_prompt(sessionId: str) -> SystemPromptOut:
    return service.system_prompt(manager(router), sessionId, refresh=True)


@router.get("/sessions/<sessionId>/tools", summary="Tool specs in a model vendor's format", tags=["tools"])
def tools(
    sessionId: str,
    fmt: Annotated[ToolFormat, Query(alias="format")] = "json-schema",
) -> ToolsOut:
    return service.tool_specs(manager(router), sessionId, fmt)


@router.post(
    "/sessions/<sessionId>/tools/<toolName>", summary="Execute a tool call", tags=["tools"], responses=ERROR_RESPONSES
)
def call_tool(sessionId: str, toolName: str, body: Annotated[ToolCallIn, Body()]) -> ToolCallOut:
    return service.call_tool(manager(router), sessionId, toolName, body.input)
