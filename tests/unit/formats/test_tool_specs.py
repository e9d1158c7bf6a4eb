"""Tool-spec converters for Bedrock Converse, OpenAI and Anthropic."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.stub import Stubber
from threadloom.tools.formats import ToolSpec, to_anthropic_tools, to_bedrock_tool_config, to_openai_tools


@dataclass(frozen=True)
class FakeTool:
    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": "string", "description": "Block label"}},
    "required": ["label"],
}


def tools() -> dict[str, ToolSpec]:
    return {
        "set_context": FakeTool("set_context", "Write to a block", SCHEMA),
        "noop": FakeTool("noop", "", {}),
    }


def test_bedrock_tool_config() -> None:
    # Given a session-style tool mapping
    # When converted for Converse
    config = to_bedrock_tool_config(tools())
    # Then each tool is a toolSpec with its schema under inputSchema.json; a blank description is omitted
    assert config == {
        "tools": [
            {"toolSpec": {"name": "set_context", "description": "Write to a block", "inputSchema": {"json": SCHEMA}}},
            {"toolSpec": {"name": "noop", "inputSchema": {"json": {"type": "object", "properties": {}}}}},
        ]
    }


def test_openai_tools() -> None:
    # Given the same tools as an iterable
    # When converted for OpenAI
    result = to_openai_tools(list(tools().values()))
    # Then each is a function tool with parameters
    assert result == [
        {
            "type": "function",
            "function": {"name": "set_context", "description": "Write to a block", "parameters": SCHEMA},
        },
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
    ]


def test_anthropic_tools() -> None:
    # Given the tools
    # When converted for Anthropic
    result = to_anthropic_tools(tools())
    # Then each has name, description and input_schema
    assert result == [
        {"name": "set_context", "description": "Write to a block", "input_schema": SCHEMA},
        {"name": "noop", "input_schema": {"type": "object", "properties": {}}},
    ]


def test_schemas_are_deep_copies() -> None:
    # Given converted specs
    config = to_bedrock_tool_config(tools())
    openai = to_openai_tools(tools())
    anthropic = to_anthropic_tools(tools())
    # When a caller edits them
    config["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"].append("x")
    openai[0]["function"]["parameters"]["properties"]["new"] = {}
    anthropic[0]["input_schema"]["type"] = "changed"
    # Then the tools' own schemas are untouched
    assert SCHEMA == {
        "type": "object",
        "properties": {"label": {"type": "string", "description": "Block label"}},
        "required": ["label"],
    }


def test_empty_tool_set() -> None:
    # Given no tools
    # When converted
    # Then every format is empty
    assert to_bedrock_tool_config({}) == {"tools": []}
    assert to_openai_tools([]) == []
    assert to_anthropic_tools({}) == []


def test_bedrock_config_passes_botocore_validation() -> None:
    # Given a Converse request using the converted toolConfig
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    response = {
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    # When it is sent through a stubbed client
    with Stubber(client) as stubber:
        stubber.add_response("converse", response)
        answer = client.converse(
            modelId="m",
            messages=[{"role": "user", "content": [{"text": "hi"}]}],
            toolConfig=to_bedrock_tool_config(tools()),  # type: ignore[arg-type]
        )
    # Then botocore accepted the shape
    assert answer["output"]["message"]["content"] == [{"text": "ok"}]
