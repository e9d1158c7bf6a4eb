"""SnapStart runtime hooks for the API function: warm up before the snapshot, hold no connection across it.

Lambda snapshots the initialised process when a version is published and starts later instances from
that snapshot. Before the snapshot the hook loads what importing the handler leaves to the first request
(the profile, the API models' validators, the idempotency package), builds the store and runs one read,
so the code paths a request needs are loaded. Then it closes every database connection: a socket in the
snapshot would be shared by every restored copy, and the proxy closed it long ago anyway. After a restore
the hook opens a fresh connection, with a fresh IAM token, before the first request arrives.

``snapshot_restore_py`` exists only in the Lambda Python runtime; elsewhere :func:`register` does nothing.
"""

from __future__ import annotations

import importlib
import logging

from threadloom.api.runtime import get_runtime

logger = logging.getLogger(__name__)


def before_snapshot() -> None:
    """Load what the handler's import deferred to the first request, warm the store, close every connection."""
    from threadloom.api.models import build_all

    runtime = get_runtime()
    _ = runtime.profile  # reads the profile: its Pydantic models and YAML
    build_all()
    if runtime.settings.idempotency_table:
        importlib.import_module("aws_lambda_powertools.utilities.idempotency")  # with boto3, which Tracer patches
    if runtime.settings.backend == "postgres":
        runtime.storage_reachable()  # loads the driver, TLS and token code; a failure is logged, not raised
        database = importlib.import_module("threadloom.storage.postgres.database")
        database.close_environment_databases()


def after_restore() -> None:
    """Reopen the database connection so the first request after a restore does not pay for it."""
    runtime = get_runtime()
    if runtime.settings.backend == "postgres" and not runtime.storage_reachable():
        logger.warning("The database was not reachable after restore; the first request will retry")


def register() -> bool:
    """Register the hooks with the Lambda runtime; False where SnapStart does not exist (tests, local server)."""
    try:
        hooks = importlib.import_module("snapshot_restore_py")
    except ImportError:
        return False
    hooks.register_before_snapshot(before_snapshot)
    hooks.register_after_restore(after_restore)
    return True


__all__ = ["after_restore", "before_snapshot", "register"]
