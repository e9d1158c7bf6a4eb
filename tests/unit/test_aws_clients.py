"""Every AWS client gets timeouts below the function's and botocore's standard retries; Bedrock retries only there."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from threadloom.aws_clients import bedrock_config, client_config
from threadloom.compaction.sqs_queue import default_sqs_client
from threadloom.compaction.summarizers import BedrockSummarizer
from threadloom.errors import CompactionError, ValidationError


def test_the_defaults_fit_a_ten_second_function() -> None:
    config = client_config({})
    assert (config.connect_timeout, config.read_timeout) == (3.0, 5.0)
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_the_template_environment_sets_the_limits() -> None:
    config = client_config({"THREADLOOM_AWS_CONNECT_TIMEOUT": "2", "THREADLOOM_AWS_READ_TIMEOUT": "4.5"})
    assert (config.connect_timeout, config.read_timeout) == (2.0, 4.5)
    bedrock = bedrock_config({"THREADLOOM_BEDROCK_READ_TIMEOUT": "50", "THREADLOOM_BEDROCK_MAX_ATTEMPTS": "2"})
    assert (bedrock.read_timeout, bedrock.retries) == (50.0, {"mode": "standard", "total_max_attempts": 2})


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"THREADLOOM_AWS_READ_TIMEOUT": "soon"}, "THREADLOOM_AWS_READ_TIMEOUT"),
        ({"THREADLOOM_AWS_CONNECT_TIMEOUT": "0"}, "THREADLOOM_AWS_CONNECT_TIMEOUT"),
        ({"THREADLOOM_BEDROCK_MAX_ATTEMPTS": "-1"}, "THREADLOOM_BEDROCK_MAX_ATTEMPTS"),
    ],
)
def test_bad_values_name_the_variable(environ: dict[str, str], named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        bedrock_config(environ) if "BEDROCK" in named else client_config(environ)


def test_the_default_clients_carry_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("THREADLOOM_BEDROCK_READ_TIMEOUT", "60")
    default_sqs_client.cache_clear()
    sqs = default_sqs_client()
    default_sqs_client.cache_clear()
    assert (sqs.meta.config.connect_timeout, sqs.meta.config.read_timeout) == (3.0, 5.0)
    assert sqs.meta.config.retries["mode"] == "standard"
    bedrock = BedrockSummarizer("anthropic.claude-3-haiku-20240307-v1:0").client
    assert bedrock.meta.config.read_timeout == 60.0
    assert bedrock.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_the_summarizer_adds_no_attempts_of_its_own_by_default() -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    sleeps: list[float] = []
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ThrottlingException", "Rate exceeded", 429)
        summarizer = BedrockSummarizer("anthropic.claude-3-haiku-20240307-v1:0", client=client, sleep=sleeps.append)
        with pytest.raises(CompactionError, match="ThrottlingException"):
            summarizer("prompt")
        stub.assert_no_pending_responses()
    assert sleeps == []
