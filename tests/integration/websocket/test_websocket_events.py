"""Every sample event in events/websocket through the real handlers: moto connections table, seeded SQLite store."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import boto3
import jwt
import pytest
from moto import mock_aws
from threadloom.api.runtime import set_runtime
from threadloom.live.aws.connections import ConnectionsTable
from threadloom.live.aws.jwt_verifier import JwtSettings, JwtVerifier
from threadloom.live.aws.routes import WebSocketRoutes

from tests.support.api import SESSION, TENANT, seeded_runtime
from tests.support.connections import CONNECTIONS_TABLE, create_connections_table
from tests.support.jwks import AUDIENCE, LocalIssuer, serve_issuer, unsigned_token
from tests.support.websocket import (
    CONNECTION,
    OTHER_TENANT,
    OTHER_TENANT_CONNECTION,
    event_names,
    invoke_authorizer,
    invoke_routes,
    load_event,
    load_expected,
    with_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from mypy_boto3_dynamodb.client import DynamoDBClient
    from threadloom.api.runtime import Runtime

ROUTE_EVENTS = [name for name in event_names("") if not name.startswith("authorize")]
AUTHORIZER_EVENTS = event_names("authorize")


@pytest.fixture
def connections(tmp_path: Path) -> Iterator[ConnectionsTable]:
    """A moto table with the sample connection open for ``user-123`` and another for ``user-456``."""
    import threadloom_websocket

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        table = ConnectionsTable(CONNECTIONS_TABLE, client=client)
        runtime, _queue = seeded_runtime(tmp_path)
        threadloom_websocket.set_routes(WebSocketRoutes(table, runtime.manager))
        yield table
        threadloom_websocket.set_routes(None)
        set_runtime(None)


def open_sample_connections(table: ConnectionsTable) -> None:
    table.open(CONNECTION, tenant=TENANT)
    table.open(OTHER_TENANT_CONNECTION, tenant=OTHER_TENANT)


@pytest.mark.parametrize("name", ROUTE_EVENTS)
def test_route_event_gives_expected_response(name: str, connections: ConnectionsTable) -> None:
    # Given the sample connections (except for $connect, which opens its own), subscribed to the session
    if name != "connect":
        open_sample_connections(connections)
        connections.subscribe(CONNECTION, tenant=TENANT, session_id=SESSION)
    # When the event is handled
    response = invoke_routes(load_event(name))
    # Then the reply is the expected one
    assert response == load_expected(name)


def test_connect_records_the_authorizers_tenant(connections: ConnectionsTable) -> None:
    invoke_routes(load_event("connect"))
    assert connections.tenant_of(CONNECTION) == TENANT


def test_a_connection_acts_no_longer_than_the_token_it_opened_with(
    connections: ConnectionsTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a connection opened with a token that expires in a minute, subscribed to the session
    connect = load_event("connect")
    expires = int(time.time()) + 60
    connect["requestContext"]["authorizer"]["tokenExpiresAt"] = str(expires)  # as API Gateway passes it
    invoke_routes(connect)
    assert invoke_routes(load_event("subscribe"))["body"]["type"] == "subscribed"
    assert connections.subscribers(TENANT, SESSION) == [CONNECTION]
    # When the token has expired, the connection is told it is not open and its subscription is sent nothing
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    assert invoke_routes(load_event("subscribe"))["body"]["type"] == "error"
    assert connections.subscribers(TENANT, SESSION) == []


def test_connect_without_authorizer_context_is_refused(connections: ConnectionsTable) -> None:
    event = load_event("connect")
    del event["requestContext"]["authorizer"]
    assert invoke_routes(event) == {"statusCode": 403}
    assert connections.tenant_of(CONNECTION) is None


def test_subscribe_records_the_subscription(connections: ConnectionsTable) -> None:
    open_sample_connections(connections)
    invoke_routes(load_event("subscribe"))
    assert connections.subscribers(TENANT, SESSION) == [CONNECTION]


def test_another_tenants_session_is_not_subscribed(connections: ConnectionsTable) -> None:
    open_sample_connections(connections)
    response = invoke_routes(load_event("subscribe_other_tenant"))
    assert response["body"]["type"] == "error"
    assert connections.subscribers(TENANT, SESSION) == []
    assert connections.subscribers(OTHER_TENANT, SESSION) == []
    assert connections.subscriptions_of(OTHER_TENANT_CONNECTION) == []


def test_a_forged_authorizer_tenant_does_not_widen_a_connection(connections: ConnectionsTable) -> None:
    # The stored tenant decides, not whatever the message event claims
    open_sample_connections(connections)
    event = load_event("subscribe_other_tenant")
    event["requestContext"]["authorizer"]["tenant"] = TENANT
    assert invoke_routes(event)["body"]["type"] == "error"
    assert connections.subscribers(TENANT, SESSION) == []


def test_unknown_connection_gets_an_error(connections: ConnectionsTable) -> None:
    response = invoke_routes(load_event("subscribe"))
    assert response["body"] == {"type": "error", "error": "This connection is not open (or has expired): reconnect"}
    assert connections.subscribers(TENANT, SESSION) == []


@pytest.mark.parametrize("action", ["subscribe", "unsubscribe"])
@pytest.mark.parametrize("session_id", ["\u0000", "\ud800", "\N{GRINNING FACE}" * 200])
def test_a_session_id_no_session_can_hold_is_an_error_event(
    connections: ConnectionsTable, action: str, session_id: str
) -> None:
    """Text the stores or the table key refuse (NUL, a lone surrogate, a key past 2,048 bytes) raised from
    them: a failed invocation, and an alarm any user could fire. The REST API's id rule now answers first."""
    open_sample_connections(connections)
    connections.subscribe(CONNECTION, tenant=TENANT, session_id=SESSION)
    event = load_event(action)
    event["body"] = json.dumps({"action": action, "sessionId": session_id})
    response = invoke_routes(event)
    assert response["body"]["type"] == "error"
    assert "may only use the characters" in response["body"]["error"]
    assert connections.subscriptions_of(CONNECTION) == [SESSION]  # the connection's other subscription stays


