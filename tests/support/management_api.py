"""A recording stand-in for the API Gateway Management API client: remembers posts, answers 410 for gone ids."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError


@dataclass
class RecordingManagementApi:
    """``post_to_connection`` as boto3 spells it; ``gone`` ids raise GoneException (HTTP 410) like the real API."""

    gone: set[str] = field(default_factory=set)
    slow_seconds: float = 0.0
    timing_out: set[str] = field(default_factory=set)
    posts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> dict[str, Any]:
        if self.slow_seconds:
            time.sleep(self.slow_seconds)
        if ConnectionId in self.timing_out:
            raise ReadTimeoutError(endpoint_url="https://abc123.execute-api.eu-west-1.amazonaws.com/dev")
        if ConnectionId in self.gone:
            raise ClientError(
                {
                    "Error": {"Code": "GoneException", "Message": ""},
                    "ResponseMetadata": {"HTTPStatusCode": 410},
                },
                "PostToConnection",
            )
        self.posts.append((ConnectionId, json.loads(Data)))
        return {"ResponseMetadata": {"HTTPStatusCode": 200}}

    def events_for(self, connection_id: str) -> list[dict[str, Any]]:
        return [event for target, event in self.posts if target == connection_id]
