"""Who watches which session on AWS: one DynamoDB table of WebSocket connections and their subscriptions.

Layout (partition key ``pk``, sort key ``sk``, both strings; TTL on ``expires_at``)::

    pk = connection#<connection id>    sk = connection                  the open connection, its tenant, its count
    pk = connection#<connection id>    sk = session#<tenant>#<session>  one of its subscriptions (for $disconnect)
    pk = session#<tenant>#<session>    sk = connection#<connection id>  the same subscription (for publishing)
    pk = tenant#<tenant>               sk = connection#<connection id>  the connection, under its tenant
    pk = tenant#<tenant>               sk = count                       how many connections the tenant has open

So a session's subscribers are one Query on its partition, a connection's subscriptions are one Query on its own,
and both halves of a subscription are written in one transaction that also checks the connection is open and
belongs to the tenant. Tenant and session ids are percent-encoded (``#`` and ``%`` included) before they are joined,
so no choice of ids can make one tenant's key equal another's. API Gateway closes every connection after two hours,
so each item expires a little after that even if ``$disconnect`` never ran (DynamoDB deletes expired items lazily,
so reads also skip them).

Over 400 lines because every access to the table (connections, subscriptions and the count that caps them) depends
on that one layout, so it is kept in one place.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from threadloom.errors import NotFoundError, StorageUnavailableError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        DeleteTypeDef,
        PutTypeDef,
        TransactWriteItemTypeDef,
        UpdateTypeDef,
        WriteRequestTypeDef,
    )

logger = logging.getLogger(__name__)

CONNECTION_TTL_SECONDS = 2 * 3600 + 300
"""API Gateway's maximum WebSocket connection duration (2 h) plus a margin."""
MAX_KEY_BYTES = 2048
"""DynamoDB's partition key limit."""
RECOUNT_SECONDS = 60
"""How often a tenant held at its connection limit may have its connections counted again."""

_T = TypeVar("_T")
_CONNECTION_SK = "connection"
_COUNT_SK = "count"
_BATCH_SIZE = 25
_BATCH_ATTEMPTS = 3
_CLIENT_CONFIG = Config(connect_timeout=0.5, read_timeout=1, retries={"mode": "standard", "total_max_attempts": 2})


@functools.cache
def default_dynamodb_client() -> DynamoDBClient:
    """A DynamoDB client with short timeouts and one retry, built on first use: publishing must stay bounded."""
    import boto3

    return boto3.session.Session().client("dynamodb", config=_CLIENT_CONFIG)


def session_key(tenant: str, session_id: str) -> str:
    """The partition of a session's subscribers; injective in ``(tenant, session_id)``."""
    key = f"session#{_encode(tenant)}#{_encode(session_id)}"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise ValidationError(
            f"Tenant and session id are too long for the connections table (over {MAX_KEY_BYTES} bytes)"
        )
    return key


def tenant_key(tenant: str) -> str:
    """The partition of a tenant's connections and their count."""
    key = f"tenant#{_encode(tenant)}"
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise ValidationError(f"The tenant is too long for the connections table (over {MAX_KEY_BYTES} bytes)")
    return key


def connection_key(connection_id: str) -> str:
    """The partition of one connection."""
    if not connection_id:
        raise ValidationError("A connection id is required")
    return f"connection#{_encode(connection_id)}"


def _encode(value: str) -> str:
    try:
        return quote(value, safe="")
    except UnicodeEncodeError as exc:  # lone surrogates cannot be stored as DynamoDB strings
        raise ValidationError("Ids must be valid Unicode text") from exc


