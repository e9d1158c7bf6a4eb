"""Chat with an OpenAI Agents SDK agent whose memory is a Threadloom session.

    make serve                                    # the local API, in another terminal
    python examples/openai_agents_chat.py "Remember that the launch is on Friday" "What do you remember?"

Each argument is one user turn; run it again later (a new process) and the agent still knows
what it saved. A scripted model answers by default, so no key or network is needed; set
THREADLOOM_BEDROCK_MODEL_ID (with AWS credentials) to talk to Bedrock through its Converse API.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import TYPE_CHECKING, Any

import boto3
from agents import Agent, FunctionTool, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from openai.types.responses.response_reasoning_item import ResponseReasoningItem, Summary
from threadloom.client import AsyncThreadloomClient
from threadloom.integrations.openai_agents import ThreadloomSession

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@function_tool
def save_note(text: str) -> str:
    """Remember a fact for later turns."""
    return f"saved: {text}"


class ScriptedModel(Model):
    """A deterministic stand-in for an LLM: saves notes with a tool call, recalls them from the history."""

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:  # noqa: A002
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        last = items[-1]
        turn = len(items)
        notes = [json.loads(i["arguments"])["text"] for i in items if i.get("type") == "function_call"]
        if last.get("type") == "function_call_output":
            output: list[Any] = [self._say(turn, f"Noted. I now remember {len(notes)} thing(s).")]
        elif str(self._text(last)).lower().startswith("remember that "):
            fact = str(self._text(last))[len("remember that ") :]
            output = [
                ResponseReasoningItem(
                    id=f"rs_{turn}",
                    type="reasoning",
                    summary=[Summary(text="The user states a fact.", type="summary_text")],
                ),
                ResponseFunctionToolCall(
                    id=f"fc_{turn}",
                    call_id=f"call_{turn}",
                    name="save_note",
                    arguments=json.dumps({"text": fact}),
                    type="function_call",
                    status="completed",
                ),
            ]
        else:
            output = [self._say(turn, "I remember: " + ("; ".join(notes) if notes else "nothing yet") + ".")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    @staticmethod
    def _text(item: dict[str, Any]) -> Any:
        content = item.get("content")
        return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content or [])

    @staticmethod
    def _say(turn: int, text: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id=f"msg_{turn}",
            role="assistant",
            status="completed",
            type="message",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


class BedrockConverseModel(Model):
    """Bedrock's Converse API as an SDK model: the SDK's items become Converse messages, its reply SDK items."""

    def __init__(self, model_id: str, client: Any | None = None) -> None:
        self.model_id = model_id
        self.client = client or boto3.client("bedrock-runtime")

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,  # noqa: A002 (the SDK names it so)
        model_settings: Any,
        tools: list[Any],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        request: dict[str, Any] = {"modelId": self.model_id, "messages": converse_messages(input)}
        if system_instructions:
            request["system"] = [{"text": system_instructions}]
        specs = [
            {"toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": t.params_json_schema}}}
            for t in tools
            if isinstance(t, FunctionTool)
        ]
        if specs:
            request["toolConfig"] = {"tools": specs}
        reply = await asyncio.to_thread(lambda: self.client.converse(**request))
        output: list[Any] = []
        for n, block in enumerate(reply["output"]["message"]["content"]):
            if "text" in block:
                output.append(ScriptedModel._say(n, block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                output.append(
                    ResponseFunctionToolCall(
                        call_id=use["toolUseId"],
                        name=use["name"],
                        arguments=json.dumps(use["input"]),
                        type="function_call",
                        status="completed",
                    )
                )
        tokens = reply.get("usage", {})
        usage = Usage(
            requests=1,
            input_tokens=tokens.get("inputTokens", 0),
            output_tokens=tokens.get("outputTokens", 0),
            total_tokens=tokens.get("totalTokens", 0),
        )
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this example does not stream")


def converse_messages(items: str | list[Any]) -> list[dict[str, Any]]:
    """SDK input items as Converse messages: text, tool uses and tool results, one message per turn of a role."""
    messages: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})

    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items:
        kind = item.get("type", "message")
        if kind == "function_call":
            use = {"toolUseId": item["call_id"], "name": item["name"], "input": json.loads(item["arguments"] or "{}")}
            add("assistant", {"toolUse": use})
        elif kind == "function_call_output":
            add("user", {"toolResult": {"toolUseId": item["call_id"], "content": [{"text": str(item["output"])}]}})
        elif kind == "message" and item.get("role") in ("user", "assistant"):
            text = ScriptedModel._text(item)
            if text:
                add(item["role"], {"text": text})
    return messages


def build_agent() -> Agent[Any]:
    model_id = os.environ.get("THREADLOOM_BEDROCK_MODEL_ID")
    model: Model = BedrockConverseModel(model_id) if model_id else ScriptedModel()
    return Agent(
        name="notes", instructions="Save facts with save_note; recall them when asked.", model=model, tools=[save_note]
    )


async def chat(session: ThreadloomSession, prompts: list[str]) -> list[str]:
    agent = build_agent()
    answers = []
    for prompt in prompts:
        result = await Runner.run(agent, prompt, session=session)
        answers.append(str(result.final_output))
    return answers


async def converse(url: str, session_id: str, prompts: list[str]) -> list[str]:
    """The SDK is asynchronous, so the session awaits Threadloom's async client on the same event loop."""
    async with AsyncThreadloomClient(url) as client:
        return await chat(ThreadloomSession(session_id, client), prompts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompts", nargs="+")
    parser.add_argument("--url", default=os.environ.get("THREADLOOM_URL", "http://127.0.0.1:3000"))
    parser.add_argument("--session", default="openai-agents-demo")
    args = parser.parse_args()
    set_tracing_disabled(True)
    answers = asyncio.run(converse(args.url, args.session, args.prompts))
    for prompt, answer in zip(args.prompts, answers, strict=True):
        print(f"you:   {prompt}\nagent: {answer}")


if __name__ == "__main__":
    main()
