"""Checks a function makes once at init, so a bad profile is one log line and a clear refusal, not a 500 per request.

Before this, an invalid deployment profile (an unknown key, say) let the function start and then failed every
invocation with ``internal_error``. Now the Lambda entry points ask :func:`profile_problem` while they are being
imported: it logs the problem once (Powertools Logger) and the API answers every request with
:func:`refusal` until the profile is fixed and the function redeployed. ``threadloom serve`` prints the same line
and exits instead (``threadloom.local_server``). A function with no request to refuse (the queue worker, the
scheduled sweeps, the WebSocket routes) calls :func:`fail_init_on_invalid_profile` instead: the same log line,
then its init fails, so no record is consumed and no sweep runs with a profile nobody meant.
"""

from __future__ import annotations

import json
from typing import Any

from threadloom.api.observability import logger
from threadloom.api.runtime import get_runtime
from threadloom.errors import ValidationError

REFUSAL_CODE = "invalid_profile"
REFUSAL_MESSAGE = (
    "The service cannot answer: its deployment profile is invalid. "
    "The operator finds the file, the key and the problem in the function's log."
)


REFUSING = "Invalid deployment profile; every request is refused until it is fixed"
FAILING_INIT = "Invalid deployment profile; the function fails its init until it is fixed"


def profile_problem(message: str = REFUSING) -> ValidationError | None:
    """Load the settings and the profile now; the problem (logged once, as an error) or None when both are sound."""
    try:
        runtime = get_runtime()
        _ = runtime.profile
        _ = runtime.limits
    except ValidationError as problem:
        logger.error(message, problem=str(problem))
        return problem
    return None


def fail_init_on_invalid_profile() -> None:
    """Log the profile's problem once and raise it, failing the function's init (Lambda then runs no invocation)."""
    problem = profile_problem(FAILING_INIT)
    if problem is not None:
        raise problem


def refusal() -> dict[str, Any]:
    """The answer to every request of a function whose profile is invalid: 500 with a code that says why."""
    body = json.dumps({"error": {"code": REFUSAL_CODE, "message": REFUSAL_MESSAGE}}, separators=(",", ":"))
    return {
        "statusCode": 500,
        "headers": {"Content-Type": "application/json"},
        "body": body,
        "isBase64Encoded": False,
    }


__all__ = [
    "FAILING_INIT",
    "REFUSAL_CODE",
    "REFUSAL_MESSAGE",
    "REFUSING",
    "fail_init_on_invalid_profile",
    "profile_problem",
    "refusal",
]
