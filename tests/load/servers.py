"""A private PostgreSQL instance and a PgBouncer in front of it, started and stopped by the load test.

Why private: the load test crashes the server (``pg_ctl -m immediate stop``) and restarts it, which
must never happen to the shared server on 5432 that every other test uses. Both programs refuse to
run as root, so as root they run as the ``postgres`` user (``runuser``), in a temporary folder that
user owns. Only processes started here are ever stopped here, by their own pid or data directory.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POSTGRES_BIN = Path(os.environ.get("THREADLOOM_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
PGBOUNCER = os.environ.get("THREADLOOM_PGBOUNCER", shutil.which("pgbouncer") or "/usr/sbin/pgbouncer")
DATABASE = "threadloom"
#: Server connections PgBouncer may open per database and user: 90% of the server's max_connections
#: (100), as the template's RDS Proxy (MaxConnectionsPercent 90). Tests pass fewer than their workers.
DEFAULT_POOL_SIZE = 90


def missing_programs() -> list[str]:
    """What this machine lacks to run the load test (empty when it can)."""
    missing = [
        str(POSTGRES_BIN / name) for name in ("initdb", "pg_ctl", "postgres") if not (POSTGRES_BIN / name).exists()
    ]
    if not Path(PGBOUNCER).exists():
        missing.append("pgbouncer (apt-get install pgbouncer)")
    return missing


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user(command: list[str]) -> list[str]:
    """PostgreSQL and PgBouncer refuse to run as root: run them as ``postgres`` then."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _owned_folder(prefix: str) -> Path:
    """A temporary folder the server user can write (as root: handed to ``postgres``)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    return folder


def _connect(port: int, database: str = DATABASE, *, timeout: float = 5.0) -> Any:
    import pg8000.native  # type: ignore[import-untyped]

    return pg8000.native.Connection(user="postgres", host="127.0.0.1", port=port, database=database, timeout=timeout)


@dataclass
class PrivatePostgres:
    """``initdb`` + ``pg_ctl`` on a free port in a temporary folder; crashable and restartable."""

    folder: Path = field(default_factory=lambda: _owned_folder("threadloom-load-"))
    port: int = field(default_factory=free_port)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "postgres.log"

    def url(self, *, port: int | None = None) -> str:
        return f"postgresql://postgres@127.0.0.1:{port or self.port}/{DATABASE}?sslmode=disable"

    def create(self) -> None:
        subprocess.run(
            _as_server_user(
                [str(POSTGRES_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
            ),
            check=True,
            capture_output=True,
            cwd=self.folder,
        )
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.folder}'",
            "max_connections": "100",
            "shared_preload_libraries": "'pg_stat_statements'",
            "pg_stat_statements.track": "top",
            "pg_stat_statements.max": "5000",
        }
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        self.start(wait=True)
        admin = _connect(self.port, "postgres")
        try:
            admin.run(f"CREATE DATABASE {DATABASE}")
        finally:
            admin.close()
        connection = _connect(self.port)
        try:
            connection.run("CREATE EXTENSION pg_stat_statements")
        finally:
            connection.close()

    def _pg_ctl(self, *arguments: str) -> None:
        subprocess.run(
            _as_server_user([str(POSTGRES_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), *arguments]),
            check=True,
            capture_output=True,
            cwd=self.folder,
            timeout=120,
        )

    def start(self, *, wait: bool) -> None:
        """Start the server; ``wait=False`` returns at once (the caller times when it accepts connections)."""
        self._pg_ctl("start", "-w" if wait else "-W")

    def crash(self) -> None:
        """``pg_ctl -m immediate stop``: every backend is killed, no checkpoint; the next start recovers from WAL."""
        self._pg_ctl("stop", "-m", "immediate")

    def wait_until_accepting(self, *, timeout: float = 60.0) -> float:
        """Poll with real connections; the ``time.time()`` of the first that ran a query."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                connection = _connect(self.port, timeout=1.0)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
                continue
            try:
                connection.run("SELECT 1")
                return time.time()
            finally:
                connection.close()

    def connect(self) -> Any:
        """A direct connection (never through the pooler) for set-up and verification."""
        return _connect(self.port, timeout=60.0)

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # already stopped (a crash without restart) is fine
            self._pg_ctl("stop", "-m", "fast")


