"""Logger, Tracer and Metrics of the compaction function, built once and imported by its handler.

Configuration comes from the environment (``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_METRICS_NAMESPACE``,
``POWERTOOLS_LOG_LEVEL``); keeping all three here makes replacing Tracer (X-Ray SDK) a one-file change.
"""

from __future__ import annotations

import logging

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

logger = Logger()
tracer = Tracer()
metrics = Metrics()


def route_library_logs() -> None:
    """Send the ``threadloom`` library's stdlib logs through ``logger``, as the same JSON lines."""
    logging.getLogger("threadloom")  # registers the package logger even before any submodule has logged
    copy_config_to_registered_loggers(source_logger=logger, include={"threadloom"})
