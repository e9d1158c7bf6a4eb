"""The MCP tools: the memory an agent manages on its own, and the reference's model tools bound to a session.

Plain Python over a ``Binding``: each call validates its arguments with the REST API's models
(``inputs``), calls the same use case as the HTTP route and answers with the text the model sees.
A refusal (bad arguments, a session of nobody the caller knows, a block that is not there) is a
``ToolRefusal`` whose text becomes the tool result with ``isError``; nothing here reaches another
tenant, since every use case starts from the caller's own manager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from threadloom.api.use_cases import context as context_cases
from threadloom.api.use_cases import history as history_cases
from threadloom.api.use_cases import knowledge as knowledge_cases
from threadloom.api.use_cases import messages as message_cases
from threadloom.api.use_cases import sessions as session_cases
from threadloom.errors import ThreadloomError, ValidationError
from threadloom.mcp.inputs import (
    SESSION_ID_DESCRIPTION,
    AppendMessageIn,
    CreateSessionIn,
    ForgetKnowledgeIn,
    ListKnowledgeIn,
    ListSessionsIn,
    ReadHistoryIn,
    SearchIn,
)
from threadloom.search import query_problem
from threadloom.tools.context_tools import LOAD_CONTEXT, SEARCH_CONTEXT, SET_CONTEXT, UNLOAD_CONTEXT
from threadloom.tools.session_search import SESSION_SEARCH

if TYPE_CHECKING:
    from collections.abc import Callable

    from threadloom.mcp.binding import Binding

SCHEMA_SESSION = "__threadloom_mcp_schema__"
"""A session id never stored: its (empty) blocks give the reference tools' schemas when no session is bound."""
REFERENCE_TOOLS = (SET_CONTEXT, LOAD_CONTEXT, UNLOAD_CONTEXT, SEARCH_CONTEXT)
"""The reference's context tools, bound to one session each call."""
CONTEXT_CHANGES = frozenset({SET_CONTEXT, LOAD_CONTEXT, UNLOAD_CONTEXT})


