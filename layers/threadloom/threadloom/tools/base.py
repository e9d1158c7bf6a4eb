"""The tool shape handed to an LLM: a name, a description, a JSON Schema, and a string-returning call.

Tools always answer with a string (errors included, as ``Error: <message>``)
because the result goes straight back to the model as a tool result.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

ToolHandler: TypeAlias = Callable[[dict[str, Any]], str]
"""The function behind a tool: receives the model's arguments, returns the tool result text."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool. Frozen so a built tool set cannot drift from what the model was shown."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler = field(repr=False, compare=False)

    def execute(self, args: Mapping[str, Any] | None) -> str:
        """Run the tool. Anything other than a mapping is treated as no arguments at all."""
        return self.handler(dict(args) if isinstance(args, Mapping) else {})

    def schema(self) -> dict[str, Any]:
        """A deep copy of the input schema, safe for callers to adapt to an LLM vendor's format."""
        return copy.deepcopy(self.input_schema)


class ErrorText(str):
    """A tool result that reports a failure: still the text the model sees, but recognisable by type.

    Why a ``str`` subclass: the result must stay a plain string for the model (and the
    reference's byte-for-byte texts), while callers such as the HTTP API need a
    machine-readable ``isError`` without guessing from the text.
    """

    __slots__ = ()


def error_result(error: BaseException | str) -> str:
    """The tool-result form of a failure: ``Error: <message>`` (an :class:`ErrorText`)."""
    return ErrorText(f"Error: {error}")


def is_error_result(result: str) -> bool:
    """Whether a tool's result reports a failure (built by :func:`error_result`)."""
    return isinstance(result, ErrorText)


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A JSON Schema object with the given properties; every tool input is one."""
    return {"type": "object", "properties": properties, "required": required}


def string_property(description: str, enum: list[str] | None = None) -> dict[str, Any]:
    """A JSON Schema string property, optionally restricted to ``enum``."""
    prop: dict[str, Any] = {"type": "string"}
    if enum is not None:
        prop["enum"] = list(enum)
    prop["description"] = description
    return prop


def invalid_argument(name: str) -> str:
    """The tool result for a missing or wrongly typed argument (the model can correct and retry)."""
    return error_result(f'"{name}" is required and must be a string')


def string_arg(args: Mapping[str, Any], name: str) -> str | None:
    """The argument ``name`` if it is a string, else ``None`` (the caller reports it)."""
    value = args.get(name)
    return value if isinstance(value, str) else None


__all__ = [
    "ErrorText",
    "Tool",
    "ToolHandler",
    "error_result",
    "invalid_argument",
    "is_error_result",
    "object_schema",
    "string_arg",
    "string_property",
]
