"""Event-driven compaction end to end: append → SQS FIFO → compaction Lambda → one fenced overlay (issue #4, D9).

Two stores over one database stand in for the two Lambdas: the API appends and enqueues, the compaction function
compacts. Every test runs against SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from threadloom import correlation
from threadloom.compaction.markers import is_compaction_message
from threadloom.compaction.queue import CompactionRequest
from threadloom.compaction.sqs_queue import SqsCompactionQueue, deduplication_id
from threadloom.compaction.summarizers import ExtractiveSummarizer

from tests.integration.compaction.sqs_lambda import (
    SECRET,
    CompactionLambda,
    api_manager,
    append_until_enqueued,
    chat_message,
    deliver,
    event_from_messages,
    event_from_requests,
    load_event,
    queue_arn,
    receive,
    worker_manager,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_sqs.client import SQSClient


def emitted_metrics(stdout: str) -> Counter[str]:
    """Sum of every EMF metric value printed by ``metrics.log_metrics``."""
    totals: Counter[str] = Counter()
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        blob = json.loads(line)
        if "_aws" not in blob:
            continue
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                value = blob[metric["Name"]]
                totals[metric["Name"]] += int(sum(value) if isinstance(value, list) else value)
    return totals


def visible(history: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What a model would read: ids and content (an overlay's ``createdAt`` is stamped when it is read)."""
    return [(message["id"], json.dumps(message["parts"])) for message in history]


