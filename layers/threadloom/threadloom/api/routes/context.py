"""Context blocks, the frozen system prompt, and the model tools (specs and execution)."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body, Query

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
from threadloom.api.use_cases import context as use_cases

from .common import BODY, CHECKED, SESSION, limits, manager, new_router, responses

router = new_router()


@router.get(
    "/sessions/<sessionId>/context",
    summary="All context blocks",
    tags=["context"],
    operation_id="listContextBlocks",
    responses=responses(200, ContextBlockList, "The session's blocks", *CHECKED),
)
def blocks(sessionId: str) -> ContextBlockList:
    return use_cases.context_blocks(manager(router), sessionId)


@router.get(
    "/sessions/<sessionId>/context/<label>",
    summary="One context block",
    tags=["context"],
    operation_id="getContextBlock",
    responses=responses(200, ContextBlockOut, "The block", *CHECKED),
)
def block(sessionId: str, label: str) -> ContextBlockOut:
    return use_cases.context_block(manager(router), sessionId, label)


@router.put(
    "/sessions/<sessionId>/context/<label>",
    summary="Replace or append to a writable block",
    tags=["context"],
    operation_id="writeContextBlock",
    responses=responses(200, ContextBlockOut, "The block as written", *SESSION, *BODY, 409),
)
def write_block(sessionId: str, label: str, body: Annotated[ContextWrite, Body()]) -> ContextBlockOut:
    return use_cases.write_context_block(
        manager(router),
        sessionId,
        label,
        content=body.content,
        mode=body.mode,
        limits=limits(),
        based_on_version=body.based_on_version,
    )


@router.get(
    "/sessions/<sessionId>/context-window",
    summary="Token breakdown (prompt, blocks, history) against the threshold; frozen vs fresh prompt",
    tags=["context"],
    operation_id="getContextWindow",
    responses=responses(200, ContextWindowOut, "The breakdown", *CHECKED),
)
def context_window(sessionId: str) -> ContextWindowOut:
    compaction = get_runtime().profile.compaction
    return use_cases.context_window(manager(router), sessionId, compaction.threshold if compaction.enabled else None)


@router.get(
    "/sessions/<sessionId>/system-prompt",
    summary="The frozen system prompt",
    tags=["context"],
    operation_id="getSystemPrompt",
    responses=responses(200, SystemPromptOut, "The prompt", *CHECKED),
)
def system_prompt(sessionId: str) -> SystemPromptOut:
    return use_cases.system_prompt(manager(router), sessionId)


@router.post(
    "/sessions/<sessionId>/system-prompt/refresh",
    summary="Re-render the system prompt",
    tags=["context"],
    operation_id="refreshSystemPrompt",
    responses=responses(200, SystemPromptOut, "The re-rendered prompt", *SESSION),
)
def refresh_system_prompt(sessionId: str) -> SystemPromptOut:
    return use_cases.system_prompt(manager(router), sessionId, refresh=True)


@router.get(
    "/sessions/<sessionId>/tools",
    summary="Tool specs in a model vendor's format",
    tags=["tools"],
    operation_id="listTools",
    responses=responses(200, ToolsOut, "The session's tools", *CHECKED),
)
def tools(
    sessionId: str,
    fmt: Annotated[ToolFormat, Query(alias="format")] = "json-schema",
) -> ToolsOut:
    return use_cases.tool_specs(manager(router), sessionId, fmt)


@router.post(
    "/sessions/<sessionId>/tools/<toolName>",
    summary="Execute a tool call; a refusal the model should see is 200 with isError true",
    tags=["tools"],
    operation_id="callTool",
    responses=responses(200, ToolCallOut, "The tool result the model sees", *CHECKED, *BODY),
)
def call_tool(sessionId: str, toolName: str, body: Annotated[ToolCallIn, Body()]) -> ToolCallOut:
    return use_cases.call_tool(manager(router), sessionId, toolName, body.input)
