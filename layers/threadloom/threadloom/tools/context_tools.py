"""The tools generated from a session's context blocks: set, load, unload and search context.

Which tools exist, their label enums and the dynamic parts of their descriptions
are fixed when the tools are built; lookups at call time use the live blocks.
Result strings are the reference's, byte for byte, because models and tests key on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from threadloom.entry_keys import context_entry_key
from threadloom.errors import StaleVersionError, ValidationError
from threadloom.tokens import usage_percent
from threadloom.tools.base import (
    Tool,
    error_result,
    invalid_argument,
    object_schema,
    string_arg,
    string_property,
)

if TYPE_CHECKING:
    from threadloom.records import ContextBlock


class ContextBlocks(Protocol):
    """What the context tools need of a session's blocks (``core.context.ContextBlocks`` is one).

    A protocol, so ``tools`` sits below ``core`` and never imports it.
    """

    def ensure_loaded(self) -> None: ...
    def get_block(self, label: str) -> ContextBlock | None: ...
    def get_blocks(self) -> list[ContextBlock]: ...
    def set_block(self, label: str, content: str) -> ContextBlock: ...
    def append_to_block(self, label: str, content: str) -> ContextBlock: ...
    def set_skill(self, label: str, key: str, content: str, description: str | None = None) -> None: ...
    def set_search_entry(self, label: str, key: str, content: str) -> None: ...
    def load_skill(self, label: str, key: str) -> str | None: ...
    def unload_skill(self, label: str, key: str) -> bool: ...
    def loaded_skill_ids(self) -> list[str]: ...
    def search_context(self, label: str, query: str) -> str | None: ...


SET_CONTEXT = "set_context"
LOAD_CONTEXT = "load_context"
UNLOAD_CONTEXT = "unload_context"
SEARCH_CONTEXT = "search_context"


def _quoted(labels: list[str]) -> str:
    return ", ".join(f'"{label}"' for label in labels)


def _kind(block: ContextBlock) -> str:
    # A block that is both loadable and searchable is described (and written) as a skill.
    if block.is_skill:
        return "skill collection, keyed entries"
    if block.is_searchable:
        return "searchable, keyed entries"
    if block.scope == "subject":
        return "writable, shared by every conversation with this user"
    if block.scope == "tenant":
        return "writable, shared by every conversation of this tenant"
    return "writable"


def _is_keyed(block: ContextBlock) -> bool:
    return block.is_skill or block.is_searchable


def format_usage(block: ContextBlock) -> str:
    """How full a block is after a write: a percentage when it has a (non-zero) budget."""
    if block.max_tokens:
        pct = usage_percent(block.tokens, block.max_tokens)
        return f"{pct}% ({block.tokens}/{block.max_tokens} tokens)"
    return f"{block.tokens} tokens"


def stale_block_message(label: str, stale: StaleVersionError) -> str:
    """What the model is told when its replacement was based on an old version: re-read, then write again."""
    return (
        f'block "{label}" was changed by another conversation or writer since you read it, so your replacement '
        f"was not saved (the block is now at version {stale.current_version}). Re-read its current content "
        f"below, then write again with your change merged into it.\n--- current content of {label} ---\n"
        f"{stale.current_content}"
    )


def _entry_metadata(value: Any) -> tuple[str | None, str | None]:
    """``(title, description)`` from the optional ``metadata`` argument, checked for shape."""
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        raise ValidationError('"metadata" must be an object')
    title = value.get("title")
    description = value.get("description")
    if title is not None and not isinstance(title, str):
        raise ValidationError('"metadata.title" must be a string')
    if description is not None and not isinstance(description, str):
        raise ValidationError('"metadata.description" must be a string')
    return title, description


def _set_context_tool(blocks: ContextBlocks, writable: list[ContextBlock]) -> Tool:
    keyed_labels = [block.label for block in writable if _is_keyed(block)]
    lines = ["Write to a context block. Available blocks:"]
    lines += [f'- "{block.label}" ({_kind(block)}): {block.description or "no description"}' for block in writable]
    description = "\n".join(lines) + "\n\nWhat you write is saved durably and is still there in later sessions."
    properties: dict[str, Any] = {
        "label": string_property("Block label to write to", [block.label for block in writable]),
        "content": string_property("The content to write"),
        "action": string_property(
            "replace (the default) overwrites the block; append adds to the end of it", ["replace", "append"]
        ),
    }
    if keyed_labels:
        description += (
            "\n\nFor keyed blocks, pass metadata: { title, description }. The title names the entry,"
            " so writing again with the same title updates it in place; the description is a one-line"
            " summary that helps pick the right entry later. Both are optional."
        )
        properties["metadata"] = {
            "type": "object",
            "properties": {
                "title": string_property("Stable name of the entry; the same title updates the same entry"),
                "description": string_property("One-line summary of the entry, shown in the system prompt"),
            },
            "description": f"Entry metadata, only for the keyed blocks {_quoted(keyed_labels)}",
        }

    def execute(args: dict[str, Any]) -> str:
        label = string_arg(args, "label")
        if label is None:
            return invalid_argument("label")
        content = string_arg(args, "content")
        if content is None:
            return invalid_argument("content")
        block = blocks.get_block(label)
        if block is None:
            return error_result(f'block "{label}" not found')
        try:
            if _is_keyed(block):
                title, entry_description = _entry_metadata(args.get("metadata"))
                key = context_entry_key(title, content)
                if block.is_skill:
                    blocks.set_skill(label, key, content, entry_description if entry_description is not None else title)
                else:
                    blocks.set_search_entry(label, key, content)
                return f'Indexed "{key}" in {label}.'
            if args.get("action") == "append":
                updated = blocks.append_to_block(label, content)
            else:
                updated = blocks.set_block(label, content)
            return f"Written to {label}. Usage: {format_usage(updated)}"
        except StaleVersionError as stale:
            return error_result(stale_block_message(label, stale))
        except Exception as exc:
            return error_result(exc)

    return Tool(SET_CONTEXT, description, object_schema(properties, ["label", "content"]), execute)


def _not_a_skill_block(label: str, skill_labels: list[str]) -> str:
    return error_result(f'"{label}" is not a skill block. Skill blocks: {", ".join(skill_labels)}')


def _load_context_tool(blocks: ContextBlocks, skill_labels: list[str]) -> Tool:
    description = (
        f"Load a document from a skill block by its key. Skill blocks: {_quoted(skill_labels)}."
        " The keys you can load are listed under each skill block in the system prompt."
    )
    schema = object_schema(
        {
            "label": string_property("Skill block label", skill_labels),
            "key": string_property("Skill key to load"),
        },
        ["label", "key"],
    )

    def execute(args: dict[str, Any]) -> str:
        label = string_arg(args, "label")
        if label is None:
            return invalid_argument("label")
        key = string_arg(args, "key")
        if key is None:
            return invalid_argument("key")
        if label not in skill_labels:
            return _not_a_skill_block(label, skill_labels)
        try:
            content = blocks.load_skill(label, key)
        except Exception as exc:
            return error_result(exc)
        return content if content is not None else f"Not found: {key}"

    return Tool(LOAD_CONTEXT, description, schema, execute)


def _unload_context_tool(blocks: ContextBlocks, skill_labels: list[str]) -> Tool:
    loaded = blocks.loaded_skill_ids()
    tail = f" Currently loaded: {', '.join(loaded)}." if loaded else " No skills currently loaded."
    description = "Unload a skill you loaded earlier to free up context space; you can load it again later." + tail
    schema = object_schema(
        {
            "label": string_property("Skill block label", skill_labels),
            "key": string_property("Skill key to unload"),
        },
        ["label", "key"],
    )

    def execute(args: dict[str, Any]) -> str:
        # No blanket error catching here: a failing unload callback must surface to the caller.
        label = string_arg(args, "label")
        if label is None:
            return invalid_argument("label")
        key = string_arg(args, "key")
        if key is None:
            return invalid_argument("key")
        if label not in skill_labels:
            return _not_a_skill_block(label, skill_labels)
        if not blocks.unload_skill(label, key):
            return f'Skill "{key}" is not currently loaded in "{label}".'
        return f'Unloaded "{key}" from {label}. Context reclaimed.'

    return Tool(UNLOAD_CONTEXT, description, schema, execute)


def _search_context_tool(blocks: ContextBlocks, search_labels: list[str]) -> Tool:
    description = (
        f"Search a searchable context block. Only these blocks can be searched: {_quoted(search_labels)};"
        " no other block supports search."
    )
    schema = object_schema(
        {
            "label": string_property("Searchable block label", search_labels),
            "query": string_property("Search query"),
        },
        ["label", "query"],
    )

    def execute(args: dict[str, Any]) -> str:
        label = string_arg(args, "label")
        if label is None:
            return invalid_argument("label")
        query = string_arg(args, "query")
        if query is None:
            return invalid_argument("query")
        if label not in search_labels:
            return error_result(f'"{label}" is not searchable. Searchable blocks: {", ".join(search_labels)}')
        try:
            result = blocks.search_context(label, query)
        except Exception as exc:
            return error_result(exc)
        return result if result is not None else "No results found."

    return Tool(SEARCH_CONTEXT, description, schema, execute)


def build_context_tools(blocks: ContextBlocks) -> dict[str, Tool]:
    """The tools the current blocks call for (loading them first if needed); ``{}`` when none apply."""
    blocks.ensure_loaded()
    current = blocks.get_blocks()
    writable = [block for block in current if block.writable]
    skill_labels = [block.label for block in current if block.is_skill]
    search_labels = [block.label for block in current if block.is_searchable]
    tools: dict[str, Tool] = {}
    if writable:
        tools[SET_CONTEXT] = _set_context_tool(blocks, writable)
    if skill_labels:
        tools[LOAD_CONTEXT] = _load_context_tool(blocks, skill_labels)
        tools[UNLOAD_CONTEXT] = _unload_context_tool(blocks, skill_labels)
    if search_labels:
        tools[SEARCH_CONTEXT] = _search_context_tool(blocks, search_labels)
    return tools


__all__ = [
    "LOAD_CONTEXT",
    "SEARCH_CONTEXT",
    "SET_CONTEXT",
    "UNLOAD_CONTEXT",
    "build_context_tools",
    "format_usage",
    "stale_block_message",
]
