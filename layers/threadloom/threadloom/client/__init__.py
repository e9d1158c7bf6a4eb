"""A Python client for the Threadloom HTTP API (``pip install 'threadloom[client]'``, needs httpx)."""

from __future__ import annotations

from threadloom.client.client import ThreadloomClient
from threadloom.client.session import RemoteSession
from threadloom.client.transport import HttpError, RetryPolicy, ServiceUnreachableError

__all__ = ["HttpError", "RemoteSession", "RetryPolicy", "ServiceUnreachableError", "ThreadloomClient"]