class ToolRefusal(Exception):
    """A call the model should correct: its text is the tool result, marked ``isError``."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool as listed: name, description and the input JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False


@dataclass(frozen=True)
class ToolOutcome:
    """The text the model sees, and what the call changed (resource URIs) for change notifications."""

    text: str
    is_error: bool = False
    changed: tuple[str, ...] = ()
    sessions_changed: bool = False


@dataclass(frozen=True)
class _MemoryTool:
    spec: ToolSpec
    model: type[BaseModel]
    run: Callable[[Binding, Any], ToolOutcome]


def _json(model: BaseModel) -> str:
    return model.model_dump_json(by_alias=True)


def _session_uri(session_id: str, tail: str = "") -> str:
    from threadloom.mcp.resources import session_uri

    return session_uri(session_id, tail)


def _list_sessions(binding: Binding, args: ListSessionsIn) -> ToolOutcome:
    page = session_cases.list_sessions(binding.manager, binding.limits, limit=args.limit, cursor=args.cursor)
    return ToolOutcome(_json(page))


def _create_session(binding: Binding, args: CreateSessionIn) -> ToolOutcome:
    created = session_cases.create_session(
        binding.manager,
        args.name,
        parent_session_id=args.parent_session_id,
        model=args.model,
        source=args.source,
        subject_id=binding.subject_for_new_session(args.subject_id),
    )
    return ToolOutcome(_json(created), sessions_changed=True)


def _append_message(binding: Binding, args: AppendMessageIn) -> ToolOutcome:
    session_id = binding.session_for(args.session_id)
    out, _ = message_cases.append(binding.manager, session_id, args, binding.limits)
    return ToolOutcome(_json(out), changed=(_session_uri(session_id, "/history"), _session_uri(session_id)))


def _read_history(binding: Binding, args: ReadHistoryIn) -> ToolOutcome:
    session_id = binding.session_for(args.session_id)
    page = history_cases.history(
        binding.manager, session_id, binding.limits, leaf_id=args.leaf_id, limit=args.limit, cursor=args.cursor
    )
    return ToolOutcome(_json(page))


def _search(binding: Binding, args: SearchIn) -> ToolOutcome:
    problem = query_problem(args.query, binding.limits.max_query_chars)
    if problem is not None:
        raise ValidationError(problem)
    if args.session_id is not None:
        found = history_cases.search_session(binding.manager, args.session_id, args.query, args.limit, binding.limits)
    else:
        found = history_cases.search_all(binding.manager, args.query, args.limit, binding.limits)
    return ToolOutcome(_json(found))


def _list_knowledge(binding: Binding, args: ListKnowledgeIn) -> ToolOutcome:
    page = knowledge_cases.search_entries(
        binding.manager, args.label, binding.limits, limit=args.limit, cursor=args.cursor
    )
    return ToolOutcome(_json(page))


def _forget_knowledge(binding: Binding, args: ForgetKnowledgeIn) -> ToolOutcome:
    return ToolOutcome(_json(knowledge_cases.delete_search_entry(binding.manager, args.label, args.key)))


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def _memory_tool(
    name: str, description: str, model: type[BaseModel], run: Callable[[Binding, Any], ToolOutcome], *, read_only: bool
) -> _MemoryTool:
    return _MemoryTool(ToolSpec(name, description, _schema(model), read_only), model, run)


MEMORY_TOOLS: dict[str, _MemoryTool] = {
    tool.spec.name: tool
    for tool in (
        _memory_tool(
            "list_sessions",
            "List your sessions, most recent activity first, one page at a time (nextCursor reads the next).",
            ListSessionsIn,
            _list_sessions,
            read_only=True,
        ),
        _memory_tool(
            "create_session",
            "Start a new session (a conversation) and get its id.",
            CreateSessionIn,
            _create_session,
            read_only=False,
        ),
        _memory_tool(
            "append_message",
            "Store a message in a session: {id, role, parts: [{type: 'text', text}]}; it attaches to the latest one.",
            AppendMessageIn,
            _append_message,
            read_only=False,
        ),
        _memory_tool(
            "read_history",
            "Read a session's conversation from the first message on, one page at a time (nextCursor reads on).",
            ReadHistoryIn,
            _read_history,
            read_only=True,
        ),
        _memory_tool(
            "search",
            "Full-text search of your stored messages: in one session (sessionId) or across all your sessions.",
            SearchIn,
            _search,
            read_only=True,
        ),
        _memory_tool(
            "list_knowledge",
            "List the entries of a searchable block (set_context with a metadata title stored them), in key order,"
            " one page at a time; shared by all your sessions.",
            ListKnowledgeIn,
            _list_knowledge,
            read_only=True,
        ),
        _memory_tool(
            "forget_knowledge",
            "Remove one entry of a searchable block by its key, with its search terms, when it is wrong or must go.",
            ForgetKnowledgeIn,
            _forget_knowledge,
            read_only=False,
        ),
    )
}


def _with_session_argument(schema: dict[str, Any], *, required: bool) -> dict[str, Any]:
    properties = {"sessionId": {"type": "string", "minLength": 1, "description": SESSION_ID_DESCRIPTION}}
    properties.update(schema.get("properties", {}))
    needed = list(schema.get("required", []))
    return {**schema, "properties": properties, "required": ["sessionId", *needed] if required else needed}


def list_tools(binding: Binding) -> list[ToolSpec]:
    """The memory tools, then the reference's tools as the bound session's blocks make them.

    Without a bound session the reference tools are described from the profile's blocks (an
    unstored session's, read only) and take a required ``sessionId``.
    """
    specs = [tool.spec for tool in MEMORY_TOOLS.values()]
    manager = binding.manager
    if binding.session_id is not None and manager.get(binding.session_id) is not None:
        reference = context_cases.session_tools(manager, manager.get_session(binding.session_id))
    else:
        try:
            reference = {**manager.get_session(SCHEMA_SESSION).tools(), **manager.tools()}
        finally:
            manager.forget_session(SCHEMA_SESSION)
    for name, tool in reference.items():
        schema = tool.schema()
        if name != SESSION_SEARCH:
            schema = _with_session_argument(schema, required=binding.session_id is None)
        specs.append(ToolSpec(name, tool.description, schema, read_only=name in (SEARCH_CONTEXT, SESSION_SEARCH)))
    return specs


def call_tool(binding: Binding, name: str, arguments: dict[str, Any] | None) -> ToolOutcome:
    """Run one tool; a ``ThreadloomError`` or bad arguments come back as an ``isError`` outcome."""
    try:
        return _call(binding, name, dict(arguments or {}))
    except ToolRefusal as refusal:
        return ToolOutcome(str(refusal), is_error=True)
    except ThreadloomError as error:
        return ToolOutcome(str(error), is_error=True)


def _call(binding: Binding, name: str, arguments: dict[str, Any]) -> ToolOutcome:
    memory_tool = MEMORY_TOOLS.get(name)
    if memory_tool is not None:
        try:
            validated = memory_tool.model.model_validate(arguments)
        except PydanticValidationError as error:
            raise ToolRefusal(f"Invalid arguments for {name}: {describe(error)}") from None
        return memory_tool.run(binding, validated)
    if name == SESSION_SEARCH:
        output = binding.manager.tools()[SESSION_SEARCH].execute(arguments)
        return ToolOutcome(output, is_error=output.startswith("Error: "))
    if name not in REFERENCE_TOOLS:
        known = ", ".join([*MEMORY_TOOLS, *REFERENCE_TOOLS, SESSION_SEARCH])
        raise ToolRefusal(f"Unknown tool {name!r}; the tools are {known}")
    chosen = arguments.pop("sessionId", None)
    if chosen is not None and (not isinstance(chosen, str) or not chosen):
        raise ToolRefusal('"sessionId" must be a non-empty string')
    session_id = binding.session_for(chosen)
    result = context_cases.call_tool(binding.manager, session_id, name, arguments)
    changed = (_session_uri(session_id, "/context"),) if name in CONTEXT_CHANGES and not result.is_error else ()
    return ToolOutcome(result.output, is_error=result.is_error, changed=changed)


def describe(error: PydanticValidationError) -> str:
    """Pydantic's errors as one line a model can act on: ``message.id: Field required; ...``."""
    parts = []
    for item in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


__all__ = ["MEMORY_TOOLS", "ToolOutcome", "ToolRefusal", "ToolSpec", "call_tool", "describe", "list_tools"]
