"""Logger, Tracer and Metrics of every Threadloom Lambda function: one module, so swapping one of them is one file.

Each function names itself with ``POWERTOOLS_SERVICE_NAME`` (``threadloom-api``, ``threadloom-compaction``, ...,
set per function in ``template.yaml``), so every log line, trace and metric says which function emitted it; the
metric namespace comes from ``POWERTOOLS_METRICS_NAMESPACE``. The library logs through the standard ``logging``
module under ``threadloom``; :func:`route_library_logs` joins those lines to the same JSON output.

Tracer patches only what Threadloom calls (botocore, for S3, DynamoDB, SQS and Bedrock), and only once
``botocore.session`` is imported (a post-import hook; every AWS client comes from a botocore session):
patching at start-up would import botocore on the cold path of every function, also where an invocation
never calls AWS. When tracing is off (outside Lambda, under ``sam local``, or ``POWERTOOLS_TRACE_DISABLED=true``;
Powertools' own rule) Tracer gets a provider that records nothing, so the X-Ray SDK is not imported at all.
``bench/cold_start.py`` measures both.

The API request id travels to the compaction worker as the SQS message attribute named
:data:`threadloom.correlation.MESSAGE_ATTRIBUTE`, so a compaction's log lines carry the request that asked for it.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_SERVICE: Final = "threadloom"
DEFAULT_NAMESPACE: Final = "Threadloom"
TRACED_MODULES: Final = ("botocore",)
_TRUE: Final = frozenset({"1", "y", "yes", "t", "true", "on"})


def tracing_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Powertools' rule for Tracer: on in Lambda (``LAMBDA_TASK_ROOT``) unless disabled or under an emulator."""
    if environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in _TRUE:
        return False
    return (
        bool(environ.get("LAMBDA_TASK_ROOT"))
        and not environ.get("AWS_SAM_LOCAL")
        and not environ.get("AWS_CHALICE_CLI_MODE")
    )


def _tracer(service: str) -> Tracer:
    if not tracing_enabled():
        from threadloom.api.null_tracing import NullTracingProvider

        return Tracer(service=service, disabled=True, provider=NullTracingProvider())
    import wrapt  # the X-Ray SDK's own dependency, so present wherever tracing can be on

    tracer = Tracer(service=service, auto_patch=False)
    wrapt.register_post_import_hook(lambda _: tracer.patch(TRACED_MODULES), "botocore.session")
    return tracer


logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SERVICE)
tracer = _tracer(logger.service)


class QuietWhenDisabledProvider(AmazonCloudWatchEMFProvider):
    """EMF metrics that print nothing at all while metrics are disabled (``POWERTOOLS_METRICS_DISABLED``).

    Powertools still prints the cold-start metric's JSON and warns "No application metrics to publish"
    then; the local server disables metrics, and its console is for people (issue 30).
    """

    def flush_metrics(self, raise_on_empty_metrics: bool = False) -> None:
        if is_metrics_disabled():
            self.clear_metrics()
            return
        super().flush_metrics(raise_on_empty_metrics=raise_on_empty_metrics)

    def add_cold_start_metric(self, context: Any) -> None:
        if not is_metrics_disabled():
            super().add_cold_start_metric(context)


def _metrics(service: str) -> Metrics:
    built = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE, service=service)
    built.provider = QuietWhenDisabledProvider(
        namespace=built.namespace,
        service=service,
        metric_set=built.metric_set,
        dimension_set=built.dimension_set,
        metadata_set=built.metadata_set,
        default_dimensions=built.default_dimensions,
    )
    return built


metrics = _metrics(logger.service)


def route_library_logs() -> None:
    """Send the ``threadloom`` library's standard-library logs through ``logger``, as the same JSON lines."""
    logging.getLogger("threadloom")  # registers the package logger even before any submodule has logged
    copy_config_to_registered_loggers(source_logger=logger, include={"threadloom"})


route_library_logs()

__all__ = ["QuietWhenDisabledProvider", "logger", "metrics", "route_library_logs", "tracer", "tracing_enabled"]
