"""Logger, Tracer and Metrics of every Threadloom Lambda function: one module, so swapping one of them is one file.

Each function names itself with ``POWERTOOLS_SERVICE_NAME`` (``threadloom-api``, ``threadloom-compaction``, ...,
set per function in ``template.yaml``), so every log line, trace and metric says which function emitted it; the
metric namespace comes from ``POWERTOOLS_METRICS_NAMESPACE``. The library logs through the standard ``logging``
module under ``threadloom``; :func:`route_library_logs` joins those lines to the same JSON output.

Tracer patches only what Threadloom calls (botocore, for S3, DynamoDB, SQS and Bedrock): patching everything
would import every library the X-Ray SDK knows about on the cold path.

The API request id travels to the compaction worker as the SQS message attribute named
:data:`threadloom.correlation.MESSAGE_ATTRIBUTE`, so a compaction's log lines carry the request that asked for it.
"""

from __future__ import annotations

import logging
import os
from typing import Final

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

DEFAULT_SERVICE: Final = "threadloom"
DEFAULT_NAMESPACE: Final = "Threadloom"
TRACED_MODULES: Final = ("botocore",)

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SERVICE)
tracer = Tracer(service=logger.service, patch_modules=TRACED_MODULES)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE, service=logger.service)


def route_library_logs() -> None:
    """Send the ``threadloom`` library's standard-library logs through ``logger``, as the same JSON lines."""
    logging.getLogger("threadloom")  # registers the package logger even before any submodule has logged
    copy_config_to_registered_loggers(source_logger=logger, include={"threadloom"})


route_library_logs()

__all__ = ["logger", "metrics", "route_library_logs", "tracer"]
