"""Provider formats: a stored history as Bedrock Converse ``messages``, and tool specs for each LLM vendor.

Everything here is a pure function of its input, so it can run on every request.

``to_converse_messages`` guarantees what the Converse API insists on, whatever the
history looks like (compaction overlays, branch switches, interrupted tool calls,
results stored in separate messages): roles alternate, no turn is empty or
carries blank text, every ``toolUse`` is answered by exactly one ``toolResult`` in
the very next (user) turn, ahead of any other block there, and no ``toolResult``
appears without its ``toolUse``. System-role messages are left out; pass
``to_converse_system(history)`` as the request's ``system`` instead.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from threadloom.compaction.markers import STUB_RESULT_TEXT, call_key, is_compaction_message, is_tool_part, text_of
from threadloom.jscompat import compact_json, js_string

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Sequence

    from threadloom.records import Message


class ToolSpec(Protocol):
    """What the converters need of a tool (``threadloom.tools.base.Tool`` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str | None: ...

    @property
    def input_schema(self) -> Mapping[str, Any]: ...


ToolSpecs: TypeAlias = "Mapping[str, ToolSpec] | Iterable[ToolSpec]"
"""A ``session.tools()`` mapping (name to tool; its values are used, in order) or any iterable of tools."""

ConverseMessage: TypeAlias = dict[str, Any]
"""One Converse message: ``{"role": "user" | "assistant", "content": [content blocks]}``."""

EMPTY_RESULT_TEXT: Final = "(empty result)"
"""Stands in for a blank string tool output, because Converse rejects blank text."""

TOOL_ERROR_TEXT: Final = "Tool call failed."
TOOL_DENIED_TEXT: Final = "Tool call was denied."

_CONVERSE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NOT_NAME_CHAR = re.compile(r"[^a-zA-Z0-9_-]")


# ── tool specs ────────────────────────────────────────────────────────────


def _tool_list(tools: ToolSpecs) -> list[ToolSpec]:
    if isinstance(tools, Mapping):
        return list(tools.values())
    return list(tools)


def _object_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep copy of the tool's schema (an empty one becomes an object with no properties)."""
    if not schema:
        return {"type": "object", "properties": {}}
    return copy.deepcopy(dict(schema))


def to_bedrock_tool_config(tools: ToolSpecs) -> dict[str, Any]:
    """Converse ``toolConfig``: ``{"tools": [{"toolSpec": {name, description, inputSchema: {json}}}]}``.

    A blank description is omitted (Converse rejects an empty one). With no
    tools the list is empty; leave ``toolConfig`` out of the request then.
    """
    specs: list[dict[str, Any]] = []
    for tool in _tool_list(tools):
        spec: dict[str, Any] = {"name": tool.name}
        if tool.description:
            spec["description"] = tool.description
        spec["inputSchema"] = {"json": _object_schema(tool.input_schema)}
        specs.append({"toolSpec": spec})
    return {"tools": specs}


def to_openai_tools(tools: ToolSpecs) -> list[dict[str, Any]]:
    """OpenAI Chat Completions ``tools``: ``[{"type": "function", "function": {name, description, parameters}}]``."""
    result: list[dict[str, Any]] = []
    for tool in _tool_list(tools):
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = _object_schema(tool.input_schema)
        result.append({"type": "function", "function": function})
    return result


def to_anthropic_tools(tools: ToolSpecs) -> list[dict[str, Any]]:
    """Anthropic Messages ``tools``: ``[{"name", "description", "input_schema"}]``."""
    result: list[dict[str, Any]] = []
    for tool in _tool_list(tools):
        spec: dict[str, Any] = {"name": tool.name}
        if tool.description:
            spec["description"] = tool.description
        spec["input_schema"] = _object_schema(tool.input_schema)
        result.append(spec)
    return result


# ── history → Converse messages ───────────────────────────────────────────


def _converse_role(message: Mapping[str, Any]) -> str:
    return "assistant" if message.get("role") == "assistant" else "user"


def _is_blank(text: str) -> bool:
    return not text.strip()


def _tool_name(part: Mapping[str, Any]) -> str:
    """The tool's name, made acceptable to Converse (``[a-zA-Z0-9_-]{1,64}``)."""
    name = part.get("toolName")
    if not isinstance(name, str) or not name:
        part_type = part.get("type")
        name = part_type[len("tool-") :] if isinstance(part_type, str) and part_type.startswith("tool-") else ""
    if _CONVERSE_NAME.match(name):
        return name
    cleaned = _NOT_NAME_CHAR.sub("_", name)[:64]
    return cleaned or "unknown"


def _has_call_id(part: Mapping[str, Any]) -> bool:
    return part.get("toolCallId") is not None


def _is_call_candidate(part: Mapping[str, Any]) -> bool:
    """A part that can open a call; the stub type ``tool-result`` only ever answers one."""
    return is_tool_part(part) and part.get("type") != "tool-result"


def _result_blocks(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """The part's result as ``{"content": [...], "status"?: "error"}``, or None if it has none yet."""
    state = part.get("state")
    if state == "output-error" or ("errorText" in part and "output" not in part):
        error_text = part.get("errorText")
        text = error_text if isinstance(error_text, str) and not _is_blank(error_text) else TOOL_ERROR_TEXT
        return {"content": [{"text": text}], "status": "error"}
    if state == "output-denied":
        return {"content": [{"text": TOOL_DENIED_TEXT}], "status": "error"}
    if "output" in part or state == "output-available":
        return {"content": [_value_block(part.get("output"))]}
    if "result" in part:
        return {"content": [_value_block(part["result"])]}
    return None


def _value_block(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"text": EMPTY_RESULT_TEXT if _is_blank(value) else value}
    if isinstance(value, Mapping):
        return {"json": copy.deepcopy(dict(value))}
    try:
        return {"text": compact_json(value)}
    except (TypeError, ValueError):
        return {"text": js_string(value)}


def _tool_input(value: Any) -> dict[str, Any]:
    """Converse wants an object; ``None`` (still streaming) becomes ``{}``, any other value is wrapped."""
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value))
    if value is None:
        return {}
    return {"input": copy.deepcopy(value)}


