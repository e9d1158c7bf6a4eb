"""The client's HTTP plumbing: bearer auth, ``Idempotency-Key`` on writes, retries, and the error envelope.

Kept apart from the operations (:mod:`threadloom.client.operations`) so retry and error rules
live in one place; :class:`Transport` (httpx ``Client``) and :class:`AsyncTransport` (httpx
``AsyncClient``) share them and differ only in how they wait for the network.

Over 400 lines because both transports and every retry and error rule they share are kept together here.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar, cast

import httpx

from threadloom.api.exceptions import (
    ForbiddenError,
    PayloadTooLargeError,
    ResponseTooLargeError,
    UnauthenticatedError,
    UnsupportedMediaTypeError,
)
from threadloom.client.operations import Call, Download, Op, Page, Step
from threadloom.errors import (
    BlockLimitError,
    CompactionError,
    ConflictError,
    NotFoundError,
    QuotaExceededError,
    ReadOnlyBlockError,
    SessionBusyError,
    SessionChangedError,
    SkillStoreError,
    StaleVersionError,
    StorageError,
    StorageTimeoutError,
    StorageUnavailableError,
    ThreadloomError,
    ValidationError,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping

T = TypeVar("T")

RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
"""Answers that mean "not now": throttled, or the service or its storage briefly unavailable."""

IN_PROGRESS: Final = "idempotency_in_progress"
SESSION_CHANGED: Final = "session_changed"
"""A server knew a keyed session before it was created again for another subject: nothing ran, and
the next attempt reads it afresh, so any request may repeat."""

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
    "stale_version": StaleVersionError,
    SESSION_CHANGED: SessionChangedError,
    "quota_exceeded": QuotaExceededError,
    "compaction_failed": CompactionError,
    "session_busy": SessionBusyError,
    "storage_timeout": StorageTimeoutError,
    "storage_unavailable": StorageUnavailableError,
    "storage_error": StorageError,
    "response_too_large": ResponseTooLargeError,
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

EXCERPT: Final = 200
"""How much of an answer that is not JSON an error message quotes."""


class ServiceUnreachableError(StorageUnavailableError):
    """The API could not be reached (connection refused, reset, timed out) after every retry."""


class HttpError(ThreadloomError):
    """An answer no library exception describes: a 500, an unexpected status, a redirect (``code``
    ``"redirect"``: the client follows none), or a success whose body is not JSON (``"not_json"``)."""

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


def _json_body(response: httpx.Response) -> Any:
    """The answer's JSON, or None when it is not JSON (a proxy's page, an empty body)."""
    try:
        return response.json()
    except ValueError:
        return None


def envelope(response: httpx.Response) -> tuple[str, str]:
    """The ``code`` and ``message`` of an ``{"error": {"code", "message"}}`` answer (empty when absent)."""
    body = _json_body(response)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("code") or ""), str(body["error"].get("message") or "")
    return "", ""


def answered(response: httpx.Response) -> str:
    """``HTTP <status> from <method> <path>``: which request got which answer, for an error message."""
    return f"HTTP {response.status_code} from {response.request.method} {response.request.url.path}"


def error_for(response: httpx.Response) -> ThreadloomError:
    """The typed exception for a 4xx/5xx answer, read from the error envelope.

    Without the envelope (an API Gateway or proxy refusal) the status decides, and the message keeps the
    gateway's own ``{"message": ...}`` text. Every exception carries the answer's ``status`` and the
    envelope's ``code`` (empty without it), as :class:`HttpError` does, so an operation can tell a
    resource that is not stored (``not_found``) from a route that is not served (``route_not_found``).
    """
    code, message = envelope(response)
    if not message:
        body = _json_body(response)
        said = body.get("message") if isinstance(body, dict) and not code else None
        message = f"{answered(response)}: {said}" if isinstance(said, str) and said else answered(response)
    kind = ERROR_CODES.get(code) or ERROR_STATUSES.get(response.status_code)
    if kind is None:
        return HttpError(response.status_code, code or "http_error", message)
    error: ThreadloomError
    if kind is StaleVersionError:  # the envelope names the block's version now
        version = (response.json().get("error") or {}).get("currentVersion")
        error = StaleVersionError(message, current_version=int(version or 0), current_content=None)
    else:
        error = kind(message)
    vars(error).update(status=response.status_code, code=code)
    return error


def redirect_error(response: httpx.Response) -> HttpError:
    """A 3xx the operation does not read itself: a proxy or load balancer sending the client elsewhere."""
    location = response.headers.get("location")
    to = f" to {location}" if location else ""
    return HttpError(
        response.status_code,
        "redirect",
        f"{answered(response)} redirects{to}; the client does not follow redirects: give it the API's own address",
    )


def decoded(response: httpx.Response) -> Any:
    """The JSON of a successful answer (None when empty); an answer that is not JSON raises :class:`HttpError`."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError as error:
        kind = response.headers.get("content-type") or "no content type"
        excerpt = " ".join(response.text[:EXCERPT].split())
        more = "..." if len(response.text) > EXCERPT else ""
        raise HttpError(
            response.status_code, "not_json", f"{answered(response)} is not JSON ({kind}): {excerpt}{more}"
        ) from error


