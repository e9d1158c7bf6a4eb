"""Drive the compaction Lambda the way its SQS event source mapping does, without AWS or Docker.

``events/sqs_compaction.json`` (the file ``sam local invoke CompactionFunction -e`` reads) is the template of every
record: tests copy it and change only what identifies a message (ids, receipt handle, body, FIFO attributes).
``deliver`` plays the event source mapping: receive a batch, invoke the handler, delete what succeeded and release
what failed (visibility 0), so SQS redelivers it and counts the receive towards the redrive policy.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from threadloom.compaction import create_compact_function
from threadloom.compaction.sqs_queue import deduplication_id, message_group_id
from threadloom.compaction.summarizers import ExtractiveSummarizer
from threadloom.core.compaction_worker import CompactionWorker
from threadloom.core.manager import SessionManager

from tests.support.messages import text_message

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef
    from threadloom.compaction.queue import CompactionQueue, CompactionRequest

EVENTS = Path(__file__).resolve().parents[3] / "events"
THRESHOLD = 1000
TAIL_TOKEN_BUDGET = 150
SECRET = "ultramarine-pelican"
"""A phrase in every test message: it must never show up in a log line."""
_FIFO_ATTRIBUTES = (
    "ApproximateReceiveCount",
    "ApproximateFirstReceiveTimestamp",
    "SentTimestamp",
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
    "SenderId",
)


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / f"{name}.json").read_text(encoding="utf-8"))


def _record_template() -> dict[str, Any]:
    return copy.deepcopy(load_event("sqs_compaction")["Records"][0])


def event_from_messages(messages: list[MessageTypeDef], queue_arn: str) -> dict[str, Any]:
    """The Lambda event for messages received from SQS (with ``MessageSystemAttributeNames=["All"]``)."""
    records = []
    for message in messages:
        record = _record_template()
        record.update(
            messageId=message["MessageId"],
            receiptHandle=message["ReceiptHandle"],
            body=message["Body"],
            md5OfBody=message["MD5OfBody"],
            eventSourceARN=queue_arn,
            awsRegion=queue_arn.split(":")[3],
        )
        attributes = message.get("Attributes", {})
        record["attributes"].update({name: attributes[name] for name in _FIFO_ATTRIBUTES if name in attributes})
        record["messageAttributes"] = {
            name: {
                "stringValue": value.get("StringValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        }
        records.append(record)
    return {"Records": records}


def event_from_requests(*requests: CompactionRequest) -> dict[str, Any]:
    """A Lambda event carrying ``requests`` as the producer would have sent them (no queue involved)."""
    records = []
    for index, request in enumerate(requests):
        record = _record_template()
        body = request.to_json()
        record.update(
            messageId=f"{record['messageId'][:-4]}{index:04d}",
            body=body,
            md5OfBody=hashlib.md5(body.encode("utf-8")).hexdigest(),
        )
        record["attributes"].update(
            MessageGroupId=message_group_id(request),
            MessageDeduplicationId=deduplication_id(request),
            SequenceNumber=str(int(record["attributes"]["SequenceNumber"]) + index),
        )
        records.append(record)
    return {"Records": records}


def receive(sqs: SQSClient, queue_url: str) -> list[MessageTypeDef]:
    """One batch as Lambda polls it: up to 10 messages, with their FIFO system attributes."""
    return sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        MessageSystemAttributeNames=["All"],
        MessageAttributeNames=["All"],
        VisibilityTimeout=60,
    ).get("Messages", [])


def queue_arn(sqs: SQSClient, queue_url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


@dataclass
class FakeLambdaContext:
    function_name: str = "threadloom-compaction"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:threadloom-compaction"
    aws_request_id: str = "52fdfc07-2182-454f-963f-5f0f9a621d72"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class CompactionLambda:
    """The real handler module, its fake context, and what its Powertools logger wrote."""

    module: ModuleType
    context: FakeLambdaContext
    log_stream: io.StringIO = field(default_factory=io.StringIO)

    def use_managers(self, resolve_manager: Callable[[str], SessionManager]) -> None:
        self.module.set_worker(CompactionWorker(resolve_manager))

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.module.lambda_handler(event, self.context)

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_stream.getvalue().splitlines() if line.strip()]


@dataclass
class Delivery:
    """One poll of the queue: the event sent to the handler, its response, and the ids that failed."""

    event: dict[str, Any]
    response: dict[str, Any] | None
    failed_ids: set[str]

    @property
    def message_ids(self) -> list[str]:
        return [record["messageId"] for record in self.event["Records"]]


def deliver(function: CompactionLambda, sqs: SQSClient, queue_url: str) -> Delivery:
    """Poll once and handle the batch like the event source mapping (with ReportBatchItemFailures)."""
    messages = receive(sqs, queue_url)
    event = event_from_messages(messages, queue_arn(sqs, queue_url))
    response: dict[str, Any] | None
    try:
        response = function.invoke(event)
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    except BatchProcessingError:  # every record failed: the invocation errors and the whole batch returns
        response = None
        failed = {message["MessageId"] for message in messages}
    for message in messages:
        if message["MessageId"] in failed:
            sqs.change_message_visibility(
                QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        else:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return Delivery(event, response, failed)


def save_logger_state(name: str) -> Callable[[], None]:
    """Snapshot a stdlib logger's routing; the returned function puts it back."""
    target = logging.getLogger(name)
    handlers, propagate, level = list(target.handlers), target.propagate, target.level

    def restore() -> None:
        target.handlers = handlers
        target.propagate = propagate
        target.setLevel(level)

    return restore


# ------------------------------------------------------------------- sessions


def compact_function(summarize: Callable[[str], str] | None = None) -> Any:
    """The reference compaction function with a small tail budget, so a handful of messages is "long"."""
    return create_compact_function(summarize or ExtractiveSummarizer(), tail_token_budget=TAIL_TOKEN_BUDGET)


def api_manager(store: Any, queue: CompactionQueue, namespace: str = "tenant-a") -> SessionManager:
    """The request-path manager: crossing the threshold only enqueues (D9)."""
    return (
        SessionManager.create(store, namespace=namespace)
        .on_compaction(compact_function())
        .compact_after(THRESHOLD)
        .with_compaction_queue(queue)
    )


def worker_manager(
    store: Any, namespace: str = "tenant-a", summarize: Callable[[str], str] | None = None
) -> SessionManager:
    """The compaction Lambda's manager of a namespace: same compaction function, no threshold, no queue."""
    return SessionManager.create(store, namespace=namespace).on_compaction(compact_function(summarize))


def chat_message(session_id: str, index: int) -> dict[str, Any]:
    """About 80 estimated tokens of plain conversation, carrying ``SECRET``."""
    role = "user" if index % 2 == 0 else "assistant"
    sentence = f"Turn {index} talks about the {SECRET} migration plan and its rollout checklist in detail. "
    return text_message(f"{session_id}-m{index:03d}", sentence * 4, role)


def append_until_enqueued(manager: SessionManager, session_id: str, start: int = 0) -> list[str]:
    """Append messages until the estimate crosses the threshold; the last append is the one that enqueued."""
    session = manager.get_session(session_id)
    ids: list[str] = []
    index = start
    while True:
        ids.append(manager.append(session_id, chat_message(session_id, index)))
        index += 1
        if session.estimate_tokens() > THRESHOLD:
            return ids
