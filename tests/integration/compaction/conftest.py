"""Fixtures of the compaction Lambda tests: a moto FIFO queue, the real handler module, stores of either backend."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from mypy_boto3_sqs.client import SQSClient
from threadloom import SqliteStore

from tests.integration.compaction.sqs_lambda import CompactionLambda, FakeLambdaContext, save_logger_state


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """New stores over one database: one per "process" (the API Lambda, the compaction Lambda)."""
    if request.param == "postgres":
        yield request.getfixturevalue("postgres_store_factory")
        return
    opened: list[SqliteStore] = []

    def factory() -> SqliteStore:
        store = SqliteStore(str(tmp_path / "threadloom.db"))
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def sqs() -> Iterator[SQSClient]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


@pytest.fixture
def fifo_queue(sqs: SQSClient) -> str:
    """A FIFO queue shaped like the stack's (explicit deduplication ids, no content-based deduplication)."""
    return sqs.create_queue(QueueName="threadloom-compaction.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]


@pytest.fixture
def fifo_queue_with_dlq(sqs: SQSClient) -> tuple[str, str]:
    """A FIFO queue whose messages move to a FIFO dead-letter queue after two receives."""
    dlq_url = sqs.create_queue(QueueName="threadloom-compaction-dlq.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(
        QueueName="threadloom-compaction.fifo",
        Attributes={
            "FifoQueue": "true",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
        },
    )["QueueUrl"]
    return url, dlq_url


@pytest.fixture
def compaction_lambda(monkeypatch: pytest.MonkeyPatch) -> Iterator[CompactionLambda]:
    """The real handler module, its Powertools log output captured, the library's logger left as found."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "threadloom-compaction")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ThreadloomTests")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    restore_library_logger = save_logger_state("threadloom")
    module = importlib.import_module("threadloom_compaction")
    module.route_library_logs()
    function = CompactionLambda(module, FakeLambdaContext())
    handler = module.logger.registered_handler
    previous_stream = handler.setStream(function.log_stream)
    yield function
    handler.setStream(previous_stream)
    module.set_worker(None)
    module.metrics.clear_metrics()
    restore_library_logger()
