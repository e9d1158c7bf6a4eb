"""A moto connections table laid out as template.yaml declares it, and a stand-in for its subscriber reads."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_dynamodb.client import DynamoDBClient

CONNECTIONS_TABLE = "threadloom-connections"


def create_connections_table(client: DynamoDBClient, name: str = CONNECTIONS_TABLE) -> str:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    client.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"})
    return name


class PagedSubscribers:
    """Just the subscribers lookup, in Query pages that each take ``page_seconds``; counts the pages read."""

    def __init__(self, *pages: list[str], page_seconds: float = 0.0) -> None:
        self.pages = [list(page) for page in pages]
        self.page_seconds = page_seconds
        self.pages_read = 0

    def subscriber_pages(self, namespace: str, session_id: str) -> Iterator[list[str]]:
        for page in self.pages:
            time.sleep(self.page_seconds)
            self.pages_read += 1
            yield list(page)

    def subscribers(self, namespace: str, session_id: str) -> list[str]:
        return [connection_id for page in self.subscriber_pages(namespace, session_id) for connection_id in page]
