"""Chat with a LangChain chat model whose message history is a Threadloom session.

    make serve                                    # the local API, in another terminal
    python examples/langchain_chat.py "Remember that the launch is on Friday" "What do you remember?"

Each argument is one user turn; run it again later (a new process) and the history is still
there. A scripted chat model answers by default, so no credentials are needed; set
THREADLOOM_BEDROCK_MODEL_ID (with AWS credentials, and ``pip install 'threadloom[examples]'`` for
langchain-aws) to use Bedrock's Converse API.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from threadloom.client import ThreadloomClient
from threadloom.integrations.langchain import ThreadloomChatMessageHistory

if TYPE_CHECKING:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.runnables import Runnable


INSTRUCTIONS = "Save facts with save_note; recall them when asked."


@tool
def save_note(text: str) -> str:
    """Remember a fact for later turns."""
    return f"saved: {text}"


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model: saves notes with a tool call, recalls them from the messages it is sent."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        notes = [call["args"]["text"] for m in messages if isinstance(m, AIMessage) for call in m.tool_calls]
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"Noted. I now remember {len(notes)} thing(s).")
        elif isinstance(last, HumanMessage) and last.text.lower().startswith("remember that "):
            fact = last.text[len("remember that ") :]
            call = {"name": "save_note", "args": {"text": fact}, "id": f"call_{len(messages)}", "type": "tool_call"}
            reply = AIMessage(content="", tool_calls=[call])
        else:
            reply = AIMessage(content="I remember: " + ("; ".join(notes) if notes else "nothing yet") + ".")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def build_model() -> Runnable[Any, BaseMessage]:
    model_id = os.environ.get("THREADLOOM_BEDROCK_MODEL_ID")
    if model_id:
        from langchain_aws import ChatBedrockConverse

        return ChatBedrockConverse(model=model_id).bind_tools([save_note])
    return ScriptedChatModel()


def chat_turn(history: BaseChatMessageHistory, model: Runnable[Any, BaseMessage], prompt: str) -> str:
    """One user turn: the model sees the instructions and the whole stored history; tool calls run until it answers."""
    history.add_user_message(prompt)
    while True:
        reply = model.invoke([SystemMessage(content=INSTRUCTIONS), *history.messages])
        history.add_message(reply)
        calls = reply.tool_calls if isinstance(reply, AIMessage) else []
        if not calls:
            return reply.text
        history.add_messages(
            [
                ToolMessage(content=save_note.invoke(call["args"]), tool_call_id=call["id"], name=call["name"])
                for call in calls
            ]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompts", nargs="+")
    parser.add_argument("--url", default=os.environ.get("THREADLOOM_URL", "http://127.0.0.1:3000"))
    parser.add_argument("--session", default="langchain-demo")
    args = parser.parse_args()
    model = build_model()
    with ThreadloomClient(args.url) as client:
        history = ThreadloomChatMessageHistory(args.session, client)
        for prompt in args.prompts:
            print(f"you:   {prompt}\nagent: {chat_turn(history, model, prompt)}")


if __name__ == "__main__":
    main()
