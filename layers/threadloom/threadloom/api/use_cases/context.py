"""Use cases of a session's context: blocks, the frozen prompt, the context window and the model tools.

Plain Python over a ``SessionManager``, so each is tested without events. Every session-level
call first checks that the session belongs to the manager's namespace: another tenant's
session is simply not found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from threadloom import correlation
from threadloom.api.models import (
    BlockUsage,
    ContextBlockList,
    ContextBlockOut,
    ContextWindowOut,
    SystemPromptOut,
    ToolCallOut,
    ToolsOut,
)
from threadloom.core.prompt import render_prompt
from threadloom.errors import NotFoundError, ValidationError
from threadloom.records import BlockChange, ContextBlock
from threadloom.storage.checked_reads import settle_waiting_check
from threadloom.tokens import estimate_message_tokens, estimate_string_tokens
from threadloom.tools.base import is_error_result
from threadloom.tools.formats import to_anthropic_tools, to_bedrock_tool_config, to_openai_tools

if TYPE_CHECKING:
    from threadloom.api.models import ToolFormat
    from threadloom.core.manager import SessionManager
    from threadloom.core.session import Session
    from threadloom.limits import Limits
    from threadloom.tools.base import Tool


CONTEXT_WRITING_TOOLS = frozenset({"set_context", "load_context", "unload_context"})
"""Model tools whose call may change the session's context, which live viewers are told about."""


def http_change() -> BlockChange:
    """The provenance of a change made by this HTTP request."""
    return BlockChange(source="http", request_id=correlation.current())


def current_blocks(session: Session) -> list[ContextBlock]:
    """The blocks as stored now: writable ones are re-read with their version (another session, or another
    process, may share them; a warm process holds what it read first)."""
    return [
        (session.read_context_block(block.label) or block) if block.writable else block
        for block in session.get_context_blocks()
    ]


def context_blocks(manager: SessionManager, session_id: str) -> ContextBlockList:
    with manager.checked_session(session_id) as session:
        return ContextBlockList(blocks=[ContextBlockOut.of(block) for block in current_blocks(session)])


def context_block(manager: SessionManager, session_id: str, label: str) -> ContextBlockOut:
    with manager.checked_session(session_id) as session:
        block = session.get_context_block(label)
        if block is None:
            raise NotFoundError(f'Block "{label}" not found')
        return ContextBlockOut.of((session.read_context_block(label) or block) if block.writable else block)


def write_context_block(
    manager: SessionManager,
    session_id: str,
    label: str,
    *,
    content: str,
    mode: str,
    limits: Limits,
    based_on_version: int | None = None,
) -> ContextBlockOut:
    """Append (merged with what is stored) or replace (refused with 409 when ``based_on_version`` is stale).

    The tenant's check goes with the append's read of what is stored, or alone ahead of a replacement.
    """
    with manager.checked_session(session_id) as session:
        block = session.get_context_block(label)
        if block is None:
            raise NotFoundError(f'Block "{label}" not found')
        if block.is_skill:  # a skill document is written to S3 (or a folder), which no statement gates
            settle_waiting_check()
        if mode == "append":
            if based_on_version is not None:
                raise ValidationError("basedOnVersion is for replacements: an append is merged with what is stored")
            return ContextBlockOut.of(session.append_context_block(label, content, change=http_change()))
        written = session.replace_context_block(label, content, based_on_version=based_on_version, change=http_change())
        return ContextBlockOut.of(written)


def context_window(manager: SessionManager, session_id: str, threshold: int | None) -> ContextWindowOut:
    """The breakdown behind the auto-compaction estimate, and the frozen prompt beside a fresh render.

    Reads only: nothing is frozen or refreshed here, so looking never changes what the model sees.
    """
    with manager.checked_session(session_id) as session:
        blocks = current_blocks(session)
        store = session.blocks.prompt_store
        frozen = store.get() if store is not None else None
        prompt_tokens = estimate_string_tokens(session.blocks.system_prompt_for_estimate())
        incremental = getattr(session.storage, "get_token_estimate", None)
        history_tokens = int(incremental()) if callable(incremental) else estimate_message_tokens(session.get_history())
        history_messages = session.get_path_length()
        loaded_skills = sorted(session.get_loaded_skill_keys())
    return ContextWindowOut(
        frozen_prompt=frozen,
        fresh_prompt=render_prompt(blocks),
        system_prompt_tokens=prompt_tokens,
        blocks=[BlockUsage(label=block.label, tokens=block.tokens, max_tokens=block.max_tokens) for block in blocks],
        history_tokens=history_tokens,
        history_messages=history_messages,
        total_tokens=prompt_tokens + history_tokens,
        threshold=threshold,
        loaded_skills=loaded_skills,
    )


def system_prompt(manager: SessionManager, session_id: str, *, refresh: bool = False) -> SystemPromptOut:
    """Every turn of an agent asks for it: a prompt already frozen is one read, the tenant's check joined to it."""
    if refresh:  # the check (and the subject's) goes with the blocks' read: no lookup ahead of it
        with manager.checked_session(session_id) as session:
            return SystemPromptOut(system_prompt=session.refresh_system_prompt())
    stored = manager.get_frozen_system_prompt(session_id)  # the session was checked here, found or not
    if stored is not None:
        return SystemPromptOut(system_prompt=stored)
    # Checked again with the freeze's first read, at no round trip's cost: a session created again for
    # another subject since this process wired it must not be frozen with the first subject's blocks.
    with manager.checked_session(session_id) as session:
        return SystemPromptOut(system_prompt=session.freeze_system_prompt())


def session_tools(manager: SessionManager, session: Session) -> dict[str, Tool]:
    """The session's context tools plus the manager's ``session_search``."""
    return {**session.tools(), **manager.tools()}


def tool_specs(manager: SessionManager, session_id: str, fmt: ToolFormat) -> ToolsOut:
    with manager.checked_session(session_id) as session:
        tools = session_tools(manager, session)
    specs: Any
    if fmt == "bedrock":
        specs = to_bedrock_tool_config(tools)
    elif fmt == "openai":
        specs = to_openai_tools(tools)
    elif fmt == "anthropic":
        specs = to_anthropic_tools(tools)
    else:
        specs = [
            {"name": tool.name, "description": tool.description, "inputSchema": tool.schema()}
            for tool in tools.values()
        ]
    return ToolsOut(format=fmt, tools=specs)


def _writes_outside_the_database(session: Session, tool_name: str, arguments: dict[str, Any]) -> bool:
    """A skill document goes to S3 (or a folder), which no statement gates: the tenant's check must run first."""
    label = arguments.get("label")
    block = session.get_context_block(label) if tool_name == "set_context" and isinstance(label, str) else None
    return block is not None and block.is_skill


def call_tool(manager: SessionManager, session_id: str, tool_name: str, arguments: dict[str, Any]) -> ToolCallOut:
    """A model's tool call, the tenant's check sent with its first read (a refusal the tool catches still 404s)."""
    with manager.checked_session(session_id) as session:
        tool = session_tools(manager, session).get(tool_name)
        if tool is None:
            raise NotFoundError(f"Tool {tool_name!r} is not available in session {session_id!r}")
        if _writes_outside_the_database(session, tool_name, arguments):
            settle_waiting_check()
        output = tool.execute(arguments)
    if tool_name in CONTEXT_WRITING_TOOLS:
        session.announce_change("context")
    return ToolCallOut(output=output, is_error=is_error_result(output))