@dataclass(frozen=True, slots=True)
class Prepared:
    """One request as every attempt sends it: the same ``Idempotency-Key`` on each retry."""

    call: Call
    headers: dict[str, str]
    params: dict[str, Any]
    repeatable: bool

    @classmethod
    def of(cls, call: Call) -> Prepared:
        headers = {"idempotency-key": str(uuid.uuid4())} if call.method == "POST" else {}
        if call.content_type is not None:
            headers["content-type"] = call.content_type
        repeatable = call.method in SAFE_METHODS if call.idempotent is None else call.idempotent
        params = {key: value for key, value in (call.params or {}).items() if value is not None}
        return cls(call, headers, params, repeatable)

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments of ``httpx.Client.request`` and ``httpx.AsyncClient.request``."""
        call = self.call
        return {
            "method": call.method,
            "url": call.route,
            "params": self.params,
            "json": call.body if call.body is not None and call.content is None else None,
            "content": call.content,
            "headers": self.headers,
        }

    def settle(
        self, retry: RetryPolicy, attempt: int, outcome: httpx.Response | httpx.TransportError
    ) -> httpx.Response | float:
        """The answer to keep, or the seconds to wait before the next attempt; raises the typed exception.

        A request that may already have run is retried only when repeating it has the effect of
        one call; a throttled (429) or never-sent one always is.
        """
        more = attempt < retry.max_retries
        if isinstance(outcome, httpx.TransportError):
            never_sent = isinstance(outcome, (httpx.ConnectError, httpx.ConnectTimeout))
            if more and (self.repeatable or never_sent):
                return retry.delay(attempt)
            raise ServiceUnreachableError(f"{self.call.method} {self.call.route} failed: {outcome}") from outcome
        status = outcome.status_code
        if more and (
            (status in RETRY_STATUSES and (self.repeatable or status == 429))  # a throttled request was never run
            # an earlier attempt of this very request (same key) is still running: its outcome will be replayed
            or (status == 409 and "idempotency-key" in self.headers and envelope(outcome)[0] == IN_PROGRESS)
            or (status == 409 and envelope(outcome)[0] == SESSION_CHANGED)
        ):
            return retry.delay(attempt, outcome.headers.get("retry-after"))
        if status >= 400:
            raise error_for(outcome)
        if status >= 300 and status not in self.call.redirects:  # httpx follows none; a 301 is no success
            raise redirect_error(outcome)
        return outcome


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait this long before the next attempt."""

    seconds: float


Wire: TypeAlias = Generator[Prepared | Download | Sleep, Any, T]
"""What a transport does for an operation: send a request (its ``httpx.Response`` or
``httpx.TransportError`` is sent back), fetch a link without credentials (likewise), or sleep."""


def exchange(step: Step, retry: RetryPolicy) -> Wire[Any]:
    """One step of an operation, with its retries: the decoded answer, or the typed exception."""
    if isinstance(step, Download):
        outcome = yield step
        where = step.url.partition("?")[0]  # never the signature
        if isinstance(outcome, httpx.TransportError):
            raise ServiceUnreachableError(f"GET {where} failed: {outcome}") from outcome
        if not outcome.is_success:  # a 3xx too (S3's 301 to another region): its body is no export file
            raise ServiceUnreachableError(f"GET {where} answered {outcome.status_code}")
        return outcome.content
    prepared = Prepared.of(step)
    attempt = 0
    while True:
        settled = prepared.settle(retry, attempt, (yield prepared))
        if isinstance(settled, httpx.Response):
            if step.raw:
                return settled
            return decoded(settled)
        yield Sleep(settled)
        attempt += 1


