"""A summarizer backed by the Amazon Bedrock Runtime Converse API.

The client is created on first use, never at import, so importing Threadloom
costs nothing in a Lambda cold start that does not compact. Throttling and
transient service errors are retried by botocore's standard retry mode, with
the timeouts of :mod:`threadloom.aws_clients`; every other failure, and any
response without usable text, surfaces as :class:`~threadloom.errors.CompactionError`.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from threadloom.errors import CompactionError, ValidationError
from threadloom.jscompat import js_trim

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_bedrock_runtime.type_defs import ConverseRequestTypeDef

RETRYABLE_ERROR_CODES: Final = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
    }
)
"""Converse error codes worth another attempt; anything else fails at once."""

BLOCKED_STOP_REASONS: Final = frozenset({"guardrail_intervened", "content_filtered"})
"""Stop reasons whose text is a refusal, not a summary; storing it as one would corrupt the history."""

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS: Final = 2048
MIN_DERIVED_MAX_TOKENS: Final = 256

_TARGET = re.compile(r"Target ~(\d+) tokens\.")


def derive_max_tokens(prompt: str, *, cap: int, default: int = DEFAULT_MAX_TOKENS) -> int:
    """Output limit for a prompt: twice its ``Target ~N tokens.`` (room for a model that overshoots), capped.

    Without a target line the ``default`` applies (also capped).
    """
    targets = _TARGET.findall(prompt)
    if not targets:
        return min(default, cap)
    return min(cap, max(MIN_DERIVED_MAX_TOKENS, int(targets[-1]) * 2))


class BedrockSummarizer:
    """:class:`~threadloom.compaction.summarizers.Summarizer` that asks a Bedrock model for the summary.

    ``max_tokens`` fixes the output limit; when omitted it is derived from the
    prompt's budget (see :func:`derive_max_tokens`, at most ``max_tokens_cap``).
    By default a call is retried only by botocore (standard mode, ``THREADLOOM_BEDROCK_MAX_ATTEMPTS``
    attempts in all, ``threadloom.aws_clients``): retrying here as well would multiply the attempts and
    the time a compaction may take. ``max_attempts`` above 1 adds attempts of this class around
    botocore's, for a client configured without retries; waits grow from ``base_delay`` and never exceed
    ``max_delay``. ``sleep`` and ``jitter`` exist for tests.
    """

    def __init__(
        self,
        model_id: str,
        *,
        client: BedrockRuntimeClient | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        system_prompt: str | None = None,
        max_attempts: int = 1,
        max_tokens_cap: int = 8192,
        base_delay: float = 0.5,
        max_delay: float = 8.0,
        jitter: bool = True,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(model_id, str) or not model_id.strip():
            raise ValidationError("model_id must be a non-empty string")
        if max_tokens is not None and (isinstance(max_tokens, bool) or max_tokens < 1):
            raise ValidationError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if isinstance(max_attempts, bool) or max_attempts < 1:
            raise ValidationError(f"max_attempts must be at least 1, got {max_attempts!r}")
        if max_tokens_cap < 1:
            raise ValidationError(f"max_tokens_cap must be a positive integer, got {max_tokens_cap!r}")
        self.model_id = model_id
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system_prompt = system_prompt
        self.max_attempts = max_attempts
        self.max_tokens_cap = max_tokens_cap
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.jitter = jitter
        self._sleep = sleep
        self._client = client
        self._client_lock = threading.Lock()

    @property
    def client(self) -> BedrockRuntimeClient:
        """The Bedrock Runtime client, created on first use: botocore's standard retries and timeouts (aws_clients)."""
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    import boto3

                    from threadloom.aws_clients import bedrock_config

                    self._client = boto3.client("bedrock-runtime", config=bedrock_config())
        return self._client

    def build_request(self, prompt: str) -> ConverseRequestTypeDef:
        """The Converse request for ``prompt`` (exposed so callers can log or inspect it)."""
        max_tokens = self.max_tokens or derive_max_tokens(prompt, cap=self.max_tokens_cap)
        request: ConverseRequestTypeDef = {
            "modelId": self.model_id,
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {"maxTokens": max_tokens, "temperature": self.temperature},
        }
        if self.system_prompt:
            request["system"] = [{"text": self.system_prompt}]
        return request

    def __call__(self, prompt: str) -> str:
        """Summarize ``prompt``; raises :class:`CompactionError` on any failure."""
        from botocore.exceptions import BotoCoreError, ClientError

        request = self.build_request(prompt)
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = self.client.converse(**request)
            except ClientError as exc:
                error = exc.response.get("Error", {})
                code = str(error.get("Code") or "Unknown")
                message = str(error.get("Message") or exc)
                if code in RETRYABLE_ERROR_CODES and attempt < self.max_attempts:
                    delay = self._delay(attempt)
                    logger.warning(
                        "Bedrock %s answered %s (attempt %d of %d); retrying in %.2fs",
                        self.model_id,
                        code,
                        attempt,
                        self.max_attempts,
                        delay,
                    )
                    self._sleep(delay)
                    continue
                tries = f" after {attempt} attempts" if code in RETRYABLE_ERROR_CODES and attempt > 1 else ""
                raise CompactionError(
                    f"Bedrock summarization with {self.model_id} failed{tries}: {code}: {message}"
                ) from exc
            except BotoCoreError as exc:
                raise CompactionError(f"Bedrock summarization with {self.model_id} failed: {exc}") from exc
            return self._summary_text(response)
        raise AssertionError("unreachable: the retry loop always returns or raises")  # pragma: no cover

    def _delay(self, attempt: int) -> float:
        delay: float = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return delay * random.uniform(0.5, 1.0) if self.jitter else delay  # backoff jitter, not security

    def _summary_text(self, response: Mapping[str, Any]) -> str:
        stop_reason = response.get("stopReason")
        if stop_reason in BLOCKED_STOP_REASONS:
            raise CompactionError(f"Bedrock model {self.model_id} refused to summarize (stopReason={stop_reason})")
        output = response.get("output")
        message = output.get("message") if isinstance(output, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            raise CompactionError(f"Bedrock model {self.model_id} returned a response without message content")
        texts = [
            block["text"] for block in content if isinstance(block, Mapping) and isinstance(block.get("text"), str)
        ]
        summary = js_trim("\n".join(texts))
        if not summary:
            raise CompactionError(
                f"Bedrock model {self.model_id} returned no summary text (stopReason={stop_reason or 'unknown'})"
            )
        return summary


__all__ = ["BLOCKED_STOP_REASONS", "RETRYABLE_ERROR_CODES", "BedrockSummarizer", "derive_max_tokens"]
