"""The client's HTTP plumbing: bearer auth, ``Idempotency-Key`` on writes, retries, and the error envelope.

Kept apart from the resource methods so each of them is one line of "which route, which body",
and so retry and error rules live in one place.
"""

from __future__ import annotations

import email.utils
import random
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

import httpx

from threadloom.api.exceptions import (
    ForbiddenError,
    PayloadTooLargeError,
    UnauthenticatedError,
    UnsupportedMediaTypeError,
)
from threadloom.errors import (
    BlockLimitError,
    CompactionError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
    ReadOnlyBlockError,
    SessionBusyError,
    SkillStoreError,
    StorageError,
    StorageTimeoutError,
    StorageUnavailableError,
    ThreadloomError,
    ValidationError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
"""Answers that mean "not now": throttled, or the service or its storage briefly unavailable."""

IN_PROGRESS: Final = "idempotency_in_progress"

SAFE_METHODS: Final = frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE"})
"""Methods whose repetition has the same effect as one call, so any failure may be retried."""

ERROR_CODES: Final[dict[str, type[ThreadloomError]]] = {
    "bad_request": ValidationError,
    "invalid_request": ValidationError,
    "payload_too_large": PayloadTooLargeError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "unauthorized": UnauthenticatedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "route_not_found": NotFoundError,
    "conflict": ConflictError,
    "idempotency_key_reused": ConflictError,
    "idempotency_in_progress": ConflictError,
    "read_only_block": ReadOnlyBlockError,
    "block_limit_exceeded": BlockLimitError,
    "quota_exceeded": QuotaExceededError,
    "compaction_failed": CompactionError,
    "session_busy": SessionBusyError,
    "storage_timeout": StorageTimeoutError,
    "storage_unavailable": StorageUnavailableError,
    "storage_error": StorageError,
    "skill_store_unavailable": SkillStoreError,
}
"""The API's error codes → the exceptions the library raises for the same failure."""

ERROR_STATUSES: Final[dict[int, type[ThreadloomError]]] = {
    400: ValidationError,
    401: UnauthenticatedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    415: UnsupportedMediaTypeError,
    422: ValidationError,
    503: StorageUnavailableError,
}
"""Fallback by status, for answers without the envelope (an API Gateway or proxy refusal)."""


class ServiceUnreachableError(StorageUnavailableError):
    """The API could not be reached (connection refused, reset, timed out) after every retry."""


class HttpError(ThreadloomError):
    """An answer no library exception describes (a 500, an unexpected status)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter, capped; a ``Retry-After`` header wins when present."""

    max_retries: int = 3
    backoff: float = 0.2
    max_backoff: float = 10.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        hinted = parse_retry_after(retry_after)
        if hinted is not None:
            return min(hinted, self.max_backoff)
        return random.uniform(0, min(self.max_backoff, self.backoff * 2**attempt))


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def path(*segments: str) -> str:
    """A route path with each segment percent-encoded; ``:`` and ``@`` (valid in ids and in a path) stay as they are."""
    return "/" + "/".join(quote(segment, safe=":@") for segment in segments)


def envelope(response: httpx.Response) -> tuple[str, str]:
    """The ``code`` and ``message`` of an ``{"error": {"code", "message"}}`` answer (empty when absent)."""
    try:
        body = response.json()
    except ValueError:
        return "", ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("code") or ""), str(body["error"].get("message") or "")
    return "", ""


def error_for(response: httpx.Response) -> ThreadloomError:
    """The typed exception for a 4xx/5xx answer, read from the error envelope."""
    code, message = envelope(response)
    message = message or f"HTTP {response.status_code} from {response.request.method} {response.request.url.path}"
    kind = ERROR_CODES.get(code) or ERROR_STATUSES.get(response.status_code)
    if kind is None:
        return HttpError(response.status_code, code or "http_error", message)
    return kind(message)


class Transport:
    """Sends one logical request, retrying it when that is safe, and decodes the JSON answer."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None,
        timeout: float,
        retry: RetryPolicy,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        default_headers = {"accept": "application/json", "user-agent": "threadloom-client"}
        if token:
            default_headers["authorization"] = f"Bearer {token}"
        default_headers.update(headers or {})
        self.retry = retry
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), headers=default_headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def request(
        self,
        method: str,
        route: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool | None = None,
    ) -> Any:
        """The decoded JSON answer (None when empty), or the typed exception.

        ``idempotent`` says whether repeating the request has the effect of one call (a POST
        whose route honours ``Idempotency-Key``, or a naturally repeatable one); by default,
        PUT/PATCH/DELETE/GET are and POST is not. Only such requests are retried when the first
        attempt might have been applied. Every POST carries a fresh key, the same on each retry.
        """
        response = self.send(method, route, params=params, body=body, idempotent=idempotent)
        return response.json() if response.content else None

    def send(
        self,
        method: str,
        route: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content: bytes | None = None,
        content_type: str | None = None,
        idempotent: bool | None = None,
    ) -> httpx.Response:
        """The raw answer of a request (JSON ``body`` or raw ``content``), retried as :meth:`request` says."""
        headers = {"idempotency-key": str(uuid.uuid4())} if method == "POST" else {}
        if content_type is not None:
            headers["content-type"] = content_type
        repeatable = method in SAFE_METHODS if idempotent is None else idempotent
        query = {key: value for key, value in (params or {}).items() if value is not None}
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    method,
                    route,
                    params=query,
                    json=body if body is not None and content is None else None,
                    content=content,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                if attempt < self.retry.max_retries and (repeatable or never_sent):
                    self._sleep(self.retry.delay(attempt))
                    attempt += 1
                    continue
                raise ServiceUnreachableError(f"{method} {route} failed: {exc}") from exc
            status = response.status_code
            if attempt < self.retry.max_retries and (
                (status in RETRY_STATUSES and (repeatable or status == 429))  # a throttled request was never run
                # an earlier attempt of this very request (same key) is still running: its outcome will be replayed
                or (status == 409 and "idempotency-key" in headers and envelope(response)[0] == IN_PROGRESS)
            ):
                self._sleep(self.retry.delay(attempt, response.headers.get("retry-after")))
                attempt += 1
                continue
            if status >= 400:
                raise error_for(response)
            return response

    def download(self, url: str) -> bytes:
        """An absolute URL the API pointed at (a presigned S3 link): fetched without our credentials."""
        where = url.partition("?")[0]  # never log the signature
        try:
            response = httpx.get(url, timeout=self._http.timeout)
        except httpx.TransportError as exc:
            raise ServiceUnreachableError(f"GET {where} failed: {exc}") from exc
        if response.status_code >= 400:
            raise ServiceUnreachableError(f"GET {where} answered {response.status_code}")
        return response.content


__all__ = [
    "ERROR_CODES",
    "ERROR_STATUSES",
    "HttpError",
    "RetryPolicy",
    "ServiceUnreachableError",
    "Transport",
    "envelope",
    "error_for",
    "parse_retry_after",
    "path",
]
