"""Idle-reflection Lambda: an EventBridge schedule queues a reflection of every session that went quiet.

Every ``THREADLOOM_IDLE_REFLECTION_EVERY_MINUTES`` (the stack's ``IdleReflectionEveryMinutes``, which is also the
schedule's rate) one sweep queues, on the compaction queue, a reflection of each session whose last activity is
between ``THREADLOOM_IDLE_REFLECTION_MINUTES`` (``IdleReflectionMinutes``) and that plus the period ago and came
after its last reflection (``threadloom.reflection.idle``). The compaction function runs them. The profile decides
whether reflection is on: off, the sweep queues nothing. The stack creates this function only when
``IdleReflectionMinutes`` is above 0; ``threadloom serve`` runs the same sweep in-process every minute instead.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from threadloom.api import startup
from threadloom.api.observability import logger, metrics, tracer
from threadloom.api.runtime import get_runtime
from threadloom.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aws_lambda_powertools.utilities.typing import LambdaContext

IDLE_MINUTES = "THREADLOOM_IDLE_REFLECTION_MINUTES"
EVERY_MINUTES = "THREADLOOM_IDLE_REFLECTION_EVERY_MINUTES"


def minutes(environ: Mapping[str, str], name: str, *, zero: bool = False) -> int:
    """A whole number of minutes from ``name``, positive (or 0 when ``zero``); else ``ValidationError`` naming it."""
    text = environ.get(name, "").strip()
    if not text.isdigit() or int(text) < (0 if zero else 1):
        raise ValidationError(f"{name} must be a {'' if zero else 'positive '}whole number of minutes, not {text!r}")
    return int(text)


startup.fail_init_on_invalid_profile()  # logged once; no sweep runs under a profile nobody meant


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """One sweep; the scheduled event carries nothing it needs."""
    idle_minutes = minutes(os.environ, IDLE_MINUTES, zero=True)
    every_minutes = minutes(os.environ, EVERY_MINUTES)
    if idle_minutes == 0:
        logger.info("IdleReflectionMinutes is 0: the idle trigger is off; no sweep")
        return {"swept": False, "reason": f"{IDLE_MINUTES} is 0", "queued": 0}
    runtime = get_runtime()
    if not runtime.profile.reflection.enabled:
        logger.info("Reflection is off in the profile (reflection.enabled); no idle sweep")
        return {"swept": False, "reason": "reflection.enabled is false", "queued": 0}
    queued = runtime.jobs.sweep_idle(every_minutes, idle_minutes=idle_minutes)
    metrics.add_metric(name="IdleReflectionsQueued", unit=MetricUnit.Count, value=queued)
    logger.info("Idle-reflection sweep finished", queued=queued, idle_minutes=idle_minutes, every=every_minutes)
    return {"swept": True, "queued": queued}


__all__ = ["EVERY_MINUTES", "IDLE_MINUTES", "lambda_handler", "minutes"]