def test_append_past_threshold_enqueues_and_the_lambda_compacts_once(
    make_store: Callable[[], Any],
    sqs: SQSClient,
    fifo_queue: str,
    compaction_lambda: CompactionLambda,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given an API manager that hands compaction to the FIFO queue, and the compaction Lambda over its own store
    api = api_manager(make_store(), SqsCompactionQueue(fifo_queue, client=sqs))
    worker = worker_manager(make_store())
    compaction_lambda.use_managers(lambda namespace: worker)
    session_id = api.create("Long chat").id

    # When messages are appended until one crosses the threshold
    appended = append_until_enqueued(api, session_id)

    # Then the crossing append enqueued exactly one request (FIFO group = session, dedup id = request identity)
    # and returned without compacting anything
    messages = receive(sqs, fifo_queue)
    assert len(messages) == 1
    request = CompactionRequest.from_json(messages[0]["Body"])
    assert (request.namespace, request.session_id, request.leaf_id) == ("tenant-a", session_id, appended[-1])
    assert messages[0]["Attributes"]["MessageGroupId"] == f"tenant-a:{session_id}"
    assert messages[0]["Attributes"]["MessageDeduplicationId"] == deduplication_id(request)
    assert api.get_compactions(session_id) == []
    assert len(api.get_history(session_id)) == len(appended)

    # When SQS hands that message to the compaction Lambda
    event = event_from_messages(messages, queue_arn(sqs, fifo_queue))
    response = compaction_lambda.invoke(event)

    # Then the batch succeeded, exactly one overlay exists, history is shorter and no raw message is lost
    assert response == load_event("sqs_compaction.expected")
    compactions = api.get_compactions(session_id)
    assert len(compactions) == 1
    history = api.get_history(session_id)
    assert len(history) < len(appended)
    assert sum(1 for message in history if is_compaction_message(message)) == 1
    assert history[-1]["id"] == appended[-1]
    session = api.get_session(session_id)
    assert all(session.get_message(message_id) == chat_message(session_id, i) for i, message_id in enumerate(appended))
    assert emitted_metrics(capsys.readouterr().out)["CompactionsCompleted"] == 1

    # When the same event is delivered again (an SQS redelivery)
    redelivery = compaction_lambda.invoke(event)

    # Then it is acknowledged and changes nothing: still one effective overlay, same history
    assert redelivery == {"batchItemFailures": []}
    assert api.get_compactions(session_id) == compactions
    assert visible(api.get_history(session_id)) == visible(history)
    assert emitted_metrics(capsys.readouterr().out)["CompactionsSkipped"] == 1


def test_a_reflection_after_a_compaction_is_queued_again_when_its_first_send_failed(
    make_store: Callable[[], Any],
    sqs: SQSClient,
    fifo_queue: str,
    compaction_lambda: CompactionLambda,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The overlay commits, then queueing the reflection fails: SQS redelivers, the worker finds the overlay
    stored (``duplicate``), and the reflection is asked for again rather than lost."""
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
    from threadloom.errors import StorageUnavailableError

    api = api_manager(make_store(), SqsCompactionQueue(fifo_queue, client=sqs))
    worker = worker_manager(make_store())
    compaction_lambda.use_managers(lambda namespace: worker)
    session_id = api.create("Long chat").id
    append_until_enqueued(api, session_id)
    event = event_from_messages(receive(sqs, fifo_queue), queue_arn(sqs, fifo_queue))
    asked: list[str] = []

    class Jobs:
        def reflect_after_compaction(self, request: CompactionRequest) -> None:
            asked.append(request.session_id)
            if len(asked) == 1:
                raise StorageUnavailableError("The queue is unavailable")

    monkeypatch.setattr(compaction_lambda.module, "_runtime_jobs", Jobs)
    with pytest.raises(BatchProcessingError):  # the batch's one record failed: SQS redelivers it
        compaction_lambda.invoke(event)
    assert compaction_lambda.invoke(event) == {"batchItemFailures": []}
    assert asked == [session_id, session_id]
    assert len(api.get_compactions(session_id)) == 1


def test_the_same_trigger_sent_twice_is_collapsed_by_the_fifo_queue(
    make_store: Callable[[], Any], sqs: SQSClient, fifo_queue: str
) -> None:
    # Given a request already on the queue
    queue = SqsCompactionQueue(fifo_queue, client=sqs)
    request = CompactionRequest.create("tenant-a", "session-1", "m-9")
    queue.enqueue(request)

    # When the producer sends the same trigger again (same namespace, session and leaf)
    queue.enqueue(CompactionRequest.create("tenant-a", "session-1", "m-9"))

    # Then SQS deduplicates it: one message to handle
    assert [message["Body"] for message in receive(sqs, fifo_queue)] == [request.to_json()]


def test_a_failing_summarizer_fails_only_its_own_session(
    make_store: Callable[[], Any],
    sqs: SQSClient,
    fifo_queue: str,
    compaction_lambda: CompactionLambda,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given two tenants' sessions past their threshold; the broken tenant's summarizer raises
    queue = SqsCompactionQueue(fifo_queue, client=sqs)
    api_ok, api_broken = (
        api_manager(make_store(), queue, "tenant-ok"),
        api_manager(make_store(), queue, "tenant-broken"),
    )

    def broken(prompt: str) -> str:
        raise RuntimeError("model endpoint unavailable")

    workers = {
        "tenant-ok": worker_manager(make_store(), "tenant-ok"),
        "tenant-broken": worker_manager(make_store(), "tenant-broken", broken),
    }
    compaction_lambda.use_managers(workers.__getitem__)
    ok_id, broken_id = api_ok.create("fine").id, api_broken.create("doomed").id
    append_until_enqueued(api_ok, ok_id)
    broken_appended = append_until_enqueued(api_broken, broken_id)
    api_broken.append(broken_id, chat_message(broken_id, len(broken_appended)))  # a second request, same group

    # When one batch carries the three requests
    delivery = deliver(compaction_lambda, sqs, fifo_queue)

    # Then both records of the broken session fail (the second without running), the other session compacts
    assert len(delivery.message_ids) == 3
    bodies = {record["messageId"]: json.loads(record["body"]) for record in delivery.event["Records"]}
    assert delivery.failed_ids == {mid for mid, body in bodies.items() if body["session_id"] == broken_id}
    assert len(delivery.failed_ids) == 2
    assert delivery.response == {
        "batchItemFailures": [{"itemIdentifier": mid} for mid in bodies if mid in delivery.failed_ids]
    }
    assert len(api_ok.get_compactions(ok_id)) == 1
    assert api_broken.get_compactions(broken_id) == []
    metrics = emitted_metrics(capsys.readouterr().out)  # the record failed by its group never ran: one failure
    assert (metrics["CompactionsCompleted"], metrics["CompactionsFailed"]) == (1, 1)

    # And the failed records come back for a retry, in order, while the succeeded one is gone
    retried = receive(sqs, fifo_queue)
    assert [message["MessageId"] for message in retried] == [mid for mid in bodies if mid in delivery.failed_ids]


def test_a_message_appended_while_the_summary_is_computed_is_never_hidden(
    make_store: Callable[[], Any], sqs: SQSClient, fifo_queue: str, compaction_lambda: CompactionLambda
) -> None:
    # Given a queued compaction whose summarizer is slow enough for the user to send another message meanwhile
    api = api_manager(make_store(), SqsCompactionQueue(fifo_queue, client=sqs))
    session_id = api.create("busy").id
    appended = append_until_enqueued(api, session_id)
    late = chat_message(session_id, len(appended))
    summarizer = ExtractiveSummarizer()

    def summarize_while_user_types(prompt: str) -> str:
        api.append(session_id, late)  # lands between the worker's snapshot and its commit
        return summarizer(prompt)

    worker = worker_manager(make_store(), summarize=summarize_while_user_types)
    compaction_lambda.use_managers(lambda namespace: worker)

    # When the compaction Lambda handles the request
    first = deliver(compaction_lambda, sqs, fifo_queue)

    # Then the overlay commits (its range is still on the branch) and the late message is visible after it
    assert first.failed_ids == set()
    assert len(api.get_compactions(session_id)) == 1
    history = api.get_history(session_id)
    assert history[-1] == late
    assert history[-2]["id"] == appended[-1]
    assert any(is_compaction_message(message) for message in history)

    # When the follow-up request the late append enqueued is handled as well
    worker_again = worker_manager(make_store())
    compaction_lambda.use_managers(lambda namespace: worker_again)
    second = deliver(compaction_lambda, sqs, fifo_queue)

    # Then it is acknowledged and the late message is still the visible leaf; every raw message is stored
    assert len(second.message_ids) == 1
    assert second.failed_ids == set()
    assert api.get_history(session_id)[-1] == late
    session = api.get_session(session_id)
    assert all(session.get_message(message_id) is not None for message_id in [*appended, late["id"]])


def test_a_compaction_committed_meanwhile_makes_the_request_stale_not_failed(
    make_store: Callable[[], Any],
    sqs: SQSClient,
    fifo_queue: str,
    compaction_lambda: CompactionLambda,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a queued request, and another process that stores an overlay while the worker summarizes
    api = api_manager(make_store(), SqsCompactionQueue(fifo_queue, client=sqs))
    session_id = api.create("contended").id
    appended = append_until_enqueued(api, session_id)
    summarizer = ExtractiveSummarizer()

    def summarize_during_manual_compaction(prompt: str) -> str:
        api.add_compaction(session_id, "Manual summary.", appended[1], appended[2])
        return summarizer(prompt)

    worker = worker_manager(make_store(), summarize=summarize_during_manual_compaction)
    compaction_lambda.use_managers(lambda namespace: worker)

    # When the compaction Lambda handles the request
    delivery = deliver(compaction_lambda, sqs, fifo_queue)

    # Then the fence refuses the stale overlay, the record is acknowledged, only the other overlay exists
    assert delivery.failed_ids == set()
    assert [compaction.summary for compaction in api.get_compactions(session_id)] == ["Manual summary."]
    assert receive(sqs, fifo_queue) == []
    assert emitted_metrics(capsys.readouterr().out)["CompactionsSkipped"] == 1


def test_a_request_for_a_deleted_session_is_acknowledged(
    make_store: Callable[[], Any], sqs: SQSClient, fifo_queue: str, compaction_lambda: CompactionLambda
) -> None:
    # Given a queued request whose session is deleted before the worker runs
    api = api_manager(make_store(), SqsCompactionQueue(fifo_queue, client=sqs))
    session_id = api.create("short-lived").id
    append_until_enqueued(api, session_id)
    assert api.delete(session_id)
    worker = worker_manager(make_store())
    compaction_lambda.use_managers(lambda namespace: worker)

    # When the compaction Lambda handles it
    delivery = deliver(compaction_lambda, sqs, fifo_queue)

    # Then nothing fails, nothing is left on the queue and no overlay was resurrected for the session
    assert len(delivery.message_ids) == 1
    assert delivery.response == {"batchItemFailures": []}
    assert receive(sqs, fifo_queue) == []
    assert worker.get(session_id) is None
    assert worker.get_session(session_id).get_compactions() == []


def test_an_unreadable_body_fails_its_record_and_the_rest_of_the_batch_proceeds(
    make_store: Callable[[], Any], compaction_lambda: CompactionLambda
) -> None:
    # Given a batch with a valid request for a missing session and a record whose body is not a request
    worker = worker_manager(make_store())
    compaction_lambda.use_managers(lambda namespace: worker)
    event = event_from_requests(
        CompactionRequest.create("tenant-a", "no-such-session", "m-1"),
        CompactionRequest.create("tenant-b", "other-session", "m-2"),
    )
    event["Records"][1]["body"] = '{"namespace": "tenant-b"}'

    # When the handler runs
    response = compaction_lambda.invoke(event)

    # Then only the unreadable record is reported for retry (and, after maxReceiveCount, the dead-letter queue)
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][1]["messageId"]}]}


def test_a_record_that_keeps_failing_moves_to_the_dead_letter_queue(
    make_store: Callable[[], Any],
    sqs: SQSClient,
    fifo_queue_with_dlq: tuple[str, str],
    compaction_lambda: CompactionLambda,
) -> None:
    # Given a queue with maxReceiveCount=2 and a session whose summarizer always fails
    queue_url, dlq_url = fifo_queue_with_dlq
    api = api_manager(make_store(), SqsCompactionQueue(queue_url, client=sqs))

    def broken(prompt: str) -> str:
        raise RuntimeError("model endpoint unavailable")

    worker = worker_manager(make_store(), summarize=broken)
    compaction_lambda.use_managers(lambda namespace: worker)
    session_id = api.create("poison").id
    append_until_enqueued(api, session_id)

    # When the event source mapping delivers it twice and it fails both times
    first = deliver(compaction_lambda, sqs, queue_url)
    second = deliver(compaction_lambda, sqs, queue_url)

    # Then each delivery failed the whole (one-record) batch, with the receive count rising
    assert first.response is None and second.response is None
    assert first.message_ids == second.message_ids
    assert [
        record["attributes"]["ApproximateReceiveCount"]
        for record in (first.event["Records"][0], second.event["Records"][0])
    ] == ["1", "2"]

    # And the next poll finds it on the dead-letter queue instead of the source queue, body and group intact
    assert receive(sqs, queue_url) == []
    dead = receive(sqs, dlq_url)
    assert [message["Body"] for message in dead] == [first.event["Records"][0]["body"]]
    assert dead[0]["Attributes"]["MessageGroupId"] == f"tenant-a:{session_id}"
    assert api.get_compactions(session_id) == []


def test_logs_carry_the_correlation_id_and_outcome_but_never_message_text(
    make_store: Callable[[], Any], sqs: SQSClient, fifo_queue: str, compaction_lambda: CompactionLambda
) -> None:
    # Given a queued compaction of messages that all contain SECRET
    api = api_manager(make_store(), SqsCompactionQueue(fifo_queue, client=sqs))
    worker = worker_manager(make_store())
    compaction_lambda.use_managers(lambda namespace: worker)
    session_id = api.create("private").id
    append_until_enqueued(api, session_id)

    # When the Lambda handles it
    delivery = deliver(compaction_lambda, sqs, fifo_queue)

    # Then the handler's log line for the record has its message id as correlation id and the outcome,
    # the library's log lines come out as the same JSON with the same keys, and no line contains conversation text
    lines = compaction_lambda.log_lines()
    handled = [line for line in lines if line["message"] == "Compaction request handled"]
    assert [(line["correlation_id"], line["outcome"], line["session_id"]) for line in handled] == [
        (delivery.message_ids[0], "compacted", session_id)
    ]
    library = [line for line in lines if line.get("name") == "threadloom.core.compaction_worker"]
    assert library
    assert {(line["correlation_id"], line["session_id"]) for line in library} == {(delivery.message_ids[0], session_id)}
    assert SECRET not in compaction_lambda.log_stream.getvalue()


def test_the_api_request_id_travels_through_the_queue_into_the_workers_logs(
    make_store: Callable[[], Any], sqs: SQSClient, fifo_queue: str, compaction_lambda: CompactionLambda
) -> None:
    # Given an API request (id bound as the HTTP handler binds it) whose append queues a compaction
    api = api_manager(make_store(), SqsCompactionQueue(fifo_queue, client=sqs))
    worker = worker_manager(make_store())
    compaction_lambda.use_managers(lambda namespace: worker)
    session_id = api.create("traced").id
    with correlation.bound("api-request-7f3a"):
        append_until_enqueued(api, session_id)

    # When the Lambda handles the message
    delivery = deliver(compaction_lambda, sqs, fifo_queue)

    # Then the message carried the request id, and every log line of the record has it as correlation id,
    # with the SQS message id beside it
    assert delivery.event["Records"][0]["messageAttributes"][correlation.MESSAGE_ATTRIBUTE]["stringValue"] == (
        "api-request-7f3a"
    )
    lines = [line for line in compaction_lambda.log_lines() if line.get("session_id") == session_id]
    assert any(line["message"] == "Compaction request handled" for line in lines)
    assert {(line["correlation_id"], line["sqs_message_id"]) for line in lines} == {
        ("api-request-7f3a", delivery.message_ids[0])
    }


def test_the_sample_event_gets_the_expected_response_through_the_process_runtime(
    tmp_path: Path, compaction_lambda: CompactionLambda
) -> None:
    # Given the process runtime over an empty SQLite store, and no worker injected (get_worker builds it)
    from threadloom.api.runtime import Runtime, Settings, set_runtime

    runtime = Runtime(Settings(sqlite_path=str(tmp_path / "threadloom.db"), compaction_mode="inline"))
    set_runtime(runtime)
    compaction_lambda.module.set_worker(None)
    try:
        # When the handler receives events/sqs_compaction.json unchanged (what `sam local invoke` would feed it)
        response = compaction_lambda.invoke(load_event("sqs_compaction"))
    finally:
        set_runtime(None)
        runtime.store.close()

    # Then its session is unknown to this store, so the record is acknowledged: the expected response
    assert response == load_event("sqs_compaction.expected")
