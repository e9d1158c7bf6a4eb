"""Shared test set-up: fake AWS credentials and Powertools settings, so no test reaches AWS."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_SECURITY_TOKEN", "testing")
os.environ.setdefault("AWS_SESSION_TOKEN", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "threadloom-tests")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ThreadloomTests")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")


@pytest.fixture
def postgres_store_factory(request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """A factory of PostgresStore objects over one freshly truncated per-worker database."""
    from tests.support.postgres import postgres_store_factory as make_factory

    yield from make_factory(request)
