"""Each example with Bedrock configured: botocore's Stubber answers Converse, so no request leaves the machine.

The Stubber checks every request against the bedrock-runtime service model (a request Bedrock
would refuse as malformed fails here), the examples run in process against the local server,
and the second run must send Bedrock the whole stored conversation, tool use and result included.
"""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

pytestmark = pytest.mark.e2e

MODEL_ID = "anthropic.claude-3-haiku-20240307-v1:0"
FACT = "the launch is on Friday"


def answer(*content: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
    """A Converse answer as Bedrock sends it."""
    return {
        "output": {"message": {"role": "assistant", "content": list(content)}},
        "stopReason": stop,
        "usage": {"inputTokens": 40, "outputTokens": 12, "totalTokens": 52},
        "metrics": {"latencyMs": 120},
    }


SAVE = answer({"toolUse": {"toolUseId": "tooluse_1", "name": "save_note", "input": {"text": FACT}}}, stop="tool_use")
NOTED = answer({"text": "Noted."})
RECALL = answer({"text": f"You told me {FACT}."})


@contextmanager
def stubbed_bedrock(*answers: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """Every bedrock-runtime client made meanwhile answers ``answers`` in order; yields the Converse requests sent."""
    sent: list[dict[str, Any]] = []
    stubbers: list[Stubber] = []
    real_client = boto3.session.Session.client

    def client(self: boto3.session.Session, *args: Any, **kwargs: Any) -> Any:
        made = real_client(self, *args, **kwargs)
        if (args[0] if args else kwargs.get("service_name")) == "bedrock-runtime":
            assert not stubbers, "an example run makes one Bedrock client"
            stubber = Stubber(made)
            for reply in answers:
                stubber.add_response("converse", reply)
            made.meta.events.register("before-parameter-build.bedrock-runtime.Converse", record)
            stubber.activate()
            stubbers.append(stubber)
        return made

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append(params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(boto3.session.Session, "client", client)
        patch.setenv("THREADLOOM_BEDROCK_MODEL_ID", MODEL_ID)
        yield sent
    assert len(stubbers) == 1
    stubbers[0].assert_no_pending_responses()


def run_example(module: str, url: str, session: str, prompt: str, capsys: pytest.CaptureFixture[str]) -> str:
    example = importlib.import_module(f"examples.{module}")
    argv = [f"{module}.py", "--url", url, "--session", session, prompt]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", argv)
        capsys.readouterr()
        example.main()
    return capsys.readouterr().out


def texts(message: dict[str, Any]) -> list[str]:
    return [block["text"] for block in message["content"] if "text" in block]


@pytest.mark.parametrize("module", ["openai_agents_chat", "strands_chat", "langchain_chat"])
def test_with_bedrock_each_example_sends_valid_converse_requests_and_resumes(
    module: str, integration_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    session = f"bedrock-{module}-{uuid.uuid4().hex[:8]}"

    # Given Bedrock asks for the save_note tool, then answers
    with stubbed_bedrock(SAVE, NOTED) as sent:
        out = run_example(module, integration_server, session, f"Remember that {FACT}", capsys)
    assert out == f"you:   Remember that {FACT}\nagent: Noted.\n"

    # Then the first request offers the tool, and the second carries Bedrock's tool use and its result
    first, second = sent
    assert first["modelId"] == MODEL_ID and texts(first["messages"][-1]) == [f"Remember that {FACT}"]
    assert [tool["toolSpec"]["name"] for tool in first["toolConfig"]["tools"]] == ["save_note"]
    assert any("save_note" in block["text"] for block in first["system"])
    use, result = second["messages"][-2]["content"][-1], second["messages"][-1]["content"][-1]
    assert use["toolUse"]["input"] == {"text": FACT} and result["toolResult"]["toolUseId"] == "tooluse_1"

    # When a new run (a new Bedrock client) asks again, Bedrock is sent the stored conversation
    with stubbed_bedrock(RECALL) as sent:
        out = run_example(module, integration_server, session, "What do you remember?", capsys)
    assert out == f"you:   What do you remember?\nagent: You told me {FACT}.\n"
    (resumed,) = sent
    roles = [message["role"] for message in resumed["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert texts(resumed["messages"][0]) == [f"Remember that {FACT}"]
    assert resumed["messages"][1]["content"][-1]["toolUse"]["input"] == {"text": FACT}
    assert "toolResult" in resumed["messages"][2]["content"][-1]
    assert texts(resumed["messages"][3]) == ["Noted."] and texts(resumed["messages"][4]) == ["What do you remember?"]
