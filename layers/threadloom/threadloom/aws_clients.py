"""One botocore configuration for every AWS client Threadloom creates: timeouts and the standard retry mode.

Without it a client waits 60 s to connect and 60 s per read, and retries in botocore's legacy mode: far
longer than the 10 s an API request may take. The limits come from the environment (the template sets
them below each function's timeout):

- ``THREADLOOM_AWS_CONNECT_TIMEOUT`` and ``THREADLOOM_AWS_READ_TIMEOUT`` (seconds; 3 and 5) for S3,
  DynamoDB, SQS, RDS and the API Gateway Management API;
- ``THREADLOOM_BEDROCK_READ_TIMEOUT`` and ``THREADLOOM_BEDROCK_MAX_ATTEMPTS`` (60 s, 3) for the Bedrock
  summarizer, whose answers take much longer. Bedrock retries only here, in botocore.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from botocore.config import Config

from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_CONNECT_TIMEOUT_S: Final = 3.0
DEFAULT_READ_TIMEOUT_S: Final = 5.0
DEFAULT_MAX_ATTEMPTS: Final = 3
BEDROCK_READ_TIMEOUT_S: Final = 60.0


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValidationError(f"{name} must be a number of seconds, not {text!r}") from None
    if value <= 0:
        raise ValidationError(f"{name} must be positive, not {text!r}")
    return value


def client_config(environ: Mapping[str, str] | None = None) -> Config:
    """Connect and read timeouts from the environment, standard retries (3 attempts in all)."""
    env = os.environ if environ is None else environ
    return Config(
        connect_timeout=_seconds(env, "THREADLOOM_AWS_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_S),
        read_timeout=_seconds(env, "THREADLOOM_AWS_READ_TIMEOUT", DEFAULT_READ_TIMEOUT_S),
        retries={"mode": "standard", "total_max_attempts": DEFAULT_MAX_ATTEMPTS},
    )


def bedrock_config(environ: Mapping[str, str] | None = None) -> Config:
    """The Bedrock Runtime client's: a long read timeout, and the only retries a summary gets."""
    env = os.environ if environ is None else environ
    attempts_text = env.get("THREADLOOM_BEDROCK_MAX_ATTEMPTS", "").strip() or str(DEFAULT_MAX_ATTEMPTS)
    if not attempts_text.isdigit() or int(attempts_text) < 1:
        raise ValidationError(f"THREADLOOM_BEDROCK_MAX_ATTEMPTS must be a whole number >= 1, not {attempts_text!r}")
    return Config(
        connect_timeout=_seconds(env, "THREADLOOM_AWS_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_S),
        read_timeout=_seconds(env, "THREADLOOM_BEDROCK_READ_TIMEOUT", BEDROCK_READ_TIMEOUT_S),
        retries={"mode": "standard", "total_max_attempts": int(attempts_text)},
    )


__all__ = ["bedrock_config", "client_config"]