@dataclass
class PgBouncer:
    """PgBouncer in transaction pooling mode in front of ``postgres``, as the stand-in for RDS Proxy."""

    postgres: PrivatePostgres
    pool_size: int = DEFAULT_POOL_SIZE
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def config(self) -> Path:
        return self.postgres.folder / "pgbouncer.ini"

    @property
    def log(self) -> Path:
        return self.postgres.folder / "pgbouncer.log"

    def url(self) -> str:
        return self.postgres.url(port=self.port)

    def write_config(self) -> None:
        folder = self.postgres.folder
        (folder / "userlist.txt").write_text('"postgres" ""\n', encoding="utf-8")
        self.config.write_text(
            "\n".join(
                [
                    "[databases]",
                    f"{DATABASE} = host=127.0.0.1 port={self.postgres.port} dbname={DATABASE} user=postgres",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {folder / 'userlist.txt'}",
                    "pool_mode = transaction",
                    f"default_pool_size = {self.pool_size}",
                    "max_client_conn = 500",
                    # After a failed server login PgBouncer waits this long before the next (default 15 s):
                    # RDS Proxy retries within a second, and so must the stand-in.
                    "server_login_retry = 0.2",
                    "admin_users = postgres",
                    "stats_users = postgres",
                    f"logfile = {self.log}",
                    f"pidfile = {folder / 'pgbouncer.pid'}",
                    "log_connections = 0",
                    "log_disconnections = 1",
                    # RDS Proxy's ConnectionBorrowTimeout in template.yaml: a request waits this long for a server.
                    "query_wait_timeout = 5",
                    "",
                ]
            ),
            encoding="utf-8",
        )
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            for path in (self.config, folder / "userlist.txt"):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    def start(self) -> None:
        self.write_config()
        self.process = subprocess.Popen(
            [PGBOUNCER, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                connection = _connect(self.port, "pgbouncer", timeout=1.0)
                connection.close()
                return
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"PgBouncer did not start; see {self.log}") from None
                time.sleep(0.05)

    def show(self, what: str) -> list[dict[str, Any]]:
        """A ``SHOW`` of the admin console (``SERVERS``, ``POOLS``, ``STATS``), one dict per row."""
        console = _connect(self.port, "pgbouncer")
        try:
            rows = console.run(f"SHOW {what}")
            names = [column["name"] for column in console.columns]
        finally:
            console.close()
        return [dict(zip(names, row, strict=True)) for row in rows]

    def totals(self) -> dict[str, int]:
        """PgBouncer's running totals for the Threadloom database (transactions, queries, client wait in µs)."""
        for row in self.show("STATS"):
            if row["database"] == DATABASE:
                return {name: int(row[f"total_{name}"]) for name in ("xact_count", "query_count", "wait_time")}
        return {"xact_count": 0, "query_count": 0, "wait_time": 0}

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)  # PgBouncer's immediate shutdown
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def private_servers(*, pool_size: int = DEFAULT_POOL_SIZE) -> Iterator[tuple[PrivatePostgres, PgBouncer]]:
    """A fresh private PostgreSQL with the Threadloom schema and a PgBouncer in front; both gone afterwards."""
    postgres = PrivatePostgres()
    bouncer = PgBouncer(postgres, pool_size=pool_size)
    try:
        postgres.create()
        migrate(postgres)
        bouncer.start()
        yield postgres, bouncer
    finally:
        bouncer.stop()
        postgres.stop()
        if not os.environ.get("THREADLOOM_LOAD_KEEP"):
            shutil.rmtree(postgres.folder, ignore_errors=True)


def migrate(postgres: PrivatePostgres) -> None:
    """The schema, as the deploy's migrations resource creates it (requests never migrate)."""
    from threadloom import PostgresStore

    store = PostgresStore(postgres.url())
    try:
        store.migrate()
    finally:
        store.close()
