"""Compaction Lambda: SQS FIFO records, each a ``CompactionRequest``, handed to the compaction worker (contract D9).

A request of kind ``reflection`` goes to the reflection worker instead (``threadloom.api.background``), and a
compaction that stored an overlay queues a reflection when the profile's ``reflection.after_compaction`` is on
(a redelivered one too, whose overlay is already stored, so a failed send of that reflection is retried).

A failing record fails only the rest of its own message group (its session), which SQS redelivers, and after the
queue's maxReceiveCount moves to the dead-letter queue; the other sessions of the batch proceed.
An invalid deployment profile is logged once at init, which then fails (``threadloom.api.startup``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from threadloom.api import startup
from threadloom.api.observability import logger, metrics, route_library_logs, tracer
from threadloom.compaction.queue import CompactionRequest
from threadloom.core.compaction_worker import CompactionOutcome, CompactionWorker
from threadloom.correlation import MESSAGE_ATTRIBUTE

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from threadloom.api.background import BackgroundJobs

__all__ = ["get_worker", "lambda_handler", "record_handler", "route_library_logs", "set_worker"]

startup.fail_init_on_invalid_profile()  # logged once; no record is consumed under a profile nobody meant
processor = SqsFifoPartialProcessor(skip_group_on_error=True)
_worker: CompactionWorker | None = None


def get_worker() -> CompactionWorker:
    """The worker over the process-wide runtime, built on first use so importing this module needs no settings."""
    global _worker  # noqa: PLW0603 - one worker per Lambda execution environment
    if _worker is None:
        from threadloom.api.runtime import get_runtime

        _worker = CompactionWorker(lambda namespace: get_runtime().manager(namespace))
    return _worker


def set_worker(worker: CompactionWorker | None) -> None:
    """Replace (or with None, forget) the worker; for tests and local runs."""
    global _worker  # noqa: PLW0603
    _worker = worker


@tracer.capture_method(capture_response=False)
def record_handler(record: SQSRecord) -> str:
    logger.remove_keys(["namespace", "session_id", "sqs_message_id"])  # the previous record's, never this one's
    # The API request that queued this compaction, when it said (else the message itself).
    attributes = record.message_attributes
    api_request_id = attributes[MESSAGE_ATTRIBUTE].string_value if MESSAGE_ATTRIBUTE in attributes else None
    logger.set_correlation_id(api_request_id or record.message_id)
    logger.append_keys(sqs_message_id=record.message_id)
    try:
        request = CompactionRequest.from_json(record.body)
        logger.append_keys(namespace=request.namespace, session_id=request.session_id)
        if request.kind == "reflection":
            return _reflect(request)
        outcome = get_worker().handle(request)
        # A duplicate too: a redelivery after the reflection's own send failed must not lose it (a reflection
        # asked for twice reads nothing new the second time)
        if outcome in (CompactionOutcome.COMPACTED, CompactionOutcome.DUPLICATE):
            _runtime_jobs().reflect_after_compaction(request)
    except Exception as error:
        metrics.add_metric(name="CompactionsFailed", unit=MetricUnit.Count, value=1)
        logger.exception("Compaction request failed; SQS will redeliver it", error_type=type(error).__name__)
        raise
    completed = outcome is CompactionOutcome.COMPACTED
    metrics.add_metric(
        name="CompactionsCompleted" if completed else "CompactionsSkipped", unit=MetricUnit.Count, value=1
    )
    logger.info("Compaction request handled", outcome=outcome.value)
    return outcome.value


def _runtime_jobs() -> BackgroundJobs:
    from threadloom.api.runtime import get_runtime

    return get_runtime().jobs


def _reflect(request: CompactionRequest) -> str:
    try:
        outcome = _runtime_jobs().handle(request)
    except Exception as error:
        metrics.add_metric(name="ReflectionsFailed", unit=MetricUnit.Count, value=1)
        logger.exception("Reflection request failed; SQS will redeliver it", error_type=type(error).__name__)
        raise
    metrics.add_metric(name="ReflectionsHandled", unit=MetricUnit.Count, value=1)
    logger.info("Reflection request handled", outcome=outcome)
    return outcome


# No clear_state: it would also drop the logger-name key that route_library_logs adds to library log lines.
@logger.inject_lambda_context
@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return dict(
        process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    )
