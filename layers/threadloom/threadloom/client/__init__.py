"""A Python client for the Threadloom HTTP API (``pip install 'threadloom[client]'``, needs httpx).

``ThreadloomClient`` is synchronous, ``AsyncThreadloomClient`` the same for ``asyncio``.
"""

from __future__ import annotations

from threadloom.extras import require_extra

require_extra("threadloom.client", "client")  # one line naming the extra rather than httpx's ModuleNotFoundError

from threadloom.client.async_client import AsyncThreadloomClient  # noqa: E402 - after the check above
from threadloom.client.async_session import AsyncRemoteSession  # noqa: E402
from threadloom.client.client import ThreadloomClient  # noqa: E402
from threadloom.client.session import RemoteSession  # noqa: E402
from threadloom.client.transport import HttpError, RetryPolicy, ServiceUnreachableError  # noqa: E402

__all__ = [
    "AsyncRemoteSession",
    "AsyncThreadloomClient",
    "HttpError",
    "RemoteSession",
    "RetryPolicy",
    "ServiceUnreachableError",
    "ThreadloomClient",
]
