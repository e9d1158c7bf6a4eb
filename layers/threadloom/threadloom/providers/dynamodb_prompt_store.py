"""A session's frozen system prompt in one DynamoDB item, so every Lambda invocation renders the same prefix.

The reference keeps the frozen prompt in a SQLite row (§4.6); on Lambda many invocations may freeze the same session
at once, so ``freeze`` is a conditional write and the first one wins (contract §4, "Frozen prompt"). ``set`` is the
unconditional overwrite used by ``refresh``, and ``delete`` erases the item when the session is deleted (D12).

Table layout: partition key ``pk`` (string) holding the store's ``key``; the prompt in ``prompt`` (string); with
``ttl_seconds``, ``expires_at`` (number, epoch seconds) for the table's TTL setting. DynamoDB deletes expired items
lazily (often hours later), so an item whose ``expires_at`` has passed is treated as absent by ``get`` and ``freeze``.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from threadloom.aws_clients import client_config
from threadloom.errors import StorageUnavailableError, ValidationError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, UniversalAttributeValueTypeDef

logger = logging.getLogger(__name__)

KEY_ATTRIBUTE = "pk"
PROMPT_ATTRIBUTE = "prompt"
TTL_ATTRIBUTE = "expires_at"
MAX_ITEM_BYTES = 400 * 1024
"""DynamoDB's item size limit (attribute names plus values)."""

_MAX_KEY_BYTES = 2048
_FREEZE_ATTEMPTS = 3
_FREEZE_CONDITION = "attribute_not_exists(#pk) OR attribute_not_exists(#prompt) OR #expires <= :now"


@functools.cache
def default_dynamodb_client() -> DynamoDBClient:
    """The process-wide DynamoDB client used when none is injected, built on first use (never at import)."""
    import boto3

    return boto3.session.Session().client("dynamodb", config=client_config())