def test_unsubscribe_and_disconnect_remove_subscriptions(connections: ConnectionsTable) -> None:
    open_sample_connections(connections)
    connections.subscribe(CONNECTION, tenant=TENANT, session_id=SESSION)
    connections.subscribe(CONNECTION, tenant=TENANT, session_id="s-other")
    invoke_routes(load_event("unsubscribe"))
    assert connections.subscribers(TENANT, SESSION) == []
    assert connections.subscribers(TENANT, "s-other") == [CONNECTION]
    invoke_routes(load_event("disconnect"))
    assert connections.subscribers(TENANT, "s-other") == []
    assert connections.tenant_of(CONNECTION) is None


def test_a_connection_holds_a_bounded_number_of_subscriptions(tmp_path: Path) -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        table = ConnectionsTable(CONNECTIONS_TABLE, client=client)
        runtime, _queue = seeded_runtime(tmp_path)
        routes = WebSocketRoutes(table, runtime.manager, max_subscriptions=1)
        table.open(CONNECTION, tenant=TENANT)
        first = routes.message(CONNECTION, '{"action": "subscribe", "sessionId": "s-demo"}')
        again = routes.message(CONNECTION, '{"action": "subscribe", "sessionId": "s-demo"}')
        second = routes.message(CONNECTION, '{"action": "subscribe", "sessionId": "s-other"}')
        set_runtime(None)
    assert first is not None and first["type"] == "subscribed"
    assert again is not None and again["type"] == "subscribed"
    assert second == {"type": "error", "error": "Too many subscriptions on this connection (at most 1)"}


class SlowWrites:
    """A DynamoDB client whose transactions take a network's time, so parallel messages overlap.

    Each request still runs atomically, as DynamoDB runs it (moto alone is not thread-safe).
    """

    def __init__(self, client: DynamoDBClient) -> None:
        self._client = client
        self._one_at_a_time = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._client, name)
        if not callable(call) or name == "get_paginator":
            return call

        def atomic(*args: Any, **kwargs: Any) -> Any:
            with self._one_at_a_time:
                return call(*args, **kwargs)

        return atomic

    def transact_write_items(self, **request: Any) -> Any:
        time.sleep(0.05)
        with self._one_at_a_time:
            return self._client.transact_write_items(**request)


