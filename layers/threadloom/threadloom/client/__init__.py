"""A Python client for the Threadloom HTTP API (``pip install 'threadloom[client]'``, needs httpx).

``ThreadloomClient`` is synchronous, ``AsyncThreadloomClient`` the same for ``asyncio``.
"""

from __future__ import annotations

from threadloom.client.async_client import AsyncThreadloomClient
from threadloom.client.async_session import AsyncRemoteSession
from threadloom.client.client import ThreadloomClient
from threadloom.client.session import RemoteSession
from threadloom.client.transport import HttpError, RetryPolicy, ServiceUnreachableError

__all__ = [
    "AsyncRemoteSession",
    "AsyncThreadloomClient",
    "HttpError",
    "RemoteSession",
    "RetryPolicy",
    "ServiceUnreachableError",
    "ThreadloomClient",
]
