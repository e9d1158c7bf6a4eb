"""The one MCP server definition: tools and resources on the ``mcp`` SDK's low-level ``Server``.

The SDK speaks the protocol (initialize, JSON-RPC, capabilities, both transports); the handlers here
only read the request's ``Binding``, run the library in a worker thread (storage calls block) and
shape the answer. Refusals are tool results with ``isError`` (the model reads them); an unknown
resource is a JSON-RPC error; an unexpected failure is logged and answered, never fatal to the server.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

from threadloom.errors import NotFoundError, ThreadloomError
from threadloom.mcp import resources, tools
from threadloom.mcp.binding import current

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.models import InitializationOptions

    from threadloom.mcp.binding import Binding

logger = logging.getLogger(__name__)

NAME = "threadloom"
INSTRUCTIONS = (
    "Threadloom is your long-term memory. Write what you learn about the user to a context block with"
    " set_context; look things up with search (stored messages) or session_search; keep a conversation with"
    " create_session, append_message and read_history."
)
RESOURCE_NOT_FOUND = -32002
"""The MCP specification's JSON-RPC code for a resource that does not exist."""
INTERNAL_FAILURE = "Threadloom could not complete the call; the server log has the details"


async def _list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    specs = await anyio.to_thread.run_sync(tools.list_tools, current())
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                annotations=types.ToolAnnotations(read_only_hint=spec.read_only),
            )
            for spec in specs
        ]
    )


async def _call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    binding = current()
    try:
        outcome = await anyio.to_thread.run_sync(tools.call_tool, binding, params.name, params.arguments)
    except Exception:
        logger.exception("MCP tool %r failed", params.name)
        outcome = tools.ToolOutcome(INTERNAL_FAILURE, is_error=True)
    if binding.notifies and not outcome.is_error:
        await _notify(ctx, binding, outcome)
    return types.CallToolResult(content=[types.TextContent(type="text", text=outcome.text)], is_error=outcome.is_error)


async def _notify(ctx: ServerRequestContext[Any], binding: Binding, outcome: tools.ToolOutcome) -> None:
    """Tell a client with an open channel what the call changed: its subscribed resources, the list."""
    changed = set(outcome.changed)
    if outcome.sessions_changed or outcome.changed:
        changed.add(resources.SESSIONS_URI)  # a new session, or another order by latest activity
    for uri in sorted(changed & binding.subscriptions):
        await ctx.session.send_resource_updated(uri)
    if outcome.sessions_changed:
        await ctx.session.send_resource_list_changed()


async def _list_resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri=uri, name=name, mime_type=resources.JSON) for uri, name in resources.listed(current())
        ]
    )


async def _list_templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                uri_template=spec.uri_template, name=spec.name, description=spec.description, mime_type=resources.JSON
            )
            for spec in resources.TEMPLATES
        ]
    )


async def _read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    try:
        text = await anyio.to_thread.run_sync(resources.read, current(), uri)
    except NotFoundError as error:
        raise MCPError(code=RESOURCE_NOT_FOUND, message=str(error), data={"uri": uri}) from None
    except ThreadloomError as error:
        raise MCPError(code=types.INVALID_PARAMS, message=str(error), data={"uri": uri}) from None
    except Exception:
        logger.exception("MCP resource %r failed", uri)
        raise MCPError(code=types.INTERNAL_ERROR, message=INTERNAL_FAILURE, data={"uri": uri}) from None
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=resources.JSON)])


async def _subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
    current().subscriptions.add(str(params.uri))
    return types.EmptyResult()


async def _unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    current().subscriptions.discard(str(params.uri))
    return types.EmptyResult()


@functools.cache
def build_server() -> Server[Any]:
    """The server (built once per process: it holds no caller state, the ``Binding`` carries that)."""
    return Server(
        NAME,
        version=_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        on_list_resources=_list_resources,
        on_list_resource_templates=_list_templates,
        on_read_resource=_read_resource,
        on_subscribe_resource=_subscribe,
        on_unsubscribe_resource=_unsubscribe,
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("threadloom")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown"


def initialization_options(server: Server[Any]) -> InitializationOptions:
    """What the server announces: resources that change (stdio tells the client), tools fixed per session."""
    return server.create_initialization_options(NotificationOptions(resources_changed=True))


__all__ = ["INSTRUCTIONS", "NAME", "build_server", "initialization_options"]
