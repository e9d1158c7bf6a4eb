"""BedrockSummarizer against a stubbed Bedrock Runtime client (botocore Stubber, no network)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import Stubber
from threadloom.compaction import build_summary_prompt
from threadloom.compaction.summarizers import BedrockSummarizer, Summarizer
from threadloom.compaction.summarizers.bedrock import derive_max_tokens
from threadloom.errors import CompactionError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Iterator

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


@pytest.fixture
def client() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1")


@pytest.fixture
def stubber(client: Any) -> Iterator[Stubber]:
    with Stubber(client) as stub:
        yield stub
        stub.assert_no_pending_responses()


def ok_response(*texts: str, stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": t} for t in texts]}},
        "stopReason": stop_reason,
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        "metrics": {"latencyMs": 12},
    }


def expected_request(prompt: str, max_tokens: int, temperature: float = 0.0) -> dict[str, Any]:
    return {
        "modelId": MODEL,
        "messages": [{"role": "user", "content": [{"text": prompt}]}],
        "inferenceConfig": {"maxTokens": max_tokens, "temperature": temperature},
    }


def prompt_with_target(target: int) -> str:
    return build_summary_prompt([{"id": "a", "role": "user", "parts": [{"type": "text", "text": "hi"}]}], None, target)


def test_success_returns_trimmed_text_and_derives_max_tokens(client: Any, stubber: Stubber) -> None:
    # Given a prompt targeting 300 tokens and a model that answers
    prompt = prompt_with_target(300)
    stubber.add_response("converse", ok_response("  ## Topic\nA summary  "), expected_request(prompt, 600))
    summarizer = BedrockSummarizer(MODEL, client=client)
    # When it summarizes
    summary = summarizer(prompt)
    # Then the request asked for twice the target, and the text comes back trimmed
    assert summary == "## Topic\nA summary"
    assert isinstance(summarizer, Summarizer)


def test_explicit_max_tokens_temperature_and_system_prompt(client: Any, stubber: Stubber) -> None:
    # Given explicit inference settings and a system prompt
    prompt = "Summarize this"
    request = {**expected_request(prompt, 77, 0.3), "system": [{"text": "You summarize."}]}
    stubber.add_response("converse", ok_response("first", "second"), request)
    summarizer = BedrockSummarizer(MODEL, client=client, max_tokens=77, temperature=0.3, system_prompt="You summarize.")
    # When it summarizes
    # Then the stub matched the exact request and multiple text blocks are joined
    assert summarizer(prompt) == "first\nsecond"


def test_throttling_then_success_retries_with_backoff(client: Any, stubber: Stubber) -> None:
    # Given two throttled answers and then a success
    prompt = prompt_with_target(100)
    stubber.add_client_error("converse", "ThrottlingException", "Rate exceeded", 429)
    stubber.add_client_error("converse", "ServiceUnavailableException", "Try later", 503)
    stubber.add_response("converse", ok_response("done"), expected_request(prompt, 256))
    sleeps: list[float] = []
    summarizer = BedrockSummarizer(
        MODEL, client=client, max_attempts=3, sleep=sleeps.append, jitter=False, base_delay=0.5
    )
    # When it summarizes
    summary = summarizer(prompt)
    # Then it retried twice with exponential waits and returned the text
    assert summary == "done"
    assert sleeps == [0.5, 1.0]


def test_throttling_exhausts_attempts(client: Any, stubber: Stubber) -> None:
    # Given a model that keeps throttling
    for _ in range(3):
        stubber.add_client_error("converse", "ThrottlingException", "Rate exceeded", 429)
    sleeps: list[float] = []
    summarizer = BedrockSummarizer(MODEL, client=client, max_attempts=3, sleep=sleeps.append, jitter=False)
    # When it summarizes
    # Then a CompactionError reports the attempts and the code, after two waits
    with pytest.raises(CompactionError, match=r"after 3 attempts: ThrottlingException: Rate exceeded"):
        summarizer("prompt")
    assert len(sleeps) == 2


def test_access_denied_is_a_compaction_error_without_retry(client: Any, stubber: Stubber) -> None:
    # Given a caller without permission
    stubber.add_client_error("converse", "AccessDeniedException", "You are not authorized", 403)
    sleeps: list[float] = []
    summarizer = BedrockSummarizer(MODEL, client=client, sleep=sleeps.append)
    # When it summarizes
    # Then it fails at once with a clear CompactionError
    with pytest.raises(CompactionError, match="AccessDeniedException: You are not authorized") as info:
        summarizer("prompt")
    assert MODEL in str(info.value)
    assert sleeps == []


def test_empty_content_is_a_compaction_error(client: Any, stubber: Stubber) -> None:
    # Given a response with no content blocks
    stubber.add_response("converse", ok_response())
    summarizer = BedrockSummarizer(MODEL, client=client)
    # When it summarizes
    # Then a CompactionError says no text came back
    with pytest.raises(CompactionError, match="no summary text"):
        summarizer("prompt")


def test_blank_text_is_a_compaction_error(client: Any, stubber: Stubber) -> None:
    # Given a response whose only text is whitespace
    stubber.add_response("converse", ok_response("   \n"))
    # When it summarizes
    # Then it is refused like an empty answer
    with pytest.raises(CompactionError, match="no summary text"):
        BedrockSummarizer(MODEL, client=client)("prompt")


def test_guardrail_refusal_is_a_compaction_error(client: Any, stubber: Stubber) -> None:
    # Given a guardrail intervention whose text is a canned refusal
    stubber.add_response("converse", ok_response("Sorry, I cannot help.", stop_reason="guardrail_intervened"))
    # When it summarizes
    # Then the refusal is not mistaken for a summary
    with pytest.raises(CompactionError, match="guardrail_intervened"):
        BedrockSummarizer(MODEL, client=client)("prompt")


class _BrokenClient:
    """A client returning a malformed payload (as a misbehaving proxy or fake might)."""

    def converse(self, **kwargs: Any) -> dict[str, Any]:
        return {"output": {}}


class _NoCredentialsClient:
    def converse(self, **kwargs: Any) -> dict[str, Any]:
        from botocore.exceptions import NoCredentialsError

        raise NoCredentialsError


def test_invalid_response_shape_is_a_compaction_error() -> None:
    # Given a response without output.message.content
    summarizer = BedrockSummarizer(MODEL, client=_BrokenClient())  # type: ignore[arg-type]
    # When it summarizes
    # Then a CompactionError explains the response was unusable
    with pytest.raises(CompactionError, match="without message content"):
        summarizer("prompt")


def test_botocore_errors_are_compaction_errors() -> None:
    # Given a client that cannot find credentials
    summarizer = BedrockSummarizer(MODEL, client=_NoCredentialsClient())  # type: ignore[arg-type]
    # When it summarizes
    # Then the botocore error is wrapped, with the cause kept
    with pytest.raises(CompactionError, match="Unable to locate credentials") as info:
        summarizer("prompt")
    assert info.value.__cause__ is not None


def test_client_is_created_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given boto3.client is watched
    created: list[tuple[str, Any]] = []

    def fake_client(service: str, config: Any = None) -> Any:
        created.append((service, config))
        return object()

    monkeypatch.setattr(boto3, "client", fake_client)
    # When a summarizer is constructed
    summarizer = BedrockSummarizer(MODEL)
    # Then no client exists until it is first needed, and then exactly one, with standard retries
    assert created == []
    first = summarizer.client
    assert summarizer.client is first
    assert len(created) == 1
    assert created[0][0] == "bedrock-runtime"
    assert created[0][1].retries == {"mode": "standard", "total_max_attempts": 3}


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [("Target ~300 tokens.", 600), ("Target ~50 tokens.", 256), ("Target ~90000 tokens.", 8192), ("no target", 2048)],
)
def test_derive_max_tokens(prompt: str, expected: int) -> None:
    # Given a prompt with or without a target
    # When the output limit is derived with the default cap
    # Then it is twice the target, floored at 256, capped, or the default
    assert derive_max_tokens(prompt, cap=8192) == expected


@pytest.mark.parametrize(
    "kwargs",
    [{"model_id": ""}, {"model_id": MODEL, "max_attempts": 0}, {"model_id": MODEL, "max_tokens": 0}],
)
def test_invalid_configuration_is_rejected(kwargs: dict[str, Any]) -> None:
    # Given / When a summarizer is configured with an impossible value
    # Then a ValidationError is raised at construction
    with pytest.raises(ValidationError):
        BedrockSummarizer(**kwargs)
