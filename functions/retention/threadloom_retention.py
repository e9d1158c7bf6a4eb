"""Retention Lambda: an EventBridge schedule runs one bounded sweep of every tenant (docs/lifecycle.md).

The sweep stops well before the function's timeout and reports ``complete: false``; the next
scheduled run continues where it stopped. Each session goes whole, so a stop is never harmful.
An invalid deployment profile is logged once at init, which then fails (``threadloom.api.startup``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from threadloom.api import startup
from threadloom.api.observability import logger, metrics, tracer
from threadloom.api.runtime import get_runtime
from threadloom.lifecycle import sweep

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

startup.fail_init_on_invalid_profile()  # logged once; no sweep runs under a profile nobody meant

SAFETY_MARGIN_MS = 5_000
"""Stop starting new removals this long before the timeout (one removal plus its erasers fits easily)."""


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    runtime = get_runtime()
    days = runtime.profile.retention.inactive_days
    if days is None:
        logger.info("Retention is not configured (retention.inactive_days); nothing to sweep")
        return {"swept": False, "reason": "retention.inactive_days is not set"}
    report = sweep(
        runtime.store.lifecycle(),
        inactive_days=days,
        erasers=runtime.lifecycle_erasers(),
        should_continue=lambda: context.get_remaining_time_in_millis() > SAFETY_MARGIN_MS,
    )
    metrics.add_metric(name="SessionsExpired", unit=MetricUnit.Count, value=len(report.expired))
    logger.info("Retention sweep finished", removed=len(report.expired), complete=report.complete, counts=report.counts)
    return {
        "swept": True,
        "cutoff": report.cutoff,
        "removed": len(report.expired),
        "complete": report.complete,
        "counts": report.counts,
    }