class _ToolUseIds:
    """Maps stored call ids to distinct ids Converse accepts (``[a-zA-Z0-9_-]{1,64}``)."""

    def __init__(self) -> None:
        self._by_key: dict[Hashable, str] = {}
        self._used: set[str] = set()

    def get(self, key: Hashable, raw: Any) -> str:
        if key in self._by_key:
            return self._by_key[key]
        text = raw if isinstance(raw, str) else js_string(raw)
        candidate = text if _CONVERSE_NAME.match(text) else f"tu_{hashlib.sha256(text.encode()).hexdigest()[:40]}"
        suffix = 0
        while candidate in self._used:
            suffix += 1
            candidate = f"tu_{hashlib.sha256(f'{text}#{suffix}'.encode()).hexdigest()[:40]}"
        self._by_key[key] = candidate
        self._used.add(candidate)
        return candidate


class _Turns:
    """Builds alternating turns; results of the latest tool calls wait until a non-call block arrives."""

    def __init__(self) -> None:
        self.turns: list[ConverseMessage] = []
        self._pending: list[dict[str, Any]] = []

    def add(self, role: str, block: dict[str, Any]) -> None:
        if not (role == "assistant" and "toolUse" in block):
            self.flush()
        self._append(role, block)

    def add_call(self, tool_use: dict[str, Any], tool_result: dict[str, Any]) -> None:
        self.add("assistant", {"toolUse": tool_use})
        self._pending.append({"toolResult": tool_result})

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for block in pending:
            self._append("user", block)

    def _append(self, role: str, block: dict[str, Any]) -> None:
        if self.turns and self.turns[-1]["role"] == role:
            self.turns[-1]["content"].append(block)
        else:
            self.turns.append({"role": role, "content": [block]})


