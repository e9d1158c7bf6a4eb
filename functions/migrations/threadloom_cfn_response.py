"""Answering a CloudFormation custom resource request: one JSON document PUT to its presigned S3 URL.

CloudFormation waits for this answer (up to the resource's ServiceTimeout); a FAILED answer fails
the stack operation and rolls it back. The URL is presigned without a content type, so none is sent.
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Status = Literal["SUCCESS", "FAILED"]

MAX_REASON_CHARS: Final = 3000  # CloudFormation shows the reason in stack events; the whole answer must stay < 4 KB
SEND_ATTEMPTS: Final = 3


@dataclass(frozen=True, slots=True)
class CustomResourceRequest:
    """The fields of a custom resource event this function uses."""

    request_type: Literal["Create", "Update", "Delete"]
    response_url: str
    stack_id: str
    request_id: str
    logical_resource_id: str
    physical_resource_id: str | None
    properties: dict[str, Any] = field(default_factory=dict)
    old_properties: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> CustomResourceRequest:
        return cls(
            request_type=event["RequestType"],
            response_url=event["ResponseURL"],
            stack_id=event["StackId"],
            request_id=event["RequestId"],
            logical_resource_id=event["LogicalResourceId"],
            physical_resource_id=event.get("PhysicalResourceId"),
            properties=dict(event.get("ResourceProperties") or {}),
            old_properties=dict(event.get("OldResourceProperties") or {}),
        )


def send_response(
    request: CustomResourceRequest,
    status: Status,
    *,
    physical_resource_id: str,
    reason: str = "",
    data: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> None:
    """PUT the answer; retried a few times, since a lost answer leaves the stack waiting for the timeout."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:MAX_REASON_CHARS] or status,
            "PhysicalResourceId": physical_resource_id,
            "StackId": request.stack_id,
            "RequestId": request.request_id,
            "LogicalResourceId": request.logical_resource_id,
            "NoEcho": False,
            "Data": data or {},
        }
    ).encode("utf-8")
    for attempt in range(1, SEND_ATTEMPTS + 1):
        put = urllib.request.Request(request.response_url, data=body, method="PUT", headers={"Content-Type": ""})
        try:
            with urllib.request.urlopen(put, timeout=timeout) as answer:
                answer.read()
            return
        except OSError:
            if attempt == SEND_ATTEMPTS:
                raise
            time.sleep(attempt)


__all__ = ["CustomResourceRequest", "send_response"]