class ConnectionsTable:
    """The connections table of the WebSocket API.

    Parameters
    ----------
    table:
        Table name (keys ``pk``/``sk``, TTL attribute ``expires_at``).
    client:
        A DynamoDB client; by default ``default_dynamodb_client()``.
    ttl_seconds:
        How long an item outlives its last write when ``$disconnect`` never comes.

    Examples
    --------
    >>> connections = ConnectionsTable("threadloom-connections")
    >>> connections.open("L0SM9cOFvHcCIhw=", tenant="tenant-a")  # doctest: +SKIP
    >>> connections.subscribe("L0SM9cOFvHcCIhw=", tenant="tenant-a", session_id="s1")  # doctest: +SKIP
    >>> connections.subscribers("tenant-a", "s1")  # doctest: +SKIP
    ['L0SM9cOFvHcCIhw=']
    """

    def __init__(
        self, table: str, *, client: DynamoDBClient | None = None, ttl_seconds: int = CONNECTION_TTL_SECONDS
    ) -> None:
        if not table:
            raise ValidationError("ConnectionsTable needs a table name")
        self._table = table
        self._client = client
        self._ttl_seconds = ttl_seconds

    @property
    def table(self) -> str:
        return self._table

    @property
    def _dynamodb(self) -> DynamoDBClient:
        if self._client is None:
            self._client = default_dynamodb_client()
        return self._client

    def _expires_at(self, limit: int | None = None) -> int:
        """The connection's own limit from now, or ``limit`` (epoch seconds) if that comes first."""
        own = int(time.time()) + self._ttl_seconds
        return own if limit is None else min(own, int(limit))

    # ------------------------------------------------------------ connections

    def open(
        self, connection_id: str, *, tenant: str, token_expires_at: int | None = None, limit: int | None = None
    ) -> bool:
        """Record a connection the authorizer let in, with the tenant its token named.

        It lasts until the token expires (``token_expires_at``, epoch seconds) if that comes before the
        connection's own limit: after it the connection is not open here, so it can subscribe to nothing,
        and its subscriptions, which last no longer than it, are not sent anything. False, with nothing
        written, when ``tenant`` already has ``limit`` connections open: the count moves in the
        transaction that records the connection, so parallel handshakes cannot pass it together, and
        a count left high by a ``$disconnect`` that never came is set right when it reaches the limit.
        """
        if not tenant:
            raise ValidationError("A connection needs a tenant")
        expires_at = str(self._expires_at(token_expires_at))
        for attempt in range(2):
            failed = self._transact(self._opening(connection_id, tenant, expires_at, limit), "record the connection")
            if not failed or 0 in failed:  # recorded, or a $connect delivered twice: recorded and counted once
                return True
            if attempt or not self._recount(tenant):
                return False
        return False

    def _opening(
        self, connection_id: str, tenant: str, expires_at: str, limit: int | None
    ) -> list[TransactWriteItemTypeDef]:
        """The connection's item, its entry under the tenant, and the tenant's count one higher (below ``limit``)."""
        own_partition = connection_key(connection_id)
        tenant_partition = tenant_key(tenant)
        connection: dict[str, AttributeValueTypeDef] = {
            "connection_id": {"S": connection_id},
            "tenant": {"S": tenant},
            "connected_at": {"N": str(int(time.time()))},
            "expires_at": {"N": expires_at},
        }
        below_limit = None if limit is None else _below("open_connections", limit)
        return [
            self._put(own_partition, _CONNECTION_SK, connection, new_only=True),
            self._put(tenant_partition, own_partition, {"expires_at": {"N": expires_at}}),
            self._counted(tenant_partition, _COUNT_SK, "open_connections", 1, below_limit),
        ]

    def _recount(self, tenant: str) -> bool:
        """Set the tenant's count to its open connections if it counts more; True when that freed a place.

        A connection whose ``$disconnect`` never came, or whose token has expired, stays counted until
        this runs: it runs only when the count reaches the limit, at most once per ``RECOUNT_SECONDS``
        for a tenant (a tenant held at its limit cannot make every handshake read its partition), and
        reads the tenant's partition once.
        """
        partition = tenant_key(tenant)
        now = int(time.time())
        claimed = self._set_count(
            partition,
            "SET recounted_at = :now",
            "attribute_not_exists(recounted_at) OR recounted_at <= :since",
            {":now": {"N": str(now)}, ":since": {"N": str(now - RECOUNT_SECONDS)}},
        )
        if not claimed:
            return False
        counted: int | None = None
        live = 0
        for items in self._pages(partition, "count the tenant's connections"):
            for item in items:
                if item["sk"]["S"] == _COUNT_SK:
                    counted = int(item.get("open_connections", {}).get("N", "0"))
                else:
                    live += 1
        if counted is None or live >= counted:
            return False
        self._set_count(
            partition,
            "SET open_connections = :live",
            "open_connections = :counted",
            {":live": {"N": str(live)}, ":counted": {"N": str(counted)}},
        )
        return True  # set right here, or moved meanwhile by another handshake: worth one more try

    def _set_count(
        self, partition: str, expression: str, condition: str, values: dict[str, AttributeValueTypeDef]
    ) -> bool:
        """One conditional update of a tenant's count item; False when its condition did not hold."""
        try:
            self._dynamodb.update_item(
                TableName=self._table,
                Key={"pk": {"S": partition}, "sk": {"S": _COUNT_SK}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise self._translate(exc, "count the tenant's connections") from exc
            return False
        except BotoCoreError as exc:
            raise self._translate(exc, "count the tenant's connections") from exc
        return True

    def tenant_of(self, connection_id: str) -> str | None:
        """The tenant of an open connection, or None when it is unknown or expired."""
        opened = self.open_connection(connection_id)
        return opened[0] if opened is not None else None

    def open_connection(self, connection_id: str) -> tuple[str, int] | None:
        """``(tenant, expires_at)`` of an open connection, or None when it is unknown or expired."""
        response = self._call(
            "read the connection",
            lambda: self._dynamodb.get_item(
                TableName=self._table,
                Key={"pk": {"S": connection_key(connection_id)}, "sk": {"S": _CONNECTION_SK}},
                ConsistentRead=True,
            ),
        )
        item = response.get("Item")
        expires_at = item.get("expires_at", {}).get("N") if item else None
        tenant = item.get("tenant", {}).get("S") if item else None
        if not tenant or expires_at is None or _expired(expires_at):
            return None
        return tenant, int(expires_at)

    def close(self, connection_id: str) -> int:
        """Forget a connection and every subscription it holds ($disconnect, or 410 Gone); returns items removed."""
        own_partition = connection_key(connection_id)
        keys: list[tuple[str, str]] = []
        for item in self._query(own_partition, "read the connection's subscriptions"):
            sk = item["sk"]["S"]
            keys.append((own_partition, sk))
            if sk != _CONNECTION_SK:
                keys.append((sk, own_partition))  # the session-side half of the subscription
            elif "tenant" in item:
                keys.append((tenant_key(item["tenant"]["S"]), own_partition))  # its entry under the tenant
                self._count_off(own_partition, item["tenant"]["S"])
        self._delete_all(keys)
        return len(keys)

    def _count_off(self, own_partition: str, tenant: str) -> None:
        """Remove the connection's item and count it off its tenant, once (a second close finds it gone)."""
        # Already closed, or never counted (recorded before tenants counted): the deletes follow all the same.
        self._transact(
            [
                self._delete(own_partition, _CONNECTION_SK, existing_only=True),
                self._counted(tenant_key(tenant), _COUNT_SK, "open_connections", -1, ("open_connections > :zero", {})),
            ],
            "forget the connection",
        )

    # ---------------------------------------------------------- subscriptions

    def subscribe(
        self,
        connection_id: str,
        *,
        tenant: str,
        session_id: str,
        expires_at: int | None = None,
        limit: int | None = None,
    ) -> bool:
        """Subscribe an open connection of ``tenant`` to one of its sessions (``NotFoundError`` if not open).

        True when the connection holds the subscription (already held: nothing is written); False,
        with nothing written, when it already holds ``limit`` others. The count lives on the
        connection's item and moves in the transaction that writes both halves, so parallel
        messages cannot pass the limit together. The subscription lasts no longer than the
        connection: pass its ``expires_at`` (``open_connection``).
        """
        session_partition = session_key(tenant, session_id)
        own_partition = connection_key(connection_id)
        expires_at_text = str(self._expires_at(expires_at))
        condition = "#tenant = :tenant AND expires_at > :now"
        values: dict[str, AttributeValueTypeDef] = {":tenant": {"S": tenant}, ":now": {"N": str(int(time.time()))}}
        if limit is not None:
            within, limit_value = _below("subscription_count", limit)
            condition += f" AND ({within})"
            values.update(limit_value)
        failed = self._transact(
            [
                self._counted(own_partition, _CONNECTION_SK, "subscription_count", 1, (condition, values)),
                self._put(  # held already: counted once
                    own_partition,
                    session_partition,
                    {"session_id": {"S": session_id}, "expires_at": {"N": expires_at_text}},
                    new_only=True,
                ),
                self._put(
                    session_partition,
                    own_partition,
                    {"connection_id": {"S": connection_id}, "expires_at": {"N": expires_at_text}},
                ),
            ],
            "subscribe",
        )
        if failed and failed != {1}:
            return self._refused_subscription(connection_id, tenant, session_partition)
        return True

    def _refused_subscription(self, connection_id: str, tenant: str, session_partition: str) -> bool:
        """Why the connection's condition failed: not open for ``tenant`` (raises), held already (True), or full."""
        opened = self.open_connection(connection_id)
        if opened is None or opened[0] != tenant:
            raise NotFoundError(f"Connection {connection_id!r} is not open for this tenant")
        response = self._call(
            "read the subscription",
            lambda: self._dynamodb.get_item(
                TableName=self._table,
                Key={"pk": {"S": connection_key(connection_id)}, "sk": {"S": session_partition}},
                ConsistentRead=True,
            ),
        )
        return "Item" in response

    def unsubscribe(self, connection_id: str, *, tenant: str, session_id: str) -> None:
        """Remove one subscription and count it off the connection (a no-op when there is none)."""
        session_partition = session_key(tenant, session_id)
        own_partition = connection_key(connection_id)
        failed = self._transact(
            [
                self._delete(own_partition, session_partition, existing_only=True),
                self._delete(session_partition, own_partition),
                self._counted(
                    own_partition, _CONNECTION_SK, "subscription_count", -1, ("subscription_count > :zero", {})
                ),
            ],
            "unsubscribe",
        )
        if failed and 0 not in failed:
            # The connection is gone, or was opened before it counted: remove the halves all the same.
            self._delete_all([(session_partition, own_partition), (own_partition, session_partition)])

    def subscriptions_of(self, connection_id: str) -> list[str]:
        """The session ids one connection is subscribed to."""
        items = self._query(connection_key(connection_id), "read the connection's subscriptions")
        return [item["session_id"]["S"] for item in items if "session_id" in item]

    def subscribers(self, tenant: str, session_id: str) -> list[str]:
        """The connection ids subscribed to a session: one Query on its partition."""
        return [connection_id for page in self.subscriber_pages(tenant, session_id) for connection_id in page]

    def subscriber_pages(self, tenant: str, session_id: str) -> Iterator[list[str]]:
        """The same, a page of the Query at a time, so a publisher can stop reading when its budget is spent."""
        for items in self._pages(session_key(tenant, session_id), "read the session's subscribers"):
            yield [item["connection_id"]["S"] for item in items if "connection_id" in item]

    # ---------------------------------------------------------------- helpers

    def _query(self, partition: str, action: str) -> list[dict[str, AttributeValueTypeDef]]:
        """Every unexpired item of one partition, following pagination."""
        return [item for items in self._pages(partition, action) for item in items]

    def _pages(self, partition: str, action: str) -> Iterator[list[dict[str, AttributeValueTypeDef]]]:
        """The unexpired items of one partition, a Query page at a time (read only as far as it is iterated)."""
        paginator = self._dynamodb.get_paginator("query")
        pages = paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": partition}},
            ConsistentRead=True,
        )
        try:
            for page in pages:
                yield [
                    dict(item) for item in page.get("Items", []) if not _expired(item.get("expires_at", {}).get("N"))
                ]
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, action) from exc

    def _delete_all(self, keys: Iterable[tuple[str, str]]) -> None:
        requests: list[WriteRequestTypeDef] = [
            {"DeleteRequest": {"Key": {"pk": {"S": pk}, "sk": {"S": sk}}}} for pk, sk in dict.fromkeys(keys)
        ]
        for start in range(0, len(requests), _BATCH_SIZE):
            pending = requests[start : start + _BATCH_SIZE]
            for _ in range(_BATCH_ATTEMPTS):
                pending = self._write_batch(pending)
                if not pending:
                    break
            if pending:
                logger.warning("%d connection items left for TTL to remove after throttling", len(pending))

    def _write_batch(self, requests: list[WriteRequestTypeDef]) -> list[WriteRequestTypeDef]:
        """One BatchWriteItem; returns what DynamoDB left unprocessed."""
        try:
            response = self._dynamodb.batch_write_item(RequestItems={self._table: requests})
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "delete subscriptions") from exc
        unprocessed = response.get("UnprocessedItems", {}).get(self._table, [])
        return [
            {"DeleteRequest": {"Key": dict(r["DeleteRequest"]["Key"])}} for r in unprocessed if "DeleteRequest" in r
        ]

    def _transact(self, items: list[TransactWriteItemTypeDef], action: str) -> set[int]:
        """Run one transaction; the positions of the items whose condition failed (none: it was written)."""
        try:
            self._dynamodb.transact_write_items(TransactItems=items)
        except ClientError as exc:
            failed = _conditions_failed(exc)
            if _error_code(exc) == "TransactionCanceledException" and failed:
                return failed
            raise self._translate(exc, action) from exc
        except BotoCoreError as exc:
            raise self._translate(exc, action) from exc
        return set()

    def _put(
        self, pk: str, sk: str, attributes: dict[str, AttributeValueTypeDef], *, new_only: bool = False
    ) -> TransactWriteItemTypeDef:
        put: PutTypeDef = {"TableName": self._table, "Item": {"pk": {"S": pk}, "sk": {"S": sk}, **attributes}}
        if new_only:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
        return {"Put": put}

    def _delete(self, pk: str, sk: str, *, existing_only: bool = False) -> TransactWriteItemTypeDef:
        delete: DeleteTypeDef = {"TableName": self._table, "Key": {"pk": {"S": pk}, "sk": {"S": sk}}}
        if existing_only:
            delete["ConditionExpression"] = "attribute_exists(pk)"
        return {"Delete": delete}

    def _counted(
        self,
        pk: str,
        sk: str,
        attribute: str,
        step: int,
        condition: tuple[str, dict[str, AttributeValueTypeDef]] | None = None,
    ) -> TransactWriteItemTypeDef:
        """An item's counter moved by ``step`` (from 0 when absent) if ``condition`` holds (``:zero`` is bound)."""
        update: UpdateTypeDef = {
            "TableName": self._table,
            "Key": {"pk": {"S": pk}, "sk": {"S": sk}},
            "UpdateExpression": f"SET {attribute} = if_not_exists({attribute}, :zero) + :step",
            "ExpressionAttributeValues": {":zero": {"N": "0"}, ":step": {"N": str(step)}},
        }
        if condition is not None:
            expression, values = condition
            update["ConditionExpression"] = expression
            update["ExpressionAttributeValues"] = {**update["ExpressionAttributeValues"], **values}
            if "#tenant" in expression:
                update["ExpressionAttributeNames"] = {"#tenant": "tenant"}
        return {"Update": update}

    def _call(self, action: str, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, action) from exc

    def _translate(self, exc: ClientError | BotoCoreError, action: str) -> StorageUnavailableError:
        where = f'Connections table "{self._table}"'
        if isinstance(exc, ClientError):
            return StorageUnavailableError(f"{where} failed (could not {action}: {_error_code(exc)})")
        return StorageUnavailableError(f"{where} could not be reached (could not {action}: {exc})")


def _expired(expires_at: str | None) -> bool:
    if expires_at is None:
        return False
    try:
        return float(expires_at) <= time.time()
    except ValueError:
        return False


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _below(attribute: str, limit: int) -> tuple[str, dict[str, AttributeValueTypeDef]]:
    """A condition that ``attribute`` (absent: 0) is below ``limit``."""
    return f"attribute_not_exists({attribute}) OR {attribute} < :limit", {":limit": {"N": str(limit)}}


def _conditions_failed(exc: ClientError) -> set[int]:
    """The positions of a cancelled transaction's items whose condition failed."""
    reasons = exc.response.get("CancellationReasons", [])
    return {index for index, reason in enumerate(reasons) if reason.get("Code") == "ConditionalCheckFailed"}


__all__ = [
    "CONNECTION_TTL_SECONDS",
    "RECOUNT_SECONDS",
    "ConnectionsTable",
    "connection_key",
    "default_dynamodb_client",
    "session_key",
    "tenant_key",
]