@contextmanager
def slow_connections_table(tmp_path: Path) -> Iterator[tuple[ConnectionsTable, Runtime]]:
    """A moto connections table whose transactions take a network's time, and the seeded runtime."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_connections_table(client)
        runtime, _queue = seeded_runtime(tmp_path)
        try:
            yield ConnectionsTable(CONNECTIONS_TABLE, client=cast("DynamoDBClient", SlowWrites(client))), runtime
        finally:
            set_runtime(None)


def test_parallel_subscribes_cannot_pass_the_cap_together(tmp_path: Path) -> None:
    """The cap is checked in the transaction that writes the subscription, not by a read before it."""
    sessions = [f"s-cap-{index}" for index in range(12)]
    with slow_connections_table(tmp_path) as (table, runtime):
        registry = runtime.store.registry(TENANT)
        for session_id in sessions:
            registry.create("Watched", session_id=session_id)
        routes = WebSocketRoutes(table, runtime.manager, max_subscriptions=3)
        table.open(CONNECTION, tenant=TENANT)
        start = threading.Barrier(len(sessions))

        def subscribe(session_id: str) -> dict[str, Any] | None:
            start.wait()
            return cast(
                "dict[str, Any] | None",
                routes.message(CONNECTION, json.dumps({"action": "subscribe", "sessionId": session_id})),
            )

        with ThreadPoolExecutor(max_workers=len(sessions)) as pool:
            replies = list(pool.map(subscribe, sessions))
        held = table.subscriptions_of(CONNECTION)
        watched = [session_id for session_id in sessions if table.subscribers(TENANT, session_id)]
    accepted = [reply for reply in replies if reply is not None and reply["type"] == "subscribed"]
    refused = [
        reply
        for reply in replies
        if reply == {"type": "error", "error": "Too many subscriptions on this connection (at most 3)"}
    ]
    assert (len(accepted), len(refused)) == (3, 9)
    assert len(held) == 3 and sorted(held) == sorted(watched)


# Lambda runs one event at a time per environment; here twelve threads share the handler's Metrics, and one
# thread's flush empties another's.
@pytest.mark.filterwarnings("ignore:No application metrics to publish")
def test_parallel_handshakes_of_one_tenant_cannot_pass_its_connection_limit(tmp_path: Path) -> None:
    import threadloom_websocket

    ids = [f"conn-{index}=" for index in range(12)]
    with slow_connections_table(tmp_path) as (table, runtime):
        threadloom_websocket.set_routes(WebSocketRoutes(table, runtime.manager, max_connections_per_tenant=3))
        start = threading.Barrier(len(ids))

        def handshake(connection_id: str) -> int:
            event = load_event("connect")
            event["requestContext"]["connectionId"] = connection_id
            start.wait()
            return int(invoke_routes(event)["statusCode"])

        with ThreadPoolExecutor(max_workers=len(ids)) as pool:
            statuses = list(pool.map(handshake, ids))
        opened = [connection_id for connection_id in ids if table.tenant_of(connection_id) == TENANT]
        # Another tenant is not held back by this one's
        other = load_event("connect")
        other["requestContext"]["connectionId"] = "other-tenant="
        other["requestContext"]["authorizer"]["tenant"] = OTHER_TENANT
        other_status = invoke_routes(other)["statusCode"]
        threadloom_websocket.set_routes(None)
    assert sorted(statuses) == [200] * 3 + [429] * 9
    assert len(opened) == 3
    assert other_status == 200


# ------------------------------------------------------------------ authorizer


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    with serve_issuer() as issuer:
        yield issuer


@pytest.fixture
def tokens(issuer: LocalIssuer) -> Iterator[dict[str, str]]:
    import threadloom_websocket_authorizer

    threadloom_websocket_authorizer.set_verifier(JwtVerifier(JwtSettings(issuer=issuer.issuer, audiences=(AUDIENCE,))))
    valid = issuer.token(sub=TENANT)
    header, _payload, signature = valid.split(".")
    yield {
        "valid": valid,
        "expired": issuer.token(sub=TENANT, exp=int(time.time()) - 60),
        "wrong-audience": issuer.token(sub=TENANT, aud="another-app"),
        "wrong-issuer": issuer.token(sub=TENANT, iss="https://issuer.invalid"),
        "alg-none": unsigned_token(
            {"iss": issuer.issuer, "aud": AUDIENCE, "sub": TENANT, "exp": 1893456000}, issuer.kid
        ),
        "tampered": f"{header}.{issuer.token(sub=OTHER_TENANT).split('.')[1]}.{signature}",
    }
    threadloom_websocket_authorizer.set_verifier(None)


@pytest.mark.parametrize("name", AUTHORIZER_EVENTS)
def test_authorizer_event_gives_expected_policy(name: str, tokens: dict[str, str]) -> None:
    policy = invoke_authorizer(with_tokens(load_event(name), tokens))
    context = policy.get("context") or {}
    if "tokenExpiresAt" in context:  # the valid token's own expiry, which changes with every run
        assert context["tokenExpiresAt"] == jwt.decode(tokens["valid"], options={"verify_signature": False})["exp"]
        context["tokenExpiresAt"] = "<the token's exp>"
    assert policy == load_expected(name)


def test_a_token_without_the_tenant_claim_is_denied(issuer: LocalIssuer, tokens: dict[str, str]) -> None:
    event = with_tokens(load_event("authorize_header"), {"valid": issuer.token(sub=None)})
    statement: dict[str, Any] = invoke_authorizer(event)["policyDocument"]["Statement"][0]
    assert statement["Effect"] == "Deny"
