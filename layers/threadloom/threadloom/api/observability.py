"""The Logger, Tracer and Metrics singletons every function shares (one module, so a swap is one file).

Configured by ``POWERTOOLS_*`` variables; library loggers (``threadloom.*``) are joined
to the Powertools JSON output once, here.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

logger = Logger(service="threadloom")
tracer = Tracer(service="threadloom")
metrics = Metrics(namespace="Threadloom", service="threadloom")

copy_config_to_registered_loggers(source_logger=logger, include={"threadloom"})

__all__ = ["logger", "metrics", "tracer"]
