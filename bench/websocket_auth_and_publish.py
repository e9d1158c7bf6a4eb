"""The live-status path on AWS: $connect JWT verification and one publish, each beside its raw baseline.

JWT: ``JwtVerifier.verify`` (key from the cached JWKS, then PyJWT's checks and the audience rule) against a
bare ``jwt.decode`` with the public key already in hand; the first verify also fetches the JWKS over local
HTTP. Publish: ``ManagementApiPublisher.publish`` to N subscribers against the raw work it wraps (one Query,
N ``post_to_connection``), both on moto's DynamoDB with a no-op Management API, so the ratio is the
publisher's own overhead. Hand-off: ``QueuePublisher.publish`` (what a write in the VPC pays with
``LivePublishing=queue``) against one Query plus one ``send_message`` on moto's DynamoDB and SQS FIFO, for an
unwatched session (the Query alone) and watched ones. Samples of both sides are interleaved so machine drift
affects both equally.

Run: .venv/bin/python bench/websocket_auth_and_publish.py
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from moto import mock_aws
from threadloom.live.aws.connections import ConnectionsTable, session_key
from threadloom.live.aws.jwt_verifier import JwtSettings, JwtVerifier
from threadloom.live.aws.publisher import ManagementApiPublisher
from threadloom.live.aws.queue_publisher import QueuePublisher
from threadloom.live.aws.relay import RelayMessage, deduplication_id, message_group_id
from threadloom.live.events import SessionStatus, encode, session_status

SAMPLES = 300
AUDIENCE = "bench-client"
TABLE = "bench-connections"


class NoOpManagementApi:
    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> dict[str, Any]:
        return {}


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def bench_jwt() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwks = json.dumps({"keys": [{**json.loads(RSAAlgorithm.to_jwk(key.public_key())), "kid": "k1", "alg": "RS256"}]})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = jwks.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    issuer = f"http://127.0.0.1:{server.server_address[1]}"
    claims = {"iss": issuer, "aud": AUDIENCE, "sub": "tenant-a", "exp": int(time.time()) + 3600}
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
    verifier = JwtVerifier(JwtSettings(issuer=issuer, audiences=(AUDIENCE,)))
    public_key = key.public_key()

    started = time.perf_counter()
    verifier.verify(token)
    first = time.perf_counter() - started
    ours: list[float] = []
    raw: list[float] = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        verifier.verify(token)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        jwt.decode(token, public_key, algorithms=["RS256"], audience=AUDIENCE, issuer=issuer)
        raw.append(time.perf_counter() - started)
    server.shutdown()
    print(f"JWT verify (RS256, {SAMPLES} samples, median)")
    print(f"  first verify, JWKS fetched:   {first * 1e6:9.0f} us")
    print(f"  JwtVerifier.verify (cached):  {median_us(ours):9.0f} us")
    print(f"  raw jwt.decode (key in hand): {median_us(raw):9.0f} us   ratio {median_us(ours) / median_us(raw):.2f}x")


def bench_publish() -> None:
    event = session_status("s1", SessionStatus("idle", 1234, 100_000))
    print(f"\nPublish one event (moto DynamoDB, no-op Management API, {SAMPLES // 3} samples, median)")
    print(f"  {'subscribers':>11}  {'publisher':>10}  {'raw':>10}  ratio")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        table = ConnectionsTable(TABLE, client=client)
        api = NoOpManagementApi()
        publisher = ManagementApiPublisher(table, "https://bench.example/dev", client=api, budget_seconds=10)  # type: ignore[arg-type]
        subscribed = 0
        for count in (1, 5, 20):
            for index in range(subscribed, count):
                table.open(f"c{index}", tenant="tenant-a")
                table.subscribe(f"c{index}", tenant="tenant-a", session_id="s1")
            subscribed = count
            ours: list[float] = []
            raw: list[float] = []
            for _ in range(SAMPLES // 3):
                started = time.perf_counter()
                publisher.publish("tenant-a", "s1", event)
                ours.append(time.perf_counter() - started)
                started = time.perf_counter()
                page = client.query(
                    TableName=TABLE,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": {"S": session_key("tenant-a", "s1")}},
                    ConsistentRead=True,
                )
                data = encode(event).encode()
                for item in page["Items"]:
                    api.post_to_connection(ConnectionId=item["connection_id"]["S"], Data=data)
                raw.append(time.perf_counter() - started)
            ratio = median_us(ours) / median_us(raw)
            print(f"  {count:>11}  {median_us(ours):8.0f}us  {median_us(raw):8.0f}us  {ratio:.2f}x")


def drain(sqs: Any, url: str) -> None:
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        sqs.delete_message_batch(QueueUrl=url, Entries=entries)


def bench_handoff() -> None:
    event = session_status("s1", SessionStatus("idle", 1234, 100_000))
    print(f"\nHand one event to the live queue (moto DynamoDB + SQS FIFO, {SAMPLES // 3} samples, median)")
    print(f"  {'subscribers':>11}  {'publisher':>10}  {'raw':>10}  ratio")
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="bench-live.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        table = ConnectionsTable(TABLE, client=client)
        publisher = QueuePublisher(table, url, client=sqs, budget_seconds=10)
        subscribed = 0
        for count in (0, 1, 20):
            for index in range(subscribed, count):
                table.open(f"c{index}", tenant="tenant-a")
                table.subscribe(f"c{index}", tenant="tenant-a", session_id="s1")
            subscribed = count
            ours: list[float] = []
            raw: list[float] = []
            for _ in range(SAMPLES // 3):
                started = time.perf_counter()
                publisher.publish("tenant-a", "s1", event)
                ours.append(time.perf_counter() - started)
                started = time.perf_counter()
                page = client.query(
                    TableName=TABLE,
                    KeyConditionExpression="pk = :pk",
                    ExpressionAttributeValues={":pk": {"S": session_key("tenant-a", "s1")}},
                    ConsistentRead=True,
                )
                ids = tuple(item["connection_id"]["S"] for item in page["Items"])
                if ids:
                    sqs.send_message(
                        QueueUrl=url,
                        MessageBody=RelayMessage("tenant-a", "s1", ids, event).to_json(),
                        MessageGroupId=message_group_id("tenant-a", "s1"),
                        MessageDeduplicationId=deduplication_id(),
                    )
                raw.append(time.perf_counter() - started)
                drain(sqs, url)  # untimed: moto's FIFO queue slows down as it fills
            ratio = median_us(ours) / median_us(raw)
            print(f"  {count:>11}  {median_us(ours):8.0f}us  {median_us(raw):8.0f}us  {ratio:.2f}x")


if __name__ == "__main__":
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(variable, "bench")
    bench_jwt()
    bench_publish()
    bench_handoff()