def _index_calls(
    history: Sequence[Mapping[str, Any]],
) -> tuple[dict[Hashable, tuple[int, int]], dict[Hashable, dict[str, Any]]]:
    """Where each call id is first opened (message, part), and the first result stored anywhere for it."""
    opened: dict[Hashable, tuple[int, int]] = {}
    results: dict[Hashable, dict[str, Any]] = {}
    for m_index, message in enumerate(history):
        if message.get("role") == "system" or is_compaction_message(message):
            continue
        parts = message.get("parts")
        if not isinstance(parts, list):
            continue
        for p_index, part in enumerate(parts):
            if not (isinstance(part, Mapping) and is_tool_part(part) and _has_call_id(part)):
                continue
            key = call_key(part["toolCallId"])
            if _is_call_candidate(part):
                opened.setdefault(key, (m_index, p_index))
            if key not in results and (result := _result_blocks(part)) is not None:
                results[key] = result
    return opened, results


def _stub_result() -> dict[str, Any]:
    return {"content": [{"text": STUB_RESULT_TEXT}]}


def to_converse_messages(history: Sequence[Message]) -> list[ConverseMessage]:
    """The history as Converse ``messages`` (see the module docstring for the guarantees).

    Text parts become text blocks (blank ones are skipped). A tool part becomes
    an assistant ``toolUse`` answered by a user ``toolResult``: its own output
    (JSON objects as ``json`` blocks, errors with ``status: "error"``), else the
    first result stored elsewhere for the same call id, else the stub text used
    by compaction. Results without a call are dropped. A ``compaction_``
    message becomes plain assistant text. Reasoning, file, source and data parts
    are not sent. The first turn may be an assistant turn when the history
    starts with one.
    """
    opened, results = _index_calls(history)
    ids = _ToolUseIds()
    turns = _Turns()
    for m_index, message in enumerate(history):
        if message.get("role") == "system":
            continue
        if is_compaction_message(message):
            summary = text_of(message)
            if not _is_blank(summary):
                turns.add("assistant", {"text": summary})
            continue
        role = _converse_role(message)
        parts = message.get("parts")
        if not isinstance(parts, list):
            continue
        for p_index, part in enumerate(parts):
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text":
                text = part.get("text")
                if isinstance(text, str) and not _is_blank(text):
                    turns.add(role, {"text": text})
            elif _is_call_candidate(part):
                if _has_call_id(part):
                    key = call_key(part["toolCallId"])
                    if opened.get(key) != (m_index, p_index):
                        continue  # a repeat of an id already answered; its result was used with the call
                    result = _result_blocks(part) or results.get(key) or _stub_result()
                    tool_use_id = ids.get(key, part["toolCallId"])
                else:
                    anonymous = f"{message.get('id')}:{p_index}"
                    result = _result_blocks(part) or _stub_result()
                    tool_use_id = ids.get(("anonymous", m_index, p_index), anonymous)
                turns.add_call(
                    {"toolUseId": tool_use_id, "name": _tool_name(part), "input": _tool_input(part.get("input"))},
                    {"toolUseId": tool_use_id, **copy.deepcopy(result)},
                )
    turns.flush()
    return turns.turns


def to_converse_system(history: Sequence[Message]) -> list[dict[str, str]]:
    """The text of the history's system-role messages, as Converse ``system`` blocks (blank ones skipped)."""
    blocks: list[dict[str, str]] = []
    for message in history:
        if message.get("role") == "system":
            text = text_of(message)
            if not _is_blank(text):
                blocks.append({"text": text})
    return blocks


__all__ = [
    "EMPTY_RESULT_TEXT",
    "ConverseMessage",
    "ToolSpec",
    "ToolSpecs",
    "to_anthropic_tools",
    "to_bedrock_tool_config",
    "to_converse_messages",
    "to_converse_system",
    "to_openai_tools",
]
