"""One router per resource; ``ROUTERS`` is what the handler includes, in this order."""

from __future__ import annotations

from threadloom.api.routes import (
    block_history,
    compaction,
    context,
    health,
    history,
    inspector,
    knowledge,
    lifecycle,
    messages,
    reflection,
    sessions,
)

ROUTERS = (
    sessions.router,
    messages.router,
    history.router,
    context.router,
    block_history.router,
    knowledge.router,
    compaction.router,
    reflection.router,
    lifecycle.router,
    health.router,
    inspector.router,
)

__all__ = ["ROUTERS"]
