"""Chat with a Strands agent whose session lives in Threadloom.

    make serve                                    # the local API, in another terminal
    python examples/strands_chat.py "Remember that the launch is on Friday" "What do you remember?"

Each argument is one user turn; run it again later (a new process) and the agent resumes its
conversation. A scripted model provider answers by default, so no credentials are needed; set
THREADLOOM_BEDROCK_MODEL_ID (with AWS credentials) to use Strands' Bedrock provider instead.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any

from strands import Agent, tool
from strands.models.bedrock import BedrockModel
from strands.models.model import Model
from strands.session.repository_session_manager import RepositorySessionManager
from threadloom.client import ThreadloomClient
from threadloom.integrations.strands import ThreadloomSessionRepository

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterable


@tool
def save_note(text: str) -> str:
    """Remember a fact for later turns.

    Args:
        text: The fact to remember.
    """
    return f"saved: {text}"


class ScriptedModel(Model):
    """A deterministic model provider: saves notes with a tool call, recalls them from the messages it is sent."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError("the scripted model has no structured output")

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncIterable[Any]:  # type: ignore[override]
        blocks = [block for message in messages for block in message["content"]]
        notes = [block["toolUse"]["input"]["text"] for block in blocks if "toolUse" in block]
        last = messages[-1]["content"]
        text = " ".join(block.get("text", "") for block in last)
        yield {"messageStart": {"role": "assistant"}}
        if text.lower().startswith("remember that ") and not any("toolResult" in block for block in last):
            call_id = f"tooluse_{len(messages)}"
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": call_id, "name": "save_note"}}}}
            fact = text[len("remember that ") :]
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"text": fact})}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
            return
        if any("toolResult" in block for block in last):
            answer = f"Noted. I now remember {len(notes)} thing(s)."
        else:
            answer = "I remember: " + ("; ".join(notes) if notes else "nothing yet") + "."
        yield {"contentBlockDelta": {"delta": {"text": answer}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def build_agent(repository: ThreadloomSessionRepository, session_id: str) -> Agent:
    model_id = os.environ.get("THREADLOOM_BEDROCK_MODEL_ID")
    # Strands' Bedrock provider on the Converse API (the example prints whole answers, so no stream)
    model: Model = BedrockModel(model_id=model_id, streaming=False) if model_id else ScriptedModel()
    return Agent(
        model=model,
        tools=[save_note],
        system_prompt="Save facts with save_note; recall them when asked.",
        session_manager=RepositorySessionManager(session_id=session_id, session_repository=repository),
        callback_handler=None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompts", nargs="+")
    parser.add_argument("--url", default=os.environ.get("THREADLOOM_URL", "http://127.0.0.1:3000"))
    parser.add_argument("--session", default="strands-demo")
    args = parser.parse_args()
    with ThreadloomClient(args.url) as client:
        agent = build_agent(ThreadloomSessionRepository(client), args.session)
        for prompt in args.prompts:
            print(f"you:   {prompt}\nagent: {str(agent(prompt)).strip()}")


if __name__ == "__main__":
    main()
