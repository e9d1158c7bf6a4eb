"""One router per resource; ``ROUTERS`` is what the handler includes, in this order."""

from __future__ import annotations

from threadloom_api_routes import compaction, context, health, history, messages, sessions

ROUTERS = (sessions.router, messages.router, history.router, context.router, compaction.router, health.router)

__all__ = ["ROUTERS"]
