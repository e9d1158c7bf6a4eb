"""The live publisher Lambda, outside the VPC: posts each relay message of the live-events queue to its connections.

The API and compaction functions run in private subnets that cannot reach the API Gateway Management API; they
queue one relay message per event of a watched session (``threadloom.live.aws.queue_publisher``). Each record here
is parsed (``RelayMessage``) and posted (``ConnectionPoster``, several posts in flight): a 410 Gone forgets the
connection. Posting is best
effort, so a post that fails is logged and counted, not retried (a retry would hold back the session's newer
events). A record that cannot be parsed is no better on a retry either: it is logged, counted
(``LiveMessagesRejected``, which an alarm watches) and dropped, so its session's later events are not held back.
Anything else that goes wrong fails the record (partial batch response): SQS redelivers it, and after the queue's
maxReceiveCount it waits in the dead-letter queue, where another alarm reports it.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from threadloom.api.observability import logger, metrics, tracer
from threadloom.correlation import MESSAGE_ATTRIBUTE
from threadloom.errors import ValidationError
from threadloom.live.aws.relay import DELIVERY_BUDGET_SECONDS, DELIVERY_CONCURRENCY, RelayMessage

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from threadloom.live.aws.posting import ConnectionPoster

__all__ = ["get_poster", "lambda_handler", "record_handler", "set_poster"]

processor = SqsFifoPartialProcessor(skip_group_on_error=True)
_poster: ConnectionPoster | None = None


def get_poster() -> ConnectionPoster:
    """The poster of ``THREADLOOM_WEBSOCKET_ENDPOINT`` over ``THREADLOOM_CONNECTIONS_TABLE``, built on first use."""
    global _poster  # noqa: PLW0603 - one poster (and Management API client) per Lambda execution environment
    if _poster is None:
        from threadloom.live.aws.connections import ConnectionsTable
        from threadloom.live.aws.posting import ConnectionPoster

        table = ConnectionsTable(os.environ.get("THREADLOOM_CONNECTIONS_TABLE", ""))
        endpoint = os.environ.get("THREADLOOM_WEBSOCKET_ENDPOINT", "")
        _poster = ConnectionPoster(table, endpoint, concurrency=DELIVERY_CONCURRENCY)
    return _poster


def set_poster(poster: ConnectionPoster | None) -> None:
    """Replace (or with None, forget) the poster; for tests."""
    global _poster  # noqa: PLW0603
    _poster = poster


@tracer.capture_method(capture_response=False)
def record_handler(record: SQSRecord) -> str:
    logger.remove_keys(["namespace", "session_id", "sqs_message_id"])  # the previous record's, never this one's
    # The API request whose write published this event, when it said (else the message itself).
    attribute = record.message_attributes[MESSAGE_ATTRIBUTE]  # None when absent (Powertools' mapping)
    api_request_id = attribute.string_value if attribute is not None else None
    logger.set_correlation_id(api_request_id or record.message_id)
    logger.append_keys(sqs_message_id=record.message_id)
    try:
        message = RelayMessage.from_json(record.body)
    except ValidationError as error:
        metrics.add_metric(name="LiveMessagesRejected", unit=MetricUnit.Count, value=1)
        logger.error("Live relay message rejected and dropped", reason=str(error), body_bytes=len(record.body))
        return "rejected"
    logger.append_keys(namespace=message.namespace, session_id=message.session_id)
    outcome = get_poster().post_all(
        message.connection_ids,
        message.data(),
        deadline=time.monotonic() + DELIVERY_BUDGET_SECONDS,
        what=f"{message.event['type']} for session {message.session_id!r}",
    )
    metrics.add_metric(name="LivePostsDelivered", unit=MetricUnit.Count, value=outcome.delivered)
    metrics.add_metric(name="LiveConnectionsGone", unit=MetricUnit.Count, value=outcome.gone)
    metrics.add_metric(name="LivePostsFailed", unit=MetricUnit.Count, value=outcome.failed + outcome.skipped)
    logger.debug("Relay message posted", delivered=outcome.delivered, gone=outcome.gone, failed=outcome.failed)
    return f"delivered {outcome.delivered} of {len(message.connection_ids)}"


# No clear_state: it would also drop the logger-name key that route_library_logs adds to library log lines.
@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