def plan(op: Op[T], retry: RetryPolicy) -> Wire[T]:
    """The operation as transport steps: each of its requests exchanged, answers and exceptions handed back."""
    try:
        step = next(op)
        while True:
            try:
                answer = yield from exchange(step, retry)
            except ThreadloomError as error:
                step = op.throw(error)
            else:
                step = op.send(answer)
    except StopIteration as stop:
        return cast("T", stop.value)


@dataclass(frozen=True, slots=True)
class Connection:
    """Where and how a client talks to the API, the same for ``Client`` and ``AsyncClient``."""

    base_url: str
    token: str | None
    timeout: float
    retry: RetryPolicy
    headers: Mapping[str, str] | None = None

    def httpx_options(self) -> dict[str, Any]:
        default_headers = {"accept": "application/json", "user-agent": "threadloom-client"}
        if self.token:
            default_headers["authorization"] = f"Bearer {self.token}"
        default_headers.update(self.headers or {})
        return {"base_url": self.base_url.rstrip("/"), "headers": default_headers, "timeout": self.timeout}


class Transport:
    """Runs operations over ``httpx.Client``."""

    def __init__(
        self,
        connection: Connection,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.retry = connection.retry
        self._sleep = sleep
        self._http = httpx.Client(**connection.httpx_options(), transport=transport)

    def close(self) -> None:
        self._http.close()

    def run(self, op: Op[T]) -> T:
        """The operation's result, every request it makes sent (and retried) in turn."""
        steps = plan(op, self.retry)
        try:
            step = next(steps)
            while True:
                step = steps.send(self._perform(step))
        except StopIteration as stop:
            return cast("T", stop.value)

    def pages(self, page: Callable[[str | None], Op[Page[T]]]) -> Iterator[T]:
        """Every item of every page, a page fetched as the iterator reaches it."""
        cursor: str | None = None
        while True:
            items, cursor = self.run(page(cursor))
            yield from items
            if cursor is None:
                return

    def _perform(self, step: Prepared | Download | Sleep) -> httpx.Response | httpx.TransportError | None:
        if isinstance(step, Sleep):
            self._sleep(step.seconds)
            return None
        try:
            if isinstance(step, Download):
                return httpx.get(step.url, timeout=self._http.timeout)  # without our credentials
            return self._http.request(**step.arguments())
        except httpx.TransportError as exc:
            return exc


class AsyncTransport:
    """:class:`Transport` over ``httpx.AsyncClient``: the same steps, awaited."""

    def __init__(
        self,
        connection: Connection,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.retry = connection.retry
        self._sleep = sleep
        self._http = httpx.AsyncClient(**connection.httpx_options(), transport=transport)

    async def close(self) -> None:
        await self._http.aclose()

    async def run(self, op: Op[T]) -> T:
        steps = plan(op, self.retry)
        try:
            step = next(steps)
            while True:
                step = steps.send(await self._perform(step))
        except StopIteration as stop:
            return cast("T", stop.value)

    async def pages(self, page: Callable[[str | None], Op[Page[T]]]) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            items, cursor = await self.run(page(cursor))
            for item in items:
                yield item
            if cursor is None:
                return

    async def _perform(self, step: Prepared | Download | Sleep) -> httpx.Response | httpx.TransportError | None:
        if isinstance(step, Sleep):
            await self._sleep(step.seconds)
            return None
        try:
            if isinstance(step, Download):
                async with httpx.AsyncClient(timeout=self._http.timeout) as anonymous:  # without our credentials
                    return await anonymous.get(step.url)
            return await self._http.request(**step.arguments())
        except httpx.TransportError as exc:
            return exc


__all__ = [
    "ERROR_CODES",
    "ERROR_STATUSES",
    "AsyncTransport",
    "Connection",
    "HttpError",
    "Prepared",
    "RetryPolicy",
    "ServiceUnreachableError",
    "Sleep",
    "Transport",
    "Wire",
    "answered",
    "decoded",
    "envelope",
    "error_for",
    "exchange",
    "parse_retry_after",
    "plan",
    "redirect_error",
]