class DynamoDBPromptStore:
    """A writable context provider holding one frozen system prompt in a DynamoDB table.

    Parameters
    ----------
    table:
        Table name; its partition key must be the string attribute ``pk``.
    key:
        This prompt's partition key value, e.g. ``"<tenant>#<session id>"``.
    client:
        A DynamoDB client to use; by default ``default_dynamodb_client()`` is built on first use (standard-mode
        retries, so throttling is retried by botocore before anything is raised here).
    ttl_seconds:
        When given, every write also sets ``expires_at`` to now plus this many seconds.

    Examples
    --------
    >>> store = DynamoDBPromptStore("threadloom-prompts", "tenant-1#session-9", ttl_seconds=7 * 86400)
    >>> prompt = store.freeze(rendered)  # doctest: +SKIP
    """

    def __init__(
        self,
        table: str,
        key: str,
        *,
        client: DynamoDBClient | None = None,
        ttl_seconds: int | None = None,
    ) -> None:
        if not table:
            raise ValidationError("DynamoDBPromptStore needs a table name")
        if not isinstance(key, str) or not key:
            raise ValidationError("DynamoDBPromptStore needs a non-empty key")
        if len(key.encode("utf-8", errors="surrogatepass")) > _MAX_KEY_BYTES:
            raise ValidationError(f"Prompt store key is longer than {_MAX_KEY_BYTES} UTF-8 bytes")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ValidationError("ttl_seconds must be positive")
        self._table = table
        self._key = key
        self._client = client
        self._ttl_seconds = ttl_seconds

    @property
    def table(self) -> str:
        """The table name."""
        return self._table

    @property
    def key(self) -> str:
        """This prompt's partition key value."""
        return self._key

    @property
    def _dynamodb(self) -> DynamoDBClient:
        if self._client is None:
            self._client = default_dynamodb_client()
        return self._client

    def get(self) -> str | None:
        """The stored prompt (``""`` counts as stored), or ``None`` when there is none or it has expired."""
        try:
            response = self._dynamodb.get_item(
                TableName=self._table, Key={KEY_ATTRIBUTE: {"S": self._key}}, ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "read the system prompt") from exc
        return self._prompt_of(response.get("Item"))

    def set(self, content: str) -> None:
        """Store ``content`` unconditionally, replacing any prompt (``refresh``)."""
        try:
            self._dynamodb.put_item(TableName=self._table, Item=self._item(content))
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "store the system prompt") from exc

    def set_if_absent(self, content: str) -> str:
        """The name ContextBlocks looks for: the first freeze wins across concurrent invocations."""
        return self.freeze(content)

    def freeze(self, content: str) -> str:
        """Store ``content`` unless a prompt is already stored; return whichever prompt is stored afterwards.

        The write is conditional, so among concurrent freezes exactly one succeeds and every caller gets its prompt.
        The losing write asks DynamoDB for the winning item in the same round trip; if that is unavailable the item is
        read back with a consistent read, and if it vanished meanwhile (a concurrent ``delete``), the freeze retries.
        """
        item = self._item(content)
        for _ in range(_FREEZE_ATTEMPTS):
            try:
                self._dynamodb.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression=_FREEZE_CONDITION,
                    ExpressionAttributeNames={
                        "#pk": KEY_ATTRIBUTE,
                        "#prompt": PROMPT_ATTRIBUTE,
                        "#expires": TTL_ATTRIBUTE,
                    },
                    ExpressionAttributeValues={":now": {"N": str(int(time.time()))}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                if _error_code(exc) != "ConditionalCheckFailedException":
                    raise self._translate(exc, "freeze the system prompt") from exc
                old_item: Mapping[str, AttributeValueTypeDef] | None = exc.response.get("Item")  # type: ignore[assignment]
                stored = self._prompt_of(old_item) if old_item else self.get()
                if stored is not None:
                    logger.debug("System prompt already frozen for key %r; keeping the stored one", self._key)
                    return stored
            except BotoCoreError as exc:
                raise self._translate(exc, "freeze the system prompt") from exc
            else:
                return content
        raise StorageUnavailableError(
            f'Could not freeze the system prompt in DynamoDB table "{self._table}": the item kept changing'
        )

    def delete(self) -> None:
        """Remove the stored prompt, if any (session deletion, contract D12)."""
        try:
            self._dynamodb.delete_item(TableName=self._table, Key={KEY_ATTRIBUTE: {"S": self._key}})
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "delete the system prompt") from exc

    def _item(self, content: str) -> dict[str, UniversalAttributeValueTypeDef]:
        """The full item for ``content``, refusing one DynamoDB would reject as too large."""
        if not isinstance(content, str):
            raise ValidationError("The system prompt must be a string")
        try:
            size = len(KEY_ATTRIBUTE) + len(self._key.encode("utf-8")) + len(PROMPT_ATTRIBUTE) + len(content.encode())
        except UnicodeEncodeError as exc:
            raise ValidationError("The system prompt must be valid Unicode text") from exc
        item: dict[str, UniversalAttributeValueTypeDef] = {
            KEY_ATTRIBUTE: {"S": self._key},
            PROMPT_ATTRIBUTE: {"S": content},
        }
        if self._ttl_seconds is not None:
            expires_at = str(int(time.time()) + self._ttl_seconds)
            item[TTL_ATTRIBUTE] = {"N": expires_at}
            size += len(TTL_ATTRIBUTE) + len(expires_at)
        if size > MAX_ITEM_BYTES:
            raise ValidationError(
                f"The system prompt is too large for the DynamoDB prompt store ({size} bytes; the limit is "
                f"{MAX_ITEM_BYTES} bytes per item)"
            )
        return item

    @staticmethod
    def _prompt_of(item: Mapping[str, AttributeValueTypeDef] | None) -> str | None:
        """The prompt held by ``item``, or ``None`` for no item, no prompt attribute, or an expired item."""
        if not item:
            return None
        expires = item.get(TTL_ATTRIBUTE, {}).get("N")
        if expires is not None and _as_number(expires) <= time.time():
            return None
        return item.get(PROMPT_ATTRIBUTE, {}).get("S")

    def _translate(self, exc: ClientError | BotoCoreError, action: str) -> StorageUnavailableError:
        """Every DynamoDB failure becomes ``StorageUnavailableError``, with a message naming the table."""
        where = f'DynamoDB table "{self._table}"'
        if isinstance(exc, ClientError):
            code = _error_code(exc)
            if code == "ResourceNotFoundException":
                return StorageUnavailableError(
                    f"Prompt store {where} does not exist or is not active (could not {action})"
                )
            return StorageUnavailableError(f"Prompt store {where} failed (could not {action}: {code})")
        return StorageUnavailableError(f"Prompt store {where} could not be reached (could not {action}: {exc})")


def _as_number(value: str) -> float:
    """DynamoDB number text as a float; unreadable numbers count as "never expires"."""
    try:
        return float(value)
    except ValueError:
        return float("inf")


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


__all__ = [
    "KEY_ATTRIBUTE",
    "PROMPT_ATTRIBUTE",
    "TTL_ATTRIBUTE",
    "DynamoDBPromptStore",
    "default_dynamodb_client",
]
