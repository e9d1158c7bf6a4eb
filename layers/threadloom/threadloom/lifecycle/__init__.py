"""Data lifecycle: export/import between backends, retention sweeps and subject erasure with a receipt.

Everything here works on whole sessions through the ``LifecycleStorage`` Protocol
(``store.lifecycle()`` on SQLite and PostgreSQL), so the same calls serve the operator
CLI, the HTTP API and the scheduled retention Lambda. See docs/lifecycle.md.
"""

from __future__ import annotations

from threadloom.lifecycle.erasure import ErasureReceipt, erase_subject, sessions_of_subject
from threadloom.lifecycle.export_format import (
    FORMAT_VERSION,
    ExportFormatError,
    UnsupportedVersionError,
    read_export,
    write_export,
)
from threadloom.lifecycle.removal import Removal, remove_session
from threadloom.lifecycle.retention import SweepReport, sweep
from threadloom.lifecycle.transfer import ExportReport, ImportReport, export_sessions, import_sessions

__all__ = [
    "FORMAT_VERSION",
    "ErasureReceipt",
    "ExportFormatError",
    "ExportReport",
    "ImportReport",
    "Removal",
    "SweepReport",
    "UnsupportedVersionError",
    "erase_subject",
    "export_sessions",
    "import_sessions",
    "read_export",
    "remove_session",
    "sessions_of_subject",
    "sweep",
    "write_export",
]
